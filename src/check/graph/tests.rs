//! Tests of the serializability check: hand-built anomalies and cycles,
//! large random histories, and the packed records against the wide ones.

use super::records::{packed_accesses, Decode, Packed};
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
