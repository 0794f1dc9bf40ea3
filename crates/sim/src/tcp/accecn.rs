//! Accurate ECN feedback (RFC 9768) as Linux runs it without the AccECN
//! option (`tcp_ecn.h`, `__tcp_accecn_process` in `tcp_input.c`): the
//! receiver counts CE-marked segments (`received_ce`, RFC 9768's r.cep) and
//! every ACK carries that count modulo 8 in the ACE field (the AE, CWR and ECE
//! header bits), offset by 5 as on the wire; the sender recovers how many of
//! the packets an ACK acknowledges were marked (`delivered_ce`, s.cep).
//!
//! Negotiation is implied by the algorithm: one that needs AccECN (Prague,
//! Linux's `TCP_CONG_NEEDS_ACCECN`) gets it on both ends whatever `tcp.ecn`
//! says, as a Linux socket running it does; every other connection keeps RFC
//! 3168 feedback (or none) and its ACKs carry ACE 0. The receiver acknowledges
//! at once a segment whose ECN field differs from the last one's
//! (change-triggered ACKs, `tcp/receiver.rs`). The option (byte counters) and
//! the handshake's ECN echo are not modelled.

/// A segment's IP ECN field as Linux reads it (`INET_ECN_MASK`): 0 not-ECT,
/// 1 ECT(1), 2 ECT(0), 3 CE.
pub fn ecn_field(d: &crate::packet::DataSegment) -> u8 {
    match (d.ce, d.ect, d.ect1) {
        (true, _, _) => 3,
        (false, true, true) => 1,
        (false, true, false) => 2,
        (false, false, _) => 0,
    }
}

/// The ACE field's initial value on the wire (`TCP_ACCECN_CEP_INIT_OFFSET`).
pub const CEP_INIT_OFFSET: u32 = 5;
/// The ACE field's mask (`TCP_ACCECN_CEP_ACE_MASK`, 3 bits).
pub const CEP_ACE_MASK: u32 = 0x7;
/// The receiver sends an ACK at once when this many CE marks are unreported
/// (`TCP_ACCECN_ACE_MAX_DELTA`), before the field could wrap.
pub const ACE_MAX_DELTA: u8 = 6;
/// The sender's EWMA of packets acknowledged per ACK: weight 1/2^6, 6
/// fractional bits (`PKTS_ACKED_WEIGHT`, `PKTS_ACKED_PREC`); above 4 packets
/// per ACK (`ACK_COMP_THRESH`) ACKs are taken to be thinned, not lost, and a
/// large ACK's delta is trusted as read.
const PKTS_ACKED_WEIGHT: u32 = 6;
const PKTS_ACKED_PREC: u32 = 6;
const ACK_COMP_THRESH: u32 = 4;

/// The ACE field of an ACK from a receiver that has counted `received_ce`
/// CE-marked segments.
pub fn ace(received_ce: u32) -> u8 {
    (received_ce.wrapping_add(CEP_INIT_OFFSET) & CEP_ACE_MASK) as u8
}

/// The sender's side: what it has learnt from the ACE fields so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct AccEcnSender {
    /// Linux `tp->pkts_acked_ewma`.
    pub pkts_acked_ewma: u32,
}

impl AccEcnSender {
    /// Linux `__tcp_accecn_process` without the option: the number of newly
    /// CE-marked packets an ACK with field `ace` reports, given the count
    /// known so far (`delivered_ce`) and the packets it newly delivered;
    /// `progress` is false for an ACK that neither advanced nor SACKed (a
    /// reordered ACK, ignored).
    pub fn process(&mut self, ace: u8, delivered_ce: u32, delivered_pkts: u32, progress: bool) -> u32 {
        if !progress {
            return 0;
        }
        if delivered_pkts > 0 {
            let ewma = if self.pkts_acked_ewma == 0 {
                delivered_pkts << PKTS_ACKED_PREC
            } else {
                let e = self.pkts_acked_ewma;
                (((e << PKTS_ACKED_WEIGHT) - e) + (delivered_pkts << PKTS_ACKED_PREC)) >> PKTS_ACKED_WEIGHT
            };
            self.pkts_acked_ewma = ewma.min(0xffff);
        }
        let corrected_ace = (ace as u32).wrapping_sub(CEP_INIT_OFFSET);
        let delta = corrected_ace.wrapping_sub(delivered_ce) & CEP_ACE_MASK;
        if delivered_pkts <= CEP_ACE_MASK {
            return delta;
        }
        // The field may have wrapped: without thinned ACKs assume the most
        // marks consistent with it (conservative), else take it as read.
        let safe_delta = delivered_pkts - (delivered_pkts.wrapping_sub(delta) & CEP_ACE_MASK);
        if self.pkts_acked_ewma > ACK_COMP_THRESH << PKTS_ACKED_PREC {
            return delta;
        }
        safe_delta
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_field_counts_ce_marks_modulo_8_from_5() {
        assert_eq!(ace(0), 5);
        assert_eq!(ace(2), 7);
        assert_eq!(ace(3), 0);
        assert_eq!(ace(11), 0);
        assert_eq!(ace(u32::MAX), 4);
    }

    #[test]
    fn the_sender_recovers_the_delta_across_wraps() {
        let mut s = AccEcnSender::default();
        // An ACK of 2 packets reporting 3 marks: the field moved from 5 to 0.
        assert_eq!(s.process(ace(3), 0, 2, true), 3);
        // The counter wraps: from 6 known to 9 received is 3 (field 6 -> 1).
        assert_eq!(s.process(ace(9), 6, 2, true), 3);
        // No change, no marks; a reordered ACK is ignored whatever it says.
        assert_eq!(s.process(ace(9), 9, 2, true), 0);
        assert_eq!(s.process(ace(12), 9, 0, false), 0);
    }

    #[test]
    fn large_acks_assume_the_field_wrapped_unless_acks_are_thinned() {
        // An ACK of 20 packets whose field moved by 2: 2, 10 or 18 marks
        // are possible; Linux assumes 18 (the most) while ACKs usually
        // cover few packets.
        let mut s = AccEcnSender::default();
        for _ in 0..200 {
            s.process(ace(0), 0, 2, true);
        }
        assert_eq!(s.process(ace(2), 0, 20, true), 18);
        // When ACKs regularly cover more than 4 packets (GRO, ACK thinning),
        // the field is taken as read.
        let mut s = AccEcnSender::default();
        for _ in 0..200 {
            s.process(ace(0), 0, 10, true);
        }
        assert_eq!(s.process(ace(2), 0, 20, true), 2);
    }
}
