//! Active queue management at the bottleneck, after Linux's queue disciplines:
//! RED (`sch_red`), CoDel (`sch_codel`), FQ-CoDel (`sch_fq_codel`), PIE
//! (`sch_pie`), DCTCP's step-marking queue (`step`) and L4S's DualPI2
//! (`sch_dualpi2`). Each follows its Linux implementation's structure and defaults
//! (the module docs list where and why they differ); the factory that builds
//! them from a scenario is `net::qdisc`.
//!
//! Lengths. Linux measures a packet at the qdisc with `qdisc_pkt_len`, which on
//! Ethernet includes the 14-byte MAC header, and compares backlogs with
//! `psched_mtu()` = MTU + header = 1514. Our packets are IP-sized (a full
//! segment is 1500 bytes), so every quantity an algorithm compares with an MTU,
//! a quantum or a byte threshold uses `qdisc_len` = wire bytes + 14, exactly the
//! numbers Linux compares. Byte limits (`network.buffer`) and the reported
//! backlog stay in wire bytes, as for drop-tail.

pub mod codel;
pub mod dualpi2;
pub mod fq_codel;
pub mod pie;
pub mod red;
pub mod step;

use crate::packet::{Packet, Payload};

/// Ethernet header bytes Linux counts in `qdisc_pkt_len` (ETH_HLEN).
pub const ETH_HLEN: u32 = 14;

/// Linux `psched_mtu()` of an Ethernet device with a 1500-byte MTU.
pub const PSCHED_MTU: u32 = 1500 + ETH_HLEN;

/// The length Linux's qdiscs see for a packet (`qdisc_pkt_len`).
#[inline]
pub fn qdisc_len(pkt: &Packet) -> u32 {
    pkt.wire_bytes + ETH_HLEN
}

/// Linux `INET_ECN_set_ce`: marks an ECN-capable packet Congestion Experienced
/// and returns true; returns false (the caller drops instead) for a packet that
/// is not ECN-capable: SYNs, datagrams of unresponsive sources, and TCP
/// segments of connections without ECN or retransmissions (RFC 3168 6.1.5).
#[inline]
pub fn set_ce(pkt: &mut Packet) -> bool {
    match pkt.payload {
        Payload::Data(ref mut d) if d.ect => {
            d.ce = true;
            true
        }
        _ => false,
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use crate::packet::{DataSegment, Packet, Payload};

    /// A full-size data segment of `flow` (1500 wire bytes), ECN-capable or not.
    pub fn seg(flow: u32, seq: u32, ect: bool) -> Packet {
        Packet::data(flow, DataSegment { seq, payload: 1448, tsval: 0, retransmission: false, ce: false, ect, ect1: false, cwr: false, psh: false, gso: Default::default() })
    }

    pub fn is_ce(p: &Packet) -> bool {
        matches!(p.payload, Payload::Data(d) if d.ce)
    }
}
