//! How flows start, and one-way data delay: `startup = iperf3` opens the data
//! connection after three round trips of control exchange and writes one
//! round trip after its handshake and the server's wait before TEST_START
//! (five RTTs and 0.5-5.3 ms from the launch to the first data segment on an
//! idle path, as measured on the kernel), its messages
//! queueing like any packet; `data_delay` lengthens the data direction only,
//! and its jitter varies around it.

mod common;

use ccarena_sim::config::Startup;
use ccarena_sim::dist::Dist;
use ccarena_sim::net::delay_line::{JitterConfig, JitterShape};
use ccarena_sim::net::queue::QueueLimit;
use ccarena_sim::units::{Dur, Time};
use common::*;

/// A 10-segment transfer (within the initial window) at `rtt_ms`: (when the
/// data connection's SYN left, when the transfer completed), ns.
fn transfer(rtt_ms: u64, startup: Startup, data_delay_ms: u64) -> (u64, u64) {
    transfer_with(rtt_ms, startup, data_delay_ms, None)
}

/// The same, with the iperf3 server's wait before TEST_START set.
fn transfer_with(rtt_ms: u64, startup: Startup, data_delay_ms: u64, test_start_wait: Option<Dist>) -> (u64, u64) {
    let mut f = flow("reno", rtt_ms);
    f.size = Some(10 * 1448);
    f.start = Time::from_ms(100);
    f.startup = startup;
    f.data_delay = Dur::from_ms(data_delay_ms);
    let mut cfg = scenario(100, QueueLimit::Packets(1000), iid(0.0), vec![f], 5, 0, 1);
    if let Some(wait) = test_start_wait {
        cfg.hosts.iperf3_test_start_wait = wait;
    }
    let r = run(cfg);
    let c = &r.flows[0].counters;
    (c.start_ns, c.completion_ns)
}

#[test]
fn iperf3_start_up_adds_four_rtts_before_the_first_data() {
    for rtt_ms in [10, 40, 162] {
        let rtt = rtt_ms * 1_000_000;
        let (syn0, done0) = transfer(rtt_ms, Startup::Immediate, 0);
        let (syn1, done1) = transfer(rtt_ms, Startup::Iperf3, 0);
        assert_eq!(syn0, 100_000_000, "rtt {rtt_ms} ms");
        // The data connection opens after three control round trips (and
        // the messages' few microseconds of serialisation) ...
        let extra = (syn1 - syn0) as i64 - 3 * rtt as i64;
        assert!((1..=100_000).contains(&extra), "rtt {rtt_ms} ms: {extra} ns off three RTTs");
        // ... and its first data leaves one more round trip after the
        // SYN-ACK and the server's own wait before TEST_START (measured:
        // 0.5-5.3 ms): everything that follows moves by four RTTs and that.
        let moved = (done1 - done0) as i64 - 4 * rtt as i64;
        assert!((515_000..=5_297_000 + 150_000).contains(&moved), "rtt {rtt_ms} ms: {moved} ns off four RTTs");
        // Without that wait, by four RTTs alone.
        let (_, done2) = transfer_with(rtt_ms, Startup::Iperf3, 0, Some(Dist::Constant { value: 0.0 }));
        let moved = (done2 - done0) as i64 - 4 * rtt as i64;
        assert!((1..=150_000).contains(&moved), "rtt {rtt_ms} ms: {moved} ns off four RTTs");
        // A wait of 3 ms moves it by that.
        let (_, done3) = transfer_with(rtt_ms, Startup::Iperf3, 0, Some(Dist::Constant { value: 3e6 }));
        assert_eq!(done3 - done2, 3_000_000, "rtt {rtt_ms} ms");
    }
}

#[test]
fn data_delay_lengthens_the_data_direction_only() {
    // A handshake and one flight cross each direction once per round trip:
    // 30 ms one way moves them as 30 ms more RTT does.
    let (_, base) = transfer(40, Startup::Immediate, 0);
    let (_, one_way) = transfer(40, Startup::Immediate, 30);
    let (_, longer_rtt) = transfer(70, Startup::Immediate, 0);
    assert_eq!(one_way - base, 60_000_000);
    assert_eq!(one_way, longer_rtt);
    // iperf3's round trips are over the whole path: RTT + data delay.
    let (syn, _) = transfer(40, Startup::Iperf3, 30);
    let extra = syn - (100_000_000 + 3 * 70_000_000);
    assert!(extra < 100_000, "{extra} ns");
}

#[test]
fn iperf3_messages_queue_behind_a_full_buffer() {
    // A Reno flow keeps a 1,000-packet buffer (120 ms at 100 Mbit/s) busy;
    // an iperf3 client launched into it sends three messages through that
    // queue before its data connection's SYN, which leaves that much later
    // than on an idle path (where it leaves 3 RTTs after the launch).
    let mut busy = flow("reno", 10);
    busy.start = Time::ZERO;
    let mut late = flow("reno", 10);
    late.start = Time::from_ms(3_000);
    late.startup = Startup::Iperf3;
    let r = run(scenario(100, QueueLimit::Packets(1000), iid(0.0), vec![busy, late.clone()], 6, 0, 1));
    let queued = r.flows[1].counters.start_ns - 3_000_000_000 - 30_000_000;
    let alone = run(scenario(100, QueueLimit::Packets(1000), iid(0.0), vec![late], 6, 0, 1));
    let idle = alone.flows[0].counters.start_ns - 3_000_000_000 - 30_000_000;
    assert!(idle < 100_000, "idle path: {idle} ns beyond 3 RTTs");
    assert!(queued > 60_000_000, "busy path: {queued} ns beyond 3 RTTs");
}

#[test]
fn jitter_varies_the_data_delay_and_min_rtt_sees_its_low_end() {
    let mut f = flow("reno", 2);
    f.data_delay = Dur::from_ms(200);
    f.jitter = Some(JitterConfig { jitter: Dur::from_ms(200), distribution: JitterShape::Uniform, reorder: true });
    let r = run(scenario(100, QueueLimit::Packets(1000), iid(0.0), vec![f], 20, 0, 1));
    let fr = &r.flows[0];
    assert_eq!(fr.rtt_ns, 202_000_000);
    // Delays are uniform in [1 ms, 401 ms] one way plus 1 ms back: the smallest
    // RTT sample is near 2 ms, far below the mean.
    assert!(fr.min_rtt_us < 20_000, "min RTT {} us", fr.min_rtt_us);
    assert!(fr.counters.bytes_delivered > 0);
}
