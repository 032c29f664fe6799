//! A log-linear latency histogram in the manner of HdrHistogram: values below
//! 256 are exact, larger ones fall in buckets of relative width ≤ 1/128
//! (about two significant decimal digits). Fixed size, no allocation after
//! creation, so recording is allowed on the transaction path.

const SUB_BITS: u32 = 8;
const SUB: u64 = 1 << SUB_BITS;
const HALF: u64 = SUB / 2;
const BUCKETS: usize = ((64 - SUB_BITS + 1) as usize) * HALF as usize + HALF as usize;

#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64]>,
    total: u64,
    max: u64,
    sum: u128,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Histogram(n={}, max={})", self.total, self.max)
    }
}

#[inline]
fn index_of(value: u64) -> usize {
    if value < SUB {
        value as usize
    } else {
        let exponent = 63 - value.leading_zeros(); // ≥ SUB_BITS
        let shift = exponent + 1 - SUB_BITS; // ≥ 1
        let mantissa = value >> shift; // in [HALF, SUB)
        (shift as usize) * HALF as usize + mantissa as usize
    }
}

/// Upper bound of the values that fall in bucket `index`.
fn highest_of(index: usize) -> u64 {
    if (index as u64) < SUB {
        index as u64
    } else {
        let shift = (index as u64 - HALF) / HALF;
        let mantissa = index as u64 - shift * HALF;
        ((((mantissa + 1) as u128) << shift) - 1).min(u64::MAX as u128) as u64
    }
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS].into_boxed_slice(),
            total: 0,
            max: 0,
            sum: 0,
        }
    }

    #[inline]
    pub fn record(&mut self, value: u64) {
        self.counts[index_of(value)] += 1;
        self.total += 1;
        self.max = self.max.max(value);
        self.sum += value as u128;
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum as f64 / self.total as f64
        }
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }

    /// The histogram as words, sparse (`total, max, sum_lo, sum_hi`, then
    /// `(bucket, count)` pairs): how the `ucx` fabric's ranks ship their
    /// latencies to rank 0.
    pub fn to_words(&self) -> Vec<u64> {
        let mut words = vec![
            self.total,
            self.max,
            self.sum as u64,
            (self.sum >> 64) as u64,
        ];
        for (index, &count) in self.counts.iter().enumerate() {
            if count != 0 {
                words.push(index as u64);
                words.push(count);
            }
        }
        words
    }

    /// The inverse of [`Histogram::to_words`]; `None` if `words` is not one.
    pub fn from_words(words: &[u64]) -> Option<Histogram> {
        let (head, pairs) = (words.get(..4)?, &words[4..]);
        if pairs.len() % 2 != 0 {
            return None;
        }
        let mut histogram = Histogram::new();
        histogram.total = head[0];
        histogram.max = head[1];
        histogram.sum = head[2] as u128 | ((head[3] as u128) << 64);
        for pair in pairs.chunks(2) {
            *histogram.counts.get_mut(usize::try_from(pair[0]).ok()?)? = pair[1];
        }
        Some(histogram)
    }

    /// The value at quantile `q` in [0, 1] (upper bound of its bucket,
    /// capped at the true maximum); 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (index, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return highest_of(index).min(self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotone_and_tight() {
        let mut previous = 0;
        for value in (0..1_000_000u64).step_by(7).chain([u64::MAX / 2, u64::MAX]) {
            let index = index_of(value);
            assert!(index < BUCKETS);
            assert!(index >= previous, "index not monotone at {value}");
            previous = index;
            let high = highest_of(index);
            assert!(high >= value, "bucket of {value} ends at {high}");
            assert!((high - value) as f64 <= value as f64 / 128.0 + 1.0);
        }
    }

    #[test]
    fn words_round_trip() {
        let mut h = Histogram::new();
        for v in [3u64, 900, 900, 123_456_789, u64::MAX / 3] {
            h.record(v);
        }
        let back = Histogram::from_words(&h.to_words()).expect("decodes");
        assert_eq!(back.count(), 5);
        assert_eq!(back.max(), h.max());
        assert_eq!(back.quantile(0.5), h.quantile(0.5));
        assert_eq!(back.mean(), h.mean());
        assert!(Histogram::from_words(&[1, 2, 3]).is_none());
        assert!(Histogram::from_words(&[1, 2, 3, 4, u64::MAX, 1]).is_none());
    }

    #[test]
    fn quantiles_of_a_uniform_range() {
        let mut h = Histogram::new();
        for v in 1..=100_000u64 {
            h.record(v);
        }
        for (q, expected) in [(0.5, 50_000.0), (0.9, 90_000.0), (0.99, 99_000.0)] {
            let got = h.quantile(q) as f64;
            assert!((got - expected).abs() / expected < 0.01, "q{q}: {got}");
        }
        assert_eq!(h.quantile(1.0), 100_000);
        assert_eq!(h.count(), 100_000);
    }
}
