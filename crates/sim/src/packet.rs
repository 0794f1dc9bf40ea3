//! Packets as they cross the simulated network. Sequence numbers count whole
//! segments (every data segment carries one MSS except possibly the last of a
//! finite transfer), which keeps SACK blocks and scoreboards in packet units as
//! Linux counts cwnd. Wire sizes follow IPv4 + TCP with the timestamp option:
//! a full segment of MSS 1448 is 1500 bytes on the wire. Sequence numbers are
//! 32-bit and wrap, so they are compared as Linux's `before()`/`after()` do.

/// IPv4 (20) + TCP (20) + timestamp option (12, padded) header bytes.
pub const HEADER_BYTES: u32 = 52;
/// Wire bytes of a pure ACK without SACK blocks.
pub const ACK_BYTES: u32 = HEADER_BYTES;
/// Wire bytes of a SYN or SYN-ACK (MSS, SACK-permitted, timestamps, window scale).
pub const SYN_BYTES: u32 = 60;
/// At most this many SACK blocks fit beside the timestamp option (Linux: 40 bytes
/// of options - 12 for timestamps = 28 -> (28 - 4) / 8 = 3), D-SACK included.
pub const MAX_SACK_BLOCKS: usize = 3;

/// `a` is after `b` in 32-bit sequence space (Linux `after()`); also used for
/// other wrapping 32-bit clocks such as jiffies and packet counters.
pub fn seq_after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// `a` is before `b` in 32-bit sequence space (Linux `before()`).
pub fn seq_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// Linux `tcp_skb_sent_after`: a segment sent at `t1` (ending at `seq1`) went
/// out after one sent at `t2` (ending at `seq2`); equal send times are told
/// apart by sequence.
pub fn sent_after(t1: u64, t2: u64, seq1: u32, seq2: u32) -> bool {
    t1 > t2 || (t1 == t2 && seq_after(seq1, seq2))
}

/// A half-open range of segment numbers [start, end).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeqRange {
    pub start: u32,
    pub end: u32,
}

impl SeqRange {
    pub fn new(start: u32, end: u32) -> Self {
        SeqRange { start, end }
    }
    pub fn len(&self) -> u32 {
        self.end - self.start
    }
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
}

/// The SACK option of an ACK; when `dsack` is set the first block is a D-SACK
/// (RFC 2883) reporting a duplicate segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SackBlocks {
    pub n: u8,
    pub dsack: bool,
    pub blocks: [SeqRange; MAX_SACK_BLOCKS],
}

impl SackBlocks {
    pub fn as_slice(&self) -> &[SeqRange] {
        &self.blocks[..self.n as usize]
    }
    pub fn push(&mut self, r: SeqRange) -> bool {
        if (self.n as usize) < MAX_SACK_BLOCKS {
            self.blocks[self.n as usize] = r;
            self.n += 1;
            true
        } else {
            false
        }
    }
    /// Option bytes on the wire: 2 + 8 per block, padded to 4.
    pub fn wire_bytes(&self) -> u32 {
        if self.n == 0 {
            0
        } else {
            (2 + 8 * self.n as u32).div_ceil(4) * 4
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataSegment {
    pub seq: u32,
    /// Payload bytes (MSS except for the tail of a finite transfer).
    pub payload: u32,
    /// Sender's timestamp clock (milliseconds) at transmission.
    pub tsval: u32,
    /// True for a retransmission (statistics only; receivers cannot see it).
    pub retransmission: bool,
    /// ECN Congestion Experienced mark set by a queue on the path.
    pub ce: bool,
    /// ECN-capable transport.
    pub ect: bool,
    /// With `ect`: the codepoint is ECT(1), the L4S identifier (RFC 9331),
    /// rather than ECT(0).
    pub ect1: bool,
    /// Congestion Window Reduced (the sender reacted to ECE).
    pub cwr: bool,
    /// The PSH flag. Linux's `__tcp_transmit_skb` sets it on every skb of
    /// more than one segment (so that the receiver's GRO flushes there) and
    /// `tcp_push` on the last skb of an application's write; segmentation
    /// leaves it on the skb's last segment only. In a bundle it stands for
    /// the last segment's flag.
    pub psh: bool,
    /// The super-packet the segment left in (host/tso.rs).
    pub gso: Gso,
}

/// Which GSO super-packet a data segment belongs to: `segs` segments handed
/// to the device as one skb (0: not part of one), this one at `index`;
/// `whole` once a Linux router queued the skb as one, so that it reaches the
/// receiver as one skb (net/link.rs).
///
/// With `bundle` set the packet is the whole skb, not one segment: it stands
/// for its `segs` segments from `seq` on, each of the first's payload except
/// the last, which carries `tail` bytes (a finite transfer's short end), and
/// only the first may carry CWR. The network moves an skb as one entry where
/// Linux moves it whole (a host's link to a Linux router, tbf's queue, the
/// veth to the receiver) and splits it (`Packet::segment`) where a model acts
/// per packet, so the segments are those the sender emitted, bit for bit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gso {
    pub segs: u16,
    pub index: u16,
    pub whole: bool,
    pub bundle: bool,
    pub tail: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckSegment {
    /// Cumulative acknowledgement: the next segment the receiver expects.
    pub ack: u32,
    /// Right edge of the receive window, in segments.
    pub wnd_end: u32,
    /// Echoed timestamp (TS.Recent).
    pub tsecr: u32,
    pub sack: SackBlocks,
    /// ECN-Echo.
    pub ece: bool,
    /// Accurate ECN (RFC 9768): the ACE field (AE, CWR, ECE read as a 3-bit
    /// counter of CE-marked packets received, starting at 5); 0 on the ACKs of
    /// connections without AccECN.
    pub ace: u8,
    /// What else the ACK carries, by what its connection uses (`AckExt`).
    pub ext: AckExt,
}

impl AckSegment {
    /// The low 32 bits of a receive time in nanoseconds.
    pub fn stamp(rx_ns: u64) -> u32 {
        rx_ns as u32
    }

    /// The newest data segment the receiver had when it sent this ACK (0
    /// when the ACK carries no receive stamp).
    pub fn rx_seq(&self) -> u32 {
        match self.ext {
            AckExt::RxStamp { seq, .. } => seq.get(),
            _ => 0,
        }
    }

    /// The full receive time, given that the ACK arrives at `now_ns`, less than
    /// 4.3 s after the data it reports on (0 stays 0: no data yet, or no
    /// receive stamp on this ACK).
    pub fn rx_time(&self, now_ns: u64) -> u64 {
        let AckExt::RxStamp { seq, ns_low } = self.ext else { return 0 };
        let (seq, ns_low) = (seq.get(), ns_low.get());
        if ns_low == 0 && seq == 0 {
            return 0;
        }
        now_ns.wrapping_sub((now_ns as u32).wrapping_sub(ns_low) as u64)
    }

    /// Option bytes on the wire beyond the timestamps: SACK and AccECN.
    pub fn option_bytes(&self) -> u32 {
        let accecn = match self.ext {
            AckExt::AccEcn { fields, .. } => crate::tcp::accecn::option_bytes(fields, self.sack.n),
            _ => 0,
        };
        self.sack.wire_bytes() + accecn
    }
}

/// A u32 kept as two halves, so that `AckExt` needs only 2-byte alignment and
/// a packet stays within one 64-byte cache line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Split32([u16; 2]);

impl Split32 {
    pub const fn new(v: u32) -> Split32 {
        Split32([v as u16, (v >> 16) as u16])
    }
    pub const fn get(self) -> u32 {
        self.0[0] as u32 | (self.0[1] as u32) << 16
    }
}

/// The part of an ACK whose meaning depends on what the connection uses. A
/// Linux ACK may carry all of these; a simulated one carries the one its
/// connection reads, which keeps every packet within one cache line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AckExt {
    #[default]
    None,
    /// The newest data segment that arrived before this ACK and its arrival
    /// time at the receiver: a high-precision receive timestamp that
    /// rate-probing algorithms (RAPID) and TCP-LP's one-way delay read;
    /// ordinary TCP ignores it. Only the low 32 bits of the nanosecond clock
    /// travel (like a TCP timestamp option, it wraps, every 4.3 s); the
    /// sender restores the full time with `AckSegment::rx_time`.
    RxStamp { seq: Split32, ns_low: Split32 },
    /// The AccECN option (RFC 9768 section 3.2.3) as Linux writes it: order
    /// 1 (ECT(1) bytes, CE bytes, ECT(0) bytes), the first `fields` of the
    /// receiver's 24-bit byte counters (`tcp::accecn`). The ECT(0) counter is
    /// not carried: the only AccECN sender here (Prague) sends ECT(1), so it
    /// never moves.
    AccEcn { fields: u8, e1b: Split32, ceb: Split32 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload {
    Data(DataSegment),
    Ack(AckSegment),
    Syn { tsval: u32 },
    SynAck { tsecr: u32 },
    /// The handshake's last packet: the active opener's pure ACK of the
    /// SYN-ACK (Linux `tcp_rcv_synsent_state_process` -> `tcp_send_ack`),
    /// from which the passive side takes its RTT.
    HandshakeAck,
    /// An unresponsive datagram (UDP source); `seq` numbers them for accounting.
    Datagram { seq: u32 },
    /// A message of a tool's start-up exchange (`traffic::iperf3::Message`
    /// by index), travelling the flow's routes beside its data connection.
    Control { message: u8 },
}

/// A packet in flight. Small and `Copy`: the engine moves packets by value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Index of the flow (or traffic source endpoint) it belongs to.
    pub flow: u32,
    /// Bytes on the wire (IP packet size).
    pub wire_bytes: u32,
    /// True if the packet travels from the data receiver back to the sender.
    pub reverse: bool,
    /// Position along the packet's route (index of the hop it is in).
    pub hop: u8,
    /// Which occupant of a recycled flow slot sent it (web flows reuse the slots
    /// of finished ones); endpoints ignore packets of an earlier occupant.
    pub epoch: u16,
    pub payload: Payload,
}

impl Packet {
    pub fn data(flow: u32, seg: DataSegment) -> Packet {
        Packet {
            flow,
            wire_bytes: HEADER_BYTES + seg.payload,
            reverse: false,
            hop: 0,
            epoch: 0,
            payload: Payload::Data(seg),
        }
    }
    pub fn ack(flow: u32, ack: AckSegment) -> Packet {
        Packet {
            flow,
            wire_bytes: ACK_BYTES + ack.option_bytes(),
            reverse: true,
            hop: 0,
            epoch: 0,
            payload: Payload::Ack(ack),
        }
    }
    /// A datagram of a UDP source (`flow` is the source's endpoint id).
    pub fn datagram(flow: u32, wire_bytes: u32, seq: u32) -> Packet {
        Packet { flow, wire_bytes, reverse: false, hop: 0, epoch: 0, payload: Payload::Datagram { seq } }
    }
    pub fn is_data(&self) -> bool {
        matches!(self.payload, Payload::Data(_))
    }

    /// True for a whole skb carried as one packet (`Gso::bundle`).
    #[inline]
    pub fn is_bundle(&self) -> bool {
        matches!(self.payload, Payload::Data(d) if d.gso.bundle)
    }

    /// The segments this packet stands for: an skb's for a bundle, else 1.
    #[inline]
    pub fn segs(&self) -> u32 {
        match self.payload {
            Payload::Data(d) if d.gso.bundle => d.gso.segs as u32,
            _ => 1,
        }
    }

    /// Wire bytes of all the segments this packet stands for.
    #[inline]
    pub fn total_wire_bytes(&self) -> u64 {
        match self.payload {
            Payload::Data(d) if d.gso.bundle => {
                self.wire_bytes as u64 * (d.gso.segs as u64 - 1) + (HEADER_BYTES + d.gso.tail) as u64
            }
            _ => self.wire_bytes as u64,
        }
    }

    /// Wire bytes of segment `i` of a bundle (of the packet itself otherwise).
    #[inline]
    pub fn segment_wire_bytes(&self, i: u32) -> u32 {
        match self.payload {
            Payload::Data(d) if d.gso.bundle && i + 1 == d.gso.segs as u32 => HEADER_BYTES + d.gso.tail,
            _ => self.wire_bytes,
        }
    }

    /// Segment `i` of a bundle, exactly as its sender emitted it (a packet
    /// that is not a bundle is its own only segment).
    #[inline]
    pub fn segment(&self, i: u32) -> Packet {
        let mut p = *self;
        if let Payload::Data(d) = &mut p.payload {
            if d.gso.bundle {
                let last = i + 1 == d.gso.segs as u32;
                d.seq = d.seq.wrapping_add(i);
                if last {
                    d.payload = d.gso.tail;
                    p.wire_bytes = HEADER_BYTES + d.gso.tail;
                }
                d.cwr &= i == 0;
                d.psh &= last;
                d.gso = Gso { segs: d.gso.segs, index: i as u16, whole: d.gso.whole, bundle: false, tail: 0 };
            }
        }
        p
    }

    /// The skb a sender just emitted as `segs` (all of one skb, in order),
    /// as one bundle, without checking (the sender knows; debug builds check).
    #[inline]
    pub fn bundle_unchecked(segs: &[Packet]) -> Packet {
        debug_assert!(Packet::bundle_of(segs).is_some(), "not one skb: {segs:?}");
        let mut b = segs[0];
        if let (Payload::Data(d), Payload::Data(last)) = (&mut b.payload, segs[segs.len() - 1].payload) {
            d.gso.bundle = true;
            d.gso.tail = last.payload;
            d.psh = last.psh;
        }
        b
    }

    /// The skb whose segments are `segs` (in order, as one sender emitted
    /// them), as one bundle; None when they do not form one exactly.
    pub fn bundle_of(segs: &[Packet]) -> Option<Packet> {
        let first = segs.first()?;
        let last = segs.last()?;
        let (Payload::Data(d0), Payload::Data(dn)) = (first.payload, last.payload) else { return None };
        if segs.len() < 2 || d0.gso.segs as usize != segs.len() || d0.gso.index != 0 || d0.gso.bundle {
            return None;
        }
        let mut b = *first;
        if let Payload::Data(d) = &mut b.payload {
            d.gso.bundle = true;
            d.gso.tail = dn.payload;
            d.psh = dn.psh;
        }
        segs.iter().enumerate().all(|(i, s)| b.segment(i as u32) == *s).then_some(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_segment_is_1500_bytes() {
        let p = Packet::data(
            0,
            DataSegment { seq: 0, payload: 1448, tsval: 0, retransmission: false, ce: false, ect: false, ect1: false, cwr: false, psh: false, gso: Default::default() },
        );
        assert_eq!(p.wire_bytes, 1500);
    }

    #[test]
    fn receive_times_survive_the_32_bit_stamp() {
        for &(rx, now) in &[(1_000u64, 2_000u64), (5_000_000_000, 5_000_000_001), ((1 << 32) - 5, (1 << 32) + 100), (9_999_999_999, 13_000_000_000)] {
            let a = AckSegment { ack: 0, wnd_end: 0, tsecr: 0, sack: SackBlocks::default(), ece: false, ace: 0, ext: AckExt::RxStamp { seq: Split32::new(1), ns_low: Split32::new(AckSegment::stamp(rx)) } };
            assert_eq!(a.rx_time(now), rx);
            assert_eq!(a.rx_seq(), 1);
        }
    }

    #[test]
    fn sack_option_sizes() {
        let mut s = SackBlocks::default();
        assert_eq!(s.wire_bytes(), 0);
        s.push(SeqRange::new(1, 2));
        assert_eq!(s.wire_bytes(), 12);
        s.push(SeqRange::new(3, 4));
        s.push(SeqRange::new(5, 6));
        assert_eq!(s.wire_bytes(), 28);
        assert!(!s.push(SeqRange::new(7, 8)));
        assert!(std::mem::size_of::<Packet>() <= 64, "{}", std::mem::size_of::<Packet>());
        assert_eq!(Split32::new(0xdead_beef).get(), 0xdead_beef);
    }

    #[test]
    fn an_accecn_ack_counts_its_option_on_the_wire() {
        let mut a = AckSegment { ack: 0, wnd_end: 0, tsecr: 0, sack: SackBlocks::default(), ece: false, ace: 5, ext: AckExt::AccEcn { fields: 3, e1b: Split32::new(7), ceb: Split32::new(0) } };
        assert_eq!(Packet::ack(0, a).wire_bytes, ACK_BYTES + 12);
        a.sack.push(SeqRange::new(3, 4));
        a.sack.push(SeqRange::new(5, 6));
        a.ext = AckExt::AccEcn { fields: 2, e1b: Split32::new(7), ceb: Split32::new(0) };
        assert_eq!(Packet::ack(0, a).wire_bytes, ACK_BYTES + 20 + 8);
        // No receive stamp on an AccECN ACK.
        assert_eq!((a.rx_seq(), a.rx_time(99)), (0, 0));
    }

    #[test]
    fn a_bundle_gives_back_the_segments_it_was_made_of() {
        let seg = |i: u16, payload: u32, cwr: bool| {
            let gso = Gso { segs: 3, index: i, ..Gso::default() };
            let mut p = Packet::data(4, DataSegment { seq: (u32::MAX - 1).wrapping_add(i as u32), payload, tsval: 9, retransmission: false, ce: false, ect: true, ect1: false, cwr, psh: false, gso });
            p.epoch = 2;
            p
        };
        let skb = [seg(0, 1448, true), seg(1, 1448, false), seg(2, 700, false)];
        let b = Packet::bundle_of(&skb).expect("one skb");
        assert!(b.is_bundle() && b.segs() == 3 && b.total_wire_bytes() == 1500 + 1500 + 752);
        for (i, s) in skb.iter().enumerate() {
            assert_eq!(b.segment(i as u32), *s);
        }
        // Not one skb: a gap, a missing segment, CWR on a later segment.
        assert!(Packet::bundle_of(&[skb[0], skb[2]]).is_none());
        assert!(Packet::bundle_of(&skb[..2]).is_none());
        assert!(Packet::bundle_of(&[skb[0], seg(1, 1448, true), skb[2]]).is_none());
        assert!(Packet::bundle_of(&[seg(0, 700, false), skb[1], skb[2]]).is_none());
        // A packet that is no bundle is its own segment.
        assert_eq!((skb[1].segs(), skb[1].segment(0), skb[1].total_wire_bytes()), (1, skb[1], 1500));
    }

    #[test]
    fn seq_compare_wraps() {
        assert!(seq_after(1, u32::MAX));
        assert!(seq_before(u32::MAX, 1));
        assert!(!seq_after(5, 5));
        assert!(sent_after(2, 1, 0, 9));
        assert!(sent_after(1, 1, 10, 9) && !sent_after(1, 1, 9, 9));
    }
}
