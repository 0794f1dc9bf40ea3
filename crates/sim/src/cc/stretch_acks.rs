//! Stretch ACKs against every algorithm with a `cong_avoid` hook: what each one
//! counts when one ACK covers several segments, as its Linux source counts it.
//! Linux hands `cong_avoid` the packets an ACK delivered (`acked`); most
//! algorithms grow by that many packets (`tcp_slow_start`, `tcp_cong_avoid_ai`,
//! or their own per-packet counter fed by `pkts_acked`), but some still count
//! ACK events whatever the ACK covers: HighSpeed's congestion avoidance
//! (`snd_cwnd_cnt += ai + 1` per call), Hybla in both phases (one increment per
//! call) and the 2.6.18 CUBIC (one ACK per call, as `tcp_abc = 0` counted).
//! Receivers that coalesce (GRO, delayed ACKs) therefore slow exactly those
//! algorithms down, while BIC, which still divides its spacing by an estimate
//! of packets per ACK, speeds up. The same packets are delivered over the same time either
//! as one ACK per segment or as one ACK per ten segments, and the growth is
//! compared. docs/fidelity.md ("Stretch ACKs") lists the sources.

use super::{make_cca, AckSample, CongestionControl, TcpSock, INFINITE_SSTHRESH};
use std::collections::BTreeMap;

const RTT_US: u64 = 100_000;
const HZ: u32 = 1000;

/// What an algorithm counts in one phase, in its Linux version.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Counts {
    /// Packets acknowledged: a stretch ACK of n counts as n ACKs of one.
    Packets,
    /// Packets, but the ACK that earns an increment restarts the count at 0
    /// and its own packets are lost (H-TCP's check-then-count, Illinois's
    /// `snd_cwnd_cnt = 0`): the bigger the ACK, the more is lost.
    PacketsLosingRemainder,
    /// ACK events: a stretch ACK counts once, whatever it covers.
    Acks,
    /// ACK events, with the increment's spacing divided by an estimate of
    /// packets per ACK (2.6.18 CUBIC's `delayed_ack`), which gives back part
    /// of what counting ACKs loses.
    AcksOverRatio,
    /// Packets, with the spacing also divided by the packets-per-ACK estimate
    /// (mainline BIC keeps the compensation from the days of counting ACKs):
    /// stretch ACKs speed it up.
    PacketsOverRatio,
}
use Counts::{Acks, AcksOverRatio, Packets, PacketsLosingRemainder, PacketsOverRatio};

/// (algorithm, slow start, congestion avoidance), from each algorithm's
/// current mainline source (cubic-2008 from Linux 2.6.18's).
const TABLE: &[(&str, Counts, Counts)] = &[
    ("reno", Packets, Packets),
    ("newreno", Packets, Packets),
    ("cubic", Packets, Packets),
    ("bic", Packets, PacketsOverRatio),
    ("scalable", Packets, Packets),
    ("westwood", Packets, Packets),
    ("vegas", Packets, Packets),
    ("veno", Packets, Packets),
    ("yeah", Packets, Packets),
    ("illinois", Packets, PacketsLosingRemainder),
    ("htcp", Packets, PacketsLosingRemainder),
    ("highspeed", Packets, Acks),
    ("hybla", Acks, Acks),
    ("cubic-2008", Acks, AcksOverRatio),
    // tcp_cdg.c and tcp_lp.c grow through tcp_reno_cong_avoid, tcp_nv.c
    // through tcp_slow_start / tcp_cong_avoid_ai with `acked`.
    ("cdg", Packets, Packets),
    ("lp", Packets, Packets),
    ("nv", Packets, Packets),
    // tcp_dctcp.c grows through tcp_reno_cong_avoid.
    ("dctcp", Packets, Packets),
    // FAST's window follows its once-per-RTT equation, whatever the ACKs cover.
    ("fast", Packets, Packets),
];

/// A connection of `cwnd` packets, 100 ms RTT, in slow start or in congestion
/// avoidance, after the algorithm's `init` (Hybla's init sets cwnd, so cwnd
/// is set after it).
fn connection(cc: &mut dyn CongestionControl, cwnd: u32, slow_start: bool) -> TcpSock {
    let mut tp = TcpSock::new(1448, HZ, 10);
    tp.srtt_us8 = (RTT_US * 8) as u32;
    tp.rtt_min.update(300 * HZ, 0, RTT_US as u32);
    tp.is_cwnd_limited = true;
    tp.jiffies = 1;
    tp.mstamp_us = 1000;
    cc.init(&mut tp);
    tp.cwnd = cwnd;
    tp.ssthresh = if slow_start { INFINITE_SSTHRESH } else { 2 };
    tp.snd_nxt = cwnd;
    tp
}

/// cwnd after `packets` packets are delivered by ACKs covering `per_ack`
/// each, spread evenly over time at one window per RTT (so both ACK patterns
/// take the same time). Each ACK runs the hooks in the stack's order:
/// `pkts_acked` from the retransmission-queue clean-up, then `cong_avoid`.
fn grow(name: &str, cwnd: u32, slow_start: bool, per_ack: u32, packets: u32) -> u32 {
    let mut cc = make_cca(name, &BTreeMap::new()).unwrap();
    let mut tp = connection(cc.as_mut(), cwnd, slow_start);
    let mut delivered = 0;
    while delivered < packets {
        delivered += per_ack;
        let now_us = 1000 + delivered as u64 * RTT_US / cwnd as u64;
        tp.mstamp_us = now_us;
        tp.jiffies = (now_us * HZ as u64 / 1_000_000) as u32;
        tp.snd_una = delivered;
        tp.delivered = delivered;
        // Keep the window full: what was acknowledged is sent again.
        tp.snd_nxt = tp.snd_una + tp.cwnd;
        tp.packets_out = tp.cwnd;
        let sample = AckSample { pkts_acked: per_ack, rtt_us: RTT_US as i64, in_flight: tp.cwnd };
        cc.pkts_acked(&mut tp, &sample);
        let ack = tp.snd_una;
        cc.cong_avoid(&mut tp, ack, per_ack);
    }
    tp.cwnd
}

#[test]
fn every_algorithm_with_cong_avoid_is_in_the_table() {
    for info in super::cca_catalogue() {
        let cc = make_cca(info.name, &BTreeMap::new()).unwrap();
        let listed = TABLE.iter().any(|(n, _, _)| *n == info.name);
        assert_eq!(listed, cc.has_cong_avoid(), "{}", info.name);
    }
}

#[test]
fn stretch_acks_count_packets_or_ack_events_as_linux_does() {
    let mut wrong = Vec::new();
    for &(name, ss, ca) in TABLE {
        for (slow_start, counts) in [(true, ss), (false, ca)] {
            // Slow start: 10 packets from cwnd 20 (doubling would run away, and
            // Hybla's first ACK at 100 ms adds 15 packets). Congestion
            // avoidance: 20 windows at cwnd 100.
            let (cwnd, packets) = if slow_start { (20, 10) } else { (100, 2000) };
            let single = grow(name, cwnd, slow_start, 1, packets) - cwnd;
            let stretch = grow(name, cwnd, slow_start, 10, packets) - cwnd;
            let phase = if slow_start { "slow start" } else { "congestion avoidance" };
            let ratio = stretch as f64 / single.max(1) as f64;
            let ok = single > 0
                && match counts {
                        Packets => ratio > 0.9 && ratio < 1.1,
                    PacketsLosingRemainder => ratio > 0.5 && ratio <= 0.9,
                    Acks => ratio > 0.05 && ratio < 0.2,
                    AcksOverRatio => (0.2..0.9).contains(&ratio),
                    PacketsOverRatio => ratio > 3.0,
                };
            if !ok {
                wrong.push(format!("{name} in {phase} ({counts:?}): +{single} with single ACKs, +{stretch} with stretch ACKs"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The brief's example, exactly: one ACK for 10 segments at cwnd 100 in
/// congestion avoidance adds 10/100 of a packet to Reno (10 in its counter)
/// but one increment of a(w) = 2 to HighSpeed (cwnd 100 is in its second bin).
#[test]
fn one_ack_for_ten_segments_reno_against_highspeed() {
    for (name, cnt) in [("reno", 10), ("highspeed", 2)] {
        let mut cc = make_cca(name, &BTreeMap::new()).unwrap();
        let mut tp = connection(cc.as_mut(), 100, false);
        cc.cong_avoid(&mut tp, 10, 10);
        assert_eq!((tp.cwnd, tp.cwnd_cnt), (100, cnt), "{name}");
    }
}
