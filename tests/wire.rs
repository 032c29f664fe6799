//! `wire/txn` means one thing on every fabric: the messages between nodes
//! a run's traffic amounts to, two per one-sided verb to another node
//! (request and response) and RPC traffic coalesced per turn as `ucx`
//! sends it. `sim` models the NIC and the coalescing; `threads` runs verbs
//! on shared memory and delivers messages one by one, and counts what a
//! NIC and `ucx` would send. So the same run shows about the same figure
//! on both.

use std::process::Command;
use std::sync::Arc;

use serde_json::Value;
use verbena::config::LatencyConfig;
use verbena::fabric::threads::ThreadsFabric;
use verbena::fabric::{Endpoint, Region, Verb, VerbKind};

mod common;
use common::request;

/// `verbena run`'s per-transaction counts for a small, lightly contended
/// YCSB run with `primitive` on `fabric`: 3 nodes, so about two thirds of
/// the accesses are remote.
fn per_txn(fabric: &str, primitive: &str) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_verbena"))
        .args(["run", "--fabric", fabric, "--primitive", primitive])
        .args(["--protocol", "no_wait", "--nodes", "3", "--workers", "1"])
        .args([
            "--coroutines",
            "4",
            "--duration",
            "0.05",
            "--warmup",
            "0.02",
        ])
        .args(["--write-ratio", "0.1", "--seed", "3", "--json", "-"])
        .output()
        .expect("verbena runs");
    assert!(output.status.success(), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("a JSON report");
    report["verbs_per_txn"].clone()
}

fn field(per_txn: &Value, name: &str) -> f64 {
    per_txn[name]
        .as_f64()
        .unwrap_or_else(|| panic!("{name}: {per_txn}"))
}

/// One-sided verbs per committed transaction.
fn verbs(per_txn: &Value) -> f64 {
    ["read", "write", "cas", "faa"]
        .iter()
        .map(|name| field(per_txn, name))
        .sum()
}

/// `a` and `b` within a factor of `factor` of each other.
fn agree(a: f64, b: f64, factor: f64) -> bool {
    a > 0.0 && b > 0.0 && a.max(b) <= factor * a.min(b)
}

/// `primitive`'s run on `sim` and on `threads`, their `wire/txn` checked
/// to agree; their per-transaction counts, by fabric.
fn on_sim_and_threads(primitive: &str) -> [(&'static str, Value); 2] {
    let runs = ["sim", "threads"].map(|fabric| (fabric, per_txn(fabric, primitive)));
    let (s, t) = (
        field(&runs[0].1, "wire_messages"),
        field(&runs[1].1, "wire_messages"),
    );
    // Aborted attempts count too, and the fabrics' abort rates differ
    // (threads' lock holders get preempted), hence the tolerance.
    assert!(
        agree(s, t, 1.5),
        "{primitive}: wire/txn sim {s:.2}, threads {t:.2}"
    );
    runs
}

#[test]
fn a_one_sided_run_counts_its_verbs_on_the_wire_on_sim_and_threads() {
    let [sim, threads] = on_sim_and_threads("onesided").map(|(_, per_txn)| {
        // Per verb the count is the workload's share of remote verbs,
        // twice: the same on both fabrics, whatever the abort rate.
        field(&per_txn, "wire_messages") / verbs(&per_txn)
    });
    assert!(
        agree(sim, threads, 1.15),
        "wire messages per verb: sim {sim:.3}, threads {threads:.3}"
    );
    assert!(sim < 2.0, "local verbs send nothing");
}

#[test]
fn an_rpc_run_counts_coalesced_messages_on_sim_and_threads() {
    for (name, per_txn) in on_sim_and_threads("rpc") {
        // Requests and replies, coalesced: fewer than the requests alone.
        let (wire, rpc) = (field(&per_txn, "wire_messages"), field(&per_txn, "rpc"));
        assert!(
            wire < rpc,
            "{name}: {wire:.2} wire messages for {rpc:.2} RPCs"
        );
        assert_eq!(verbs(&per_txn), 0.0, "{name}");
    }
}

/// `threads` delivers each message on its own but counts them as `ucx`
/// sends them (and `sim` models it): one wire message per destination
/// node per turn, cut at 64 KiB; and two per verb to another node.
#[test]
fn threads_counts_the_wire_messages_ucx_would_send() {
    let regions = (0..3).map(|_| Arc::new(Region::new(64))).collect();
    let fabric = ThreadsFabric::new(regions, 1, LatencyConfig::default());
    let mut client = fabric.endpoint(0, 0);
    let mut inbox = Vec::new();
    for call in 0..5u16 {
        client.send(request(0, 1, call, 1 + call as usize));
    }
    client.send(request(0, 2, 5, 1));
    client.send(request(0, 0, 6, 1));
    let counters = *client.counters();
    assert_eq!(counters.rpc, 7, "the logical count stays one per RPC");
    assert_eq!(counters.wire_messages, 2, "one per other node this turn");
    let frames: u64 = (0..5).map(|call| 16 + 8 * (1 + call)).sum::<u64>() + 16 + 8;
    assert_eq!(counters.wire_bytes, 2 * 8 + frames);

    client.receive(&mut inbox);
    // 3 × 3,002 words reach 8,192: the fourth request opens a second.
    for call in 0..5u16 {
        client.send(request(0, 1, call, 3_000));
    }
    assert_eq!(client.counters().wire_messages, 2 + 2);

    client.receive(&mut inbox);
    let before = *client.counters();
    let read = |node| Verb {
        kind: VerbKind::Read,
        node,
        addr: 0,
        len: 2,
        buf: 0,
        compare: 0,
        swap: 0,
    };
    let mut results = [0u64; 4];
    client.post(0, 0, &[read(1), read(1)], &[], &mut results);
    client.post(0, 0, &[read(0)], &[], &mut results);
    let after = client.counters();
    assert_eq!(
        after.wire_messages - before.wire_messages,
        4,
        "a request and a response per remote verb"
    );
    assert_eq!(after.doorbells - before.doorbells, 2);
}
