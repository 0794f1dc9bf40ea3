//! RTT estimation as Linux does it (`tcp_rtt_estimator`, `tcp_set_rto`): smoothed
//! RTT with gain 1/8 kept in microseconds x 8, a mean deviation kept x 4 whose
//! decreases are damped, and an RTTVAR that is floored at the minimum RTO and only
//! decays once per round trip. The result is RTO = SRTT + max(4 x mdev, 200 ms)
//! rather than RFC 6298's 1 s floor.

use crate::packet::seq_after;
use crate::units::{jiffies_to_usecs, usecs_to_jiffies};

/// Linux TCP_RTO_MAX: 120 s.
pub const RTO_MAX_US: u64 = 120_000_000;
/// Linux TCP_TIMEOUT_INIT: 1 s (RFC 6298).
pub const RTO_INIT_US: u64 = 1_000_000;
/// Linux TCP_RTO_MIN: HZ/5 = 200 ms.
pub const RTO_MIN_US: u32 = 200_000;

/// Linux's smoothed RTT / RTO state.
#[derive(Clone, Debug, Default)]
pub struct RttEstimator {
    /// Smoothed RTT in microseconds, scaled by 8 (0 = no sample yet).
    pub srtt_us8: u32,
    /// Mean deviation in microseconds, scaled by 4.
    pub mdev_us4: u32,
    /// Largest mdev in the current round trip.
    pub mdev_max_us: u32,
    /// The variance term used in the RTO.
    pub rttvar_us: u32,
    /// Segment that ends the current measurement round (Linux `rtt_seq`).
    pub rtt_seq: u32,
}

impl RttEstimator {
    pub fn has_sample(&self) -> bool {
        self.srtt_us8 != 0
    }

    pub fn srtt_us(&self) -> u32 {
        self.srtt_us8 >> 3
    }

    /// Feeds one RTT measurement `m` (us). `snd_una`/`snd_nxt` decide when the
    /// per-round RTTVAR decay happens; `rto_min_us` floors the variance term.
    pub fn sample(&mut self, m_us: u32, snd_una: u32, snd_nxt: u32, rto_min_us: u32) {
        let mut m = m_us as i64;
        let mut srtt = self.srtt_us8 as i64;
        if srtt != 0 {
            m -= srtt >> 3;
            srtt += m;
            if m < 0 {
                m = -m;
                m -= (self.mdev_us4 >> 2) as i64;
                if m > 0 {
                    m >>= 3;
                }
            } else {
                m -= (self.mdev_us4 >> 2) as i64;
            }
            self.mdev_us4 = (self.mdev_us4 as i64 + m) as u32;
            if self.mdev_us4 > self.mdev_max_us {
                self.mdev_max_us = self.mdev_us4;
                if self.mdev_max_us > self.rttvar_us {
                    self.rttvar_us = self.mdev_max_us;
                }
            }
            if seq_after(snd_una, self.rtt_seq) {
                if self.mdev_max_us < self.rttvar_us {
                    self.rttvar_us -= (self.rttvar_us - self.mdev_max_us) >> 2;
                }
                self.rtt_seq = snd_nxt;
                self.mdev_max_us = rto_min_us;
            }
        } else {
            srtt = m << 3;
            self.mdev_us4 = (m << 1) as u32;
            self.rttvar_us = self.mdev_us4.max(rto_min_us);
            self.mdev_max_us = self.rttvar_us;
            self.rtt_seq = snd_nxt;
        }
        self.srtt_us8 = (srtt.max(1)) as u32;
    }

    /// The retransmission timeout in jiffies (Linux `__tcp_set_rto` + `tcp_bound_rto`).
    pub fn rto_jiffies(&self, hz: u32) -> u64 {
        let us = (self.srtt_us8 >> 3) as u64 + self.rttvar_us as u64;
        usecs_to_jiffies(us, hz).min(usecs_to_jiffies(RTO_MAX_US, hz))
    }
}

/// The RTO at connection start, in jiffies.
pub fn initial_rto_jiffies(hz: u32) -> u64 {
    usecs_to_jiffies(RTO_INIT_US, hz)
}

/// A span in jiffies expressed in microseconds.
pub fn rto_us(rto_jiffies: u64, hz: u32) -> u64 {
    jiffies_to_usecs(rto_jiffies, hz)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sample_gives_three_rtt_or_rtt_plus_rto_min() {
        let mut e = RttEstimator::default();
        e.sample(100_000, 0, 10, RTO_MIN_US);
        assert_eq!(e.srtt_us(), 100_000);
        // rttvar = max(2m, 200ms) = 200 ms -> RTO = 300 ms = 75 jiffies at HZ 250.
        assert_eq!(e.rto_jiffies(250), 75);
        let mut e = RttEstimator::default();
        e.sample(300_000, 0, 10, RTO_MIN_US);
        // rttvar = 600 ms -> RTO = 900 ms = 3 RTT.
        assert_eq!(e.rto_jiffies(1000), 900);
    }

    #[test]
    fn steady_rtt_converges_to_rtt_plus_rto_min() {
        let mut e = RttEstimator::default();
        let mut una = 0;
        for _ in 0..200 {
            una += 10;
            e.sample(50_000, una, una + 10, RTO_MIN_US);
        }
        assert_eq!(e.srtt_us(), 50_000);
        assert_eq!(e.rto_jiffies(1000), 250);
    }
}
