//! The sorted access records the key scan walks: one record per read or
//! write of a committed transaction, sorted by `(table, key, seq, kind,
//! txn)` with writes before reads of the same version.
//!
//! Two representations sort into that same order: [`Packed`], one `u64` per
//! access whenever the history's value ranges fit (radix sorted, which keeps
//! millions of transactions to a few seconds), and the general [`Access`]
//! otherwise (comparison sorted). [`Decode`] reads either, so the scan is
//! written once.

use std::cmp::Ordering;

use crate::check::history::{History, Item};

/// The flag bit of [`Access::tk`] marking a read: writes sort before reads of
/// the same version, which the key scan relies on.
pub(super) const READ_BIT: u32 = 1 << 31;

/// Reads the fields of one sorted access record, whichever representation.
pub(super) trait Decode<R: Copy> {
    /// Equal for two records exactly when they access the same tuple.
    fn tuple(&self, r: R) -> u128;
    fn table(&self, r: R) -> u32;
    fn key(&self, r: R) -> u64;
    fn seq(&self, r: R) -> u64;
    fn txn(&self, r: R) -> u32;
    fn is_read(&self, r: R) -> bool;
}

/// The general record, for histories whose ranges do not pack into a `u64`.
/// 24 bytes with no padding.
#[derive(Clone, Copy, Debug)]
pub(super) struct Access {
    key: u64,
    seq: u64,
    table: u32,
    /// Transaction index, with [`READ_BIT`] set for reads.
    tk: u32,
}

impl Access {
    fn order(&self, other: &Access) -> Ordering {
        (self.table, self.key, self.seq, self.tk).cmp(&(
            other.table,
            other.key,
            other.seq,
            other.tk,
        ))
    }
}

pub(super) struct Wide;

impl Decode<Access> for Wide {
    #[inline]
    fn tuple(&self, r: Access) -> u128 {
        (r.table as u128) << 64 | r.key as u128
    }
    #[inline]
    fn table(&self, r: Access) -> u32 {
        r.table
    }
    #[inline]
    fn key(&self, r: Access) -> u64 {
        r.key
    }
    #[inline]
    fn seq(&self, r: Access) -> u64 {
        r.seq
    }
    #[inline]
    fn txn(&self, r: Access) -> u32 {
        r.tk & !READ_BIT
    }
    #[inline]
    fn is_read(&self, r: Access) -> bool {
        r.tk & READ_BIT != 0
    }
}

/// One access packed into a `u64`, most significant first:
/// `table - min | key - min | seq - min | is_read | txn`, each field as wide
/// as its range in this history needs. Ascending `u64` order is then exactly
/// `(table, key, seq, kind, txn)` order.
#[derive(Clone, Copy, Debug)]
pub(super) struct Packed {
    min_table: u32,
    min_key: u64,
    min_seq: u64,
    txn_bits: u32,
    seq_bits: u32,
    key_bits: u32,
    table_bits: u32,
}

impl Packed {
    /// The layout for these ranges, if the record fits in 64 bits.
    pub(super) fn fit(lo: (u32, u64, u64), hi: (u32, u64, u64), txns: usize) -> Option<Packed> {
        let layout = Packed {
            min_table: lo.0,
            min_key: lo.1,
            min_seq: lo.2,
            txn_bits: bits(txns.saturating_sub(1) as u64),
            seq_bits: bits(hi.2 - lo.2),
            key_bits: bits(hi.1 - lo.1),
            table_bits: bits((hi.0 - lo.0) as u64),
        };
        (layout.txn_bits + 1 + layout.seq_bits + layout.key_bits + layout.table_bits <= 64)
            .then_some(layout)
    }

    fn seq_shift(&self) -> u32 {
        self.txn_bits + 1
    }

    fn key_shift(&self) -> u32 {
        self.seq_shift() + self.seq_bits
    }

    fn table_shift(&self) -> u32 {
        self.key_shift() + self.key_bits
    }

    pub(super) fn pack(&self, table: u32, key: u64, seq: u64, read: bool, txn: u32) -> u64 {
        shl(u64::from(table - self.min_table), self.table_shift())
            | shl(key - self.min_key, self.key_shift())
            | shl(seq - self.min_seq, self.seq_shift())
            | shl(u64::from(read), self.txn_bits)
            | u64::from(txn)
    }
}

impl Decode<u64> for Packed {
    #[inline]
    fn tuple(&self, r: u64) -> u128 {
        shr(r, self.key_shift()) as u128
    }
    #[inline]
    fn table(&self, r: u64) -> u32 {
        shr(r, self.table_shift()) as u32 + self.min_table
    }
    #[inline]
    fn key(&self, r: u64) -> u64 {
        (shr(r, self.key_shift()) & mask(self.key_bits)) + self.min_key
    }
    #[inline]
    fn seq(&self, r: u64) -> u64 {
        (shr(r, self.seq_shift()) & mask(self.seq_bits)) + self.min_seq
    }
    #[inline]
    fn txn(&self, r: u64) -> u32 {
        (r & mask(self.txn_bits)) as u32
    }
    #[inline]
    fn is_read(&self, r: u64) -> bool {
        shr(r, self.txn_bits) & 1 != 0
    }
}

/// Shifts that saturate: a field of zero width can sit at bit 64.
#[inline]
fn shl(x: u64, by: u32) -> u64 {
    x.checked_shl(by).unwrap_or(0)
}

#[inline]
fn shr(x: u64, by: u32) -> u64 {
    x.checked_shr(by).unwrap_or(0)
}

#[inline]
fn mask(bits: u32) -> u64 {
    shl(1, bits).wrapping_sub(1)
}

/// Bits needed to hold `x`.
pub(super) fn bits(x: u64) -> u32 {
    u64::BITS - x.leading_zeros()
}

/// The sorted accesses as packed words, or `None` if the history's ranges
/// do not fit in 64 bits.
pub(super) fn packed_accesses(history: &History) -> Option<(Vec<u64>, Packed)> {
    let mut lo = (u32::MAX, u64::MAX, u64::MAX);
    let mut hi = (0u32, 0u64, 0u64);
    for txn in &history.txns {
        for a in history.reads(txn).iter().chain(history.writes(txn)) {
            lo = (lo.0.min(a.table), lo.1.min(a.key), lo.2.min(a.seq));
            hi = (hi.0.max(a.table), hi.1.max(a.key), hi.2.max(a.seq));
        }
    }
    if lo.0 > hi.0 {
        // No accesses at all: any layout will do.
        lo = (0, 0, 0);
        hi = lo;
    }
    let layout = Packed::fit(lo, hi, history.txns.len())?;
    let mut records = Vec::with_capacity(access_count(history));
    for (index, txn) in history.txns.iter().enumerate() {
        let index = index as u32;
        let pack = |a: &Item, read| layout.pack(a.table, a.key, a.seq, read, index);
        records.extend(history.reads(txn).iter().map(|a| pack(a, true)));
        records.extend(history.writes(txn).iter().map(|a| pack(a, false)));
    }
    // Records were appended in txn order and the sort is stable, so sorting
    // the bits above the txn gives the full order without passes over it.
    let above = layout.table_shift() + layout.table_bits - layout.txn_bits;
    let txn_bits = layout.txn_bits;
    radix_sort(&mut records, above, |&r| shr(r, txn_bits));
    Some((records, layout))
}

pub(super) fn wide_accesses(history: &History) -> Vec<Access> {
    let mut accesses = Vec::with_capacity(access_count(history));
    for (index, txn) in history.txns.iter().enumerate() {
        let index = index as u32;
        let access = |a: &Item, tk| Access {
            key: a.key,
            seq: a.seq,
            table: a.table,
            tk,
        };
        accesses.extend(
            history
                .reads(txn)
                .iter()
                .map(|a| access(a, index | READ_BIT)),
        );
        accesses.extend(history.writes(txn).iter().map(|a| access(a, index)));
    }
    accesses.sort_unstable_by(Access::order);
    accesses
}

fn access_count(history: &History) -> usize {
    history
        .txns
        .iter()
        .map(|t| t.reads as usize + t.writes as usize)
        .sum()
}

/// Stable LSD radix sort on the low `key_bits` bits of `key`. Digits of 11
/// bits keep the 2048 bucket cursors in L1 while scattering; digits that are
/// the same for every element are skipped.
pub(super) fn radix_sort<T: Copy>(data: &mut Vec<T>, key_bits: u32, key: impl Fn(&T) -> u64) {
    const DIGIT: u32 = 11;
    const BUCKETS: usize = 1 << DIGIT;
    let passes = key_bits.div_ceil(DIGIT) as usize;
    if data.len() < 2 || passes == 0 {
        return;
    }
    let digit = |k: u64, pass: usize| (shr(k, pass as u32 * DIGIT) as usize) & (BUCKETS - 1);
    let mut counts = vec![[0usize; BUCKETS]; passes];
    for x in data.iter() {
        let k = key(x);
        for (pass, count) in counts.iter_mut().enumerate() {
            count[digit(k, pass)] += 1;
        }
    }
    let mut scratch: Vec<T> = Vec::new();
    for (pass, count) in counts.iter().enumerate() {
        if count.contains(&data.len()) {
            continue;
        }
        if scratch.is_empty() {
            scratch = data.clone();
        }
        let mut cursor = [0usize; BUCKETS];
        let mut sum = 0;
        for (c, &n) in cursor.iter_mut().zip(count.iter()) {
            *c = sum;
            sum += n;
        }
        for x in data.iter() {
            let d = digit(key(x), pass);
            scratch[cursor[d]] = *x;
            cursor[d] += 1;
        }
        std::mem::swap(data, &mut scratch);
    }
}
