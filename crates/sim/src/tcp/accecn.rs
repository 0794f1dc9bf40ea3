//! Accurate ECN feedback (RFC 9768) as Linux runs it (`tcp_ecn.h`,
//! `__tcp_accecn_process` and `tcp_accecn_process_option` in `tcp_input.c`,
//! `tcp_options_fit_accecn` in `tcp_output.c`): the receiver counts CE-marked
//! segments (`received_ce`, RFC 9768's r.cep) and every ACK carries that count
//! modulo 8 in the ACE field (the AE, CWR and ECE header bits), offset by 5 as
//! on the wire; the sender recovers how many of the packets an ACK
//! acknowledges were marked (`delivered_ce`, s.cep).
//!
//! The ACE field alone cannot tell 2 marks from 10 on an ACK that covers 20
//! packets, so Linux also sends the AccECN option on every segment whenever it
//! fits (`tcp_ecn_option` 2, the default): the receiver's 24-bit counts of
//! payload bytes received ECT(1), CE and ECT(0). With it the sender takes an
//! ACK's field as read when no CE bytes arrived and estimates the wraps from
//! the CE bytes when some did; without it (no room beside SACK blocks) it
//! assumes the most marks consistent with the field unless ACKs are known to
//! be thinned. An ACK that needs the option's CE count gives up its third SACK
//! block for it.
//!
//! Negotiation is implied by the algorithm: one that needs AccECN (Prague,
//! Linux's `TCP_CONG_NEEDS_ACCECN`) gets it on both ends whatever `tcp.ecn`
//! says, as a Linux socket running it does; every other connection keeps RFC
//! 3168 feedback (or none) and its ACKs carry ACE 0. The receiver acknowledges
//! at once a segment whose ECN field differs from the last one's
//! (change-triggered ACKs, `tcp/receiver.rs`). Not modelled: the handshake's
//! ECN echo and option, the counters' initial offsets (they only detect
//! middleboxes that zero them), and the option on data segments (Linux then
//! sends 12 bytes less payload per segment).

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

/// Bytes of payload received per ECN codepoint, indexed by the IP ECN field
/// less one as Linux indexes `received_ecn_bytes`: ECT(1), ECT(0), CE.
pub type EcnBytes = [u32; 3];

/// The index of a codepoint's counter in `EcnBytes` (field 1, 2 or 3).
const fn bytes_index(field: u8) -> usize {
    field as usize - 1
}

/// The AccECN option's counters are 24 bits wide.
const COUNTER_MASK: u32 = 0xff_ffff;
/// Option sizes (`TCPOLEN_ACCECN_BASE`, `TCPOLEN_ACCECN_PERFIELD`), its most
/// fields (`TCP_ACCECN_NUMFIELDS`) and the bytes one SACK block takes
/// (`TCPOLEN_SACK_PERBLOCK`).
const OPTION_BASE: i32 = 2;
const OPTION_PER_FIELD: i32 = 3;
const OPTION_FIELDS: u8 = 3;
const SACK_PER_BLOCK: i32 = 8;
/// TCP option space (`MAX_TCP_OPTION_SPACE`) less the aligned timestamps.
const SPACE_BESIDE_TIMESTAMPS: i32 = 40 - 12;
/// `TCP_ACCECN_SAFETY_SHIFT`: RFC 9768's safety factor of 2.
const SAFETY_SHIFT: u32 = 1;

/// How many option fields a receiver must send to report a payload that
/// arrived with ECN field `field` (Linux `tcp_ecnfield_to_accecn_optfield`,
/// order 1): ECT(1) is the first, CE the second, ECT(0) the third.
pub fn fields_needed(field: u8) -> u8 {
    match field {
        1 => 1,
        3 => 2,
        2 => 3,
        _ => 0,
    }
}

/// Linux `tcp_options_fit_accecn` beside timestamps and `sack_blocks` SACK
/// blocks: the number of counters the option carries (the most that fit,
/// padded to 4 bytes unless the 2 bytes of SACK's alignment can be shared),
/// or None when fewer than `required` fit; when the required fields fit only
/// without the third SACK block, the second value says the block is dropped.
pub fn fit_option(required: u8, sack_blocks: u8) -> Option<(u8, bool)> {
    let sack_bytes = if sack_blocks > 0 { 4 + SACK_PER_BLOCK * sack_blocks as i32 } else { 0 };
    let fit = |room: i32, sack: bool| -> Option<u8> {
        let mut fields = OPTION_FIELDS;
        loop {
            if option_size(fields, sack) <= room {
                return Some(fields);
            }
            if fields == required {
                return None;
            }
            fields -= 1;
        }
    };
    match fit(SPACE_BESIDE_TIMESTAMPS - sack_bytes, sack_blocks > 0) {
        Some(fields) => Some((fields, false)),
        // Try to fit the option by removing one SACK block (never below two).
        None if sack_blocks > 2 && required > 0 => {
            fit(SPACE_BESIDE_TIMESTAMPS - sack_bytes + SACK_PER_BLOCK, true).map(|fields| (fields, true))
        }
        None => None,
    }
}

/// The option's bytes with `fields` counters: 2 + 3 per field, padded to 4
/// unless the tail can share the 2 bytes of padding before SACK blocks.
fn option_size(fields: u8, beside_sack: bool) -> i32 {
    let size = OPTION_BASE + OPTION_PER_FIELD * fields as i32;
    let leftover = size & 3;
    let saving = if beside_sack { 2 } else { 0 };
    if leftover <= saving {
        size - leftover
    } else {
        size + ((4 - leftover) & 3)
    }
}

/// Wire bytes the option adds to an ACK with `sack_blocks` SACK blocks.
pub fn option_bytes(fields: u8, sack_blocks: u8) -> u32 {
    option_size(fields, sack_blocks > 0) as u32
}

/// The sender's side: what it has learnt from the ACE fields and options.
#[derive(Clone, Copy, Debug, Default)]
pub struct AccEcnSender {
    /// Linux `tp->pkts_acked_ewma`.
    pub pkts_acked_ewma: u32,
    /// Bytes delivered per codepoint as the options report them
    /// (`tp->delivered_ecn_bytes`).
    pub delivered_ecn_bytes: EcnBytes,
    /// The codepoint of the counter that moved last (`tp->est_ecnfield`, 0
    /// when unknown or ambiguous): an ACK without the option is taken to have
    /// delivered its bytes with it.
    est_ecnfield: u8,
}

/// The AccECN option an ACK carries: its first `fields` counters (order 1)
/// of which the sender reads the ECT(1) and CE byte counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionCounters {
    pub fields: u8,
    pub e1b: u32,
    pub ceb: u32,
}

/// What the sender knows of an ACK it processes: its ACE field, its AccECN
/// option (None when the ACK carries none), the packets and payload bytes
/// it newly delivers, and whether it moved the connection forward (false
/// for a reordered ACK, which is ignored).
#[derive(Clone, Copy, Debug)]
pub struct AckFeedback {
    pub ace: u8,
    pub option: Option<OptionCounters>,
    pub delivered_pkts: u32,
    pub delivered_bytes: u32,
    pub progress: bool,
}

impl AccEcnSender {
    /// Linux `tcp_update_ecn_bytes`: the counter follows the option's 24-bit
    /// value by the shortest way round (a negative step is possible when an
    /// estimate ran ahead).
    fn update_bytes(&mut self, field: u8, value: u32) -> i32 {
        let cnt = &mut self.delivered_ecn_bytes[bytes_index(field)];
        let delta = (value & COUNTER_MASK).wrapping_sub(*cnt) & COUNTER_MASK;
        // Sign-extend the 24-bit difference.
        let delta = ((delta << 8) as i32) >> 8;
        *cnt = cnt.wrapping_add(delta as u32);
        delta
    }

    /// Linux `tcp_accecn_process_option`: true when the CE byte count can be
    /// trusted for this ACK.
    fn process_option(&mut self, option: Option<OptionCounters>, delivered_bytes: u32) -> bool {
        let estimate = self.est_ecnfield;
        let Some(OptionCounters { fields, e1b, ceb }) = option else {
            // No option: the bytes go to the codepoint that moved last.
            if estimate != 0 {
                let i = bytes_index(estimate);
                self.delivered_ecn_bytes[i] = self.delivered_ecn_bytes[i].wrapping_add(delivered_bytes);
                return true;
            }
            return false;
        };
        let mut valid = estimate != 0;
        let mut ambiguous = false;
        let mut first_changed = false;
        // Order 1: ECT(1) (field 1), CE (field 3); ECT(0) never moves here.
        for (field, value) in [(1u8, e1b), (3u8, ceb)].into_iter().take(fields as usize) {
            let delta = self.update_bytes(field, value);
            if delta == 0 {
                continue;
            }
            if delta < 0 {
                valid = false;
                ambiguous = true;
            }
            if field != estimate {
                if !first_changed {
                    self.est_ecnfield = field;
                    first_changed = true;
                } else {
                    valid = false;
                    ambiguous = true;
                }
            }
        }
        if ambiguous {
            self.est_ecnfield = 0;
        }
        valid
    }

    /// Linux `__tcp_accecn_process`: the number of newly CE-marked packets an
    /// ACK reports, given the count known so far (`delivered_ce`). `mss` is
    /// the sender's MSS; `sack_or_open` is true when delivered counts can be
    /// trusted (SACK, or the Open or CWR state).
    pub fn process(&mut self, ack: &AckFeedback, delivered_ce: u32, mss: u32, sack_or_open: bool) -> u32 {
        if !ack.progress {
            return 0;
        }
        let old_ceb = self.delivered_ecn_bytes[bytes_index(3)];
        let option_valid = self.process_option(ack.option, ack.delivered_bytes);
        let delivered_pkts = ack.delivered_pkts;
        if delivered_pkts > 0 {
            let ewma = if self.pkts_acked_ewma == 0 {
                delivered_pkts << PKTS_ACKED_PREC
            } else {
                let e = self.pkts_acked_ewma;
                (((e << PKTS_ACKED_WEIGHT) - e) + (delivered_pkts << PKTS_ACKED_PREC)) >> PKTS_ACKED_WEIGHT
            };
            self.pkts_acked_ewma = ewma.min(0xffff);
        }
        let corrected_ace = (ack.ace as u32).wrapping_sub(CEP_INIT_OFFSET);
        let delta = corrected_ace.wrapping_sub(delivered_ce) & CEP_ACE_MASK;
        if delivered_pkts <= CEP_ACE_MASK {
            return delta;
        }
        // The field may have wrapped: the most marks consistent with it.
        let safe_delta = delivered_pkts - (delivered_pkts.wrapping_sub(delta) & CEP_ACE_MASK);
        if option_valid {
            let d_ceb = self.delivered_ecn_bytes[bytes_index(3)].wrapping_sub(old_ceb);
            if d_ceb == 0 {
                return delta;
            }
            if delivered_pkts >= (CEP_ACE_MASK + 1) * 2 && sack_or_open {
                // More than one wrap possible: estimate the marked packets
                // from the share of CE bytes, keep the field's remainder.
                if ack.delivered_bytes <= d_ceb {
                    return safe_delta;
                }
                let est_d_cep = (d_ceb as u64 * delivered_pkts as u64).div_ceil(ack.delivered_bytes as u64) as u32;
                return safe_delta.min(delta + (est_d_cep & !CEP_ACE_MASK));
            }
            if d_ceb > delta.saturating_mul(mss) {
                return safe_delta;
            }
            if (d_ceb as u64) < (safe_delta as u64 * mss as u64) >> SAFETY_SHIFT {
                return delta;
            }
        } else if self.pkts_acked_ewma > ACK_COMP_THRESH << PKTS_ACKED_PREC {
            // ACKs regularly cover many packets (thinned, not lost): as read.
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

    const MSS: u32 = 1448;

    /// An ACK of `pkts` full segments with field `ace` and, if given, an
    /// option carrying both counters (ECT(1) bytes, CE bytes).
    fn ack(ace: u8, pkts: u32, option: Option<(u32, u32)>) -> AckFeedback {
        AckFeedback {
            ace,
            option: option.map(|(e1b, ceb)| OptionCounters { fields: 2, e1b, ceb }),
            delivered_pkts: pkts,
            delivered_bytes: pkts * MSS,
            progress: true,
        }
    }

    #[test]
    fn the_sender_recovers_the_delta_across_wraps() {
        let mut s = AccEcnSender::default();
        // An ACK of 2 packets reporting 3 marks: the field moved from 5 to 0.
        assert_eq!(s.process(&ack(ace(3), 2, None), 0, MSS, true), 3);
        // The counter wraps: from 6 known to 9 received is 3 (field 6 -> 1).
        assert_eq!(s.process(&ack(ace(9), 2, None), 6, MSS, true), 3);
        // No change, no marks; a reordered ACK is ignored whatever it says.
        assert_eq!(s.process(&ack(ace(9), 2, None), 9, MSS, true), 0);
        let reordered = AckFeedback { progress: false, delivered_pkts: 0, ..ack(ace(12), 0, None) };
        assert_eq!(s.process(&reordered, 9, MSS, true), 0);
    }

    #[test]
    fn large_acks_without_the_option_assume_the_field_wrapped_unless_acks_are_thinned() {
        // An ACK of 20 packets whose field moved by 2: 2, 10 or 18 marks
        // are possible; Linux assumes 18 (the most) while ACKs usually
        // cover few packets.
        let mut s = AccEcnSender::default();
        for _ in 0..200 {
            s.process(&ack(ace(0), 2, None), 0, MSS, true);
        }
        assert_eq!(s.process(&ack(ace(2), 20, None), 0, MSS, true), 18);
        // Even with no change at all: 16 phantom marks.
        assert_eq!(s.process(&ack(ace(0), 20, None), 0, MSS, true), 16);
        // When ACKs regularly cover more than 4 packets (GRO, ACK thinning),
        // the field is taken as read.
        let mut s = AccEcnSender::default();
        for _ in 0..200 {
            s.process(&ack(ace(0), 10, None), 0, MSS, true);
        }
        assert_eq!(s.process(&ack(ace(2), 20, None), 0, MSS, true), 2);
    }

    #[test]
    fn with_the_option_a_large_ack_without_ce_bytes_reports_what_the_field_says() {
        let mut s = AccEcnSender::default();
        let mut e1b = 0;
        for _ in 0..200 {
            e1b += 2 * MSS;
            s.process(&ack(ace(0), 2, Some((e1b, 0))), 0, MSS, true);
        }
        // 20 packets unmarked: no CE bytes moved, so no wrap: 0, not 16.
        e1b += 20 * MSS;
        assert_eq!(s.process(&ack(ace(0), 20, Some((e1b, 0))), 0, MSS, true), 0);
        // 10 of 20 marked, field moved by 2 (10 mod 8): the CE bytes say
        // about 10, so one wrap is added to the field's 2.
        e1b += 10 * MSS;
        let ceb = 10 * MSS;
        assert_eq!(s.process(&ack(ace(10), 20, Some((e1b, ceb))), 0, MSS, true), 10);
        // 2 of 10 marked (fewer than 16 delivered: no multi-wrap estimate):
        // CE bytes below half of the 10 the field could mean: as read.
        e1b += 8 * MSS;
        let ceb = ceb + 2 * MSS;
        assert_eq!(s.process(&ack(ace(12), 10, Some((e1b, ceb))), 10, MSS, true), 2);
    }

    #[test]
    fn the_counters_are_24_bits_and_follow_the_shortest_way_round() {
        let mut s = AccEcnSender { delivered_ecn_bytes: [COUNTER_MASK - 100, 0, 0], ..AccEcnSender::default() };
        assert_eq!(s.update_bytes(1, 400), 501);
        assert_eq!(s.delivered_ecn_bytes[0], COUNTER_MASK + 401);
        // A step back (an estimate that ran ahead) is negative.
        assert_eq!(s.update_bytes(1, 300), -100);
    }

    #[test]
    fn an_ack_without_the_option_is_credited_to_the_codepoint_that_moved_last() {
        let mut s = AccEcnSender::default();
        s.process(&ack(ace(0), 2, Some((2 * MSS, 0))), 0, MSS, true);
        s.process(&ack(ace(0), 2, Some((4 * MSS, 0))), 0, MSS, true);
        let no_option = ack(ace(0), 2, None);
        s.process(&no_option, 0, MSS, true);
        assert_eq!(s.delivered_ecn_bytes, [6 * MSS, 0, 0]);
        // Once CE moved last, option-less bytes count as CE, and the next
        // option corrects them (a negative step: ambiguous, so no estimate).
        s.process(&ack(ace(1), 1, Some((6 * MSS, MSS))), 0, MSS, true);
        s.process(&no_option, 1, MSS, true);
        assert_eq!(s.delivered_ecn_bytes[2], 3 * MSS);
        s.process(&ack(ace(1), 2, Some((10 * MSS, MSS))), 1, MSS, true);
        assert_eq!(s.delivered_ecn_bytes, [10 * MSS, 0, MSS]);
        assert_eq!(s.est_ecnfield, 0);
    }

    #[test]
    fn the_option_takes_the_room_sack_blocks_leave() {
        // Beside timestamps: no SACK or one block, all three counters (12
        // bytes); two blocks, two counters (8); three blocks: the option
        // with no counters shares SACK's padding, and one that needs a
        // counter takes the third block's room.
        assert_eq!(fit_option(1, 0), Some((3, false)));
        assert_eq!(fit_option(2, 1), Some((3, false)));
        assert_eq!(fit_option(2, 2), Some((2, false)));
        assert_eq!(fit_option(0, 3), Some((0, false)));
        assert_eq!(fit_option(2, 3), Some((2, true)));
        assert_eq!(fit_option(3, 3), None);
        assert_eq!((option_bytes(3, 0), option_bytes(3, 1), option_bytes(2, 2), option_bytes(0, 3)), (12, 12, 8, 0));
        // The option never makes an ACK exceed TCP's 40 option bytes.
        for blocks in 0..=3u8 {
            for required in 0..=3u8 {
                if let Some((fields, dropped)) = fit_option(required, blocks) {
                    let n = blocks - dropped as u8;
                    let sack = if n > 0 { 4 + 8 * n as u32 } else { 0 };
                    assert!(12 + sack + option_bytes(fields, n) <= 40, "{required} {blocks}");
                    assert!(fields >= required);
                }
            }
        }
    }
}
