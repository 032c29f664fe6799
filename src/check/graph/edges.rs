//! The key scan: every dependency edge of the graph, and the anomalies
//! that break serializability whatever the graph.
//!
//! [`collect_edges`] walks each key's versions in the records' order, so a
//! version's writers come before its readers; edges go out as
//! `from << 32 | to` transaction indexes, self edges dropped.
//! [`check_duplicate_writes`] catches what the scan cannot see: a
//! transaction writing one key twice under different versions.

use super::records::Decode;
use super::{Anomalies, NONE};
use crate::check::history::{History, TxnEntry};

/// A transaction writing a key twice leaves two versions of it that no
/// serial order explains as one write each; reported per transaction since
/// the key scan sees the two writes far apart when their versions differ.
pub(super) fn check_duplicate_writes(history: &History, anomalies: &mut Anomalies) {
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

/// Walks every key's versions in order, appending each dependency edge as
/// `from << 32 | to` (txn indexes, self edges excluded) and reporting the
/// per-version anomalies on the way. Appending is sequential; placing each
/// edge straight into its CSR row would cost a cache miss per edge.
pub(super) fn collect_edges<R: Copy, D: Decode<R>>(
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
