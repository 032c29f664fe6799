//! YCSB as RCC runs it (RCC §6.1; Deneva §4.1): one table of fixed-size
//! records, transactions of `ops_per_txn` distinct keys, each a read or a
//! read-modify-write, with a compute phase, over `partitions_per_txn` nodes
//! (always including the coordinator's own).
//!
//! Keys: each node holds `rows_per_node` rows; the global key of row `r` of
//! node `n` is `n · rows_per_node + r`. Within a partition a row is chosen
//! uniformly, by Zipf θ, or by RCC's hot area (`hot_fraction` of the rows get
//! `hot_probability` of the accesses).
//!
//! Writes: each operation is a read-modify-write with `write_ratio` (RCC's
//! definition), or, with `update_txn_ratio` set, Deneva's (Deneva §4.1,
//! Fig. 3): a transaction is an update transaction with that probability —
//! half its operations, rounded down, at random positions, are
//! read-modify-writes (5 reads and 5 updates of 10) — and read-only
//! otherwise.
//!
//! Record: word 0 is a counter every write increments; every other word `i`
//! starts at `key + i` and every write adds 1 to it. Invariant after a run,
//! per row: `counter == seq` and `word[i] == key + i + seq` — so a lost,
//! duplicated or torn write shows — and the sum of counters equals the number
//! of committed writes in the history.

use std::sync::Arc;

use crate::base::rng::Rng;
use crate::check::History;
use crate::config::{KeyDistribution, YcsbConfig, MAX_OPS_PER_TXN};
use crate::fabric::NodeId;
use crate::store::{NodeStore, StoreError, TableId, TableSpec};
use crate::txn::{Protocol, Txn, TxnResult};

use super::zipf::Zipf;
use super::{Declared, InvariantReport, Workload};

pub const TABLE: TableId = 0;

#[derive(Clone, Copy, Debug, Default)]
pub struct YcsbOp {
    pub node: NodeId,
    pub key: u64,
    pub write: bool,
}

#[derive(Clone, Copy, Debug)]
pub struct YcsbRequest {
    pub ops: [YcsbOp; MAX_OPS_PER_TXN as usize],
    pub len: u8,
}

pub struct Ycsb {
    config: YcsbConfig,
    nodes: u32,
    partitions: u32,
    record_words: u32,
    compute_ns: u64,
    zipf: Option<Zipf>,
    hot_rows: u64,
}

impl Ycsb {
    /// `config` must have passed `Config::validate`.
    pub fn new(config: &YcsbConfig, nodes: u32) -> Ycsb {
        let rows = config.rows_per_node;
        Ycsb {
            config: *config,
            nodes,
            partitions: config.partitions_per_txn.unwrap_or(nodes.min(2)),
            record_words: config.record_bytes / 8,
            compute_ns: (config.compute_us * 1000.0) as u64,
            zipf: (config.distribution == KeyDistribution::Zipf)
                .then(|| Zipf::new(rows, config.theta)),
            hot_rows: ((rows as f64 * config.hot_fraction) as u64).clamp(1, rows),
        }
    }

    fn row(&self, rng: &mut Rng) -> u64 {
        let rows = self.config.rows_per_node;
        match self.config.distribution {
            KeyDistribution::Uniform => rng.below(rows),
            KeyDistribution::Zipf => self.zipf.as_ref().expect("built for zipf").sample(rng),
            KeyDistribution::Hot => {
                if self.hot_rows == rows || rng.unit() < self.config.hot_probability {
                    rng.below(self.hot_rows)
                } else {
                    self.hot_rows + rng.below(rows - self.hot_rows)
                }
            }
        }
    }

    fn initial_word(key: u64, word: usize) -> u64 {
        if word == 0 {
            0
        } else {
            key.wrapping_add(word as u64)
        }
    }
}

impl Workload for Ycsb {
    type Request = YcsbRequest;

    fn name(&self) -> &'static str {
        "ycsb"
    }

    fn tables(&self) -> Vec<TableSpec> {
        vec![TableSpec {
            name: "usertable",
            record_words: self.record_words,
            capacity_per_node: self.config.rows_per_node,
        }]
    }

    fn load(&self, store: &NodeStore) -> Result<(), StoreError> {
        let rows = self.config.rows_per_node;
        let mut record = vec![0u64; self.record_words as usize];
        for row in 0..rows {
            let key = store.node as u64 * rows + row;
            for (word, value) in record.iter_mut().enumerate() {
                *value = Ycsb::initial_word(key, word);
            }
            store.insert(TABLE, key, &record)?;
        }
        Ok(())
    }

    fn generate(&self, rng: &mut Rng, node: NodeId) -> YcsbRequest {
        let mut request = YcsbRequest {
            ops: [YcsbOp::default(); MAX_OPS_PER_TXN as usize],
            len: self.config.ops_per_txn as u8,
        };
        // The coordinator's partition first, then distinct others.
        let mut partitions = [0 as NodeId; MAX_OPS_PER_TXN as usize];
        let count = self.partitions.min(self.nodes) as usize;
        partitions[0] = node;
        let mut chosen = 1;
        while chosen < count {
            let candidate = rng.below(self.nodes as u64) as NodeId;
            if !partitions[..chosen].contains(&candidate) {
                partitions[chosen] = candidate;
                chosen += 1;
            }
        }
        let rows = self.config.rows_per_node;
        for i in 0..request.len as usize {
            let partition = partitions[i % count];
            let mut row = self.row(rng);
            let mut tries = 0;
            let taken = |ops: &[YcsbOp], key: u64| ops.iter().any(|op| op.key == key);
            while taken(&request.ops[..i], partition as u64 * rows + row) {
                tries += 1;
                // A tiny hot area can hold fewer rows than a transaction
                // needs: after a few redraws, walk to the next free row.
                row = if tries < 16 {
                    self.row(rng)
                } else {
                    (row + 1) % rows
                };
            }
            request.ops[i] = YcsbOp {
                node: partition,
                key: partition as u64 * rows + row,
                write: self.config.update_txn_ratio.is_none()
                    && rng.unit() < self.config.write_ratio,
            };
        }
        if let Some(ratio) = self.config.update_txn_ratio {
            if rng.unit() < ratio {
                // A partial Fisher–Yates shuffle picks the written half.
                let len = request.len as usize;
                let mut order: [u8; MAX_OPS_PER_TXN as usize] = std::array::from_fn(|i| i as u8);
                for i in 0..len / 2 {
                    let j = i + rng.below((len - i) as u64) as usize;
                    order.swap(i, j);
                    request.ops[order[i] as usize].write = true;
                }
            }
        }
        request
    }

    async fn execute<P: Protocol>(
        &self,
        txn: &mut Txn<'_, '_, P>,
        request: &YcsbRequest,
    ) -> TxnResult<()> {
        for op in &request.ops[..request.len as usize] {
            if op.write {
                let rec = txn.update(TABLE, op.node, op.key).await?;
                for word in txn.get_mut(rec).iter_mut() {
                    *word = word.wrapping_add(1);
                }
            } else {
                txn.read(TABLE, op.node, op.key).await?;
            }
        }
        txn.compute(self.compute_ns);
        Ok(())
    }

    fn max_request_words(&self) -> usize {
        1 + 2 * self.config.ops_per_txn as usize
    }

    fn max_accesses(&self) -> usize {
        self.config.ops_per_txn as usize
    }

    /// `[len, then per op: node << 1 | write, key]`.
    fn encode_request(&self, request: &YcsbRequest, out: &mut Vec<u64>) {
        out.push(request.len as u64);
        for op in &request.ops[..request.len as usize] {
            out.push(((op.node as u64) << 1) | op.write as u64);
            out.push(op.key);
        }
    }

    fn decode_request(&self, words: &[u64]) -> Option<YcsbRequest> {
        let len = *words.first()? as usize;
        if len > MAX_OPS_PER_TXN as usize || words.len() != 1 + 2 * len {
            return None;
        }
        let mut request = YcsbRequest {
            ops: [YcsbOp::default(); MAX_OPS_PER_TXN as usize],
            len: len as u8,
        };
        for (op, pair) in request.ops.iter_mut().zip(words[1..].chunks_exact(2)) {
            *op = YcsbOp {
                node: (pair[0] >> 1) as NodeId,
                key: pair[1],
                write: pair[0] & 1 != 0,
            };
        }
        Some(request)
    }

    /// YCSB's keys are drawn before the transaction runs: the set is
    /// known, no reconnaissance needed.
    fn declare_accesses(&self, request: &YcsbRequest, out: &mut Vec<Declared>) -> bool {
        for op in &request.ops[..request.len as usize] {
            out.push(Declared {
                table: TABLE,
                node: op.node,
                key: op.key,
                write: op.write,
            });
        }
        true
    }

    fn check_invariants(&self, stores: &[Arc<NodeStore>], history: &History) -> InvariantReport {
        let mut report = InvariantReport {
            ok: true,
            details: Vec::new(),
        };
        let mut violations = 0u64;
        let mut counter_sum = 0u64;
        let mut record = Vec::new();
        for store in stores {
            for slot in 0..store.rows(TABLE) {
                store.record(TABLE, slot, &mut record);
                let seq = store.seq(TABLE, slot);
                let key = store
                    .region
                    .load(store.layout.table(TABLE).tuple_addr(slot));
                counter_sum += record[0];
                let bad_word = (0..record.len())
                    .find(|&w| record[w] != Ycsb::initial_word(key, w).wrapping_add(seq));
                if let Some(word) = bad_word {
                    violations += 1;
                    if violations <= 10 {
                        report.details.push(format!(
                            "row key {key} on node {}: word {word} is {} but seq {seq} implies {}",
                            store.node,
                            record[word],
                            Ycsb::initial_word(key, word).wrapping_add(seq)
                        ));
                    }
                }
            }
        }
        let committed_writes: u64 = history.txns.iter().map(|t| t.writes as u64).sum();
        if violations > 0 {
            report.ok = false;
            report
                .details
                .push(format!("{violations} rows disagree with their version"));
        }
        if counter_sum != committed_writes {
            report.ok = false;
            report.details.push(format!(
                "sum of counters {counter_sum} != committed writes {committed_writes}"
            ));
        }
        if report.ok {
            report.details.push(format!(
                "every row's counter and words match its version; sum of counters = {counter_sum} = committed writes"
            ));
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requests(config: YcsbConfig, count: usize) -> Vec<YcsbRequest> {
        let ycsb = Ycsb::new(&config, 2);
        let mut rng = Rng::new(7);
        (0..count).map(|_| ycsb.generate(&mut rng, 0)).collect()
    }

    #[test]
    fn deneva_mix_is_read_only_or_half_updates_in_the_configured_share() {
        let config = YcsbConfig {
            rows_per_node: 1000,
            update_txn_ratio: Some(0.3),
            write_ratio: 1.0,
            ..YcsbConfig::default()
        };
        let all = requests(config, 4000);
        let mut updates = 0;
        for request in &all {
            let writes = request.ops[..request.len as usize]
                .iter()
                .filter(|op| op.write)
                .count();
            assert!(writes == 0 || writes == 5, "{writes} writes of 10");
            updates += (writes == 5) as usize;
        }
        let share = updates as f64 / all.len() as f64;
        assert!((share - 0.3).abs() < 0.03, "update share {share}");
        // The written half is not always the same positions.
        let first_written = all.iter().filter(|r| r.ops[0].write).count();
        assert!(first_written > 0 && first_written < updates);
    }

    #[test]
    fn without_the_mix_each_operation_writes_with_write_ratio() {
        let config = YcsbConfig {
            rows_per_node: 1000,
            write_ratio: 0.25,
            ..YcsbConfig::default()
        };
        let all = requests(config, 2000);
        let writes: usize = all
            .iter()
            .map(|r| r.ops[..r.len as usize].iter().filter(|op| op.write).count())
            .sum();
        let share = writes as f64 / (all.len() * 10) as f64;
        assert!((share - 0.25).abs() < 0.02, "write share {share}");
    }
}
