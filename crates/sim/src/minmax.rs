//! A running minimum or maximum over a sliding time window, kept with three
//! samples (the best, and the best of the later parts of the window) so that
//! an expired best is replaced without storing every sample: Kathleen Nichols'
//! algorithm as Linux implements it in `lib/win_minmax.c`. The socket keeps the
//! min-RTT that RACK and HyStart read with it, and BBR its max-bandwidth filter.

#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    t: u32,
    v: u32,
}

/// A running min (or max) over a time window, tracking the best three samples.
#[derive(Clone, Debug)]
pub struct MinMax {
    s: [Sample; 3],
    is_max: bool,
}

impl MinMax {
    pub fn new_min(t: u32, v: u32) -> MinMax {
        let mut m = MinMax { s: [Sample::default(); 3], is_max: false };
        m.reset(t, v);
        m
    }
    pub fn new_max(t: u32, v: u32) -> MinMax {
        let mut m = MinMax { s: [Sample::default(); 3], is_max: true };
        m.reset(t, v);
        m
    }

    pub fn get(&self) -> u32 {
        self.s[0].v
    }

    pub fn reset(&mut self, t: u32, v: u32) -> u32 {
        self.s = [Sample { t, v }; 3];
        v
    }

    fn better_or_equal(&self, a: u32, b: u32) -> bool {
        if self.is_max {
            a >= b
        } else {
            a <= b
        }
    }

    /// Feeds measurement `v` taken at time `t` (any monotonic unit) with window `win`.
    pub fn update(&mut self, win: u32, t: u32, v: u32) -> u32 {
        let val = Sample { t, v };
        if self.better_or_equal(v, self.s[0].v) || t.wrapping_sub(self.s[2].t) > win {
            return self.reset(t, v);
        }
        if self.better_or_equal(v, self.s[1].v) {
            self.s[1] = val;
            self.s[2] = val;
        } else if self.better_or_equal(v, self.s[2].v) {
            self.s[2] = val;
        }
        self.subwin_update(win, val)
    }

    fn subwin_update(&mut self, win: u32, val: Sample) -> u32 {
        let dt = val.t.wrapping_sub(self.s[0].t);
        if dt > win {
            self.s[0] = self.s[1];
            self.s[1] = self.s[2];
            self.s[2] = val;
            if val.t.wrapping_sub(self.s[0].t) > win {
                self.s[0] = self.s[1];
                self.s[1] = self.s[2];
                self.s[2] = val;
            }
        } else if self.s[1].t == self.s[0].t && dt > win / 4 {
            self.s[1] = val;
            self.s[2] = val;
        } else if self.s[2].t == self.s[1].t && dt > win / 2 {
            self.s[2] = val;
        }
        self.s[0].v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windowed_min_expires() {
        let mut m = MinMax::new_min(0, u32::MAX);
        m.update(100, 0, 50);
        m.update(100, 10, 60);
        m.update(100, 60, 70);
        assert_eq!(m.get(), 50);
        // After the window passes, the best sample kept from a later sub-window wins.
        assert_eq!(m.update(100, 120, 80), 70);
        let mut x = MinMax::new_max(0, 0);
        x.update(10, 0, 5);
        x.update(10, 1, 3);
        assert_eq!(x.get(), 5);
        assert_eq!(x.update(10, 12, 1), 1);
    }
}
