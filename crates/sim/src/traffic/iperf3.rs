//! iperf3's start-up as messages on the path (`startup = "iperf3"`). An
//! iperf3 client (3.x) opens a control connection, sends a cookie answered by
//! PARAM_EXCHANGE, sends its parameters answered by CREATE_STREAMS, opens the
//! data connection, sends that connection's cookie, and writes only once the
//! server's TEST_START and TEST_RUNNING arrive. On a testbed these small
//! messages queue behind whatever fills the bottleneck, and one that a full
//! queue drops waits for its sender's retransmission timer, so a flow launched
//! while another flow's slow start fills the buffer starts its data late by
//! that queueing, or by a timeout. This module is the exchange's state
//! machine: one message in flight at a time, each sent the instant the one it
//! answers arrives, resent on Linux's timers (1 s for a SYN or SYN-ACK, then
//! the tail loss probe or the RTO of the connection's own RTT estimate); the
//! simulation carries the messages over the flow's routes and opens and
//! releases the data connection (a `TcpSender`) when told to.
//!
//! The server answers the data connection's cookie after its own work (a
//! wait drawn from `hosts.iperf3_test_start_wait`, measured: 0.5-5.3 ms on an
//! idle machine); every other message is answered the instant it arrives
//! (measured under 0.7 ms).
//!
//! Left out: acknowledgements (the next message acknowledges the one before,
//! and a lost pure ACK only causes a spurious resend that changes no timing),
//! the longer waits of a loaded machine (docs/fidelity.md), and the data
//! connection's cookie's bytes in that connection's sequence space (it is
//! carried as a message of its own).

use crate::dist::{Dist, Sampler};
use crate::packet::{HEADER_BYTES, SYN_BYTES};
use crate::rng::Rng;
use crate::tcp::rtt::{RttEstimator, RTO_INIT_US, RTO_MAX_US, RTO_MIN_US};
use crate::units::{jiffies_to_usecs, usecs_to_jiffies, Dur, Time};

/// iperf3's cookie: 36 characters and a terminating NUL (`COOKIE_SIZE`).
const COOKIE_BYTES: u32 = 37;
/// The client's parameters: a 4-byte length and the JSON object, sent back to
/// back (TCP_NODELAY on the control socket); 123-144 bytes of JSON measured
/// on iperf 3.12 (`tcpdump` of a test; docs/fidelity.md).
const PARAMS_BYTES: u32 = 4 + 144;

/// The exchange's messages, in the order they are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    ControlSyn = 0,
    ControlSynAck = 1,
    Cookie = 2,
    ParamExchange = 3,
    Params = 4,
    CreateStreams = 5,
    /// The data connection's cookie (after its handshake).
    DataCookie = 6,
    /// TEST_START and TEST_RUNNING, written back to back.
    TestRunning = 7,
}

const MESSAGES: [Message; 8] = [
    Message::ControlSyn,
    Message::ControlSynAck,
    Message::Cookie,
    Message::ParamExchange,
    Message::Params,
    Message::CreateStreams,
    Message::DataCookie,
    Message::TestRunning,
];

impl Message {
    pub fn index(self) -> u8 {
        self as u8
    }

    pub fn from_index(i: u8) -> Option<Message> {
        MESSAGES.get(i as usize).copied()
    }

    /// Sent by the client (the data sender) towards the server.
    pub fn from_client(self) -> bool {
        matches!(self, Message::ControlSyn | Message::Cookie | Message::Params | Message::DataCookie)
    }

    /// IPv4 + TCP (timestamps) bytes on the wire.
    pub fn wire_bytes(self) -> u32 {
        match self {
            Message::ControlSyn | Message::ControlSynAck => SYN_BYTES,
            Message::Cookie | Message::DataCookie => HEADER_BYTES + COOKIE_BYTES,
            Message::ParamExchange | Message::CreateStreams => HEADER_BYTES + 1,
            Message::Params => HEADER_BYTES + PARAMS_BYTES,
            Message::TestRunning => HEADER_BYTES + 2,
        }
    }

    fn is_handshake(self) -> bool {
        matches!(self, Message::ControlSyn | Message::ControlSynAck)
    }
}

/// What the simulation does after a message arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Send this message (the answer to the one that arrived).
    Send(Message),
    /// CREATE_STREAMS arrived: the client opens the data connection.
    OpenData,
    /// TEST_RUNNING arrived: the client begins writing.
    Release,
    /// The server works on the data connection's cookie: its answer leaves
    /// at the exchange's next deadline.
    Wait,
}

/// The retransmission timer of the message in flight.
#[derive(Clone, Copy, Debug)]
struct Timer {
    at: Time,
    /// The next firing is a tail loss probe, not an RTO.
    probe: bool,
}

/// One flow's exchange.
#[derive(Clone, Debug)]
pub struct Iperf3Exchange {
    hz: u32,
    /// The message on its way (none while the data connection's handshake
    /// runs, and once the exchange is over).
    current: Option<Message>,
    /// When each message last left its sender.
    sent: [Time; 8],
    /// RTOs of the current message so far (the backoff's exponent).
    backoffs: u32,
    timer: Option<Timer>,
    /// Each end's estimate on the control connection (samples: a message's
    /// last transmission to the arrival of its answer).
    client: RttEstimator,
    server: RttEstimator,
    /// The data connection's SRTT and RTO once established (its cookie's timer).
    data: (u32, u64),
    awaiting_data: bool,
    /// The server's time from the data connection's cookie to TEST_START
    /// (drawn once per exchange), and when that answer is due.
    test_start_wait: Option<(Sampler, Rng)>,
    answer_due: Option<Time>,
}

impl Iperf3Exchange {
    /// An exchange whose hosts' timers tick at `hz`.
    pub fn new(hz: u32) -> Iperf3Exchange {
        Iperf3Exchange {
            hz,
            current: None,
            sent: [Time::ZERO; 8],
            backoffs: 0,
            timer: None,
            client: RttEstimator::default(),
            server: RttEstimator::default(),
            data: (0, 0),
            awaiting_data: false,
            test_start_wait: None,
            answer_due: None,
        }
    }

    /// The server answers the data connection's cookie after a wait drawn
    /// from `wait` (its own work before the test starts; measured, host/mod.rs).
    pub fn with_test_start_wait(mut self, wait: Dist, rng: Rng) -> Iperf3Exchange {
        self.test_start_wait = Some((Sampler::new(wait), rng));
        self
    }

    /// The client is launched: its control connection's SYN.
    pub fn launch(&mut self, now: Time) -> Message {
        self.send(now, Message::ControlSyn)
    }

    /// When the retransmission timer of the message in flight fires, or the
    /// server's answer to the data cookie is due.
    pub fn deadline(&self) -> Option<Time> {
        self.answer_due.or(self.timer.map(|t| t.at))
    }

    /// Waiting for the data connection's handshake (CREATE_STREAMS arrived).
    pub fn awaiting_data(&self) -> bool {
        self.awaiting_data
    }

    /// `message` reached its destination; what follows from it. A copy whose
    /// resend was not needed, or a message of an earlier step, changes
    /// nothing. (A message counts as acknowledged when it arrives: its
    /// sender's timer stops, so a lost SYN-ACK is resent by the server's
    /// timer rather than in answer to a resent SYN, 50 ms apart at most.)
    pub fn arrived(&mut self, now: Time, message: Message) -> Option<Step> {
        if self.current != Some(message) {
            return None;
        }
        let i = message as usize;
        // The end that sent the previous message learns its round trip.
        if i > 0 && message != Message::DataCookie {
            let m = (now.0.saturating_sub(self.sent[i - 1].0) / 1_000).clamp(1, u32::MAX as u64) as u32;
            let estimator = if message.from_client() { &mut self.server } else { &mut self.client };
            estimator.sample(m, i as u32, i as u32 + 1, RTO_MIN_US);
        }
        self.current = None;
        self.timer = None;
        Some(match message {
            Message::CreateStreams => {
                self.awaiting_data = true;
                Step::OpenData
            }
            Message::TestRunning => Step::Release,
            Message::DataCookie => match &mut self.test_start_wait {
                Some((wait, rng)) => {
                    self.answer_due = Some(now + Dur(wait.draw_ns(rng)));
                    Step::Wait
                }
                None => Step::Send(self.send(now, Message::TestRunning)),
            },
            _ => Step::Send(self.send(now, MESSAGES[i + 1])),
        })
    }

    /// The data connection is established; `srtt_us` and `rto_us` are its
    /// estimate from the handshake. Returns its cookie.
    pub fn data_established(&mut self, now: Time, srtt_us: u32, rto_us: u64) -> Message {
        self.awaiting_data = false;
        self.data = (srtt_us, rto_us);
        self.send(now, Message::DataCookie)
    }

    /// The retransmission timer fired: the message to send again, if any.
    pub fn on_timer(&mut self, now: Time) -> Option<Message> {
        if self.answer_due == Some(now) {
            self.answer_due = None;
            return Some(self.send(now, Message::TestRunning));
        }
        let timer = self.timer.filter(|t| t.at == now)?;
        let message = self.current?;
        self.sent[message as usize] = now;
        let rto = if timer.probe {
            // After a probe the RTO is re-armed whole (`tcp_send_loss_probe`).
            self.rto_us(message)
        } else {
            self.backoffs += 1;
            self.rto_us(message).saturating_mul(1 << self.backoffs.min(20)).min(RTO_MAX_US)
        };
        self.timer = Some(Timer { at: now + Dur(rto * 1_000), probe: false });
        Some(message)
    }

    fn send(&mut self, now: Time, message: Message) -> Message {
        self.current = Some(message);
        self.sent[message as usize] = now;
        self.backoffs = 0;
        self.timer = Some(self.first_timer(now, message));
        message
    }

    /// The sending end's first timer for `message`: 1 s for a SYN or
    /// SYN-ACK; else the earlier of the tail loss probe (2 SRTT + the minimum
    /// RTO with one segment out, `tcp_schedule_loss_probe`) and the RTO.
    fn first_timer(&self, now: Time, message: Message) -> Timer {
        if message.is_handshake() {
            return Timer { at: now + Dur(RTO_INIT_US * 1_000), probe: false };
        }
        let (srtt_us, rto_us) = self.estimate(message);
        let hz = self.hz;
        let pto = usecs_to_jiffies(2 * srtt_us as u64, hz) + usecs_to_jiffies(RTO_MIN_US as u64, hz);
        let rto = usecs_to_jiffies(rto_us, hz);
        let probe = pto < rto;
        Timer { at: now + Dur(jiffies_to_usecs(pto.min(rto), hz) * 1_000), probe }
    }

    fn rto_us(&self, message: Message) -> u64 {
        if message.is_handshake() {
            RTO_INIT_US
        } else {
            self.estimate(message).1
        }
    }

    /// SRTT and RTO (us) of the connection and end that send `message`.
    fn estimate(&self, message: Message) -> (u32, u64) {
        if message == Message::DataCookie {
            return self.data;
        }
        let e = if message.from_client() { &self.client } else { &self.server };
        (e.srtt_us(), jiffies_to_usecs(e.rto_jiffies(self.hz), self.hz))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn at(ms: u64) -> Time {
        Time(ms * MS)
    }

    /// Delivers every message `rtt_ms / 2` after it was sent; returns when
    /// each step happened (ms).
    fn clean_exchange(rtt_ms: u64) -> Vec<(u64, Step)> {
        clean_exchange_with(Iperf3Exchange::new(1000), rtt_ms)
    }

    fn clean_exchange_with(mut x: Iperf3Exchange, rtt_ms: u64) -> Vec<(u64, Step)> {
        let half = rtt_ms / 2;
        let mut t = 0;
        let mut m = x.launch(at(t));
        let mut steps = Vec::new();
        loop {
            t += half;
            match x.arrived(at(t), m).expect("in order") {
                Step::Send(next) => {
                    steps.push((t, Step::Send(next)));
                    m = next;
                }
                Step::OpenData => {
                    steps.push((t, Step::OpenData));
                    t += rtt_ms; // the data connection's handshake
                    m = x.data_established(at(t), (rtt_ms * 1000) as u32, 3 * rtt_ms * 1000);
                }
                Step::Release => {
                    steps.push((t, Step::Release));
                    return steps;
                }
                Step::Wait => {
                    steps.push((t, Step::Wait));
                    let due = x.deadline().expect("the answer is due");
                    assert_eq!(x.on_timer(Time(due.0 - 1)), None, "not before it is due");
                    t = due.0 / MS;
                    m = x.on_timer(due).expect("the answer");
                    steps.push((t, Step::Send(m)));
                }
            }
        }
    }

    #[test]
    fn on_a_clean_path_data_is_released_five_round_trips_after_the_launch() {
        let steps = clean_exchange(100);
        assert_eq!(steps[0], (50, Step::Send(Message::ControlSynAck)));
        assert!(steps.contains(&(300, Step::OpenData)), "{steps:?}");
        assert_eq!(*steps.last().unwrap(), (500, Step::Release));
        // Client and server messages alternate.
        let sent: Vec<bool> = steps.iter().filter_map(|(_, s)| if let Step::Send(m) = s { Some(m.from_client()) } else { None }).collect();
        assert_eq!(sent, [false, true, false, true, false, false]);
    }

    #[test]
    fn the_server_answers_the_data_cookie_after_its_own_wait() {
        let wait = Dist::Constant { value: 3.0 * MS as f64 };
        let x = Iperf3Exchange::new(1000).with_test_start_wait(wait, Rng::stream(1, "test"));
        let steps = clean_exchange_with(x, 100);
        // The cookie reaches the server at 450 ms; TEST_START leaves 3 ms
        // later and reaches the client at 503 ms.
        assert!(steps.contains(&(450, Step::Wait)), "{steps:?}");
        assert!(steps.contains(&(453, Step::Send(Message::TestRunning))), "{steps:?}");
        assert_eq!(*steps.last().unwrap(), (503, Step::Release));
        // A second copy of the cookie during the wait changes nothing.
        let mut x = Iperf3Exchange::new(1000).with_test_start_wait(Dist::Constant { value: 3.0 * MS as f64 }, Rng::stream(1, "test"));
        x.current = Some(Message::DataCookie);
        assert_eq!(x.arrived(at(450), Message::DataCookie), Some(Step::Wait));
        assert_eq!(x.arrived(at(451), Message::DataCookie), None);
        assert_eq!(x.deadline(), Some(at(453)));
        assert_eq!(x.on_timer(at(453)), Some(Message::TestRunning));
        assert_eq!(x.deadline(), x.timer.map(|t| t.at), "then the answer's own timer");
    }

    #[test]
    fn a_lost_syn_is_sent_again_after_one_second_then_two() {
        let mut x = Iperf3Exchange::new(1000);
        assert_eq!(x.launch(at(0)), Message::ControlSyn);
        assert_eq!(x.deadline(), Some(at(1000)));
        assert_eq!(x.on_timer(at(999)), None);
        assert_eq!(x.on_timer(at(1000)), Some(Message::ControlSyn));
        assert_eq!(x.deadline(), Some(at(3000)));
        // Its answer arrives: the round trip is timed from the resend.
        assert_eq!(x.arrived(at(1100), Message::ControlSyn), Some(Step::Send(Message::ControlSynAck)));
        assert_eq!(x.arrived(at(1200), Message::ControlSynAck), Some(Step::Send(Message::Cookie)));
        assert_eq!(x.client.srtt_us(), 200_000);
    }

    #[test]
    fn a_lost_syn_ack_is_sent_again_by_the_server_after_one_second() {
        let mut x = Iperf3Exchange::new(1000);
        x.launch(at(0));
        assert_eq!(x.arrived(at(50), Message::ControlSyn), Some(Step::Send(Message::ControlSynAck)));
        assert_eq!(x.deadline(), Some(at(1050)));
        assert_eq!(x.on_timer(at(1050)), Some(Message::ControlSynAck));
        assert_eq!(x.arrived(at(1100), Message::ControlSynAck), Some(Step::Send(Message::Cookie)));
        // A stale copy changes nothing.
        assert_eq!(x.arrived(at(1101), Message::ControlSynAck), None);
        assert_eq!(x.arrived(at(1102), Message::ControlSyn), None);
    }

    #[test]
    fn a_lost_message_waits_for_the_earlier_of_probe_and_rto_then_backs_off() {
        // 20 ms round trip: RTO = 20 + max(40, 200) = 220 ms; the probe at
        // 2 x 20 + 200 = 240 ms comes later, so the RTO fires first.
        let mut x = Iperf3Exchange::new(1000);
        x.launch(at(0));
        x.arrived(at(10), Message::ControlSyn);
        assert_eq!(x.arrived(at(20), Message::ControlSynAck), Some(Step::Send(Message::Cookie)));
        assert_eq!(x.deadline(), Some(at(240)));
        assert_eq!(x.on_timer(at(240)), Some(Message::Cookie));
        assert_eq!(x.deadline(), Some(at(240 + 440)), "backed off once");
        // 300 ms round trip: the probe (2 x 300 + 200 = 800) comes before the
        // RTO (300 + 600 = 900); after the probe, one whole RTO.
        let mut y = Iperf3Exchange::new(1000);
        y.launch(at(0));
        y.arrived(at(150), Message::ControlSyn);
        y.arrived(at(300), Message::ControlSynAck);
        assert_eq!(y.deadline(), Some(at(300 + 800)));
        assert_eq!(y.on_timer(at(1100)), Some(Message::Cookie));
        assert_eq!(y.deadline(), Some(at(1100 + 900)));
        assert_eq!(y.on_timer(at(2000)), Some(Message::Cookie));
        assert_eq!(y.deadline(), Some(at(2000 + 1800)));
    }

    #[test]
    fn the_server_times_its_answers_with_its_own_estimate() {
        let mut x = Iperf3Exchange::new(1000);
        x.launch(at(0));
        x.arrived(at(10), Message::ControlSyn);
        x.arrived(at(20), Message::ControlSynAck);
        // The cookie waited 500 ms in a queue: the server's first sample is
        // the SYN-ACK's departure to the cookie's arrival, 510 ms.
        assert_eq!(x.arrived(at(520), Message::Cookie), Some(Step::Send(Message::ParamExchange)));
        assert_eq!(x.server.srtt_us(), 510_000);
        // PARAM_EXCHANGE's timer: min(2 x 510 + 200, 510 + 1020) = 1220 ms.
        assert_eq!(x.deadline(), Some(at(520 + 1220)));
    }

    #[test]
    fn the_data_cookie_uses_the_data_connections_estimate() {
        let mut x = Iperf3Exchange::new(1000);
        x.launch(at(0));
        for (t, m) in [(5, Message::ControlSyn), (10, Message::ControlSynAck), (15, Message::Cookie), (20, Message::ParamExchange), (25, Message::Params)] {
            x.arrived(at(t), m);
        }
        assert_eq!(x.arrived(at(30), Message::CreateStreams), Some(Step::OpenData));
        assert!(x.awaiting_data());
        assert_eq!(x.deadline(), None);
        assert_eq!(x.data_established(at(40), 10_000, 210_000), Message::DataCookie);
        assert_eq!(x.deadline(), Some(at(40 + 210)));
        assert_eq!(x.arrived(at(45), Message::DataCookie), Some(Step::Send(Message::TestRunning)));
        assert_eq!(x.arrived(at(50), Message::TestRunning), Some(Step::Release));
        assert_eq!(x.deadline(), None);
    }

    #[test]
    fn wire_sizes_are_headers_plus_payload() {
        assert_eq!(Message::Cookie.wire_bytes(), 89);
        assert_eq!(Message::ParamExchange.wire_bytes(), 53);
        assert_eq!(Message::ControlSyn.wire_bytes(), 60);
        for m in MESSAGES {
            assert_eq!(Message::from_index(m.index()), Some(m));
        }
        assert_eq!(Message::from_index(8), None);
    }
}
