//! Pieces the multi-type workloads share: a weighted transaction mix, the
//! skewed "hot area" row choice (SmallBank's 4 % of accounts getting 90 %
//! of accesses, DrTM+H §5; RCC's hot area for YCSB), a deterministic hash
//! for loaders, and a walk over every row of a table for invariants.
//!
//! Invariants: a [`Mix`] never picks a type of weight 0, and picks each
//! other type with probability weight / total; [`HotArea::row`] returns a
//! row in `[0, rows)`.

use std::sync::Arc;

use crate::base::rng::Rng;
use crate::store::{NodeStore, TableId, KEY_WORD};

/// Declares a workload's transaction types, each named once: a
/// `#[repr(u8)]` enum whose discriminants count from 0 in the order the
/// workload's `TXN_TYPES` names them (a request's type index, as encoded),
/// and `ALL`, every type in that order (what a [`Mix`] pick and a decoded
/// request index).
macro_rules! txn_types {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($variant:ident),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        $vis enum $name {
            $($variant),+
        }

        impl $name {
            const ALL: [$name; [$($name::$variant),+].len()] = [$($name::$variant),+];
        }
    };
}
pub(crate) use txn_types;

/// A weighted choice among transaction types.
#[derive(Clone, Debug)]
pub struct Mix {
    /// Running sums of the weights.
    cumulative: Vec<u64>,
}

impl Mix {
    /// `weights` must not all be 0 (the config validation refuses that).
    pub fn new(weights: &[u32]) -> Mix {
        let mut sum = 0u64;
        let cumulative = weights
            .iter()
            .map(|&w| {
                sum += w as u64;
                sum
            })
            .collect();
        debug_assert!(sum > 0, "a mix needs one type of positive weight");
        Mix { cumulative }
    }

    /// The type of the next transaction.
    pub fn pick(&self, rng: &mut Rng) -> usize {
        let total = *self.cumulative.last().expect("a mix has types");
        let draw = rng.below(total);
        self.cumulative
            .iter()
            .position(|&c| draw < c)
            .expect("draw below total")
    }
}

pub use crate::config::mix::validate_mix;

/// Parses a mix given as `name=weight,name=weight…` (types not named get
/// weight 0); `names` are the accepted names, in weight order.
pub fn parse_mix(flag: &str, text: &str, names: &[&str]) -> Result<Vec<u32>, String> {
    let mut weights = vec![0u32; names.len()];
    for part in text.split(',').filter(|p| !p.trim().is_empty()) {
        let (name, weight) = part.split_once('=').ok_or_else(|| {
            format!(
                "{flag} entry `{part}` is not NAME=WEIGHT; names: {}",
                names.join(", ")
            )
        })?;
        let index = names
            .iter()
            .position(|n| *n == name.trim())
            .ok_or_else(|| {
                format!(
                    "{flag}: unknown transaction `{}`; allowed: {}",
                    name.trim(),
                    names.join(", ")
                )
            })?;
        weights[index] = weight.trim().parse().map_err(|_| {
            format!(
                "{flag}: weight `{}` of {} is not a whole number",
                weight.trim(),
                names[index]
            )
        })?;
    }
    Ok(weights)
}

/// Rows of one partition where `hot_rows` of them get `hot_probability` of
/// the accesses.
#[derive(Clone, Copy, Debug)]
pub struct HotArea {
    pub rows: u64,
    pub hot_rows: u64,
    pub hot_probability: f64,
}

impl HotArea {
    /// `hot_fraction` of `rows` (at least 1 row) is hot.
    pub fn new(rows: u64, hot_fraction: f64, hot_probability: f64) -> HotArea {
        debug_assert!(rows > 0);
        HotArea {
            rows,
            hot_rows: ((rows as f64 * hot_fraction) as u64).clamp(1, rows),
            hot_probability,
        }
    }

    pub fn row(&self, rng: &mut Rng) -> u64 {
        let row = if self.hot_rows == self.rows || rng.unit() < self.hot_probability {
            rng.below(self.hot_rows)
        } else {
            self.hot_rows + rng.below(self.rows - self.hot_rows)
        };
        debug_assert!(row < self.rows);
        row
    }
}

/// A well-mixed 64-bit hash (splitmix64's finalizer), for loaders that
/// derive initial values from keys so invariants can recompute them.
pub fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Calls `visit(key, seq, record)` for every row of `table` on every node.
pub fn for_each_row(
    stores: &[Arc<NodeStore>],
    table: TableId,
    mut visit: impl FnMut(u64, u64, &[u64]),
) {
    let mut record = Vec::new();
    for store in stores {
        let layout = store.layout.table(table);
        for slot in 0..store.rows(table) {
            store.record(table, slot, &mut record);
            let key = store.region.load(layout.tuple_addr(slot) + KEY_WORD as u64);
            visit(key, store.seq(table, slot), &record);
        }
    }
}

/// Collects invariant findings: every violation counted, the first few
/// described.
#[derive(Default)]
pub struct Findings {
    pub details: Vec<String>,
    pub violations: u64,
}

impl Findings {
    const LISTED: u64 = 10;

    pub fn violation(&mut self, text: impl FnOnce() -> String) {
        self.violations += 1;
        if self.violations <= Self::LISTED {
            self.details.push(text());
        }
    }

    pub fn note(&mut self, text: String) {
        self.details.push(text);
    }

    pub fn into_report(mut self) -> super::InvariantReport {
        if self.violations > Self::LISTED {
            self.details
                .push(format!("{} violations in all", self.violations));
        }
        super::InvariantReport {
            ok: self.violations == 0,
            details: self.details,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_follows_its_weights_and_skips_zero_weights() {
        let mix = Mix::new(&[25, 0, 75]);
        let mut rng = Rng::new(7);
        let mut counts = [0u32; 3];
        for _ in 0..40_000 {
            counts[mix.pick(&mut rng)] += 1;
        }
        assert_eq!(counts[1], 0);
        let share = counts[0] as f64 / 40_000.0;
        assert!((share - 0.25).abs() < 0.02, "{share}");
    }

    #[test]
    fn mix_text_names_unknown_types_and_bad_weights() {
        let names = ["a", "b", "c"];
        assert_eq!(parse_mix("--m", "c=3, a=1", &names).unwrap(), vec![1, 0, 3]);
        let unknown = parse_mix("--m", "d=1", &names).unwrap_err();
        assert!(
            unknown.contains("`d`") && unknown.contains("a, b, c"),
            "{unknown}"
        );
        assert!(parse_mix("--m", "a=x", &names).unwrap_err().contains("`x`"));
        assert!(parse_mix("--m", "a", &names)
            .unwrap_err()
            .contains("NAME=WEIGHT"));
        assert!(validate_mix("s", &names, &[0, 0, 0]).is_err());
        assert!(validate_mix("s", &names, &[0, 2_000_000, 0]).is_err());
    }

    #[test]
    fn hot_area_concentrates_accesses() {
        let area = HotArea::new(1000, 0.04, 0.9);
        assert_eq!(area.hot_rows, 40);
        let mut rng = Rng::new(3);
        let hot = (0..20_000).filter(|_| area.row(&mut rng) < 40).count();
        let share = hot as f64 / 20_000.0;
        assert!((share - 0.9).abs() < 0.02, "{share}");
    }
}
