//! TCP Small Queues, after Linux's `tcp_small_queue_check` and `tcp_wfree`
//! (`net/ipv4/tcp_output.c`): a socket may have only about two skbs, or about
//! a millisecond at its pacing rate, in its host's qdisc and NIC at once. The
//! bytes of skbs handed down and not yet freed (`sk_wmem_alloc`) are counted;
//! when they exceed the limit the sender stops (the socket is "throttled",
//! not cwnd-limited), and each TX completion that frees an skb lets it write
//! again. Without it a sender whose NIC is slower than its window would queue
//! a whole window in its own host and see its RTT grow without bound; with it
//! the window waits in the socket, as on Linux.

/// Per-skb bookkeeping on top of the payload, in bytes: Linux charges each
/// skb's `truesize`, the payload plus `SKB_TRUESIZE(MAX_TCP_HEADER)`, about
/// 256 (struct sk_buff) + 320 (skb_shared_info) + 320 (header room) on x86_64.
/// An approximation: page-fragment rounding is not modelled.
pub const SKB_OVERHEAD: u64 = 896;

/// `net.ipv4.tcp_limit_output_bytes` on Linux 6.15 and later (4 MiB; 1 MiB
/// from 4.20 to 6.14): the cap for sockets that are not paced by the stack.
pub const LIMIT_OUTPUT_BYTES: u64 = 4 << 20;

/// One socket's small-queue state.
#[derive(Clone, Debug, Default)]
pub struct SmallQueues {
    /// Truesize of the skbs in the host below the socket (`sk_wmem_alloc`).
    pub wmem: u64,
    /// Payload of the skb the NIC is transmitting, freed with its last segment.
    partial: u64,
    /// The sender stopped because of the limit (`TSQ_THROTTLED`).
    pub throttled: bool,
}

/// What the check needs to know of the socket and of the skb to send.
#[derive(Clone, Copy, Debug)]
pub struct CheckInput {
    /// Payload bytes of the skb about to be sent.
    pub skb_bytes: u64,
    /// `sk_pacing_rate` in bytes per second.
    pub pacing_rate: u64,
    pub pacing_shift: u32,
    /// The stack paces this socket itself (`sk_pacing_status != SK_PACING_NONE`).
    pub paced: bool,
    /// 1 for retransmissions, whose limit is doubled; 0 otherwise.
    pub factor: u32,
    /// The retransmit queue is empty or holds a single skb: Linux sends anyway.
    pub rtx_queue_single: bool,
}

/// Linux `tcp_small_queue_check`'s limit in bytes.
pub fn limit(c: &CheckInput) -> u64 {
    let truesize = c.skb_bytes + SKB_OVERHEAD;
    let by_rate = if c.pacing_rate == u64::MAX { u64::MAX } else { c.pacing_rate >> c.pacing_shift };
    let mut limit = (2 * truesize).max(by_rate);
    if !c.paced {
        limit = limit.min(LIMIT_OUTPUT_BYTES);
    }
    limit << c.factor
}

impl SmallQueues {
    /// Linux `tcp_small_queue_check`: true if the skb must wait (the socket
    /// is then throttled until a TX completion).
    pub fn check(&mut self, c: &CheckInput) -> bool {
        if self.wmem <= limit(c) {
            return false;
        }
        if c.rtx_queue_single {
            return false;
        }
        self.throttled = true;
        true
    }

    /// An skb of `payload` bytes handed to the qdisc/NIC.
    pub fn sent(&mut self, payload: u64) {
        self.wmem += payload + SKB_OVERHEAD;
    }

    /// A data segment of `payload` bytes left the NIC; `last` if it ends its
    /// skb, which is then freed (`tcp_wfree`). Returns true if the socket was
    /// throttled and may write again (Linux's TSQ handler runs).
    pub fn tx_done(&mut self, payload: u64, last: bool) -> bool {
        self.partial += payload;
        if !last {
            return false;
        }
        self.wmem = self.wmem.saturating_sub(self.partial + SKB_OVERHEAD);
        self.partial = 0;
        std::mem::take(&mut self.throttled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(skb: u64, rate: u64) -> CheckInput {
        CheckInput { skb_bytes: skb, pacing_rate: rate, pacing_shift: 10, paced: false, factor: 0, rtx_queue_single: false }
    }

    #[test]
    fn limit_is_two_skbs_or_a_millisecond_at_the_pacing_rate() {
        // 45 KB skbs at 10 Mbit/s: two skbs' truesize dominates.
        assert_eq!(limit(&input(45_000, 1_250_000)), 2 * (45_000 + SKB_OVERHEAD));
        // 10 Gbit/s: ~1 ms at the pacing rate (rate >> 10).
        assert_eq!(limit(&input(65_160, 1_250_000_000)), 1_250_000_000 >> 10);
        // Unpaced sockets are capped at tcp_limit_output_bytes; paced ones are not.
        let fast = input(65_160, 100_000_000_000);
        assert_eq!(limit(&fast), LIMIT_OUTPUT_BYTES);
        assert_eq!(limit(&CheckInput { paced: true, ..fast }), 100_000_000_000 >> 10);
        // Retransmissions get twice the room.
        assert_eq!(limit(&CheckInput { factor: 1, ..input(1448, 0) }), 4 * (1448 + SKB_OVERHEAD));
    }

    #[test]
    fn throttles_above_the_limit_and_resumes_when_an_skb_is_freed() {
        let mut q = SmallQueues::default();
        let c = input(14_480, 1_000_000); // limit: 2 x (14,480 + 896) = 30,752
        for _ in 0..2 {
            assert!(!q.check(&c));
            q.sent(14_480);
        }
        // Two skbs queued: at the limit, a third may still go (the check is "more than").
        assert!(!q.check(&c));
        q.sent(14_480);
        assert!(q.check(&c) && q.throttled);
        // The NIC sends the first skb's ten segments; only its last frees it.
        for i in 0..10 {
            assert_eq!(q.tx_done(1448, i == 9), i == 9);
        }
        assert!(!q.throttled);
        assert_eq!(q.wmem, 2 * (14_480 + SKB_OVERHEAD));
        assert!(!q.check(&c));
    }

    #[test]
    fn a_single_skb_in_the_retransmit_queue_is_sent_anyway() {
        let mut q = SmallQueues { wmem: 1 << 30, ..Default::default() };
        assert!(!q.check(&CheckInput { rtx_queue_single: true, ..input(1448, 0) }));
        assert!(!q.throttled);
    }

    #[test]
    fn a_completion_without_throttling_does_not_wake_the_socket() {
        let mut q = SmallQueues::default();
        q.sent(1448);
        assert!(!q.tx_done(1448, true));
        assert_eq!(q.wmem, 0);
    }
}
