//! `wire/txn` means one thing on every fabric: the messages between nodes
//! a run's traffic amounts to, two per one-sided verb to another node
//! (request and response) and RPC traffic coalesced per turn as `ucx`
//! sends it. `sim` models the NIC and the coalescing; `threads` runs verbs
//! on shared memory and delivers messages one by one, and counts what a
//! NIC and `ucx` would send. So the same run shows about the same figure
//! on both.

use verbena::base::{Primitive, ProtocolKind};
use verbena::config::{Config, FabricKind};
use verbena::engine::{self, Report};

/// A small, lightly contended YCSB run on `fabric`: 3 nodes, so about two
/// thirds of the accesses are remote.
fn config(fabric: FabricKind, primitive: Primitive) -> Config {
    let mut config = Config {
        fabric,
        protocol: ProtocolKind::NoWait,
        primitive,
        nodes: 3,
        workers: 1,
        coroutines: 4,
        duration_s: 0.05,
        warmup_s: 0.02,
        seed: 3,
        ..Config::default()
    };
    config.ycsb.write_ratio = 0.1;
    config
}

fn run(fabric: FabricKind, primitive: Primitive) -> Report {
    engine::run(&config(fabric, primitive)).expect("run").report
}

/// One-sided verbs per committed transaction.
fn verbs_per_txn(report: &Report) -> f64 {
    let v = &report.verbs_per_txn;
    v.read + v.write + v.cas + v.faa
}

/// `a` and `b` within a factor of `factor` of each other.
fn agree(a: f64, b: f64, factor: f64) -> bool {
    a > 0.0 && b > 0.0 && a.max(b) <= factor * a.min(b)
}

#[test]
fn a_one_sided_run_counts_its_verbs_on_the_wire_on_sim_and_threads() {
    let sim = run(FabricKind::Sim, Primitive::OneSided);
    let threads = run(FabricKind::Threads, Primitive::OneSided);
    let (s, t) = (&sim.verbs_per_txn, &threads.verbs_per_txn);
    assert!(s.wire_messages > 0.0 && t.wire_messages > 0.0);
    // Aborted attempts' verbs count too, and the fabrics' abort rates
    // differ (threads' lock holders get preempted), hence the tolerance.
    assert!(
        agree(s.wire_messages, t.wire_messages, 1.5),
        "wire/txn: sim {:.2}, threads {:.2}",
        s.wire_messages,
        t.wire_messages
    );
    // Per verb the count is the workload's share of remote verbs, twice:
    // the same on both fabrics, whatever the abort rate.
    let (sim_per_verb, threads_per_verb) = (
        s.wire_messages / verbs_per_txn(&sim),
        t.wire_messages / verbs_per_txn(&threads),
    );
    assert!(
        agree(sim_per_verb, threads_per_verb, 1.15),
        "wire messages per verb: sim {sim_per_verb:.3}, threads {threads_per_verb:.3}"
    );
    assert!(sim_per_verb < 2.0, "local verbs send nothing");
}

#[test]
fn an_rpc_run_counts_coalesced_messages_on_sim_and_threads() {
    let sim = run(FabricKind::Sim, Primitive::Rpc);
    let threads = run(FabricKind::Threads, Primitive::Rpc);
    let (s, t) = (&sim.verbs_per_txn, &threads.verbs_per_txn);
    assert!(
        agree(s.wire_messages, t.wire_messages, 1.5),
        "wire/txn: sim {:.2}, threads {:.2}",
        s.wire_messages,
        t.wire_messages
    );
    for (name, v) in [("sim", s), ("threads", t)] {
        // Requests and replies, coalesced: fewer than the requests alone.
        assert!(
            v.wire_messages < v.rpc,
            "{name}: {:.2} wire messages for {:.2} RPCs",
            v.wire_messages,
            v.rpc
        );
        assert_eq!(v.read + v.write + v.cas + v.faa, 0.0, "{name}");
    }
}
