/*
 * ccarena-delay: a per-queue packet delay on netfilter NFQUEUE, fixed or
 * varying as netem's `delay D J`.
 *
 * The kernel here has no netem, so the linux backend adds each flow's
 * propagation delay with this program. iptables rules send a flow's packets
 * (the backend uses the ACK direction, in the right-hand router, and the
 * data direction for flows with a data-path delay or jitter) to NFQUEUE
 * queue N; this program holds each packet and gives the kernel its ACCEPT
 * verdict DELAY microseconds after it received it. A queue with a fixed
 * delay is a FIFO: release order = arrival order, O(1) work per packet.
 *
 * A queue with jitter J draws each packet's delay as netem does
 * (sch_netem.c, tabledist): uniform in [D - J, D + J), or D + J x a standard
 * normal value; a negative delay releases at once. With reordering (netem's
 * default: its tfifo orders packets by send time, equal times in arrival
 * order) the queue is a heap on (due time, arrival); without it a packet
 * never leaves before the one ahead of it (netem with a rate or a FIFO
 * child), so the queue stays a FIFO. The kernel hands NFQUEUE a GSO packet
 * segment by segment (no NFQA_CFG_F_GSO), so each segment gets its own draw,
 * as the simulator's delay line gives it.
 *
 * Usage: ccarena-delay QUEUE:DELAY_US[:JITTER_US:DIST:REORDER:SEED] ...
 *   DIST is u (uniform) or n (normal), REORDER 1 or 0, SEED the queue's
 *   random stream (splitmix64), so that a run can be repeated.
 *   Prints "ready" on stdout once every queue is bound (add the iptables rules
 *   after that). On SIGINT/SIGTERM it releases every held packet, unbinds and
 *   prints one JSON line of statistics on stderr:
 *   {"packets":N,"late_mean_us":x,"late_p10_us":..,"late_p50_us":..,"late_p90_us":..,
 *    "late_p99_us":y,"late_max_us":z,"overflow":k,"late_wakeups":[[t_us,late_us],...]}
 *   where "late" is release time minus due time (the error this program adds
 *   on top of the requested delay; the kernel-to-user hand-over before the
 *   packet is seen adds a few microseconds more that are not counted).
 *   "late_wakeups" lists the wake-ups at least LATE_WAKEUP_US later than
 *   the program asked for: t_us is the instant it asked for, in
 *   microseconds after the first packet arrived, late_us how late it woke.
 *   Every packet due while the program was not running leaves at the same
 *   wake-up, so each entry is one stall of every queue together (the first
 *   LATE_WAKEUP_MAX entries are kept). So that a stall is seen whether or
 *   not a packet falls due in it (with offloads on, ACKs come a few hundred
 *   microseconds apart), the program wakes at least every PROBE_US from
 *   the first packet on (about 10,000 wake-ups a second, a few per cent of
 *   a core; the environment's CCARENA_DELAY_PROBE_US sets another period,
 *   0 none). On a virtual machine that also keeps the program's core from
 *   idling, which makes its wake-ups several times less late
 *   (docs/linux-backend.md).
 *
 * It runs at SCHED_FIFO priority 20 (unless CCARENA_DELAY_NO_RT is set) so
 * that a busy machine does not make it late.
 *
 * Accuracy and limits: see docs/linux-backend.md (measured: the added delay is
 * within a fraction of a millisecond of the request at 50-100 Mbps). Packets
 * are copied as metadata only (NFQNL_COPY_META), so the cost per packet is one
 * netlink message each way. Up to 2^17 packets per queue can be held; beyond
 * that (never at the rates the backend supports) packets are accepted
 * immediately and counted in "overflow". If the program dies, the kernel drops
 * the held packets and (the rules use no --queue-bypass) everything queued
 * later: a dead delay program stalls the flow rather than silently removing
 * its delay.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <math.h>
#include <linux/netfilter.h>
#include <libnetfilter_queue/libnetfilter_queue.h>

#define MAXQ 256
#define RING (1u << 17)
#define HIST_US 20000 /* lateness histogram, 1 us bins */
#define LATE_WAKEUP_US 200 /* a wake-up this late is logged as a stall */
#define LATE_WAKEUP_MAX 65536
#define PROBE_US 100       /* the longest sleep once packets have come (CCARENA_DELAY_PROBE_US; 0: none) */

struct held { uint32_t id; uint64_t due; uint64_t order; };

struct queue {
    struct nfq_q_handle *qh;
    uint16_t num;
    uint64_t delay_ns;
    uint64_t jitter_ns;  /* 0: a fixed delay */
    int normal;          /* draw D + J x N(0,1) instead of uniform */
    int reorder;         /* a heap on (due, order) instead of a FIFO */
    uint64_t rng;        /* splitmix64 state */
    uint64_t last_due;   /* FIFO with jitter: no packet leaves before the one ahead */
    uint64_t arrivals;
    struct held *ring;   /* FIFO: ring buffer; reorder: binary heap in ring[0..tail) */
    uint32_t head, tail; /* FIFO: head next to release, tail next free */
};

static struct queue queues[MAXQ];
static int nq;
static volatile sig_atomic_t stop;
static uint64_t packets, overflow, late_sum_ns, late_max_ns;
static uint64_t hist[HIST_US + 1];
static uint64_t first_arrival; /* when the first packet came (0: none yet) */
static uint32_t late_wakeups;
static uint64_t probe_ns = PROBE_US * 1000ull;
static uint64_t late_wakeup_at_us[LATE_WAKEUP_MAX], late_wakeup_us[LATE_WAKEUP_MAX];

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void on_signal(int sig) { (void)sig; stop = 1; }

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A uniform value in (0, 1). */
static double unit(uint64_t *x) { return ((splitmix64(x) >> 11) + 0.5) / 9007199254740992.0; }

/* This packet's delay in ns: D, or D varied by J as netem varies it, at least 0. */
static uint64_t draw_delay(struct queue *q) {
    if (!q->jitter_ns) return q->delay_ns;
    double d = (double)q->delay_ns, j = (double)q->jitter_ns;
    double v = q->normal ? d + j * sqrt(-2.0 * log(unit(&q->rng))) * cos(2.0 * M_PI * unit(&q->rng))
                         : d - j + 2.0 * j * unit(&q->rng);
    return v > 0 ? (uint64_t)v : 0;
}

static int earlier(const struct held *a, const struct held *b) {
    return a->due < b->due || (a->due == b->due && a->order < b->order);
}

static void heap_push(struct queue *q, struct held h) {
    uint32_t i = q->tail++;
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!earlier(&h, &q->ring[parent])) break;
        q->ring[i] = q->ring[parent];
        i = parent;
    }
    q->ring[i] = h;
}

static struct held heap_pop(struct queue *q) {
    struct held top = q->ring[0], last = q->ring[--q->tail];
    uint32_t i = 0, n = q->tail;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && earlier(&q->ring[c + 1], &q->ring[c])) c++;
        if (!earlier(&q->ring[c], &last)) break;
        q->ring[i] = q->ring[c];
        i = c;
    }
    if (n) q->ring[i] = last;
    return top;
}

static int held_count(const struct queue *q) { return (int)(q->tail - q->head); }

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa, void *data) {
    (void)msg;
    struct queue *q = data;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (!ph) return 0;
    uint32_t id = ntohl(ph->packet_id);
    if (held_count(q) >= (int)RING) { /* full: let it through now */
        overflow++;
        return nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL);
    }
    uint64_t t = now_ns();
    if (!first_arrival) first_arrival = t;
    struct held h = { id, t + draw_delay(q), q->arrivals++ };
    if (q->jitter_ns && q->reorder) {
        heap_push(q, h);
        return 0;
    }
    if (h.due < q->last_due) h.due = q->last_due;
    q->last_due = h.due;
    q->ring[q->tail % RING] = h;
    q->tail++;
    return 0;
}

/* The packet at the front of queue q: its heap top or its FIFO head. */
static struct held *front(struct queue *q) {
    if (q->head == q->tail) return NULL;
    return q->jitter_ns && q->reorder ? &q->ring[0] : &q->ring[q->head % RING];
}

/* Releases every packet due by now, across all queues in order of due time
 * (a packet due earlier leaves first whichever queue holds it: releasing
 * queue by queue would hand the first flow's ACKs a head start of some
 * microseconds at every wake-up, enough to bias which flow a full
 * bottleneck turns away); returns the earliest remaining due time (0: none). */
static uint64_t release_due(int all) {
    uint64_t t = now_ns();
    for (;;) {
        struct queue *best = NULL;
        struct held *first = NULL;
        for (int i = 0; i < nq; i++) {
            struct held *h = front(&queues[i]);
            if (h && (!first || h->due < first->due)) best = &queues[i], first = h;
        }
        if (!best) return 0;
        struct held h = *first;
        if (!all && h.due > t) return h.due;
        if (best->jitter_ns && best->reorder)
            heap_pop(best);
        else
            best->head++;
        nfq_set_verdict(best->qh, h.id, NF_ACCEPT, 0, NULL);
        if (!all) {
            uint64_t late = t > h.due ? t - h.due : 0;
            packets++;
            late_sum_ns += late;
            if (late > late_max_ns) late_max_ns = late;
            hist[late / 1000 < HIST_US ? late / 1000 : HIST_US]++;
        }
    }
}

/* The lateness below which a share `per_mille`/1000 of the packets fell
 * (1 us bins). */
static double quantile_us(uint64_t per_mille) {
    uint64_t want = packets * per_mille / 1000, seen = 0;
    for (int i = 0; i <= HIST_US; i++) {
        seen += hist[i];
        if (seen >= want && seen) return i;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s QUEUE:DELAY_US[:JITTER_US:DIST:REORDER:SEED] ...\n", argv[0]);
        return 2;
    }
    prctl(PR_SET_TIMERSLACK, 1UL); /* wake up on time, not up to 50 us late */
    if (getenv("CCARENA_DELAY_PROBE_US")) probe_ns = strtoull(getenv("CCARENA_DELAY_PROBE_US"), NULL, 10) * 1000ull;
    /* Real-time priority: on a busy machine a normal process can wait
     * milliseconds for a core after its timer fires. Best effort. */
    struct sched_param sp = { .sched_priority = 20 };
    if (!getenv("CCARENA_DELAY_NO_RT") && sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
        fprintf(stderr, "note: no real-time priority (%s); delays may be late under load\n", strerror(errno));
    struct nfq_handle *h = nfq_open();
    if (!h) { perror("nfq_open"); return 1; }
    for (int i = 1; i < argc && nq < MAXQ; i++) {
        unsigned num, reorder = 1; unsigned long long us, jitter_us = 0, seed = 0; char dist = 'u';
        int fields = sscanf(argv[i], "%u:%llu:%llu:%c:%u:%llu", &num, &us, &jitter_us, &dist, &reorder, &seed);
        if ((fields != 2 && fields != 6) || num > 65535 || (dist != 'u' && dist != 'n') || reorder > 1) {
            fprintf(stderr, "bad argument '%s': expected QUEUE:DELAY_US or QUEUE:DELAY_US:JITTER_US:u|n:1|0:SEED\n", argv[i]);
            return 2;
        }
        struct queue *q = &queues[nq];
        q->num = num;
        q->delay_ns = us * 1000ull;
        q->jitter_ns = jitter_us * 1000ull;
        q->normal = dist == 'n';
        q->reorder = (int)reorder;
        q->rng = seed;
        q->ring = calloc(RING, sizeof *q->ring);
        q->qh = nfq_create_queue(h, num, on_packet, q);
        if (!q->ring || !q->qh) { fprintf(stderr, "cannot bind queue %u: %s\n", num, strerror(errno)); return 1; }
        if (nfq_set_mode(q->qh, NFQNL_COPY_META, 0) < 0) { perror("nfq_set_mode"); return 1; }
        nfq_set_queue_maxlen(q->qh, RING);
        nq++;
    }
    int fd = nfq_fd(h);
    nfnl_rcvbufsiz(nfq_nfnlh(h), 16 << 20);
    int one = 1;
    setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof one);

    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigset_t block, empty;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, NULL); /* signals arrive only inside ppoll */
    sigemptyset(&empty);

    printf("ready\n");
    fflush(stdout);

    static char buf[65536];
    while (!stop) {
        uint64_t next = release_due(0);
        struct timespec ts, *tsp = NULL;
        uint64_t t = now_ns(), wake = 0;
        if (first_arrival && probe_ns) {
            wake = t + probe_ns;
            if (next && next < wake) wake = next;
        } else if (next) {
            wake = next;
        }
        if (wake) {
            uint64_t d = wake > t ? wake - t : 0;
            ts.tv_sec = d / 1000000000ull;
            ts.tv_nsec = d % 1000000000ull;
            tsp = &ts;
        }
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        int r = ppoll(&pfd, 1, tsp, &empty);
        if (r < 0 && errno != EINTR) { perror("ppoll"); break; }
        uint64_t woke = now_ns();
        if (wake && first_arrival && woke >= wake + LATE_WAKEUP_US * 1000ull && late_wakeups < LATE_WAKEUP_MAX) {
            late_wakeup_at_us[late_wakeups] = (wake - first_arrival) / 1000;
            late_wakeup_us[late_wakeups++] = (woke - wake) / 1000;
        }
        if (r > 0) {
            for (;;) {
                ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
                if (n < 0) break;
                nfq_handle_packet(h, buf, (int)n);
            }
        }
    }
    release_due(1);
    for (int i = 0; i < nq; i++) nfq_destroy_queue(queues[i].qh);
    nfq_close(h);
    fprintf(stderr,
            "{\"packets\":%llu,\"late_mean_us\":%.2f,\"late_p10_us\":%.0f,\"late_p50_us\":%.0f,\"late_p90_us\":%.0f,"
            "\"late_p99_us\":%.0f,\"late_max_us\":%.1f,\"overflow\":%llu,\"late_wakeups\":[",
            (unsigned long long)packets, packets ? late_sum_ns / 1e3 / packets : 0.0, quantile_us(100), quantile_us(500),
            quantile_us(900), quantile_us(990), late_max_ns / 1e3, (unsigned long long)overflow);
    for (uint32_t i = 0; i < late_wakeups; i++)
        fprintf(stderr, "%s[%llu,%llu]", i ? "," : "", (unsigned long long)late_wakeup_at_us[i],
                (unsigned long long)late_wakeup_us[i]);
    fprintf(stderr, "]}\n");
    return 0;
}
