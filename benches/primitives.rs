//! `cargo bench`: the costs the foundation issue names, on the `threads`
//! fabric with no injected latency — coroutine switch, one-sided READ and
//! CAS round trips (raw endpoint and through a coroutine's round), RPC round
//! trip between two worker threads — and YCSB throughput of each protocol ×
//! primitive on 2 nodes × 1 worker × 8 coroutines. Results go to stdout and
//! to `target/bench-primitives.json`. `VERBENA_BENCH_SECONDS` sets the YCSB
//! run length (default 3).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Instant;

use verbena::base::{Primitive, ProtocolKind};
use verbena::config::{Config, LatencyConfig};
use verbena::engine;
use verbena::fabric::threads::ThreadsFabric;
use verbena::fabric::{Batch, Endpoint, Region};
use verbena::runtime::{RpcService, Served, Worker};

type Co<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

struct Echo;
impl RpcService for Echo {
    fn serve(&self, _kind: u16, _payload: &mut Vec<u64>, _now_ns: u64) -> Served {
        Served::Reply
    }
}

fn fabric(nodes: usize) -> ThreadsFabric {
    let regions = (0..nodes).map(|_| Arc::new(Region::new(1024))).collect();
    ThreadsFabric::new(regions, 1, LatencyConfig::default())
}

fn coroutine_switch_ns(switches: u64) -> f64 {
    let fabric = fabric(1);
    let worker = Worker::new(Box::new(fabric.endpoint(0, 0)), 2);
    let finished = AtomicUsize::new(0);
    let each = switches / 2;
    let worker_ref = &worker;
    let mut coroutines: Vec<Co<'_>> = (0..2)
        .map(|_| {
            Box::pin(async move {
                for _ in 0..each {
                    worker_ref.yield_now().await;
                }
            }) as Co<'_>
        })
        .collect();
    let start = Instant::now();
    worker.run(&mut coroutines, &Echo, &finished, 1);
    start.elapsed().as_nanos() as f64 / (2 * each) as f64
}

fn raw_verb_ns(cas: bool, rounds: u64) -> f64 {
    let fabric = fabric(2);
    let mut endpoint = fabric.endpoint(0, 0);
    let mut batch = Batch::default();
    let start = Instant::now();
    for i in 0..rounds {
        batch.clear();
        if cas {
            batch.cas(1, 8, i, i + 1);
        } else {
            batch.read(1, 8, 1);
        }
        let Batch {
            verbs,
            write_data,
            results,
            ..
        } = &mut batch;
        endpoint.post(0, 0, verbs, write_data, results);
    }
    start.elapsed().as_nanos() as f64 / rounds as f64
}

/// A coroutine posting one verb per round and awaiting it.
fn coroutine_verb_ns(cas: bool, rounds: u64) -> f64 {
    let fabric = fabric(2);
    let worker = Worker::new(Box::new(fabric.endpoint(0, 0)), 1);
    let finished = AtomicUsize::new(0);
    let worker_ref = &worker;
    let mut coroutines: Vec<Co<'_>> = vec![Box::pin(async move {
        for i in 0..rounds {
            {
                let mut batch = worker_ref.slot(0).batch.borrow_mut();
                batch.clear();
                if cas {
                    batch.cas(1, 8, i, i + 1);
                } else {
                    batch.read(1, 8, 1);
                }
            }
            worker_ref.submit(0).await.expect("no peer fails here");
        }
    })];
    let start = Instant::now();
    worker.run(&mut coroutines, &Echo, &finished, 1);
    start.elapsed().as_nanos() as f64 / rounds as f64
}

fn rpc_round_trip_ns(rounds: u64) -> f64 {
    let fabric = fabric(2);
    let finished = AtomicUsize::new(0);
    let mut elapsed_ns = 0.0;
    std::thread::scope(|scope| {
        let (fabric_ref, finished_ref) = (&fabric, &finished);
        scope.spawn(move || {
            let worker = Worker::new(Box::new(fabric_ref.endpoint(1, 0)), 1);
            let mut idle: Vec<Co<'_>> = vec![Box::pin(async {})];
            worker.run(&mut idle, &Echo, finished_ref, 2);
        });
        let worker = Worker::new(Box::new(fabric.endpoint(0, 0)), 1);
        let worker_ref = &worker;
        let mut coroutines: Vec<Co<'_>> = vec![Box::pin(async move {
            for _ in 0..rounds {
                {
                    let mut batch = worker_ref.slot(0).batch.borrow_mut();
                    batch.clear();
                    let mut payload = batch.payload();
                    payload.push(1);
                    batch.call(1, 1, payload, false);
                }
                worker_ref.submit(0).await.expect("no peer fails here");
            }
        })];
        let start = Instant::now();
        worker.run(&mut coroutines, &Echo, &finished, 2);
        elapsed_ns = start.elapsed().as_nanos() as f64 / rounds as f64;
    });
    elapsed_ns
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let seconds: f64 = std::env::var("VERBENA_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let mut results = serde_json::Map::new();
    let mut note = |name: &str, value: f64, unit: &str| {
        println!("{name:<44} {value:>14.1} {unit}");
        results.insert(
            name.to_string(),
            serde_json::json!({ "value": value, "unit": unit }),
        );
    };
    note("coroutine_switch", coroutine_switch_ns(4_000_000), "ns");
    note(
        "onesided_read_raw_post",
        raw_verb_ns(false, 4_000_000),
        "ns",
    );
    note("onesided_cas_raw_post", raw_verb_ns(true, 4_000_000), "ns");
    note(
        "onesided_read_round_trip_coroutine",
        coroutine_verb_ns(false, 2_000_000),
        "ns",
    );
    note(
        "onesided_cas_round_trip_coroutine",
        coroutine_verb_ns(true, 2_000_000),
        "ns",
    );
    note("rpc_round_trip", rpc_round_trip_ns(200_000), "ns");
    for protocol in [ProtocolKind::NoWait, ProtocolKind::Occ] {
        for primitive in [Primitive::OneSided, Primitive::Rpc] {
            let config = Config {
                protocol,
                primitive,
                nodes: 2,
                workers: 1,
                coroutines: 8,
                duration_s: seconds,
                warmup_s: 0.5,
                ..Config::default()
            };
            let report = engine::run(&config).expect("bench run").report;
            note(
                &format!("ycsb_{}_{}_txn_per_s", protocol.name(), primitive.name()),
                report.throughput_txn_per_s,
                "txn/s",
            );
            note(
                &format!("ycsb_{}_{}_p50_latency", protocol.name(), primitive.name()),
                report.latency_us.p50,
                "µs",
            );
        }
    }
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-primitives.json");
    if let Ok(text) = serde_json::to_string_pretty(&results) {
        let _ = std::fs::write(&path, text);
    }
}
