//! The `threads` fabric keeps the RC queue-pair semantics of ARCHITECTURE.md
//! under real thread contention: CAS/FAA atomicity, FIFO per (worker, node),
//! passive ACK, torn multi-word READs, injected latency, verb counting, and
//! index probes by one-sided READs.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use verbena::config::LatencyConfig;
use verbena::fabric::threads::ThreadsFabric;
use verbena::fabric::{Batch, Endpoint, Posted, Region, Verb, VerbKind};
use verbena::runtime::{RpcService, Served, Worker};
use verbena::store::index::{IndexLayout, BUCKET_WORDS};
use verbena::store::{NodeStore, StoreLayout, TableSpec};

fn fabric(nodes: usize, words: usize, workers: u16, latency: LatencyConfig) -> ThreadsFabric {
    let regions = (0..nodes).map(|_| Arc::new(Region::new(words))).collect();
    ThreadsFabric::new(regions, workers, latency)
}

/// Posts `batch`'s verbs on `endpoint` as one doorbell batch.
fn post(endpoint: &mut dyn Endpoint, batch: &mut Batch) -> u64 {
    let Batch {
        verbs,
        write_data,
        results,
        ..
    } = batch;
    match endpoint.post(0, 0, verbs, write_data, results) {
        Posted::At(at) => at,
        Posted::Deferred => panic!("threads completes every batch at once"),
    }
}

#[test]
fn cas_and_faa_are_atomic_across_threads() {
    const THREADS: u16 = 4;
    const INCREMENTS: u64 = 20_000;
    let fabric = fabric(2, 8, THREADS, LatencyConfig::default());
    std::thread::scope(|scope| {
        for worker in 0..THREADS {
            let fabric = &fabric;
            scope.spawn(move || {
                let mut endpoint = fabric.endpoint(0, worker);
                let mut batch = Batch::default();
                for _ in 0..INCREMENTS {
                    // CAS-increment word 0 of node 1 until it succeeds.
                    let mut seen = 0;
                    loop {
                        batch.clear();
                        let cas = batch.cas(1, 0, seen, seen + 1);
                        post(&mut endpoint, &mut batch);
                        let previous = batch.result_word(cas);
                        if previous == seen {
                            break;
                        }
                        seen = previous;
                    }
                    batch.clear();
                    batch.faa(1, 1, 1);
                    post(&mut endpoint, &mut batch);
                }
            });
        }
    });
    let region = fabric.region(1);
    assert_eq!(
        region.load(0),
        THREADS as u64 * INCREMENTS,
        "a CAS increment was lost"
    );
    assert_eq!(
        region.load(1),
        THREADS as u64 * INCREMENTS,
        "an FAA increment was lost"
    );
}

#[test]
fn verbs_from_one_worker_take_effect_in_issue_order() {
    // The writer posts WRITE(data = i) then WRITE(flag = i) in one doorbell
    // batch; a reader that sees flag = f must then see data >= f.
    const ROUNDS: u64 = 200_000;
    let fabric = fabric(2, 16, 2, LatencyConfig::default());
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (fabric_ref, done_ref) = (&fabric, &done);
        scope.spawn(move || {
            let mut endpoint = fabric_ref.endpoint(0, 0);
            let mut batch = Batch::default();
            for i in 1..=ROUNDS {
                batch.clear();
                batch.write_word(1, 0, i);
                batch.write_word(1, 8, i);
                post(&mut endpoint, &mut batch);
            }
            done_ref.store(true, Ordering::SeqCst);
        });
        scope.spawn(move || {
            let mut endpoint = fabric_ref.endpoint(0, 1);
            let mut batch = Batch::default();
            let mut observed = 0;
            while !done_ref.load(Ordering::SeqCst) || observed < ROUNDS {
                batch.clear();
                let flag = batch.read(1, 8, 1);
                let data = batch.read(1, 0, 1);
                post(&mut endpoint, &mut batch);
                let (flag, data) = (batch.result_word(flag), batch.result_word(data));
                assert!(
                    data >= flag,
                    "saw flag {flag} before its data (data {data})"
                );
                assert!(
                    flag >= observed,
                    "flag went backwards: {observed} then {flag}"
                );
                observed = flag;
            }
        });
    });
}

#[test]
fn a_multi_word_read_can_be_torn_by_a_concurrent_write() {
    const WORDS: usize = 64;
    let fabric = fabric(2, WORDS, 2, LatencyConfig::default());
    let stop = AtomicBool::new(false);
    let torn_after = AtomicU64::new(0);
    std::thread::scope(|scope| {
        let (fabric_ref, stop_ref) = (&fabric, &stop);
        scope.spawn(move || {
            let mut endpoint = fabric_ref.endpoint(0, 0);
            let mut batch = Batch::default();
            let mut value = 0u64;
            while !stop_ref.load(Ordering::Relaxed) {
                value += 1;
                batch.clear();
                batch.write(1, 0, &[value; WORDS]);
                post(&mut endpoint, &mut batch);
            }
        });
        let mut endpoint = fabric.endpoint(0, 1);
        let mut batch = Batch::default();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut reads = 0u64;
        while Instant::now() < deadline {
            reads += 1;
            batch.clear();
            let read = batch.read(1, 0, WORDS as u32);
            post(&mut endpoint, &mut batch);
            let words = batch.result(read);
            if words.iter().any(|&w| w != words[0]) {
                torn_after.store(reads, Ordering::SeqCst);
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(
        torn_after.load(Ordering::SeqCst) > 0,
        "no torn READ observed in 20 s of racing a 64-word WRITE"
    );
}

#[test]
fn injected_latency_delays_completion_and_delivery_of_remote_verbs_only() {
    let latency = LatencyConfig {
        onesided_ns: 300_000,
        atomic_ns: 500_000,
        rpc_ns: 400_000,
    };
    let fabric = fabric(2, 8, 1, latency);
    let mut endpoint = fabric.endpoint(0, 0);
    let mut batch = Batch::default();
    batch.read(1, 0, 1);
    let before = endpoint.now_ns();
    let done = post(&mut endpoint, &mut batch);
    assert!(done >= before + 300_000, "READ completes one RTT later");
    batch.clear();
    batch.read(1, 0, 1);
    batch.cas(1, 1, 0, 1);
    let before = endpoint.now_ns();
    let done = post(&mut endpoint, &mut batch);
    assert!(
        done >= before + 500_000,
        "a batch completes with its slowest verb"
    );
    batch.clear();
    batch.read(0, 0, 1);
    assert_eq!(
        post(&mut endpoint, &mut batch),
        0,
        "local verbs take no injected latency"
    );
    let counters = *endpoint.counters();
    assert_eq!((counters.read, counters.cas, counters.doorbells), (3, 1, 3));
    assert_eq!(counters.read_bytes, 24);
}

/// Node 1's service: `SET(v)` stores v, `GET` returns it.
struct Register(AtomicU64);

const SET: u16 = 1;
const GET: u16 = 2;

impl RpcService for Register {
    fn serve(&self, kind: u16, payload: &mut Vec<u64>, _now_ns: u64) -> Served {
        match kind {
            SET => {
                self.0.store(payload[0], Ordering::SeqCst);
                payload.clear();
            }
            GET => {
                payload.clear();
                payload.push(self.0.load(Ordering::SeqCst));
            }
            other => panic!("no handler {other}"),
        }
        Served::Reply
    }
}

/// A passive (unawaited) RPC takes effect before a later awaited one from
/// the same worker (FIFO + passive ACK), with and without injected latency.
fn passive_rpc_then_read_sees_the_write(latency: LatencyConfig) {
    const ROUNDS: u64 = 300;
    let fabric = fabric(2, 8, 1, latency);
    let finished = AtomicUsize::new(0);
    let register = Register(AtomicU64::new(0));
    std::thread::scope(|scope| {
        let (fabric, finished, register) = (&fabric, &finished, &register);
        scope.spawn(move || {
            let worker = Worker::new(Box::new(fabric.endpoint(1, 0)), 1);
            let mut idle: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>> =
                vec![Box::pin(async {})];
            worker.run(&mut idle, register, finished, 2);
        });
        let worker = Worker::new(Box::new(fabric.endpoint(0, 0)), 1);
        let client = async {
            for i in 1..=ROUNDS {
                {
                    let mut batch = worker.slot(0).batch.borrow_mut();
                    batch.clear();
                    let mut payload = batch.payload();
                    payload.push(i);
                    batch.call(1, SET, payload, true);
                }
                worker.submit_passive(0);
                let call = {
                    let mut batch = worker.slot(0).batch.borrow_mut();
                    batch.clear();
                    let payload = batch.payload();
                    batch.call(1, GET, payload, false)
                };
                worker.submit(0).await.expect("no peer fails here");
                let seen = worker.slot(0).batch.borrow().reply(call)[0];
                assert_eq!(seen, i, "the read overtook the passive write");
            }
            worker.drain(0).await;
        };
        let mut coroutines: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>>> =
            vec![Box::pin(client)];
        struct NoService;
        impl RpcService for NoService {
            fn serve(&self, kind: u16, _: &mut Vec<u64>, _now_ns: u64) -> Served {
                panic!("node 0 serves nothing, got {kind}")
            }
        }
        worker.run(&mut coroutines, &NoService, finished, 2);
        let counters = worker.counters();
        assert_eq!(counters.rpc, 2 * ROUNDS);
    });
    assert_eq!(register.0.load(Ordering::SeqCst), ROUNDS);
}

#[test]
fn passive_rpcs_stay_in_order_with_later_calls() {
    passive_rpc_then_read_sees_the_write(LatencyConfig::default());
}

#[test]
fn passive_rpcs_stay_in_order_under_injected_latency() {
    passive_rpc_then_read_sees_the_write(LatencyConfig {
        onesided_ns: 0,
        atomic_ns: 0,
        rpc_ns: 20_000,
    });
}

#[test]
fn a_remote_worker_finds_keys_with_one_round_of_index_reads() {
    let layout = Arc::new(StoreLayout::new(
        &[TableSpec {
            name: "t",
            record_words: 2,
            capacity_per_node: 5_000,
        }],
        |_| 1,
    ));
    let store = NodeStore::new(1, layout.clone());
    for key in 0..5_000u64 {
        store.insert(0, key * 3 + 11, &[key, key]).unwrap();
    }
    let empty = Arc::new(Region::new(layout.region_words as usize));
    let fabric = ThreadsFabric::new(
        vec![empty, store.region.clone()],
        1,
        LatencyConfig::default(),
    );
    let mut endpoint = fabric.endpoint(0, 0);
    let table = layout.table(0);
    let mut batch = Batch::default();
    for key in (0..5_000u64).map(|k| k * 3 + 11).chain([1, 2, 4]) {
        batch.clear();
        let reads = table
            .index
            .candidates(key)
            .map(|bucket| batch.read(1, bucket, BUCKET_WORDS as u32));
        let doorbells_before = endpoint.counters().doorbells;
        post(&mut endpoint, &mut batch);
        assert_eq!(
            endpoint.counters().doorbells,
            doorbells_before + 1,
            "one round trip"
        );
        let slot = reads
            .iter()
            .find_map(|&id| IndexLayout::find_in_bucket(key, batch.result(id)));
        assert_eq!(slot, store.lookup(0, key), "key {key}");
        if let Some(slot) = slot {
            // The tuple it points at carries the key (what a READ checks).
            let tuple = table.tuple_addr(slot);
            assert_eq!(store.region.load(tuple), key);
        }
    }
}

#[test]
fn verb_structs_describe_what_was_queued() {
    let mut batch = Batch::default();
    let read = batch.read(3, 100, 4);
    let cas = batch.cas(3, 7, 1, 2);
    batch.write(3, 50, &[9, 9]);
    let verbs: Vec<Verb> = batch.verbs.clone();
    assert_eq!(verbs.len(), 3);
    assert!(matches!(verbs[0].kind, VerbKind::Read));
    assert_eq!((verbs[1].compare, verbs[1].swap), (1, 2));
    assert_eq!(batch.result(read).len(), 4);
    assert_eq!(batch.result(cas).len(), 1);
}

#[test]
fn the_write_back_order_makes_every_torn_read_detectable() {
    // One writer installs versions with the RPC write-back handler (the
    // order every write-back keeps); a reader READs the whole tuple word by
    // word. Whenever it sees `seq == seq_end`, the record must be exactly
    // that version; tears (seq != seq_end) must also occur, or the race was
    // never exercised.
    use verbena::txn::kit::{lock_addr, serve_write_back};
    const RECORD: u32 = 24;
    let layout = Arc::new(StoreLayout::new(
        &[TableSpec {
            name: "t",
            record_words: RECORD,
            capacity_per_node: 1,
        }],
        |_| 1,
    ));
    let store = NodeStore::new(0, layout.clone());
    let slot = store.insert(0, 5, &[0; RECORD as usize]).unwrap();
    let table = layout.table(0);
    let stop = AtomicBool::new(false);
    let mut consistent = 0u64;
    let mut torn = 0u64;
    std::thread::scope(|scope| {
        let (store, stop) = (&store, &stop);
        scope.spawn(move || {
            let owner = 7;
            let mut payload = Vec::new();
            let mut version = 0u64;
            while !stop.load(Ordering::Relaxed) {
                version += 1;
                assert_eq!(store.region.cas(lock_addr(table, slot), 0, owner), 0);
                payload.clear();
                payload.extend_from_slice(&[owner, 0, slot, version]);
                payload.extend(std::iter::repeat_n(version, RECORD as usize));
                serve_write_back(store, &mut payload);
            }
        });
        // Stops the writer even when an assertion below fails.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop_writer = StopOnDrop(stop);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut tuple = vec![0u64; table.tuple_words as usize];
        while Instant::now() < deadline && (torn < 100 || consistent < 1000) {
            store.region.read(table.tuple_addr(slot), &mut tuple);
            let seq = tuple[1];
            let seq_end = tuple[table.seq_end_offset() as usize];
            let record = &tuple[table.record_offset() as usize..][..RECORD as usize];
            if seq == seq_end {
                assert!(
                    record.iter().all(|&w| w == seq),
                    "seq == seq_end == {seq} but the record is {record:?}"
                );
                consistent += 1;
            } else {
                torn += 1;
            }
        }
    });
    assert!(
        torn >= 100,
        "only {torn} torn READs seen: the race was not exercised"
    );
}
