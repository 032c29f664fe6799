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
    Endpoint, Message, NodeId, Posted, Region, Verb, VerbCounters, VerbKind, MSG_COMPLETION,
};
use verbena::runtime::{RpcService, Worker};

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
    fn post(
        &mut self,
        coroutine: u16,
        tag: u16,
        verbs: &[Verb],
        write_data: &[u64],
        results: &mut [u64],
    ) -> Posted {
        assert!(matches!(
            self.inner.post(coroutine, tag, verbs, write_data, results),
            Posted::At(_)
        ));
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
    fn serve(&self, kind: u16, _: &mut Vec<u64>) {
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
                    worker_ref.submit(co).await;
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
