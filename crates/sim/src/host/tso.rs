//! TSO/GSO sizing and deferral, after Linux's `tcp_tso_autosize`,
//! `tcp_tso_segs` and `tcp_tso_should_defer` (`net/ipv4/tcp_output.c`). A
//! sender with segmentation offload hands the device one large packet (a
//! super-packet of several segments) at a time; the device puts its segments
//! on the wire back to back. How large it is decides how bursty the sender
//! is: about a millisecond of data at the pacing rate, more for near peers,
//! capped by the device's GSO limit. When the window opens by less than that,
//! Linux waits for the next ACK to build a bigger packet (deferral), unless
//! that ACK is likely to come too late. These are pure functions of the
//! socket's state so that they can be checked against the kernel's formulas.

use crate::config::Schema;
use serde::{Deserialize, Serialize};

/// Which of Linux's `tcp_tso_should_defer` rules decides whether the next
/// ACK is worth waiting for (`[hosts] tso_defer`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, Schema)]
#[serde(rename_all = "snake_case")]
pub enum DeferRule {
    /// Wait only while the oldest unacknowledged skb's ACK is due within
    /// min(srtt/2, 1 ms): Linux 6.18 and the stable trees since October 2025
    /// ("tcp: fix tcp_tso_should_defer() vs large RTT").
    #[default]
    AckDue,
    /// Wait whenever the oldest unacknowledged skb left more than srtt/2 ago:
    /// the kernels before that fix (the testbeds of published experiments).
    HalfRtt,
}

/// `sk_gso_max_size` for a legacy 64 KiB GSO device: `GSO_LEGACY_MAX_SIZE`
/// minus `MAX_TCP_HEADER + 1` (320 + 1 on x86-64), as `sk_setup_caps` sets it.
pub const GSO_MAX_BYTES: u64 = 65_536 - 1 - 320;
/// `sk_gso_max_segs` of a device without its own limit (`GSO_MAX_SEGS`).
pub const GSO_MAX_SEGS: u32 = 65_535;

/// Linux `tcp_xmit_size_goal`: the size of the skbs `tcp_sendmsg` builds in
/// the write queue, `sk_gso_max_size` in whole segments (45 at MSS 1448).
/// `tcp_write_xmit` then splits them to the autosize goal and the window,
/// and grows a short head skb from the next one (`tcp_grow_skb`).
pub fn sendmsg_size_goal(mss: u32) -> u32 {
    ((GSO_MAX_BYTES / mss.max(1) as u64) as u32).clamp(1, GSO_MAX_SEGS)
}

/// The two skbs of new data at the front of a sender's write queue, in
/// segments, as `tcp_sendmsg` built them and `tcp_write_xmit` has split
/// and grown them since (`[hosts] write_queue`).
#[derive(Clone, Copy, Debug)]
pub struct WriteQueue {
    goal: u32,
    head: u32,
    next: u32,
}

impl WriteQueue {
    pub fn new(mss: u32) -> WriteQueue {
        let goal = sendmsg_size_goal(mss);
        WriteQueue { goal, head: goal, next: goal }
    }

    /// The head skb for a send of up to `quota` segments with `data_left`
    /// still to send: grown from the next skb if shorter than the quota
    /// (`tcp_grow_skb`; a next skb eaten whole leaves a fresh one behind it).
    /// Returns its segments and whether it is the queue's last skb.
    pub fn head_skb(&mut self, quota: u32, data_left: u32) -> (u32, bool) {
        if self.head < quota && data_left > self.head {
            let grow = (quota - self.head).min(self.next);
            self.head += grow;
            self.next -= grow;
            if self.next == 0 {
                self.next = self.goal;
            }
        }
        (self.head.min(data_left), data_left <= self.head)
    }

    /// `n` segments of the head skb left (`tso_fragment` keeps the rest at
    /// the head); sent whole, the next skb becomes the head.
    pub fn sent(&mut self, n: u32) {
        if self.head > n {
            self.head -= n;
        } else {
            (self.head, self.next) = (self.next, self.goal);
        }
    }
}
/// `net.ipv4.tcp_min_tso_segs` default.
pub const MIN_TSO_SEGS: u32 = 2;
/// `net.ipv4.tcp_tso_rtt_log` default: the RTT bonus halves per 2^9 us of min_rtt.
pub const TSO_RTT_LOG: u32 = 9;
/// `net.ipv4.tcp_tso_win_divisor` default: a super-packet may take a third of cwnd.
pub const TSO_WIN_DIVISOR: u32 = 3;

/// Linux `tcp_tso_autosize` + `tcp_tso_segs`: segments per super-packet for a
/// pacing rate in bytes/s, the flow's min RTT in microseconds (`u32::MAX`
/// when unknown, as Linux's `~0U`), the MSS, the algorithm's minimum (Linux
/// `min_tso_segs` of the congestion ops, else `MIN_TSO_SEGS`) and the
/// pacing shift (`sk_pacing_shift`, 10: about 1 ms).
pub fn tso_segs(pacing_rate: u64, min_rtt_us: u32, mss: u32, min_tso_segs: u32, pacing_shift: u32) -> u32 {
    let mut bytes = pacing_rate >> pacing_shift;
    let r = min_rtt_us >> TSO_RTT_LOG;
    if r < 32 {
        bytes += GSO_MAX_BYTES >> r;
    }
    let bytes = bytes.min(GSO_MAX_BYTES);
    let segs = ((bytes / mss as u64) as u32).max(min_tso_segs);
    segs.min(GSO_MAX_SEGS)
}

/// What `tcp_tso_should_defer` looks at, in segments and nanoseconds.
#[derive(Clone, Copy, Debug)]
pub struct DeferInput {
    /// Segments the congestion window allows now (cwnd - in flight, > 0).
    pub cwnd_room: u32,
    /// Segments the peer's window allows now.
    pub rwnd_room: u32,
    /// The congestion window and the peer's window, in segments.
    pub cwnd: u32,
    pub snd_wnd: u32,
    /// The super-packet size goal (`tso_segs`).
    pub goal: u32,
    /// Segments of the skb at the send head (after `tcp_grow_skb`), and
    /// whether it is the last skb of the write queue.
    pub skb_segs: u32,
    pub skb_is_tail: bool,
    /// In loss recovery (`icsk_ca_state >= TCP_CA_Recovery`): never defer.
    pub in_recovery: bool,
    /// Nanoseconds since the oldest unacknowledged segment was sent (None:
    /// nothing in flight).
    pub head_age_ns: Option<u64>,
    /// Smoothed RTT in nanoseconds (Linux: `srtt_us` x 125, its eighths of a
    /// microsecond).
    pub srtt_ns: u64,
    /// The kernel's rule for the last test.
    pub rule: DeferRule,
}

/// The longest Linux waits for the head's ACK before it stops deferring
/// (`NSEC_PER_MSEC` in `tcp_tso_should_defer`).
pub const DEFER_ACK_HORIZON_NS: u64 = 1_000_000;

/// Linux `tcp_tso_should_defer`: true when the sender should wait for the
/// next ACK to send a bigger super-packet. Only asked when the packet could
/// hold more than one segment and the window has room for at least one.
pub fn should_defer(d: &DeferInput) -> bool {
    if d.in_recovery || d.goal <= 1 {
        return false;
    }
    let limit = d.cwnd_room.min(d.rwnd_room);
    // A full-sized super-packet can go now.
    if limit >= d.goal {
        return false;
    }
    // An skb in the middle of the write queue gets no more data: if all of
    // it may go, it goes.
    if !d.skb_is_tail && limit >= d.skb_segs {
        return false;
    }
    // At least a fraction of the window is available: use it.
    let chunk = d.snd_wnd.min(d.cwnd) / TSO_WIN_DIVISOR;
    if limit >= chunk {
        return false;
    }
    // Nothing in flight: no ACK will come to open the window further.
    let Some(age) = d.head_age_ns else { return false };
    // Send now when the next ACK is likely to come too late.
    let ack_too_late = match d.rule {
        // The head's ACK is due one srtt after it left; more than
        // min(srtt/2, 1 ms) away, waiting would break the ACK clock (Linux
        // 6.18 and its stable trees, "tcp: fix tcp_tso_should_defer() vs
        // large RTT", October 2025).
        DeferRule::AckDue => d.srtt_ns.saturating_sub(age) > (d.srtt_ns / 2).min(DEFER_ACK_HORIZON_NS),
        // Before: while the head is younger than srtt/2, which at RTTs of
        // many milliseconds deferred almost every small opening.
        DeferRule::HalfRtt => age < d.srtt_ns / 2,
    };
    !ack_too_late
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1448;

    /// Pacing rate as Linux sets it in congestion avoidance (`tcp_pacing_ca_ratio`
    /// 120 %) for a flow delivering `mbps`.
    fn ca_pacing(mbps: u64) -> u64 {
        mbps * 1_000_000 / 8 * 120 / 100
    }

    /// The kernel's arithmetic written out independently for a grid of rates and
    /// RTTs (10/100/400/1000 Mbit/s, 0.1-300 ms).
    #[test]
    fn burst_sizes_follow_the_kernels_formula() {
        for mbps in [10u64, 100, 400, 1000] {
            for rtt_us in [100u32, 500, 1_000, 5_000, 16_000, 40_000, 100_000, 300_000] {
                let rate = ca_pacing(mbps);
                let shift = rtt_us / 512;
                let bonus = if shift < 32 { 65_215u64 >> shift } else { 0 };
                let bytes = ((rate / 1024) + bonus).min(65_215);
                let want = ((bytes / MSS as u64) as u32).max(2);
                assert_eq!(tso_segs(rate, rtt_us, MSS, MIN_TSO_SEGS, 10), want, "{mbps} Mbit/s, {rtt_us} us");
            }
        }
    }

    #[test]
    fn worked_examples() {
        // 400 Mbit/s in CA, long RTT: 60 MB/s >> 10 = 58593 B -> 40 segments.
        assert_eq!(tso_segs(ca_pacing(400), 40_000, MSS, 2, 10), 40);
        // 100 Mbit/s: 14648 B -> 10 segments.
        assert_eq!(tso_segs(ca_pacing(100), 40_000, MSS, 2, 10), 10);
        // 10 Mbit/s: 1464 B -> 1 segment, raised to the minimum of 2.
        assert_eq!(tso_segs(ca_pacing(10), 40_000, MSS, 2, 10), 2);
        // Near peer (min_rtt 100 us): the whole 64 KB cap at any rate.
        assert_eq!(tso_segs(ca_pacing(10), 100, MSS, 2, 10), 45);
        // Unknown min RTT (~0U): no bonus.
        assert_eq!(tso_segs(ca_pacing(100), u32::MAX, MSS, 2, 10), 10);
        // 1 Gbit/s: capped by the GSO size.
        assert_eq!(tso_segs(ca_pacing(1000), 40_000, MSS, 2, 10), 45);
        // An algorithm's own minimum (BBR asks for 1 below 1.2 Mbit/s).
        assert_eq!(tso_segs(1000, 40_000, MSS, 1, 10), 1);
    }

    fn input() -> DeferInput {
        DeferInput {
            cwnd_room: 4,
            rwnd_room: 10_000,
            cwnd: 300,
            snd_wnd: 10_000,
            goal: 40,
            skb_segs: 40,
            skb_is_tail: false,
            in_recovery: false,
            head_age_ns: Some(39_500_000),
            srtt_ns: 40_000_000,
            rule: DeferRule::AckDue,
        }
    }

    #[test]
    fn defers_a_small_opening_when_an_ack_is_due() {
        assert!(should_defer(&input()));
    }

    #[test]
    fn sends_a_full_goal_or_a_third_of_the_window() {
        assert!(!should_defer(&DeferInput { cwnd_room: 40, ..input() }));
        // cwnd 30: a third is 10.
        assert!(!should_defer(&DeferInput { cwnd: 30, cwnd_room: 10, ..input() }));
        assert!(should_defer(&DeferInput { cwnd: 30, cwnd_room: 9, ..input() }));
        // The receiver's window counts too.
        assert!(!should_defer(&DeferInput { snd_wnd: 12, rwnd_room: 4, ..input() }));
    }

    /// A short skb in the middle of the write queue (the rest of a split
    /// one, grown by `tcp_grow_skb` to the window's room) goes whole; the
    /// queue's last skb may still wait for more data.
    #[test]
    fn sends_a_middle_skb_that_fits_whole() {
        assert!(!should_defer(&DeferInput { skb_segs: 4, ..input() }));
        assert!(should_defer(&DeferInput { skb_segs: 5, ..input() }));
        assert!(should_defer(&DeferInput { skb_segs: 4, skb_is_tail: true, ..input() }));
    }

    /// 45-segment skbs: a send of 20 leaves 25 at the head, then 5; the
    /// 5 are grown by 15 from the next skb to a full 20.
    #[test]
    fn the_write_queue_splits_and_grows_its_head() {
        let mut q = WriteQueue::new(1448);
        assert_eq!(q.head_skb(20, u32::MAX), (45, false));
        q.sent(20);
        assert_eq!(q.head_skb(20, u32::MAX), (25, false));
        q.sent(20);
        assert_eq!(q.head_skb(20, u32::MAX), (20, false));
        q.sent(20);
        assert_eq!(q.head_skb(50, u32::MAX), (50, false), "30 left, grown by 20 from a fresh skb");
        assert_eq!(q.head_skb(10, 8), (8, true), "the transfer ends inside it");
    }

    #[test]
    fn sendmsg_builds_skbs_of_the_gso_size() {
        assert_eq!(sendmsg_size_goal(1448), 45);
        assert_eq!(sendmsg_size_goal(8948), 7);
    }

    #[test]
    fn never_defers_in_recovery_or_when_the_next_ack_is_far() {
        assert!(!should_defer(&DeferInput { in_recovery: true, ..input() }));
        assert!(!should_defer(&DeferInput { head_age_ns: None, ..input() }));
        assert!(!should_defer(&DeferInput { goal: 1, ..input() }));
        // srtt 40 ms: the head's ACK is due in 30 ms, 20 ms, 1.5 ms: too far.
        for age in [10_000_000, 20_000_000, 38_500_000] {
            assert!(!should_defer(&DeferInput { head_age_ns: Some(age), ..input() }), "head {age} ns old");
        }
    }

    #[test]
    fn defers_only_when_the_heads_ack_is_due_within_a_millisecond_or_half_an_rtt() {
        let at = |age: u64, srtt: u64| should_defer(&DeferInput { head_age_ns: Some(age), srtt_ns: srtt, ..input() });
        // Long RTT: the horizon is 1 ms, whatever srtt/2 is.
        assert!(!at(38_999_999, 40_000_000), "due in 1.000001 ms");
        assert!(at(39_000_000, 40_000_000), "due in exactly 1 ms");
        assert!(at(45_000_000, 40_000_000), "overdue");
        // Short RTT (srtt 1.2 ms): the horizon is srtt/2 = 0.6 ms.
        assert!(!at(599_999, 1_200_000));
        assert!(at(600_000, 1_200_000));
        // The rule before Linux 6.18 deferred here (head older than srtt/2).
        assert!(!at(25_000_000, 40_000_000));
    }

    #[test]
    fn the_rule_before_linux_6_18_defers_once_the_head_is_half_an_rtt_old() {
        let at = |age: u64| should_defer(&DeferInput { head_age_ns: Some(age), rule: DeferRule::HalfRtt, ..input() });
        assert!(!at(19_999_999), "head younger than srtt/2: send now");
        assert!(at(20_000_000));
        assert!(at(25_000_000), "the 6.18 rule sends this one now");
    }
}
