//! Serializability check of a committed history: builds the direct
//! serialization graph and searches it for a cycle.
//!
//! The graph follows Adya's dependency-graph definitions (Adya, "Weak
//! Consistency", 1999), specialised to single-version reads of totally ordered
//! per-key versions. For each tuple `(table, key)`:
//!
//! - **ww**: the writer of version `v` -> the writer of the next higher
//!   *installed* version;
//! - **wr**: the writer of version `v` -> every transaction that read `v`;
//! - **rw** (anti-dependency): every reader of `v` -> the writer of the next
//!   higher installed version after `v`.
//!
//! Self edges are dropped: a read-modify-write reads `v` and installs `v + 1`,
//! which would otherwise give every such transaction a loop. The history is
//! serializable iff no anomaly below is present and the graph is acyclic.
//!
//! Anomalies that break serializability by themselves, whatever the graph:
//! two committed transactions installing the same version of a key; a read of
//! a version `v > 0` that no committed transaction installed (dirty or aborted
//! read); a transaction writing the same key twice; a transaction claiming to
//! install version 0, which belongs to the loader.
//!
//! Invariants the implementation relies on:
//!
//! - transactions are named by their index in `history.txns` as a `u32`, with
//!   fewer than 2^31 of them; ids only reappear in the report;
//! - every access becomes one record and the records are sorted by
//!   `(table, key, seq, kind, txn)`, writes before reads, so one linear scan
//!   sees each key's versions in order with a version's writers first — no
//!   per-key map is ever built. Records are single packed `u64`s whenever the
//!   history's value ranges fit, which is what keeps millions of transactions
//!   to a few seconds; both representations sort into the same order;
//! - edges are appended to one flat list and grouped by source with a radix
//!   sort, then each CSR row is sorted and deduplicated, so `edge_count`
//!   counts distinct edges;
//! - nothing recurses: the SCC search and the cycle extraction keep explicit
//!   stacks, because histories reach millions of transactions.

use std::cmp::Ordering;
use std::collections::VecDeque;

use serde::Serialize;

use super::history::{History, TxnEntry};

/// How many anomaly descriptions the report lists; all are counted.
const MAX_LISTED_ANOMALIES: usize = 20;

/// The flag bit of [`Access::tk`] marking a read: writes sort before reads of
/// the same version, which the key scan relies on.
const READ_BIT: u32 = 1 << 31;

const NONE: u32 = u32::MAX;

#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    pub serializable: bool,
    pub txn_count: usize,
    /// Distinct edges of the dependency graph (self edges excluded).
    pub edge_count: usize,
    /// One dependency cycle, as txn ids in edge order (the last depends back
    /// on the first), if the graph has any.
    pub cycle: Option<Vec<u64>>,
    /// Up to 20 anomaly descriptions; `anomaly_count` has the full number.
    pub anomalies: Vec<String>,
    pub anomaly_count: usize,
    /// Strongly connected components with more than one transaction: each
    /// holds at least one cycle, so this says how widespread the damage is.
    pub cyclic_components: usize,
}

pub fn check_serializable(history: &History) -> CheckReport {
    let mut anomalies = Anomalies::default();
    let graph = build_graph(history, &mut anomalies);
    let scc = strongly_connected(&graph);
    let cycle = scc.first_cyclic.map(|start| {
        find_cycle(&graph, &scc.component, start)
            .into_iter()
            .map(|t| history.txns[t as usize].id)
            .collect::<Vec<u64>>()
    });
    CheckReport {
        serializable: anomalies.count == 0 && cycle.is_none(),
        txn_count: history.txns.len(),
        edge_count: graph.targets.len(),
        cycle,
        anomalies: anomalies.listed,
        anomaly_count: anomalies.count,
        cyclic_components: scc.cyclic_components,
    }
}

#[derive(Default)]
struct Anomalies {
    listed: Vec<String>,
    count: usize,
}

impl Anomalies {
    /// Formats lazily: a badly broken run can have millions of anomalies and
    /// only the first few are worth the allocation.
    fn report(&mut self, describe: impl FnOnce() -> String) {
        self.count += 1;
        if self.listed.len() < MAX_LISTED_ANOMALIES {
            self.listed.push(describe());
        }
    }
}

/// Reads the fields of one sorted access record, whichever representation.
trait Decode<R: Copy> {
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
struct Access {
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

struct Wide;

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
struct Packed {
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
    fn fit(lo: (u32, u64, u64), hi: (u32, u64, u64), txns: usize) -> Option<Packed> {
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

    fn pack(&self, table: u32, key: u64, seq: u64, read: bool, txn: u32) -> u64 {
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
fn bits(x: u64) -> u32 {
    u64::BITS - x.leading_zeros()
}

/// Compressed sparse rows: the successors of `t` are
/// `targets[offsets[t]..offsets[t + 1]]`, sorted and distinct.
struct Graph {
    offsets: Vec<usize>,
    targets: Vec<u32>,
}

impl Graph {
    #[inline]
    fn successors(&self, t: u32) -> &[u32] {
        &self.targets[self.offsets[t as usize]..self.offsets[t as usize + 1]]
    }
}

fn build_graph(history: &History, anomalies: &mut Anomalies) -> Graph {
    let txns = &history.txns;
    let n = txns.len();
    assert!(
        n < READ_BIT as usize,
        "serializability check: {n} transactions exceed the 2^31 the checker indexes"
    );
    check_duplicate_writes(history, anomalies);
    let edges = match packed_accesses(history) {
        Some((records, layout)) => collect_edges(&records, &layout, txns, anomalies),
        None => collect_edges(&wide_accesses(history), &Wide, txns, anomalies),
    };
    to_csr(edges, n)
}

/// A transaction writing a key twice leaves two versions of it that no
/// serial order explains as one write each; reported per transaction since
/// the key scan sees the two writes far apart when their versions differ.
fn check_duplicate_writes(history: &History, anomalies: &mut Anomalies) {
    let mut scratch: Vec<(u32, u64, u64)> = Vec::new();
    for txn in &history.txns {
        let writes = history.writes(txn);
        if writes.len() < 2 {
            continue;
        }
        scratch.clear();
        scratch.extend(writes.iter().map(|w| (w.table, w.key, w.seq)));
        scratch.sort_unstable();
        let mut i = 0;
        while i < scratch.len() {
            let (table, key, _) = scratch[i];
            let mut j = i + 1;
            while j < scratch.len() && scratch[j].0 == table && scratch[j].1 == key {
                j += 1;
            }
            if j > i + 1 {
                let seqs: Vec<u64> = scratch[i..j].iter().map(|s| s.2).collect();
                anomalies.report(|| {
                    format!(
                        "txn {} wrote table {table} key {key} {} times (versions {seqs:?})",
                        txn.id,
                        j - i
                    )
                });
            }
            i = j;
        }
    }
}

/// The sorted accesses as packed words, or `None` if the history's ranges
/// do not fit in 64 bits.
fn packed_accesses(history: &History) -> Option<(Vec<u64>, Packed)> {
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
        let pack = |a: &super::history::Item, read| layout.pack(a.table, a.key, a.seq, read, index);
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

fn wide_accesses(history: &History) -> Vec<Access> {
    let mut accesses = Vec::with_capacity(access_count(history));
    for (index, txn) in history.txns.iter().enumerate() {
        let index = index as u32;
        let access = |a: &super::history::Item, tk| Access {
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
fn radix_sort<T: Copy>(data: &mut Vec<T>, key_bits: u32, key: impl Fn(&T) -> u64) {
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

/// Walks every key's versions in order, appending each dependency edge as
/// `from << 32 | to` (txn indexes, self edges excluded) and reporting the
/// per-version anomalies on the way. Appending is sequential; placing each
/// edge straight into its CSR row would cost a cache miss per edge.
fn collect_edges<R: Copy, D: Decode<R>>(
    records: &[R],
    decode: &D,
    txns: &[TxnEntry],
    anomalies: &mut Anomalies,
) -> Vec<u64> {
    let mut edges: Vec<u64> = Vec::with_capacity(records.len() * 2);
    let mut emit = |from: u32, to: u32| {
        if from != to {
            edges.push(u64::from(from) << 32 | u64::from(to));
        }
    };
    let txn = |r: &R| decode.txn(*r);
    let id = |r: &R| txns[decode.txn(*r) as usize].id;

    let mut start = 0;
    while start < records.len() {
        let this = decode.tuple(records[start]);
        let mut end = start + 1;
        while end < records.len() && decode.tuple(records[end]) == this {
            end += 1;
        }
        let tuple = &records[start..end];
        let (table, key) = (decode.table(tuple[0]), decode.key(tuple[0]));

        // Writers of the latest installed version seen so far; empty while
        // that is still the loader's version 0.
        let mut prev_writers = 0..0;
        // Readers since that version was installed (its own readers and those
        // of uninstalled versions after it): all anti-depend on the next one.
        let mut pending_from = 0;

        let mut run = 0;
        while run < tuple.len() {
            let seq = decode.seq(tuple[run]);
            let mut readers_from = run;
            while readers_from < tuple.len()
                && decode.seq(tuple[readers_from]) == seq
                && !decode.is_read(tuple[readers_from])
            {
                readers_from += 1;
            }
            let mut run_end = readers_from;
            while run_end < tuple.len() && decode.seq(tuple[run_end]) == seq {
                run_end += 1;
            }
            let writers = &tuple[run..readers_from];
            let readers = &tuple[readers_from..run_end];

            if writers.is_empty() {
                if seq > 0 {
                    for r in readers {
                        anomalies.report(|| {
                            format!(
                                "txn {} read table {table} key {key} version {seq}, \
                                 which no committed transaction installed \
                                 (dirty or aborted read)",
                                id(r)
                            )
                        });
                    }
                }
                // Still pending: they anti-depend on the next installed version.
            } else {
                report_installers(anomalies, writers, table, key, seq, &txn, &id);
                for p in &tuple[prev_writers.clone()] {
                    for w in writers {
                        emit(txn(p), txn(w));
                    }
                }
                for r in &tuple[pending_from..run] {
                    for w in writers {
                        emit(txn(r), txn(w));
                    }
                }
                for w in writers {
                    for r in readers {
                        emit(txn(w), txn(r));
                    }
                }
                prev_writers = run..readers_from;
                pending_from = readers_from;
            }
            run = run_end;
        }
        start = end;
    }
    edges
}

/// Version `seq` must have exactly one installer, and it must not be the
/// loader's version 0. Writers arrive sorted by txn index, so a transaction
/// listed twice (already reported as a duplicate write) is adjacent and
/// counted once here.
fn report_installers<R>(
    anomalies: &mut Anomalies,
    writers: &[R],
    table: u32,
    key: u64,
    seq: u64,
    txn: &impl Fn(&R) -> u32,
    id: &impl Fn(&R) -> u64,
) {
    // Runs once per installed version: stay allocation-free and off the txn
    // table (a cache miss per lookup) unless there is something to report.
    let first = txn(&writers[0]);
    if seq != 0 && writers.iter().all(|w| txn(w) == first) {
        return;
    }
    let mut distinct: Vec<u64> = Vec::new();
    let mut last = NONE;
    for w in writers {
        if txn(w) != last {
            distinct.push(id(w));
            last = txn(w);
        }
    }
    if seq == 0 {
        anomalies.report(|| {
            format!(
                "txn(s) {distinct:?} installed version 0 of table {table} key {key}, \
                 which only the loader installs"
            )
        });
    }
    if distinct.len() > 1 {
        anomalies.report(|| {
            format!(
                "{} committed transactions installed table {table} key {key} \
                 version {seq}: txns {distinct:?} (lost update)",
                distinct.len()
            )
        });
    }
}

/// Groups `from << 32 | to` edges into rows, deduplicating: a transaction
/// reading several keys from one writer yields the same edge once per key.
fn to_csr(mut edges: Vec<u64>, n: usize) -> Graph {
    // Grouping needs only the source bits; rows are small and each is sorted
    // on its own below.
    radix_sort(&mut edges, bits(n as u64), |&e| e >> 32);
    let mut offsets = vec![0usize; n + 1];
    let mut targets: Vec<u32> = Vec::with_capacity(edges.len());
    let mut row_start = 0;
    while row_start < edges.len() {
        let from = (edges[row_start] >> 32) as usize;
        let mut row_end = row_start + 1;
        while row_end < edges.len() && (edges[row_end] >> 32) as usize == from {
            row_end += 1;
        }
        let row = &mut edges[row_start..row_end];
        row.sort_unstable();
        let mut last = u64::MAX;
        for &e in row.iter() {
            if e != last {
                targets.push(e as u32);
                last = e;
            }
        }
        offsets[from + 1] = targets.len();
        row_start = row_end;
    }
    drop(edges);
    // Sources without edges were left at 0; they end where the last row did.
    for t in 0..n {
        offsets[t + 1] = offsets[t + 1].max(offsets[t]);
    }
    targets.shrink_to_fit();
    Graph { offsets, targets }
}

struct Components {
    /// Component number of each transaction.
    component: Vec<u32>,
    cyclic_components: usize,
    /// A transaction in the first component found with more than one member.
    first_cyclic: Option<u32>,
}

/// Pearce's space-efficient variant of Tarjan's algorithm ("A space-efficient
/// algorithm for finding strongly connected components", IPL 2016), with an
/// explicit call stack. One `u32` per transaction instead of Tarjan's three:
/// every edge visit lands on a random transaction, so the smaller the array
/// the more of it stays in cache.
///
/// `rindex[v]` is 0 while `v` is unvisited; while `v` is being searched, its
/// visit index, lowered to the smallest index it reaches; once its component
/// is complete, the component number. Numbers are handed out downwards from
/// `n - 1` and visit indexes are reused as components complete, so a
/// completed number is never below a live index and needs no separate flag.
fn strongly_connected(graph: &Graph) -> Components {
    let n = graph.offsets.len() - 1;
    let mut rindex = vec![0u32; n];
    // Visited transactions whose component is not yet complete.
    let mut stack: Vec<u32> = Vec::new();
    // (transaction, next edge, still a candidate component root).
    let mut calls: Vec<(u32, usize, bool)> = Vec::new();
    let mut index = 1u32;
    let mut next_component = n as u32;
    let mut cyclic_components = 0;
    let mut first_cyclic = None;

    for root in 0..n as u32 {
        if rindex[root as usize] != 0 {
            continue;
        }
        rindex[root as usize] = index;
        index += 1;
        calls.push((root, graph.offsets[root as usize], true));

        while let Some(&mut (v, ref mut edge, ref mut is_root)) = calls.last_mut() {
            let vi = v as usize;
            if *edge < graph.offsets[vi + 1] {
                let w = graph.targets[*edge];
                *edge += 1;
                let seen = rindex[w as usize];
                if seen == 0 {
                    rindex[w as usize] = index;
                    index += 1;
                    calls.push((w, graph.offsets[w as usize], true));
                } else if seen < rindex[vi] {
                    rindex[vi] = seen;
                    *is_root = false;
                }
                continue;
            }
            let is_root = *is_root;
            calls.pop();
            if is_root {
                next_component -= 1;
                index -= 1;
                let mut size = 1usize;
                while let Some(&w) = stack.last() {
                    if rindex[w as usize] < rindex[vi] {
                        break;
                    }
                    stack.pop();
                    rindex[w as usize] = next_component;
                    index -= 1;
                    size += 1;
                }
                rindex[vi] = next_component;
                if size > 1 {
                    cyclic_components += 1;
                    first_cyclic.get_or_insert(v);
                }
            } else {
                stack.push(v);
            }
            if let Some((parent, _, parent_is_root)) = calls.last_mut() {
                let low = rindex[vi];
                if low < rindex[*parent as usize] {
                    rindex[*parent as usize] = low;
                    *parent_is_root = false;
                }
            }
        }
    }
    Components {
        component: rindex,
        cyclic_components,
        first_cyclic,
    }
}

/// A shortest cycle through `start`, found by breadth-first search from it
/// back to it inside its component (every cycle through `start` stays inside,
/// and the search never wanders over the rest of a huge graph).
fn find_cycle(graph: &Graph, component: &[u32], start: u32) -> Vec<u32> {
    let home = component[start as usize];
    let mut parent = vec![NONE; component.len()];
    let mut queue = VecDeque::new();
    queue.push_back(start);
    while let Some(v) = queue.pop_front() {
        for &w in graph.successors(v) {
            if w == start {
                // Walk parents back from v to start, then reverse into edge order.
                let mut cycle = vec![v];
                let mut at = v;
                while at != start {
                    at = parent[at as usize];
                    cycle.push(at);
                }
                cycle.reverse();
                return cycle;
            }
            if component[w as usize] == home && parent[w as usize] == NONE {
                parent[w as usize] = v;
                queue.push_back(w);
            }
        }
    }
    unreachable!("a component with more than one member has a cycle through each member")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::rng::Rng;
    use crate::check::history::Item;
    use std::time::Instant;

    const X: (u32, u64) = (0, 10);
    const Y: (u32, u64) = (0, 20);
    const Z: (u32, u64) = (1, 10);
    /// Multiplies small keys up to near 2^63, beyond what packs into a u64.
    const SPREAD: u64 = 1 << 57;

    fn at(tuple: (u32, u64), seq: u64) -> Item {
        Item {
            table: tuple.0,
            key: tuple.1,
            seq,
        }
    }

    /// Every consecutive pair of the reported cycle (wrapping) must be an
    /// edge, or the cycle is not evidence of anything.
    fn assert_is_cycle(history: &History, cycle: &[u64]) {
        let mut anomalies = Anomalies::default();
        let graph = build_graph(history, &mut anomalies);
        let index = |id: u64| history.txns.iter().position(|t| t.id == id).unwrap() as u32;
        for i in 0..cycle.len() {
            let (from, to) = (index(cycle[i]), index(cycle[(i + 1) % cycle.len()]));
            assert!(
                graph.successors(from).contains(&to),
                "{} -> {} is not an edge",
                cycle[i],
                cycle[(i + 1) % cycle.len()]
            );
        }
    }

    fn sorted(ids: &[u64]) -> Vec<u64> {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids
    }

    #[test]
    fn empty_history_is_serializable() {
        let report = check_serializable(&History::new());
        assert!(report.serializable);
        assert_eq!(report.txn_count, 0);
        assert_eq!(report.edge_count, 0);
        assert!(report.cycle.is_none());
    }

    #[test]
    fn serial_history_passes() {
        let mut h = History::new();
        // T1: rmw x; T2: reads x1, rmw y; T3: reads x1 and y1, blind-writes x.
        h.push(1, 0, &[at(X, 0)], &[at(X, 1)]);
        h.push(2, 0, &[at(X, 1), at(Y, 0)], &[at(Y, 1)]);
        h.push(3, 0, &[at(X, 1), at(Y, 1)], &[at(X, 2)]);
        let report = check_serializable(&h);
        assert!(report.serializable, "{report:?}");
        assert!(report.cycle.is_none());
        assert!(report.anomalies.is_empty());
        assert_eq!(report.txn_count, 3);
        // 1->2 (wr x1), 1->3 (wr x1, ww x), 2->3 (wr y1, rw x1), deduplicated.
        assert_eq!(report.edge_count, 3);
        assert_eq!(report.cyclic_components, 0);
    }

    #[test]
    fn write_skew_is_a_two_cycle() {
        let mut h = History::new();
        // Unrelated serial traffic around it, so extraction must stay in the SCC.
        h.push(7, 0, &[at(Z, 0)], &[at(Z, 1)]);
        h.push(101, 0, &[at(X, 0)], &[at(Y, 1)]);
        h.push(8, 0, &[at(Z, 1)], &[at(Z, 2)]);
        h.push(202, 1, &[at(Y, 0)], &[at(X, 1)]);
        h.push(9, 0, &[at(X, 1), at(Y, 1), at(Z, 2)], &[]);
        let report = check_serializable(&h);
        assert!(!report.serializable);
        assert!(report.anomalies.is_empty(), "{:?}", report.anomalies);
        let cycle = report.cycle.expect("write skew must give a cycle");
        assert_eq!(sorted(&cycle), vec![101, 202]);
        assert_is_cycle(&h, &cycle);
        assert_eq!(report.cyclic_components, 1);
    }

    #[test]
    fn lost_update_is_an_anomaly() {
        let mut h = History::new();
        h.push(11, 0, &[at(X, 0)], &[at(X, 1)]);
        h.push(12, 0, &[at(X, 0)], &[at(X, 1)]);
        let report = check_serializable(&h);
        assert!(!report.serializable);
        assert_eq!(report.anomaly_count, 1);
        let text = &report.anomalies[0];
        assert!(text.contains("version 1") && text.contains("11") && text.contains("12"));
        // Each read x0 and the other installed x1 over it: a cycle as well.
        assert_eq!(sorted(&report.cycle.unwrap()), vec![11, 12]);
    }

    #[test]
    fn read_of_uninstalled_version_is_an_anomaly() {
        let mut h = History::new();
        h.push(1, 0, &[at(X, 0)], &[at(X, 1)]);
        h.push(2, 0, &[at(X, 2)], &[]);
        let report = check_serializable(&h);
        assert!(!report.serializable);
        assert!(report.cycle.is_none());
        assert_eq!(report.anomaly_count, 1);
        assert!(report.anomalies[0].contains("txn 2 read table 0 key 10 version 2"));
    }

    /// Run-time inserts and deletes (`store`, "Run-time inserts and
    /// deletes") need nothing new from the checker: an insert reads the
    /// absent version `v` (0 for a never-used key, which no transaction
    /// installs, like a loaded row) and installs `v + 1`; a delete installs a
    /// tombstone as the next version; a re-insert the one after.
    #[test]
    fn inserts_and_deletes_are_versions_of_their_key() {
        const K: (u32, u64) = (3, 77);
        let mut h = History::new();
        h.push(20, 0, &[at(Y, 0)], &[]); // saw no row K yet, read y
        h.push(21, 0, &[at(K, 0)], &[at(K, 1)]); // insert K
        h.push(22, 0, &[at(K, 1)], &[]); // read the inserted row
        h.push(23, 0, &[at(K, 1)], &[at(K, 2)]); // delete K (tombstone)
        h.push(24, 0, &[at(K, 2)], &[at(K, 3)]); // re-insert K
        let report = check_serializable(&h);
        assert!(report.serializable, "{report:?}");

        // Two committed inserts of one key both install version 1: a
        // duplicate key, reported.
        let mut h = History::new();
        h.push(30, 0, &[at(K, 0)], &[at(K, 1)]);
        h.push(31, 1, &[at(K, 0)], &[at(K, 1)]);
        let report = check_serializable(&h);
        assert!(!report.serializable);
        assert!(report.anomalies[0].contains("version 1"), "{report:?}");

        // A read of a row whose insert never committed (an aborted
        // attempt's version): a dirty read, reported.
        let mut h = History::new();
        h.push(40, 0, &[at(K, 1)], &[]);
        let report = check_serializable(&h);
        assert!(!report.serializable);
        assert!(report.anomalies[0].contains("version 1"), "{report:?}");
    }

    #[test]
    fn double_write_and_version_zero_install_are_anomalies() {
        let mut h = History::new();
        h.push(5, 0, &[], &[at(X, 1), at(X, 2)]);
        h.push(6, 0, &[], &[at(Y, 0)]);
        let report = check_serializable(&h);
        assert!(!report.serializable);
        assert_eq!(report.anomaly_count, 2, "{:?}", report.anomalies);
        assert!(report
            .anomalies
            .iter()
            .any(|a| a.contains("txn 5 wrote table 0 key 10 2 times")));
        assert!(report
            .anomalies
            .iter()
            .any(|a| a.contains("installed version 0")));
    }

    #[test]
    fn anomaly_list_is_capped_but_counted() {
        let mut h = History::new();
        for t in 0..50 {
            h.push(t, 0, &[at(X, 1000 + t)], &[]);
        }
        let report = check_serializable(&h);
        assert_eq!(report.anomaly_count, 50);
        assert_eq!(report.anomalies.len(), MAX_LISTED_ANOMALIES);
    }

    #[test]
    fn three_cycle_is_found_whole() {
        let mut h = History::new();
        // Anti-dependencies only: 1 -> 3 (x), 3 -> 2 (z), 2 -> 1 (y).
        h.push(1, 0, &[at(X, 0)], &[at(Y, 1)]);
        h.push(2, 0, &[at(Y, 0)], &[at(Z, 1)]);
        h.push(3, 0, &[at(Z, 0)], &[at(X, 1)]);
        let report = check_serializable(&h);
        assert!(!report.serializable);
        assert!(report.anomalies.is_empty());
        let cycle = report.cycle.unwrap();
        assert_eq!(sorted(&cycle), vec![1, 2, 3]);
        assert_is_cycle(&h, &cycle);
    }

    #[test]
    fn circular_information_flow_is_found() {
        let mut h = History::new();
        // G1c: each reads what the other wrote (wr edges both ways).
        h.push(1, 0, &[at(Y, 1)], &[at(X, 1)]);
        h.push(2, 0, &[at(X, 1)], &[at(Y, 1)]);
        let report = check_serializable(&h);
        let cycle = report.cycle.unwrap();
        assert_eq!(sorted(&cycle), vec![1, 2]);
        assert_is_cycle(&h, &cycle);
    }

    /// Serial execution over `keys` tuples (key numbers times `key_scale`):
    /// each txn reads, read-modify-writes or blind-writes up to `items`
    /// distinct tuples against the current state.
    fn serial_history(txns: usize, keys: u64, items: usize, seed: u64, key_scale: u64) -> History {
        let mut rng = Rng::new(seed);
        let mut version = vec![0u64; keys as usize];
        let mut chosen = Vec::new();
        let mut recorded = Vec::with_capacity(txns);
        for t in 0..txns {
            chosen.clear();
            while chosen.len() < items {
                let k = rng.below(keys);
                if !chosen.contains(&k) {
                    chosen.push(k);
                }
            }
            let (mut reads, mut writes) = (Vec::new(), Vec::new());
            for &k in &chosen {
                let tuple = ((k % 3) as u32, k * key_scale);
                let v = &mut version[k as usize];
                match rng.below(4) {
                    0 | 1 => reads.push(at(tuple, *v)),
                    2 => {
                        reads.push(at(tuple, *v));
                        *v += 1;
                        writes.push(at(tuple, *v));
                    }
                    _ => {
                        *v += 1;
                        writes.push(at(tuple, *v));
                    }
                }
            }
            recorded.push((1_000_000 + t as u64, reads, writes));
        }
        // Merged worker histories arrive in no particular order.
        for i in (1..recorded.len()).rev() {
            recorded.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let mut h = History::new();
        for (id, reads, writes) in &recorded {
            h.push(*id, 0, reads, writes);
        }
        h
    }

    #[test]
    fn large_random_serial_history_passes() {
        let h = serial_history(200_000, 1000, 10, 42, 1);
        let report = check_serializable(&h);
        assert!(
            report.serializable,
            "{:?} {:?}",
            report.anomalies, report.cycle
        );
        assert_eq!(report.txn_count, 200_000);
        assert!(report.edge_count > 200_000);
    }

    #[test]
    fn injected_skew_in_large_history_is_found() {
        let mut h = serial_history(50_000, 1000, 10, 7, 1);
        // Two txns on fresh keys in write skew, lost among the rest.
        let (a, b) = ((2, 5_000), (2, 5_001));
        h.push(1, 0, &[at(a, 0)], &[at(b, 1)]);
        h.push(2, 0, &[at(b, 0)], &[at(a, 1)]);
        let report = check_serializable(&h);
        assert!(!report.serializable);
        assert_eq!(sorted(&report.cycle.unwrap()), vec![1, 2]);
        assert_eq!(report.cyclic_components, 1);
    }

    #[test]
    fn packing_round_trips_at_the_edges() {
        // Zero-width fields, and fields pushed right up to bit 64.
        let cases = [
            ((0, 0, 0), (0, 0, 0), 1),
            ((3, 7, 0), (3, 7, 0), 1),
            ((0, 0, 0), (0, u64::MAX >> 33, 0), 1 << 31),
            ((5, 1 << 60, 9), (6, (1 << 60) + 1000, 1 << 20), 1 << 20),
        ];
        for (lo, hi, txns) in cases {
            let layout = Packed::fit(lo, hi, txns).expect("fits in 64 bits");
            for (table, key, seq) in [lo, hi] {
                for (read, txn) in [(false, 0), (true, txns as u32 - 1)] {
                    let r = layout.pack(table, key, seq, read, txn);
                    assert_eq!(
                        (
                            layout.table(r),
                            layout.key(r),
                            layout.seq(r),
                            layout.is_read(r),
                            layout.txn(r)
                        ),
                        (table, key, seq, read, txn),
                        "{layout:?}"
                    );
                }
            }
        }
        assert!(Packed::fit((0, 0, 0), (0, u64::MAX, 0), 2).is_none());
    }

    /// Random graphs against brute-force reachability: u and v share a
    /// component iff each reaches the other.
    #[test]
    fn components_match_mutual_reachability() {
        let mut rng = Rng::new(99);
        for round in 0..300 {
            let n = 1 + rng.below(12) as usize;
            let mut edges: Vec<u64> = (0..rng.below(3 * n as u64 + 1))
                .map(|_| rng.below(n as u64) << 32 | rng.below(n as u64))
                .filter(|e| e >> 32 != e & 0xffff_ffff)
                .collect();
            edges.sort_unstable();
            let graph = to_csr(edges.clone(), n);
            assert_eq!(graph.targets.len(), {
                edges.dedup();
                edges.len()
            });
            let mut reach = vec![vec![false; n]; n];
            for (v, row) in reach.iter_mut().enumerate() {
                let mut todo = vec![v as u32];
                while let Some(u) = todo.pop() {
                    for &w in graph.successors(u) {
                        if !row[w as usize] {
                            row[w as usize] = true;
                            todo.push(w);
                        }
                    }
                }
            }
            let scc = strongly_connected(&graph);
            let mut cyclic = std::collections::BTreeSet::new();
            for (u, from_u) in reach.iter().enumerate() {
                for (v, &u_reaches_v) in from_u.iter().enumerate() {
                    let together = u == v || (u_reaches_v && reach[v][u]);
                    assert_eq!(
                        scc.component[u] == scc.component[v],
                        together,
                        "round {round}: {u} {v}"
                    );
                    if u != v && together {
                        cyclic.insert(scc.component[u]);
                    }
                }
            }
            assert_eq!(scc.cyclic_components, cyclic.len(), "round {round}");
            if let Some(start) = scc.first_cyclic {
                let cycle = find_cycle(&graph, &scc.component, start);
                assert!(cycle.len() >= 2);
                for i in 0..cycle.len() {
                    let next = cycle[(i + 1) % cycle.len()];
                    assert!(graph.successors(cycle[i]).contains(&next));
                }
            }
        }
    }

    /// A history no engine should produce: reads of random, possibly stale or
    /// future versions, and blind writes of random versions, so that cycles
    /// and every anomaly kind turn up.
    fn messy_history(txns: u64, keys: u64, seed: u64, key_scale: u64) -> History {
        let mut rng = Rng::new(seed);
        let mut h = History::new();
        for t in 0..txns {
            let (mut reads, mut writes) = (Vec::new(), Vec::new());
            for _ in 0..1 + rng.below(4) {
                let k = rng.below(keys);
                let item = at(((k % 2) as u32, k * key_scale), rng.below(6));
                if rng.below(2) == 0 {
                    reads.push(item);
                } else {
                    writes.push(Item {
                        seq: item.seq + 1,
                        ..item
                    });
                }
            }
            h.push(500 + t, 0, &reads, &writes);
        }
        h
    }

    /// Spreading keys over the whole `u64` range forces the wide records and
    /// comparison sort; the verdict, graph and cycle must not depend on the
    /// layout.
    #[test]
    fn packed_and_wide_records_agree() {
        for seed in 0..40 {
            let narrow = messy_history(60, 8, seed, 1);
            let spread = messy_history(60, 8, seed, SPREAD);
            assert!(packed_accesses(&narrow).is_some());
            assert!(packed_accesses(&spread).is_none());
            let (packed, wide) = (check_serializable(&narrow), check_serializable(&spread));
            assert!(!packed.serializable);
            assert_eq!(packed.edge_count, wide.edge_count, "seed {seed}");
            assert_eq!(packed.cycle, wide.cycle, "seed {seed}");
            assert_eq!(packed.anomaly_count, wide.anomaly_count, "seed {seed}");
            assert_eq!(packed.cyclic_components, wide.cyclic_components);
        }
        let narrow = serial_history(5_000, 50, 5, 11, 1);
        let spread = serial_history(5_000, 50, 5, 11, SPREAD);
        assert!(packed_accesses(&spread).is_none());
        let (packed, wide) = (check_serializable(&narrow), check_serializable(&spread));
        assert!(packed.serializable && wide.serializable);
        assert_eq!(packed.edge_count, wide.edge_count);
    }

    #[test]
    fn wide_records_find_a_cycle() {
        let mut h = History::new();
        // Keys at both ends of the u64 range: their difference cannot pack.
        let big = |k: u64| (0, if k == 1 { 1 } else { u64::MAX });
        h.push(1, 0, &[at(big(1), 0)], &[at(big(1), 1)]);
        h.push(2, 0, &[at(big(1), 1), at(big(2), 0)], &[at(big(2), 1)]);
        h.push(3, 0, &[at(big(2), 0)], &[at(big(1), 2)]);
        assert!(packed_accesses(&h).is_none());
        let report = check_serializable(&h);
        // 3 read big(2) before 2 overwrote it (3 -> 2) and overwrote big(1)
        // after 2 read it (2 -> 3).
        assert_eq!(sorted(&report.cycle.unwrap()), vec![2, 3]);
        assert_is_cycle(&h, &[2, 3]);
    }

    /// The scale the checker is sized for (2M txns x 10 accesses); run with
    /// `cargo test --release --lib check::graph -- --ignored --nocapture`
    /// to see its speed (docs/PERFORMANCE.md).
    #[test]
    #[ignore]
    fn two_million_transactions() {
        let began = Instant::now();
        let h = serial_history(2_000_000, 1_000_000, 10, 3, 1);
        eprintln!("generated in {:?}", began.elapsed());
        let began = Instant::now();
        let report = check_serializable(&h);
        eprintln!(
            "checked {} txns, {} edges in {:?}",
            report.txn_count,
            report.edge_count,
            began.elapsed()
        );
        assert!(report.serializable);
    }
}
