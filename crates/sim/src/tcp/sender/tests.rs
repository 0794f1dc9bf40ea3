//! Packet scripts for the ACK path (`mod.rs`, see `testing`): cumulative and
//! stretch ACKs, RTT samples, SACK tagging. The scripts for the other files sit
//! at their ends (`rack.rs`, `recovery.rs`, `timer.rs`). Cases marked
//! `#[ignore]` are divergences from Linux, kept failing on purpose (run with
//! `--ignored`).

use super::testing::*;
use crate::cc::CaState::{Cwr, Open, Recovery};
use crate::tcp::TcpConfig;

/// A stretch (delayed, cumulative) ACK grows cwnd by every packet it covers in
/// slow start.
#[test]
fn stretch_ack_in_slow_start_grows_cwnd_by_the_packets_acked() {
    let mut h = started();
    h.at(200);
    ack!(h, 2);
    expect_tx!(h, 10..14);
    check!(h, cwnd = 12, delivered = 2);
    h.at(205);
    ack!(h, 10);
    check!(h, cwnd = 20, delivered = 10);
    expect_tx!(h, 14..30);
}

/// A delayed ACK of a lone segment raises srtt (1/8 gain) but not the
/// windowed min RTT.
#[test]
fn delayed_ack_of_a_lone_segment_raises_srtt_not_min_rtt() {
    let mut h = reno().segments(1).start();
    expect_tx!(h, 0);
    check!(h, srtt_us = 100_000, min_rtt_us = 100_000);
    // The receiver's delayed-ACK timer adds 40 ms: a 140 ms sample.
    h.at(240);
    ack!(h, 1);
    check!(h, srtt_us = 105_000, min_rtt_us = 100_000);
}

/// Linux marks segment 0 lost on the first SACK of three segments (sacked_out
/// reaches tp->reordering, reo_wnd = 0) and sees no reordering: the SACKed
/// segments are in order. Here `highest_sack_seq` falls back to SND.NXT while
/// the first block is being tagged (the SACKed-range set is only updated after
/// the block), so segments 2 and 3 look like "SACKed below the highest SACK":
/// reord_seen counts a reordering, RACK keeps a min_rtt/4 window and waits.
#[test]
#[ignore = "divergence: the first SACK block of an episode counts as reordering"]
fn divergence_first_sack_block_is_not_reordering() {
    let mut h = started();
    h.at(200);
    ack!(h, 0, sack = [(1, 4)]);
    check!(h, reord_seen = 0);
    expect_tx!(h, 0 rtx, 10);
    check!(h, ca = Recovery, cwnd = 8);
}

/// AccECN (Prague): after ACKs of two segments, one ACK covers eight with its
/// 3-bit ACE field unchanged. 0 and 8 marks look alike in the field; without
/// the AccECN option Linux assumes the most (8, `__tcp_accecn_process`'s
/// safe delta while ACKs are not known to be thinned) and the sender enters
/// CWR; with the option's CE byte count unchanged it takes the field as read.
#[test]
fn a_large_ack_with_the_accecn_option_and_no_ce_bytes_reports_no_marks() {
    let mss = TcpConfig::default().mss;
    for with_option in [false, true] {
        let mut h = setup("prague").start();
        expect_tx!(h, 0..10);
        h.at(200);
        let mut a = AckSpec::new(2);
        if with_option {
            a.accecn_option((2 * mss, 0));
        }
        h.ack(a);
        check!(h, delivered_ce = 0, ca = Open);
        h.drain();
        let mut a = AckSpec::new(10);
        if with_option {
            a.accecn_option((10 * mss, 0));
        }
        h.ack(a);
        h.drain();
        if with_option {
            check!(h, delivered = 10, delivered_ce = 0, ca = Open);
        } else {
            check!(h, delivered = 10, delivered_ce = 8, ca = Cwr);
        }
    }
}
