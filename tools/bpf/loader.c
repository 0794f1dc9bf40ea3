/* Loads one of the BPF programs in this directory (as a bpftool skeleton)
 * and writes its ring buffer's records to a file until SIGINT or SIGTERM.
 * tools/bpf_tracer.py builds it once per program, with -DSKEL=<name> and
 * -DSKEL_HEADER='"<name>.skel.h"': the skeleton and its "<name>_bpf"
 * functions. Prints
 * "attached" on stderr once the programs are attached, and at the end
 * "dropped N", the records the ring had no room for (the program's
 * `dropped` counter). */
#include <signal.h>
#include <stdio.h>
#include <bpf/libbpf.h>

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#include SKEL_HEADER

#define SKEL_T CAT(SKEL, _bpf)
#define SKEL_FN(suffix) CAT(SKEL_T, suffix)

static volatile sig_atomic_t stopping;
static FILE *out;

static void on_signal(int sig) { (void)sig; stopping = 1; }

static int write_record(void *ctx, void *data, size_t size)
{
	(void)ctx;
	fwrite(data, size, 1, out);
	return 0;
}

int main(int argc, char **argv)
{
	struct SKEL_T *skel;
	struct ring_buffer *ring;

	if (argc != 2) {
		fprintf(stderr, "usage: %s OUTPUT\n", argv[0]);
		return 2;
	}
	out = fopen(argv[1], "wb");
	if (!out) {
		perror(argv[1]);
		return 1;
	}
	skel = SKEL_FN(__open_and_load)();
	if (!skel || SKEL_FN(__attach)(skel)) {
		fprintf(stderr, "could not load or attach the tracing programs\n");
		return 1;
	}
	ring = ring_buffer__new(bpf_map__fd(skel->maps.records), write_record, NULL, NULL);
	if (!ring) {
		fprintf(stderr, "no ring buffer\n");
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	fprintf(stderr, "attached\n");
	while (!stopping)
		ring_buffer__poll(ring, 100);
	ring_buffer__consume(ring);
	fclose(out);
	fprintf(stderr, "dropped %llu\n", (unsigned long long)skel->bss->dropped);
	ring_buffer__free(ring);
	SKEL_FN(__destroy)(skel);
	return 0;
}
