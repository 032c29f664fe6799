//! Latency histograms: HdrHistogram (the [`hdrhistogram`] crate), kept per
//! transaction type and per interval of the run, so that one set of
//! histograms gives the report's percentiles, its per-type percentiles and
//! the interval log (`--latency-log`, [`super::log`]).
//!
//! Layout. A worker records each committed transaction's latency into the
//! histogram of its type for the interval it committed in ([`INTERVAL_NS`]
//! of the run's clock — wall time on `threads` and `ucx`, virtual time on
//! `sim` — counted from the start of the measured interval). When a commit
//! falls in a later interval, the finished interval's histograms are sealed
//! into a sparse list of `(value, count)` bins (only the buckets that hold
//! something) and the dense histograms are reset for the next interval.
//! Merging workers, nodes or ranks sums bins of equal (interval, type); a
//! dense histogram is rebuilt only when a figure is asked for.
//!
//! Sizing. Every histogram tracks 1 ns to [`HIGHEST_NS`] (one hour) with
//! [`SIGNIFICANT_FIGURES`] = 2: bucket width at most 1/128 of the value
//! (0.8 %), the resolution the report has always had, in 4,608 `u64`
//! counters (36 KiB). Three figures would be 270 KiB per histogram: with one
//! live histogram per transaction type and worker, a 64-node × 8-worker
//! TPC-C run would hold 0.7 GiB of mostly empty counters instead of 90 MiB.
//! A latency above an hour (a transaction stuck behind a fault) is counted
//! at one hour rather than lost or allowed to grow the histogram. Sealed
//! intervals cost 16 bytes per occupied bucket (a few hundred per interval
//! and type), so a long run grows by kilobytes per worker and second.
//!
//! Invariants: recording never allocates once a type's histogram exists
//! (histograms do not auto-resize; a new interval reuses them, and sealing
//! — one small allocation per type and interval — happens once a second);
//! sealed slices are sorted by (interval, type) and their bins by value;
//! a merged set counts exactly the commits of its parts, bucket by bucket,
//! so the interval log read back reproduces the report's percentiles.
//!
//! The histograms are measurement only: nothing in a run reads them, so the
//! simulator's histories and memory images do not depend on them.

use super::MAX_TXN_TYPES;

/// An HdrHistogram of nanoseconds, sized as the module doc says.
pub type Histogram = hdrhistogram::Histogram<u64>;

/// Smallest latency told apart from 0, ns.
pub const LOWEST_NS: u64 = 1;
/// Largest latency tracked, ns (one hour); larger ones are counted here.
pub const HIGHEST_NS: u64 = 3_600 * 1_000_000_000;
/// Decimal digits of resolution: buckets are at most 1/128 of their value.
pub const SIGNIFICANT_FIGURES: u8 = 2;
/// Length of one interval of the log, ns of the run's clock.
pub const INTERVAL_NS: u64 = 1_000_000_000;

/// An empty histogram of the module's size.
pub fn new_histogram() -> Histogram {
    Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_FIGURES)
        .expect("the bounds are constants HdrHistogram accepts")
}

/// One type's latencies in one interval: `(value, count)` per occupied
/// bucket, values ascending (each the highest value of its bucket, so it
/// records back into the same bucket).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slice {
    pub interval: u32,
    pub kind: u8,
    pub bins: Vec<(u64, u64)>,
}

impl Slice {
    fn of(interval: u32, kind: u8, histogram: &Histogram) -> Slice {
        Slice {
            interval,
            kind,
            bins: histogram
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect(),
        }
    }

    pub fn count(&self) -> u64 {
        self.bins.iter().map(|&(_, n)| n).sum()
    }

    /// Adds the slice's counts to `histogram`.
    pub fn add_to(&self, histogram: &mut Histogram) {
        for &(value, count) in &self.bins {
            histogram.saturating_record_n(value, count);
        }
    }

    /// Adds `other`'s bins (both sorted by value) to this slice's.
    fn absorb(&mut self, other: &Slice) {
        let mut merged = Vec::with_capacity(self.bins.len().max(other.bins.len()));
        let (mut a, mut b) = (self.bins.iter().peekable(), other.bins.iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(&&(va, na)), Some(&&(vb, nb))) => {
                    if va == vb {
                        a.next();
                        b.next();
                        (va, na + nb)
                    } else if va < vb {
                        *a.next().expect("peeked")
                    } else {
                        *b.next().expect("peeked")
                    }
                }
                (Some(_), None) => *a.next().expect("peeked"),
                (None, Some(_)) => *b.next().expect("peeked"),
                (None, None) => break,
            };
            merged.push(next);
        }
        self.bins = merged;
    }
}

/// The latencies of one worker, or after merging, of a run.
#[derive(Clone, Default)]
pub struct Latencies {
    /// Sealed intervals, sorted by (interval, kind).
    sealed: Vec<Slice>,
    /// The interval now recording.
    current: u32,
    /// Its histograms by transaction type, created at the type's first
    /// commit and reused for every later interval.
    live: [Option<Histogram>; MAX_TXN_TYPES],
}

impl std::fmt::Debug for Latencies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Latencies(n={}, slices={})",
            self.count(),
            self.sealed.len()
        )
    }
}

impl Latencies {
    pub fn new() -> Latencies {
        Latencies::default()
    }

    /// Records a commit of type `kind` at `since_start_ns` into the
    /// measured interval that took `latency_ns`. Commits come in time order
    /// per worker; one that does not (it cannot, on one worker's clock) is
    /// counted in the current interval.
    #[inline]
    pub fn record(&mut self, kind: usize, since_start_ns: u64, latency_ns: u64) {
        let interval = (since_start_ns / INTERVAL_NS).min(u32::MAX as u64) as u32;
        if interval > self.current {
            self.roll(interval);
        }
        self.live[kind]
            .get_or_insert_with(new_histogram)
            .saturating_record(latency_ns);
    }

    /// Seals the current interval and moves on to `interval`.
    #[cold]
    fn roll(&mut self, interval: u32) {
        self.seal();
        self.current = interval;
    }

    /// Seals the current interval's histograms (the worker is done, or a
    /// later interval begins).
    pub fn seal(&mut self) {
        for (kind, histogram) in self.live.iter_mut().enumerate() {
            if let Some(histogram) = histogram.as_mut().filter(|h| !h.is_empty()) {
                self.sealed
                    .push(Slice::of(self.current, kind as u8, histogram));
                histogram.reset();
            }
        }
    }

    /// Every slice, sealed or live, sorted by (interval, kind).
    fn slices(&self) -> Vec<Slice> {
        let mut all = self.sealed.clone();
        for (kind, histogram) in self.live.iter().enumerate() {
            if let Some(histogram) = histogram.as_ref().filter(|h| !h.is_empty()) {
                all.push(Slice::of(self.current, kind as u8, histogram));
            }
        }
        all
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &Latencies) {
        self.seal();
        let mut theirs = other.slices().into_iter().peekable();
        let mut merged = Vec::with_capacity(self.sealed.len());
        let mut ours = std::mem::take(&mut self.sealed).into_iter().peekable();
        let key = |s: &Slice| (s.interval, s.kind);
        loop {
            let next = match (ours.peek(), theirs.peek()) {
                (Some(a), Some(b)) if key(a) == key(b) => {
                    let mut a = ours.next().expect("peeked");
                    a.absorb(&theirs.next().expect("peeked"));
                    a
                }
                (Some(a), Some(b)) if key(a) < key(b) => ours.next().expect("peeked"),
                (_, Some(_)) => theirs.next().expect("peeked"),
                (Some(_), None) => ours.next().expect("peeked"),
                (None, None) => break,
            };
            merged.push(next);
        }
        self.sealed = merged;
        self.current = self.current.max(other.current);
    }

    /// Committed transactions recorded.
    pub fn count(&self) -> u64 {
        let live: u64 = self.live.iter().flatten().map(|h| h.len()).sum();
        self.sealed.iter().map(Slice::count).sum::<u64>() + live
    }

    /// One histogram of every slice `keep` accepts.
    fn histogram_of(&self, keep: impl Fn(&Slice) -> bool) -> Histogram {
        let mut histogram = new_histogram();
        for slice in self.slices().iter().filter(|s| keep(s)) {
            slice.add_to(&mut histogram);
        }
        histogram
    }

    /// The whole run's latencies.
    pub fn total(&self) -> Histogram {
        self.histogram_of(|_| true)
    }

    /// The latencies of transaction type `kind`.
    pub fn of_kind(&self, kind: usize) -> Histogram {
        self.histogram_of(|s| s.kind as usize == kind)
    }

    /// The slices of each interval that has any, in interval order.
    pub fn intervals(&self) -> Vec<(u32, Vec<Slice>)> {
        let mut out: Vec<(u32, Vec<Slice>)> = Vec::new();
        for slice in self.slices() {
            match out.last_mut() {
                Some((interval, slices)) if *interval == slice.interval => slices.push(slice),
                _ => out.push((slice.interval, vec![slice])),
            }
        }
        out
    }

    /// The latencies as words (`slices`, then per slice `interval, kind,
    /// bins`, then the bins' `value, count` pairs): how the `ucx` fabric's
    /// ranks ship them to rank 0.
    pub fn to_words(&self) -> Vec<u64> {
        let slices = self.slices();
        let mut words = vec![slices.len() as u64];
        for slice in &slices {
            words.extend_from_slice(&[
                slice.interval as u64,
                slice.kind as u64,
                slice.bins.len() as u64,
            ]);
            for &(value, count) in &slice.bins {
                words.extend_from_slice(&[value, count]);
            }
        }
        words
    }

    /// The inverse of [`Latencies::to_words`]; `None` if `words` is not one
    /// (wrong length, a type beyond the workload's limit, slices or bins out
    /// of order).
    pub fn from_words(words: &[u64]) -> Option<Latencies> {
        let (&slices, mut rest) = words.split_first()?;
        let mut sealed = Vec::new();
        for _ in 0..slices {
            let (head, tail) = (rest.get(..3)?, &rest[3..]);
            let bins = usize::try_from(head[2]).ok()?;
            let pairs = tail.get(..bins.checked_mul(2)?)?;
            rest = &tail[bins * 2..];
            let slice = Slice {
                interval: u32::try_from(head[0]).ok()?,
                kind: u8::try_from(head[1])
                    .ok()
                    .filter(|&k| (k as usize) < MAX_TXN_TYPES)?,
                bins: pairs.chunks(2).map(|p| (p[0], p[1])).collect(),
            };
            let sorted = slice.bins.windows(2).all(|w| w[0].0 < w[1].0);
            let after = sealed
                .last()
                .is_none_or(|s: &Slice| (s.interval, s.kind) < (slice.interval, slice.kind));
            if !sorted || !after {
                return None;
            }
            sealed.push(slice);
        }
        if !rest.is_empty() {
            return None;
        }
        Some(Latencies {
            current: sealed.last().map_or(0, |s| s.interval),
            sealed,
            live: Default::default(),
        })
    }
}

/// `histogram`'s value at quantile `q` in [0, 1]; 0 when empty.
pub fn quantile(histogram: &Histogram, q: f64) -> u64 {
    if histogram.is_empty() {
        0
    } else {
        histogram.value_at_quantile(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = INTERVAL_NS;

    #[test]
    fn quantiles_of_a_uniform_range_are_within_the_resolution() {
        let mut l = Latencies::new();
        for v in 1..=100_000u64 {
            l.record(0, 0, v);
        }
        let h = l.total();
        for (q, expected) in [(0.5, 50_000.0), (0.9, 90_000.0), (0.99, 99_000.0)] {
            let got = quantile(&h, q) as f64;
            assert!((got - expected).abs() / expected < 0.01, "q{q}: {got}");
        }
        assert_eq!(h.len(), 100_000);
        assert!((h.max() as f64 - 100_000.0).abs() / 100_000.0 < 0.01);
    }

    #[test]
    fn intervals_and_types_are_kept_apart_and_add_up() {
        let mut l = Latencies::new();
        l.record(0, 0, 1_000);
        l.record(1, S / 2, 2_000);
        l.record(0, S, 3_000);
        l.record(0, 3 * S + 1, 4_000);
        // Out of order on one clock cannot happen; it lands in the current
        // interval rather than reopening a sealed one.
        l.record(1, S, 5_000);
        let intervals = l.intervals();
        let shape: Vec<(u32, Vec<(u8, u64)>)> = intervals
            .iter()
            .map(|(i, slices)| (*i, slices.iter().map(|s| (s.kind, s.count())).collect()))
            .collect();
        assert_eq!(
            shape,
            vec![
                (0, vec![(0, 1), (1, 1)]),
                (1, vec![(0, 1)]),
                (3, vec![(0, 1), (1, 1)]),
            ]
        );
        assert_eq!(l.count(), 5);
        assert_eq!(l.of_kind(1).len(), 2);
        assert_eq!(l.total().len(), 5);
    }

    #[test]
    fn merging_sums_equal_slices_bucket_by_bucket() {
        let mut a = Latencies::new();
        let mut b = Latencies::new();
        for v in [100, 200, 300] {
            a.record(0, 0, v);
            b.record(0, 0, v);
        }
        b.record(2, 2 * S, 7_777_777);
        a.record(0, S, 50);
        a.seal();
        let mut merged = Latencies::new();
        merged.merge(&a);
        merged.merge(&b);
        assert_eq!(merged.count(), 8);
        let first = &merged.intervals()[0].1[0];
        assert_eq!(
            first.bins.iter().map(|b| b.1).collect::<Vec<_>>(),
            [2, 2, 2]
        );
        let mut both = a.total();
        both.add(b.total()).expect("same size");
        assert_eq!(merged.total(), both);
        assert_eq!(merged.of_kind(2).max(), b.of_kind(2).max());
    }

    #[test]
    fn words_round_trip_and_reject_garbage() {
        let mut l = Latencies::new();
        for (kind, at, v) in [(0, 0, 3u64), (1, 0, 900), (1, 0, 900), (0, S, 123_456_789)] {
            l.record(kind, at, v);
        }
        let back = Latencies::from_words(&l.to_words()).expect("decodes");
        assert_eq!(back.count(), 4);
        assert_eq!(back.total(), l.total());
        assert_eq!(back.intervals(), l.intervals());
        assert!(Latencies::from_words(&[]).is_none());
        assert!(
            Latencies::from_words(&[1, 0, 0, 2, 5, 1]).is_none(),
            "short"
        );
        assert!(Latencies::from_words(&[1, 0, 99, 0]).is_none(), "type");
        assert!(
            Latencies::from_words(&[1, 0, 0, 2, 9, 1, 5, 1]).is_none(),
            "order"
        );
        assert!(Latencies::from_words(&[0, 7]).is_none(), "trailing");
    }

    #[test]
    fn recording_reuses_the_histograms_across_intervals() {
        let mut l = Latencies::new();
        l.record(0, 0, 10);
        let before = l.live[0].as_ref().expect("created").distinct_values();
        l.record(0, 5 * S, 10);
        assert_eq!(before, 4_608, "the module doc's size");
        assert_eq!(l.live[0].as_ref().expect("kept").len(), 1);
        assert_eq!(l.sealed.len(), 1);
    }
}
