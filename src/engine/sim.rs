//! Running a cluster on the `sim` fabric: every worker of every node on
//! this thread, turn by turn in the sim's processing order (see `fabric::sim`).
//!
//! The same node program (`engine::driver`) as on `threads`; only the
//! backend differs: instead of one OS thread per worker looping over
//! `Worker::turn`, one loop asks the simulator which worker is due next and
//! runs one turn of it. The gap between a worker's idle turn and its next
//! one is its idle time. The history is always recorded, so every sim
//! report carries its hash; without the checker it is recorded packed
//! (`History::hash_only`), which hashes the same.
//!
//! A run ends when every worker's coroutines have finished; a run whose
//! coroutines wait for what never comes (a crashed node that no detector
//! declares, traffic the transport gave up on) ends at a virtual deadline
//! instead, a virtual second or the run's length past its end (beyond the
//! transport's whole retry budget on RDMA, `fabric::sim`'s transport), and
//! counts the workers that were still waiting (`stuck_workers`); the
//! driver then fails the run with that as the reason.

use std::sync::Arc;
use std::time::Instant;

use super::driver::BackendRun;
use super::program::{Cluster, Coroutines, NodeProgram, RunClock, WorkerStart};
use super::report::SimSummary;
use crate::check::History;
use crate::config::Config;
use crate::fabric::sim::{SimFabric, WordHasher};
use crate::fabric::NodeId;
use crate::runtime::{RpcService, Turn, Worker};
use crate::store::NodeStore;

/// Virtual time of the first turn, ns.
pub(crate) const START_NS: u64 = 1_000;

/// What the driver saw, for the report.
pub(crate) struct SimRun {
    /// Virtual time from the first turn to the last.
    pub simulated_ns: u64,
    pub wall_s: f64,
    /// Events the simulator processed, and messages it lost.
    pub events: u64,
    pub lost: u64,
    /// Workers still waiting at the virtual deadline.
    pub stuck_workers: usize,
}

impl SimRun {
    pub(crate) fn summary(&self, history: &History, stores: &[Arc<NodeStore>]) -> SimSummary {
        let simulated_s = self.simulated_ns as f64 / 1e9;
        SimSummary {
            simulated_s,
            wall_s: self.wall_s,
            simulated_s_per_wall_s: simulated_s / self.wall_s.max(1e-9),
            events: self.events,
            lost_messages: self.lost,
            stuck_workers: self.stuck_workers,
            history_hash: format!("{:016x}", history_hash(history)),
            memory_hash: format!("{:016x}", memory_hash(stores)),
        }
    }
}

/// Hash of the committed history, in its (deterministic) recording order;
/// the same for its flat and its hash-only form.
pub fn history_hash(history: &History) -> u64 {
    let mut hasher = WordHasher::default();
    history.visit(|txn, items| {
        hasher.word(txn.id);
        hasher.word(txn.node as u64);
        hasher.word(((txn.reads as u64) << 32) | txn.writes as u64);
        // Workload type and note, when set (YCSB's hashes stay as they were).
        if txn.kind != 0 || txn.note != 0 {
            hasher.word(txn.kind as u64);
            hasher.word(txn.note as u64);
        }
        for item in items {
            hasher.word(item.table as u64);
            hasher.word(item.key);
            hasher.word(item.seq);
        }
    });
    hasher.finish()
}

/// Hash of the tables' contents: every row's key, version and record on
/// every node, in slot order — the database state, without protocol
/// headers, buffers or indexes.
pub fn tables_hash(stores: &[Arc<NodeStore>]) -> u64 {
    let mut hasher = WordHasher::default();
    let mut record = Vec::new();
    for store in stores {
        for table in &store.layout.tables {
            for slot in 0..store.rows(table.id) {
                hasher.word(store.region.load(table.tuple_addr(slot)));
                hasher.word(store.seq(table.id, slot));
                store.record(table.id, slot, &mut record);
                for &word in &record {
                    hasher.word(word);
                }
            }
        }
    }
    hasher.finish()
}

/// Hash of every word of every node's region.
pub fn memory_hash(stores: &[Arc<NodeStore>]) -> u64 {
    let mut hasher = WordHasher::default();
    for store in stores {
        for word in 0..store.region.len_words() {
            hasher.word(store.region.load(word));
        }
    }
    hasher.finish()
}

/// The `sim` backend: every worker of every node on this thread, turn by
/// turn in the sim's processing order, from [`START_NS`].
pub(crate) fn run_sim<G: NodeProgram>(
    config: &Config,
    program: &G,
    cluster: &Cluster,
) -> BackendRun<G::Extra> {
    let wall = Instant::now();
    let workers_per_node = config.workers as u16;
    let fabric = SimFabric::new(
        cluster.stores.iter().map(|s| s.region.clone()).collect(),
        workers_per_node,
        &config.profile,
        &config.sim,
        config.seed,
    );
    let total = config.total_workers() as usize;
    let node_of = |index: usize| (index / workers_per_node as usize) as NodeId;
    let clock = RunClock::starting_at(config, START_NS);
    let faults = cluster.attached_faults();
    if let Some(faults) = faults {
        faults
            .crashes
            .inject_all(START_NS, |node, at_ns| fabric.crash_node(node, at_ns));
        // A pause is the simulator's own fault: the node stops answering
        // for a while and comes back (its memory kept).
        for fault in &config.faults {
            if let crate::config::faults::RunFault::Pause { node, at_s, for_s } = *fault {
                let at_ns = START_NS + (at_s * 1e9) as u64;
                fabric.pause_node(node as NodeId, at_ns, (for_s * 1e9) as u64);
            }
        }
    }
    let workers: Vec<Worker> = (0..total)
        .map(|index| {
            let worker_index = (index % workers_per_node as usize) as u16;
            let endpoint = fabric.endpoint(node_of(index), worker_index);
            let worker = Worker::new(Box::new(endpoint), program.slots(worker_index));
            match faults {
                Some(faults) => faults.attach_in_process(
                    worker,
                    &cluster.layout,
                    config,
                    program.give_up_ns(clock),
                ),
                None => worker,
            }
        })
        .collect();
    let start = WorkerStart {
        workers: &workers,
        // Flat for the checker; otherwise only the hash needs it, packed.
        histories: (0..total)
            .map(|_| {
                if config.check {
                    History::new()
                } else {
                    History::hash_only()
                }
            })
            .collect(),
        clock,
        // Always: every sim report carries the history's hash.
        record_history: true,
    };
    let mut driven = (0, 0);
    let results = program.run_workers(cluster, start, &mut |coroutines, services| {
        driven = drive(&fabric, &workers, coroutines, services, clock.end_ns);
    });
    let (simulated_ns, done_count) = driven;
    let abandoned_rounds = workers.iter().map(|w| w.abandoned_rounds()).sum();
    let sim = SimRun {
        simulated_ns,
        wall_s: wall.elapsed().as_secs_f64(),
        events: fabric.events_processed(),
        lost: fabric.lost_count(),
        stuck_workers: total - done_count,
    };
    BackendRun {
        results,
        start_ns: START_NS,
        abandoned_rounds,
        stores: None,
        detections: None,
        sim: Some(sim),
    }
}

/// Runs `workers` turn by turn in the sim's processing order until every one's
/// coroutines have finished, or past a deadline after `end_ns` (whatever
/// still waits then waits for what will not come). Returns the simulated
/// time and how many workers finished. `services[i]` serves worker `i`.
pub(crate) fn drive(
    fabric: &SimFabric,
    workers: &[Worker],
    coroutines: &mut [Coroutines<'_>],
    services: &[&dyn RpcService],
    end_ns: u64,
) -> (u64, usize) {
    let total = workers.len();
    for index in 0..total {
        fabric.wake(index, START_NS);
    }
    let deadline_ns = end_ns + (end_ns - START_NS).max(1_000_000_000);
    let mut done = vec![false; total];
    let mut done_count = 0;
    // A crashed node's workers count as done once it crashed (in crash
    // order): they will never run again.
    let workers_per_node = total / fabric.nodes().max(1);
    let mut crashes: Vec<(u64, usize)> = (0..fabric.nodes())
        .map(|node| (fabric.crash_at_ns(node as NodeId), node))
        .filter(|&(at, _)| at != u64::MAX)
        .collect();
    crashes.sort_unstable();
    let mut next_crash = 0;
    let mut idle_since: Vec<Option<Turn>> = vec![None; total];
    while done_count < total {
        let Some(index) = fabric.next_run() else {
            break;
        };
        if fabric.frontier_ns() > deadline_ns {
            break;
        }
        while next_crash < crashes.len() && crashes[next_crash].0 <= fabric.frontier_ns() {
            let node = crashes[next_crash].1;
            for finished in &mut done[node * workers_per_node..(node + 1) * workers_per_node] {
                if !*finished {
                    *finished = true;
                    done_count += 1;
                }
            }
            next_crash += 1;
        }

        let worker = &workers[index];
        if let Some(turn) = idle_since[index].take() {
            worker.idle(&turn);
        }
        let turn = worker.turn(&mut coroutines[index], services[index]);
        if turn.coroutines_done && !done[index] {
            done[index] = true;
            done_count += 1;
        }
        if !turn.progressed {
            idle_since[index] = Some(turn);
        }
        fabric.turn_done(index, turn.progressed, turn.wake_at_ns);
    }
    (fabric.frontier_ns().saturating_sub(START_NS), done_count)
}
