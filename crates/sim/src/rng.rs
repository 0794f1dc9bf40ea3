//! Deterministic randomness. One seed per run is split into independent named
//! streams (loss, traffic, jitter, ...): each stream's state is derived from the
//! run seed and a hash of its name, so adding a new random component never
//! shifts the numbers another component draws. The generator is xoshiro256++
//! seeded through SplitMix64 (both public-domain algorithms by Vigna et al.),
//! implemented here so results do not depend on a crate's version.

/// SplitMix64 step: used to expand one 64-bit seed into generator state.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a hash of a stream name: stable across platforms and releases.
fn name_hash(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.as_bytes() {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

/// A xoshiro256++ generator.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// The stream called `name` of the run seeded with `seed`.
    pub fn stream(seed: u64, name: &str) -> Rng {
        let mut sm = seed ^ name_hash(name).rotate_left(17);
        // Discard a few outputs so that nearby seeds decorrelate fully.
        let mut s = [0u64; 4];
        for x in s.iter_mut() {
            *x = splitmix64(&mut sm);
        }
        if s == [0; 4] {
            s[0] = 1;
        }
        Rng { s }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[0]
            .wrapping_add(self.s[3])
            .rotate_left(23)
            .wrapping_add(self.s[0]);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// A Bernoulli trial with a fixed probability, compared in integers so the draw
/// costs one generator step and no float maths on the hot path.
#[derive(Clone, Copy, Debug)]
pub struct Bernoulli {
    threshold: u64,
    always: bool,
}

impl Bernoulli {
    pub fn new(p: f64) -> Bernoulli {
        let p = p.clamp(0.0, 1.0);
        Bernoulli {
            threshold: (p * 18_446_744_073_709_551_616.0) as u64,
            always: p >= 1.0,
        }
    }
    pub fn is_never(&self) -> bool {
        self.threshold == 0 && !self.always
    }
    pub fn sample(&self, rng: &mut Rng) -> bool {
        self.always || rng.next_u64() < self.threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_deterministic_and_independent() {
        let mut a1 = Rng::stream(7, "loss");
        let mut a2 = Rng::stream(7, "loss");
        let mut b = Rng::stream(7, "traffic");
        let mut c = Rng::stream(8, "loss");
        let xa: Vec<u64> = (0..4).map(|_| a1.next_u64()).collect();
        let xa2: Vec<u64> = (0..4).map(|_| a2.next_u64()).collect();
        let xb: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        let xc: Vec<u64> = (0..4).map(|_| c.next_u64()).collect();
        assert_eq!(xa, xa2);
        assert_ne!(xa, xb);
        assert_ne!(xa, xc);
    }

    #[test]
    fn bernoulli_frequency() {
        let mut r = Rng::stream(1, "t");
        let b = Bernoulli::new(0.01);
        let n = 1_000_000;
        let hits = (0..n).filter(|_| b.sample(&mut r)).count() as f64;
        // 10000 expected, sd ~ 99.5: 5 sd bounds.
        assert!((hits - 10_000.0).abs() < 500.0, "hits = {hits}");
        assert!(Bernoulli::new(0.0).is_never());
        assert!(Bernoulli::new(1.0).sample(&mut r));
    }

    #[test]
    fn uniform_in_unit_interval() {
        let mut r = Rng::stream(3, "u");
        let mut sum = 0.0;
        for _ in 0..100_000 {
            let u = r.uniform();
            assert!((0.0..1.0).contains(&u));
            sum += u;
        }
        assert!((sum / 100_000.0 - 0.5).abs() < 0.01);
    }
}
