//! Units as types: simulated instants and spans in integer nanoseconds, data
//! rates in bits per second, sizes in bytes. Every conversion between them lives
//! here so that rounding is decided once (transmission times round up, so a link
//! never carries more than its rate allows).

use serde::{Deserialize, Serialize};
use std::ops::{Add, AddAssign, Sub};

/// Nanoseconds in one second.
pub const NS_PER_SEC: u64 = 1_000_000_000;
/// Nanoseconds in one microsecond.
pub const NS_PER_US: u64 = 1_000;
/// Nanoseconds in one millisecond.
pub const NS_PER_MS: u64 = 1_000_000;

/// An instant of simulated time, in nanoseconds since the start of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Time(pub u64);

/// A span of simulated time, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Dur(pub u64);

/// A data rate in bits per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Rate(pub u64);

/// An amount of data in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Bytes(pub u64);

impl Time {
    pub const ZERO: Time = Time(0);
    pub const NEVER: Time = Time(u64::MAX);

    pub fn from_secs(s: u64) -> Time {
        Time(s * NS_PER_SEC)
    }
    pub fn from_ms(ms: u64) -> Time {
        Time(ms * NS_PER_MS)
    }
    /// Microseconds since the start of the run, as Linux's `tcp_mstamp` counts.
    pub fn as_us(self) -> u64 {
        self.0 / NS_PER_US
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NS_PER_SEC as f64
    }
    /// Time elapsed since `earlier`, or zero if `earlier` is later.
    pub fn since(self, earlier: Time) -> Dur {
        Dur(self.0.saturating_sub(earlier.0))
    }
}

impl Dur {
    pub const ZERO: Dur = Dur(0);

    pub fn from_secs(s: u64) -> Dur {
        Dur(s * NS_PER_SEC)
    }
    pub fn from_ms(ms: u64) -> Dur {
        Dur(ms * NS_PER_MS)
    }
    pub fn from_us(us: u64) -> Dur {
        Dur(us * NS_PER_US)
    }
    pub fn as_us(self) -> u64 {
        self.0 / NS_PER_US
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NS_PER_SEC as f64
    }
    pub fn is_zero(&self) -> bool {
        self.0 == 0
    }
}

impl Add<Dur> for Time {
    type Output = Time;
    fn add(self, d: Dur) -> Time {
        Time(self.0.saturating_add(d.0))
    }
}
impl AddAssign<Dur> for Time {
    fn add_assign(&mut self, d: Dur) {
        self.0 = self.0.saturating_add(d.0);
    }
}
impl Sub<Time> for Time {
    type Output = Dur;
    fn sub(self, other: Time) -> Dur {
        Dur(self.0 - other.0)
    }
}
impl Add for Dur {
    type Output = Dur;
    fn add(self, d: Dur) -> Dur {
        Dur(self.0 + d.0)
    }
}

impl Rate {
    pub fn from_mbps(m: u64) -> Rate {
        Rate(m * 1_000_000)
    }
    pub fn bits_per_sec(self) -> u64 {
        self.0
    }
    /// Time to serialise `bytes` onto a link of this rate, rounded up to the next
    /// nanosecond so that the link can never exceed its rate.
    pub fn tx_time(self, bytes: u64) -> Dur {
        debug_assert!(self.0 > 0);
        // 64-bit arithmetic for packet-sized amounts (the hot path), 128-bit otherwise.
        if bytes < (1 << 31) {
            return Dur((bytes * 8 * NS_PER_SEC).div_ceil(self.0));
        }
        let bits = bytes as u128 * 8 * NS_PER_SEC as u128;
        Dur(bits.div_ceil(self.0 as u128) as u64)
    }
    /// Bytes this rate carries in `d` (rounded down).
    pub fn bytes_in(self, d: Dur) -> u64 {
        (self.0 as u128 * d.0 as u128 / (8 * NS_PER_SEC as u128)) as u64
    }
    /// The rate at which `bytes` take `d` to deliver.
    pub fn from_bytes_over(bytes: u64, d: Dur) -> Rate {
        if d.0 == 0 {
            return Rate(0);
        }
        Rate((bytes as u128 * 8 * NS_PER_SEC as u128 / d.0 as u128) as u64)
    }
}

/// Linux's jiffies clock: the tick count at `t` for a kernel built with `hz` ticks
/// per second (wrapping like the kernel's 32-bit `tcp_jiffies32`).
pub fn jiffies_at(t: Time, hz: u32) -> u32 {
    match t.0.checked_mul(hz as u64) {
        Some(x) => (x / NS_PER_SEC) as u32,
        None => ((t.0 as u128 * hz as u128) / NS_PER_SEC as u128) as u32,
    }
}

/// The instant at which the jiffies clock reaches tick `j` (first nanosecond of it).
/// Only valid for ticks of the current 32-bit epoch, which covers >49 days at HZ=1000.
pub fn time_of_jiffy(j: u64, hz: u32) -> Time {
    Time((j as u128 * NS_PER_SEC as u128).div_ceil(hz as u128) as u64)
}

/// Linux `usecs_to_jiffies`: rounds up.
pub fn usecs_to_jiffies(us: u64, hz: u32) -> u64 {
    (us * hz as u64).div_ceil(1_000_000)
}

/// Linux `jiffies_to_usecs`.
pub fn jiffies_to_usecs(j: u64, hz: u32) -> u64 {
    j * 1_000_000 / hz as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_time_rounds_up() {
        // 1500 bytes at 400 Mbit/s = 30 us exactly.
        assert_eq!(Rate::from_mbps(400).tx_time(1500), Dur(30_000));
        // 1 byte at 3 bit/s = 2.666 s -> rounds up.
        assert_eq!(Rate(3).tx_time(1), Dur(2_666_666_667));
    }

    #[test]
    fn jiffies_round_trip() {
        let hz = 250;
        assert_eq!(jiffies_at(Time::from_ms(4), hz), 1);
        assert_eq!(jiffies_at(Time::from_ms(3), hz), 0);
        assert_eq!(time_of_jiffy(1, hz), Time::from_ms(4));
        assert_eq!(usecs_to_jiffies(1, hz), 1);
        assert_eq!(usecs_to_jiffies(4000, hz), 1);
        assert_eq!(usecs_to_jiffies(4001, hz), 2);
        assert_eq!(jiffies_to_usecs(3, hz), 12_000);
    }

    #[test]
    fn bytes_in_inverts_tx_time() {
        let r = Rate::from_mbps(100);
        assert_eq!(r.bytes_in(Dur::from_secs(1)), 12_500_000);
        assert_eq!(Rate::from_bytes_over(12_500_000, Dur::from_secs(1)), r);
    }
}
