//! The runtime keeps its contract with a backend that completes doorbell
//! batches later (`Posted::Deferred`, as `sim` and `ucx` will): results
//! arrive through a completion message and are scattered into the right
//! coroutine's batch, awaited rounds wait for them, passive rounds do not,
//! and a drained coroutine has nothing in flight.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use verbena::config::LatencyConfig;
use verbena::fabric::threads::{ThreadsEndpoint, ThreadsFabric};
use verbena::fabric::{
    Doorbell, Endpoint, Message, NodeId, Posted, Region, VerbCounters, VerbKind, MSG_COMPLETION,
};
use verbena::runtime::{RpcService, Served, Worker};

/// Executes verbs at once on the `threads` fabric but reports them later:
/// the caller's result words are poisoned, and the real ones come back in a
/// completion message after `lag` polls of `receive`.
struct Deferring {
    inner: ThreadsEndpoint,
    lag: u32,
    queue: VecDeque<(u32, Message)>,
    polls: u32,
}

const POISON: u64 = 0xdead_dead_dead_dead;

impl Endpoint for Deferring {
    fn node(&self) -> NodeId {
        self.inner.node()
    }
    fn worker(&self) -> u16 {
        self.inner.worker()
    }
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
    fn post_doorbell(&mut self, doorbell: Doorbell<'_>, results: &mut [u64]) -> Posted {
        assert!(matches!(
            self.inner.post_doorbell(doorbell, results),
            Posted::At(_)
        ));
        let Doorbell {
            coroutine,
            tag,
            verbs,
            ..
        } = doorbell;
        let mut payload = Vec::new();
        for verb in verbs.iter().filter(|v| v.kind != VerbKind::Write) {
            let at = verb.buf as usize;
            let words = &mut results[at..at + verb.len as usize];
            payload.extend_from_slice(words);
            words.fill(POISON);
        }
        let due = self.polls + self.lag;
        self.queue.push_back((
            due,
            Message {
                src_node: self.node(),
                src_worker: self.worker(),
                dst_node: self.node(),
                dst_worker: self.worker(),
                coroutine,
                call: tag,
                kind: verbs.len() as u16,
                flags: MSG_COMPLETION,
                deliver_at_ns: 0,
                payload,
            },
        ));
        Posted::Deferred
    }
    fn send(&mut self, msg: Message) {
        self.inner.send(msg)
    }
    fn receive(&mut self, out: &mut Vec<Message>) {
        self.polls += 1;
        while self
            .queue
            .front()
            .is_some_and(|(due, _)| *due <= self.polls)
        {
            out.push(self.queue.pop_front().expect("checked").1);
        }
        self.inner.receive(out)
    }
    fn spend_cpu(&mut self, ns: u64) {
        self.inner.spend_cpu(ns)
    }
    fn idle(&mut self, wake_at_ns: Option<u64>) {
        if self.queue.is_empty() {
            self.inner.idle(wake_at_ns)
        }
    }
    fn counters(&self) -> &VerbCounters {
        self.inner.counters()
    }
}

struct NoService;
impl RpcService for NoService {
    fn serve(&self, kind: u16, _: &mut Vec<u64>, _now_ns: u64) -> Served {
        panic!("no RPCs in this test, got {kind}")
    }
}

#[test]
fn deferred_completions_reach_the_right_coroutine() {
    const COROUTINES: u16 = 3;
    const ROUNDS: u64 = 400;
    let regions: Vec<Arc<Region>> = (0..2).map(|_| Arc::new(Region::new(64))).collect();
    for word in 0..8 {
        regions[1].store(16 + word, 1_000 + word);
    }
    let fabric = ThreadsFabric::new(regions, 1, LatencyConfig::default());
    let endpoint = Deferring {
        inner: fabric.endpoint(0, 0),
        lag: 3,
        queue: VecDeque::new(),
        polls: 0,
    };
    let worker = Worker::new(Box::new(endpoint), COROUTINES as usize);
    let finished = AtomicUsize::new(0);
    let worker_ref = &worker;
    let mut coroutines: Vec<Pin<Box<dyn Future<Output = ()> + '_>>> = (0..COROUTINES)
        .map(|co| {
            Box::pin(async move {
                let mut increments = 0;
                let mut seen = 0;
                while increments < ROUNDS {
                    // A CAS increment and a READ of a known pattern, then a
                    // passive WRITE to this coroutine's own word.
                    let (cas, read) = {
                        let mut batch = worker_ref.slot(co).batch.borrow_mut();
                        batch.clear();
                        (batch.cas(1, 0, seen, seen + 1), batch.read(1, 16, 8))
                    };
                    worker_ref.submit(co).await.expect("no peer fails here");
                    let (previous, pattern) = {
                        let batch = worker_ref.slot(co).batch.borrow();
                        (batch.result_word(cas), batch.result(read).to_vec())
                    };
                    assert_ne!(previous, POISON, "the round resumed before its completion");
                    assert_eq!(pattern, (1_000..1_008).collect::<Vec<u64>>());
                    if previous == seen {
                        increments += 1;
                        seen += 1;
                    } else {
                        seen = previous;
                    }
                    {
                        let mut batch = worker_ref.slot(co).batch.borrow_mut();
                        batch.clear();
                        batch.write_word(1, 32 + co as u64, increments);
                    }
                    worker_ref.submit_passive(co);
                }
                worker_ref.drain(co).await;
            }) as Pin<Box<dyn Future<Output = ()> + '_>>
        })
        .collect();
    worker.run(&mut coroutines, &NoService, &finished, 1);
    let region = fabric.region(1);
    assert_eq!(region.load(0), COROUTINES as u64 * ROUNDS);
    for co in 0..COROUTINES as u64 {
        assert_eq!(
            region.load(32 + co),
            ROUNDS,
            "coroutine {co}'s last passive write"
        );
    }
}

/// Node 1's service: `ENTER` waits until the gate is open; `OPEN` opens it.
struct Gate {
    open: std::sync::atomic::AtomicBool,
    offers: std::sync::atomic::AtomicU64,
}

const ENTER: u16 = 1;
const OPEN: u16 = 2;

impl RpcService for Gate {
    fn serve(&self, kind: u16, payload: &mut Vec<u64>, _now_ns: u64) -> Served {
        use std::sync::atomic::Ordering;
        match kind {
            ENTER => {
                self.offers.fetch_add(1, Ordering::Relaxed);
                if !self.open.load(Ordering::SeqCst) {
                    return Served::Wait;
                }
                assert_eq!(payload[..], [42], "a waiting request keeps its payload");
                payload[0] = 43;
            }
            OPEN => {
                self.open.store(true, Ordering::SeqCst);
                payload.clear();
            }
            other => panic!("no handler {other}"),
        }
        Served::Reply
    }
}

#[test]
fn a_waiting_request_is_answered_once_it_can_be_served() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let regions: Vec<Arc<Region>> = (0..2).map(|_| Arc::new(Region::new(8))).collect();
    let fabric = ThreadsFabric::new(regions, 1, LatencyConfig::default());
    let finished = AtomicUsize::new(0);
    let gate = Gate {
        open: AtomicBool::new(false),
        offers: AtomicU64::new(0),
    };
    let opened_at = AtomicU64::new(0);
    std::thread::scope(|scope| {
        let (fabric, finished, gate) = (&fabric, &finished, &gate);
        scope.spawn(move || {
            let worker = Worker::new(Box::new(fabric.endpoint(1, 0)), 1);
            let mut idle: Vec<Pin<Box<dyn Future<Output = ()>>>> = vec![Box::pin(async {})];
            worker.run(&mut idle, gate, finished, 2);
        });
        let worker = Worker::new(Box::new(fabric.endpoint(0, 0)), 2);
        let (worker_ref, opened_at) = (&worker, &opened_at);
        let enter = async move {
            let call = {
                let mut batch = worker_ref.slot(0).batch.borrow_mut();
                batch.clear();
                let mut payload = batch.payload();
                payload.push(42);
                batch.call(1, ENTER, payload, false)
            };
            worker_ref.submit(0).await.expect("no peer fails here");
            let answered_at = worker_ref.now_ns();
            assert_eq!(worker_ref.slot(0).batch.borrow().reply(call), [43]);
            let opened = opened_at.load(Ordering::SeqCst);
            assert!(
                opened > 0 && answered_at >= opened,
                "answered before the gate opened"
            );
        };
        let open = async move {
            worker_ref.sleep(1, 3_000_000).await;
            {
                let mut batch = worker_ref.slot(1).batch.borrow_mut();
                batch.clear();
                let payload = batch.payload();
                batch.call(1, OPEN, payload, false);
            }
            opened_at.store(worker_ref.now_ns(), Ordering::SeqCst);
            worker_ref.submit(1).await.expect("no peer fails here");
        };
        let mut coroutines: Vec<Pin<Box<dyn Future<Output = ()> + '_>>> =
            vec![Box::pin(enter), Box::pin(open)];
        worker.run(&mut coroutines, &NoService, finished, 2);
    });
    let offers = gate.offers.load(Ordering::Relaxed);
    assert!(
        offers >= 2,
        "the waiting request was offered again ({offers} offers)"
    );
    // Offered on the event loop's turns, not in a busy loop: 3 ms of waiting
    // at one offer per turn and at most one turn per 2 µs idle.
    assert!(offers < 100_000, "{offers} offers in 3 ms");
}

/// Node 1's service for the single-thread test: adds the request's words.
struct Adder;
impl RpcService for Adder {
    fn serve(&self, _kind: u16, payload: &mut Vec<u64>, _now_ns: u64) -> Served {
        let sum = payload.iter().sum();
        payload.clear();
        payload.push(sum);
        Served::Reply
    }
}

#[test]
fn one_thread_drives_several_workers_turn_by_turn() {
    // What the `sim` fabric does: no worker thread, no idling — a driver
    // gives each worker a turn in its own order until the work is done.
    let regions: Vec<Arc<Region>> = (0..2).map(|_| Arc::new(Region::new(8))).collect();
    let fabric = ThreadsFabric::new(regions, 1, LatencyConfig::default());
    let client = Worker::new(Box::new(fabric.endpoint(0, 0)), 2);
    let server = Worker::new(Box::new(fabric.endpoint(1, 0)), 1);
    let client_ref = &client;
    let mut client_coroutines: Vec<Pin<Box<dyn Future<Output = ()> + '_>>> = (0..2u16)
        .map(|co| {
            Box::pin(async move {
                for i in 0..50u64 {
                    let (call, faa) = {
                        let mut batch = client_ref.slot(co).batch.borrow_mut();
                        batch.clear();
                        let mut payload = batch.payload();
                        payload.extend_from_slice(&[i, 2 * i, co as u64]);
                        let call = batch.call(1, 1, payload, false);
                        (call, batch.faa(1, co as u64, 1))
                    };
                    client_ref.submit(co).await.expect("no peer fails here");
                    let batch = client_ref.slot(co).batch.borrow();
                    assert_eq!(batch.reply(call), [3 * i + co as u64]);
                    assert_eq!(batch.result_word(faa), i);
                }
            }) as Pin<Box<dyn Future<Output = ()> + '_>>
        })
        .collect();
    let mut server_coroutines: Vec<Pin<Box<dyn Future<Output = ()> + '_>>> =
        vec![Box::pin(async {})];
    let mut turns = 0;
    loop {
        turns += 1;
        assert!(turns < 100_000, "the driver made no progress");
        let client_turn = client.turn(&mut client_coroutines, &NoService);
        let server_turn = server.turn(&mut server_coroutines, &Adder);
        assert!(server_turn.coroutines_done);
        if client_turn.coroutines_done {
            break;
        }
    }
    assert_eq!(fabric.region(1).load(0), 50);
    assert_eq!(fabric.region(1).load(1), 50);
    assert_eq!(server.counters().rpc, 0, "the server only replied");
    assert_eq!(client.counters().rpc, 100);
}
