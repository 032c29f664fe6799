//! `wire/txn` means one thing on every fabric: the messages between nodes
//! a run's traffic amounts to, two per one-sided verb to another node
//! (request and response) and RPC traffic coalesced per turn as `ucx`
//! sends it. `sim` models the NIC and the coalescing; `threads` runs verbs
//! on shared memory and delivers messages one by one, and counts what a
//! NIC and `ucx` would send. So the same run shows about the same figure
//! on both.

use std::sync::Arc;

use verbena::base::{Primitive, ProtocolKind};
use verbena::config::{Config, FabricKind, LatencyConfig};
use verbena::engine::{self, Report};
use verbena::fabric::threads::ThreadsFabric;
use verbena::fabric::{Endpoint, Message, Region, Verb, VerbKind};

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

fn request(to: u16, call: u16, words: usize) -> Message {
    Message {
        src_node: 0,
        src_worker: 0,
        dst_node: to,
        dst_worker: 0,
        coroutine: 0,
        call,
        kind: 1,
        flags: 0,
        deliver_at_ns: 0,
        payload: vec![0; words],
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
        client.send(request(1, call, 1 + call as usize));
    }
    client.send(request(2, 5, 1));
    client.send(request(0, 6, 1));
    let counters = *client.counters();
    assert_eq!(counters.rpc, 7, "the logical count stays one per RPC");
    assert_eq!(counters.wire_messages, 2, "one per other node this turn");
    let frames: u64 = (0..5).map(|call| 16 + 8 * (1 + call)).sum::<u64>() + 16 + 8;
    assert_eq!(counters.wire_bytes, 2 * 8 + frames);

    client.receive(&mut inbox);
    // 3 × 3,002 words reach 8,192: the fourth request opens a second.
    for call in 0..5u16 {
        client.send(request(1, call, 3_000));
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
