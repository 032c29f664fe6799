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
//!
//! The parts, a file each: `records` (the sorted access records, packed or
//! wide), `edges` (the key scan: the edges and the anomalies), and
//! `components` (the CSR graph, its strongly connected components and one
//! cycle through them).

mod components;
mod edges;
mod records;
#[cfg(test)]
mod tests;

use serde::Serialize;

use super::history::History;
use components::{find_cycle, strongly_connected, to_csr, Graph};
use edges::{check_duplicate_writes, collect_edges};
use records::{packed_accesses, wide_accesses, Wide, READ_BIT};

/// How many anomaly descriptions the report lists; all are counted.
const MAX_LISTED_ANOMALIES: usize = 20;

/// No transaction: an unset parent link, or no writer seen yet.
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
