//! One worker thread of a rank: its UCX worker and endpoints, the node
//! program's coroutines from the cluster's start, and its service to its
//! peers until the whole cluster is done.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender};

use super::Shared;
use crate::check::History;
use crate::cluster::node::journal_path;
use crate::config::{Config, LocalAtomics};
use crate::engine::program::{Cluster, NodeProgram, RunClock, WorkerResult, WorkerStart};
use crate::fabric::ucx::{PeerInfo, UcxContext, UcxEndpoint, UcxWorkerHost};
use crate::fabric::NodeId;
use crate::runtime::Worker;

/// A worker's word that its endpoints are up: the transports UCX chose to
/// each node (worker 0 only), or what went wrong.
pub(super) type ReadyReport = (u16, Result<Vec<Vec<String>>, String>);

/// What the main thread hands a worker thread, and gets back.
pub(super) struct WorkerLinks<X> {
    pub(super) address: Sender<(u16, Result<Vec<u8>, String>)>,
    pub(super) peers: Receiver<Vec<PeerInfo>>,
    pub(super) ready: Sender<ReadyReport>,
    pub(super) go: Receiver<u64>,
    pub(super) result: Sender<(u16, WorkerResult<X>)>,
    pub(super) teardown: Receiver<()>,
}

/// One worker thread of a rank.
pub(super) struct WorkerThread<'r> {
    pub(super) config: &'r Config,
    pub(super) context: &'r UcxContext,
    pub(super) cluster: &'r Cluster,
    pub(super) shared: &'r Shared<'r>,
}

impl WorkerThread<'_> {
    /// Creates its UCX worker, connects once the join gave the peers, runs
    /// the program's coroutines from the cluster's start, serves its peers
    /// until the whole cluster is done, and hands back its result.
    pub(super) fn run<G: NodeProgram>(
        &self,
        program: &G,
        worker_index: u16,
        links: WorkerLinks<G::Extra>,
    ) {
        let Some(endpoint) = self.connect(worker_index, &links) else {
            return;
        };
        let Ok(start_ns) = links.go.recv() else {
            return;
        };
        let (config, cluster) = (self.config, self.cluster);
        let clock = RunClock::starting_at(config, start_ns);
        let worker = Worker::new(Box::new(endpoint), program.slots(worker_index));
        let worker = cluster.with_faults(worker, config, program, clock);
        let start = WorkerStart {
            workers: std::slice::from_ref(&worker),
            histories: vec![self.history(worker_index)],
            clock,
            record_history: config.check,
        };
        let shared = self.shared;
        let mut results = program.run_workers(cluster, start, &mut |coroutines, services| {
            let mut announced = false;
            loop {
                let turn = worker.turn(&mut coroutines[0], services[0]);
                if turn.coroutines_done && !announced {
                    shared.local_done.fetch_add(1, Ordering::SeqCst);
                    announced = true;
                }
                // Keep serving peers until the whole cluster is done.
                if shared.stop.load(Ordering::SeqCst) {
                    break;
                }
                if !turn.progressed {
                    worker.idle(&turn);
                }
            }
        });
        shared
            .abandoned
            .fetch_add(worker.abandoned_rounds(), Ordering::Relaxed);
        let result = results.pop().expect("one result per worker");
        let _ = links.result.send((worker_index, result));
        // The endpoints go only once every rank is past its run (see docs).
        let _ = links.teardown.recv();
        drop(worker);
    }

    /// Steps 2 and 4 for this worker: its `ucp_worker`, then its endpoints
    /// to every node's worker of the same index; `None` when it could not
    /// (the main thread was told why).
    fn connect<X>(&self, worker_index: u16, links: &WorkerLinks<X>) -> Option<UcxEndpoint> {
        let node = self.cluster.stores[0].node;
        let host = match UcxWorkerHost::new(self.context, node, worker_index) {
            Ok(host) => host,
            Err(e) => {
                let _ = links.address.send((worker_index, Err(e)));
                return None;
            }
        };
        let _ = links
            .address
            .send((worker_index, Ok(host.address().to_vec())));
        let peers = links.peers.recv().ok()?;
        let cpu_atomics = self.config.ucx.local_atomics == LocalAtomics::Cpu;
        let endpoint = match host.connect(self.context, &peers, cpu_atomics) {
            Ok(endpoint) => endpoint,
            Err(e) => {
                let _ = links.ready.send((worker_index, Err(e)));
                return None;
            }
        };
        let transports = if worker_index == 0 {
            (0..self.config.nodes as NodeId)
                .map(|n| endpoint.transports_to(n))
                .collect()
        } else {
            Vec::new()
        };
        let _ = links.ready.send((worker_index, Ok(transports)));
        Some(endpoint)
    }

    /// The worker's empty history: journaled when the run keeps journals.
    fn history(&self, worker_index: u16) -> History {
        let Some(prefix) = self.shared.journal_prefix else {
            return History::new();
        };
        let node = self.cluster.stores[0].node;
        let path = journal_path(prefix, node as u32, worker_index);
        match std::fs::File::create(&path) {
            Ok(file) => History::journaled(file),
            Err(e) => {
                eprintln!(
                    "verbena: rank {node}: cannot create the history journal {path}: {e}; should this rank die, its history is lost"
                );
                History::new()
            }
        }
    }
}
