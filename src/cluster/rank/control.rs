//! The main thread of a rank from the join on: it connects the workers,
//! starts the run at the cluster barrier, watches workers, peers and UCX
//! (with the failover across ranks) until every rank is done, and sends
//! or gathers the results.

use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Gathered, MainLinks, Shared};
use crate::cluster::bootstrap::Bootstrap;
use crate::cluster::failover::ClusterFailover;
use crate::cluster::node::{
    decode_rank_result, encode_rank_result, fault_section, kill_self, remove_journals,
};
use crate::cluster::wire::{Dec, Enc, Kind};
use crate::config::Config;
use crate::engine::program::{Cluster, ExtraStats, WorkerResult};
use crate::engine::report::{ClusterSummary, RankSummary};
use crate::fabric::ucx::{ucx_version, PeerInfo, UcxContext};
use crate::fabric::NodeId;
use crate::recovery::{CrashInjector, RankVerdicts};
use crate::store::NodeStore;
use crate::workloads::Workload;

/// The main thread of a rank from the join on: steps 4–6 of the module
/// docs. An `Err` is the message every rank gets.
pub(super) struct Control<'r, X> {
    pub(super) config: &'r Config,
    pub(super) context: &'r UcxContext,
    pub(super) cluster: &'r Cluster,
    pub(super) boot: Bootstrap,
    pub(super) links: MainLinks<X>,
    pub(super) shared: &'r Shared<'r>,
    /// A fault-tolerant run's: where the lease rank 0 renews goes.
    pub(super) verdicts: Option<&'r RankVerdicts>,
    pub(super) stall: Duration,
}

impl<'r, X: ExtraStats> Control<'r, X> {
    fn me(&self) -> String {
        self.boot.describe(self.boot.rank)
    }

    fn workers(&self) -> u16 {
        self.config.workers as u16
    }

    pub(super) fn drive<W: Workload>(
        &mut self,
        workload: &W,
    ) -> Result<Option<Gathered<X>>, String> {
        self.check_ranks()?;
        let transports = self.connect()?;
        let start_ns = self.start()?;
        let mut failover = self.cluster_failover();
        self.watch(failover.as_mut())?;
        let results = self.finish_local()?;
        let fault_words = fault_section(
            self.cluster.faults.as_ref(),
            self.boot.rank,
            &self.shared.abandoned,
            start_ns,
        );
        if self.boot.rank != 0 {
            self.send_results(workload, &transports, &results, &fault_words)?;
            return Ok(None);
        }
        let gathered = self.gather(workload, transports, results, fault_words)?;
        if let Some(failover) = &failover {
            failover.finish();
            // The report carries the pause's total; where it went is for
            // whoever tunes the recovery.
            for (index, times) in failover.phase_times().iter().enumerate() {
                eprintln!("{}: failover {} pause: {times}", self.me(), index + 1);
            }
        }
        Ok(Some(gathered))
    }

    /// Every rank has this run's number of workers and region size.
    fn check_ranks(&self) -> Result<(), String> {
        let workers = self.workers();
        let region_words = self.cluster.layout.region_words;
        for info in &self.boot.ranks {
            if info.workers.len() != workers as usize || info.region_words != region_words {
                return Err(format!(
                    "{} has {} workers and a region of {} words; this run needs {} and {}",
                    self.boot.describe(info.rank),
                    info.workers.len(),
                    info.region_words,
                    workers,
                    region_words
                ));
            }
        }
        Ok(())
    }

    /// Step 4's first half: hands each worker its peers and waits until
    /// every one connected; the transports UCX chose to each node.
    fn connect(&mut self) -> Result<Vec<Vec<String>>, String> {
        let boot = &self.boot;
        let me = self.me();
        // How long an idle worker may spin depends on how many share the host.
        let my_host = boot
            .ranks
            .iter()
            .find(|info| info.rank == boot.rank)
            .map(|info| &info.host);
        self.context.set_host_worker_threads(
            boot.ranks
                .iter()
                .filter(|info| Some(&info.host) == my_host)
                .map(|info| info.workers.len())
                .sum(),
        );
        for (w, tx) in self.links.peers.iter().enumerate() {
            let peers = boot
                .ranks
                .iter()
                .map(|info| PeerInfo {
                    worker_address: info.workers[w].clone(),
                    rkey: info.rkey.clone(),
                    base_address: info.base_address,
                })
                .collect();
            tx.send(peers)
                .map_err(|_| format!("{me}: a worker thread stopped"))?;
        }
        let mut transports = Vec::new();
        for _ in 0..self.workers() {
            let what = "connect its UCX endpoints";
            let (w, result) = wait_local(&mut self.boot, &self.links.ready, self.stall * 6, what)?;
            let chosen = result.map_err(|e| format!("{me}: {e}"))?;
            if w == 0 {
                transports = chosen;
            }
        }
        Ok(transports)
    }

    /// Step 4's second half: the cluster barrier (every endpoint of every
    /// rank exists), then every local worker's start; arms a planned crash
    /// of this rank. The start, ns on the context's clock.
    fn start(&mut self) -> Result<u64, String> {
        let boot = &mut self.boot;
        let deadline = Instant::now() + self.stall * 6;
        if boot.rank == 0 {
            boot.gather(Kind::Ready, deadline, "connect its UCX endpoints")?;
            boot.send(Kind::Go, &[])?;
        } else {
            boot.send(Kind::Ready, &[1])?;
            boot.gather(Kind::Go, deadline, "start the run")?;
        }
        let start_ns = self.context.epoch.elapsed().as_nanos() as u64;
        let me = self.me();
        for tx in &self.links.go {
            tx.send(start_ns)
                .map_err(|_| format!("{me}: a worker thread stopped"))?;
        }
        // `--fault crash:RANK@S`: this process dies then as `kill -9`
        // kills it — no cleanup, no goodbye.
        CrashInjector::new(&self.config.faults, self.config.nodes)
            .arm_own(self.boot.rank as NodeId, kill_self)
            .map_err(|e| format!("{me}: starting the crash timer: {e}"))?;
        Ok(start_ns)
    }

    /// The failover across ranks, when the run has one.
    fn cluster_failover(&mut self) -> Option<ClusterFailover<'r>> {
        let faults = self.cluster.faults.as_ref()?;
        let failover = faults.failover.clone()?;
        let rank = self.boot.rank;
        if rank == 0 {
            self.boot.tolerate_loss();
        }
        self.boot.enable_leases(
            self.context.epoch,
            crate::config::faults::lease_of(self.config),
        );
        let membership = faults.memberships[rank as usize].clone();
        let suspicions = faults
            .detector_views
            .as_ref()
            .map_or_else(|| membership.clone(), |v| v[rank as usize].clone());
        Some(ClusterFailover::new(
            failover,
            membership,
            suspicions,
            &self.context.failure,
            self.context.epoch,
            rank,
        ))
    }

    /// Step 5: watches workers, peers and UCX until every rank is done.
    fn watch(&mut self, mut failover: Option<&mut ClusterFailover<'r>>) -> Result<(), String> {
        let (rank, nodes, stall) = (self.boot.rank, self.boot.nodes, self.stall);
        let run_for = Duration::from_secs_f64(self.config.warmup_s + self.config.duration_s);
        // Rank 0 judges first; the others wait longer, to hear its verdict.
        let grace = if rank == 0 { stall } else { stall * 2 };
        let mut deadline = Instant::now() + run_for + grace;
        let mut done = vec![false; nodes as usize];
        let mut sent_done = false;
        let mut recovering_since: Option<Instant> = None;
        loop {
            // The lease as the bootstrap last renewed it (rank 0's echoes).
            if let (Some(until), Some(verdicts)) = (self.boot.lease_until_ns(), self.verdicts) {
                verdicts.set_lease_until(until);
            }
            if let Some(driver) = failover.as_deref_mut() {
                driver.poll(&mut self.boot)?;
                if driver.recovering() {
                    // A recovery may outlast the run; its end restarts the
                    // clock. But it must end: every phase is a few messages
                    // and local scans, so a recovery that takes longer than
                    // the stall timeout waits on a rank that will not answer.
                    let since = *recovering_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > grace {
                        let stalled = driver.stalled(&mut self.boot);
                        return Err(format!(
                            "{}: {stalled} within {:.1} s (raise --stall-timeout if the store is large)",
                            self.me(),
                            grace.as_secs_f64()
                        ));
                    }
                    deadline = deadline.max(Instant::now() + grace);
                } else {
                    recovering_since = None;
                }
                for failed in driver.failed() {
                    done[failed as usize] = true;
                }
            }
            if let Some((node, why)) = self.context.failure.get() {
                return Err(format!(
                    "{}: UCX reports {} failed: {why}",
                    self.me(),
                    self.boot.describe(node as u32)
                ));
            }
            let local_done = self.shared.local_done.load(Ordering::SeqCst);
            if !sent_done && local_done == self.workers() as usize {
                sent_done = true;
                done[rank as usize] = true;
                if rank != 0 {
                    self.boot.send(Kind::Done, &[])?;
                }
            }
            let recovering = failover.as_deref().is_some_and(|d| d.recovering());
            if rank == 0 && !recovering && done.iter().all(|&d| d) {
                self.boot.send(Kind::AllDone, &[])?;
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(self.late(&done));
            }
            // While recovering, every turn may end a phase of the pause
            // (this rank's coroutines all parked): look often.
            let turn = if recovering {
                Duration::from_millis(1)
            } else {
                Duration::from_millis(5)
            };
            match self.boot.next(turn)? {
                Some((from, frame)) if frame.kind == Kind::Done => done[from as usize] = true,
                Some((_, frame)) if frame.kind == Kind::AllDone => return Ok(()),
                Some((from, frame))
                    if failover.is_some()
                        && failover.as_deref_mut().expect("checked").on_frame(
                            &mut self.boot,
                            from,
                            &frame,
                        )? => {}
                Some((from, frame)) => {
                    return Err(format!(
                        "{} sent {:?} during the run",
                        self.boot.describe(from),
                        frame.kind
                    ))
                }
                None => {}
            }
        }
    }

    /// What a rank says when the run did not end in time: rank 0 names
    /// the ranks not done.
    fn late(&self, done: &[bool]) -> String {
        let (rank, stall_s) = (self.boot.rank, self.stall.as_secs_f64());
        if rank != 0 {
            return format!(
                "{}: rank 0 did not end the run within {stall_s:.1} s after the measured interval",
                self.me()
            );
        }
        let late: Vec<String> = (0..self.boot.nodes)
            .filter(|&r| !done[r as usize])
            .map(|r| self.boot.describe(r))
            .collect();
        format!(
            "{} did not finish within {stall_s:.1} s after the measured interval (workers stuck waiting on a peer, or transactions slower than that: raise --stall-timeout)",
            late.join(", "),
        )
    }

    /// The run is over: no failover any more, so no lease either. Stops
    /// the workers, takes their results (in worker order) and applies what
    /// this node's backups still hold.
    fn finish_local(&mut self) -> Result<Vec<WorkerResult<X>>, String> {
        self.boot.disable_leases();
        if let Some(verdicts) = self.verdicts {
            verdicts.set_lease_until(u64::MAX);
        }
        self.shared.stop.store(true, Ordering::SeqCst);
        let mut results: Vec<Option<WorkerResult<X>>> = (0..self.workers()).map(|_| None).collect();
        for _ in 0..self.workers() {
            let what = "hand over their results";
            let (w, result) = wait_local(&mut self.boot, &self.links.result, self.stall, what)?;
            results[w as usize] = Some(result);
        }
        if let Some(replication) = &self.cluster.replication {
            // Every coordinator is done: what this node's backups still hold
            // (records above a watermark no later post carried, and the RPC
            // log, which lives outside the region rank 0 is sent) is decided.
            let _gate = replication
                .apply_gate
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            replication.drain_all(&self.cluster.stores[0]);
        }
        Ok(results.into_iter().map(|r| r.expect("all")).collect())
    }

    /// Step 6 on a rank other than 0: its results, detections and (with
    /// `check`) its store go to rank 0.
    fn send_results<W: Workload>(
        &mut self,
        workload: &W,
        transports: &[Vec<String>],
        results: &[WorkerResult<X>],
        fault_words: &[u64],
    ) -> Result<(), String> {
        let rank = self.boot.rank;
        let store = &self.cluster.stores[0];
        let mut enc = Enc::default();
        encode_rank_result(&mut enc, transports, results);
        enc.words(fault_words);
        if self.config.check {
            let words: Vec<u64> = (0..self.cluster.layout.region_words)
                .map(|w| store.region.load(w))
                .collect();
            enc.words(&words);
            enc.words(&store.row_counters());
            // What the invariants read beside the region (TPC-C's ordered
            // indexes), which only this process holds.
            enc.words(&workload.export_node_local(rank as NodeId));
        }
        self.boot.send(Kind::Result, &enc.bytes)?;
        remove_journals(self.shared.journal_prefix, rank, self.workers());
        Ok(())
    }

    /// Step 6 on rank 0: every other rank's results, merged with its own.
    fn gather<W: Workload>(
        &mut self,
        workload: &W,
        transports: Vec<Vec<String>>,
        results: Vec<WorkerResult<X>>,
        fault_words: Vec<u64>,
    ) -> Result<Gathered<X>, String> {
        let deadline = Instant::now() + self.stall * 6;
        let frames = self
            .boot
            .gather(Kind::Result, deadline, "send its results")?;
        let mut gathered = Gathered {
            results,
            stores: vec![self.cluster.stores[0].clone()],
            fault_sections: vec![(0, fault_words)],
            summary: self.cluster_summary(),
            one_host: false,
        };
        let mut rank_transports = vec![(0u32, transports)];
        for (from, frame) in frames {
            self.boot.mark_finished(from);
            let who = self.boot.describe(from);
            let mut dec = Dec::new(&frame.body);
            let chosen = self
                .take_rank(workload, from, &mut dec, &mut gathered)
                .map_err(|e| format!("{who}: {e}"))?;
            rank_transports.push((from, chosen));
        }
        // Node order, as the checker and the invariants expect.
        gathered.stores.sort_by_key(|store| store.node);
        for summary in &mut gathered.summary.ranks {
            if let Some((_, names)) = rank_transports.iter().find(|(r, _)| *r == summary.rank) {
                summary.transports = names.clone();
            }
        }
        let boot = &self.boot;
        gathered.one_host = boot.ranks.iter().all(|r| r.host == boot.ranks[0].host);
        remove_journals(self.shared.journal_prefix, 0, self.workers());
        Ok(gathered)
    }

    /// Reads one rank's results frame into `gathered`; its transports.
    fn take_rank<W: Workload>(
        &self,
        workload: &W,
        from: u32,
        dec: &mut Dec,
        gathered: &mut Gathered<X>,
    ) -> Result<Vec<Vec<String>>, String> {
        let (chosen, results) = decode_rank_result(dec, self.workers())?;
        gathered.results.extend(results);
        let section = dec.words("failure detections")?;
        gathered.fault_sections.push((from, section));
        if !self.config.check {
            return Ok(chosen);
        }
        let words = dec.words("region image")?;
        let rows = dec.words("row counts")?;
        let layout = self.cluster.layout.clone();
        let image = NodeStore::from_image(from as NodeId, layout, &words, &rows)
            .ok_or("its region image does not fit the layout")?;
        gathered.stores.push(Arc::new(image));
        let local = dec.words("node-local state")?;
        if !workload.import_node_local(from as NodeId, &local) {
            return Err("its node-local state does not fit the workload".into());
        }
        Ok(chosen)
    }

    /// The report's `cluster`: UCX's version and choices, and every rank
    /// (its transports filled in once gathered).
    fn cluster_summary(&self) -> ClusterSummary {
        ClusterSummary {
            ucx_version: ucx_version(),
            transport: self.config.ucx.transport.name(),
            local_atomics: self.config.ucx.local_atomics.name(),
            ranks: self
                .boot
                .ranks
                .iter()
                .map(|info| RankSummary {
                    rank: info.rank,
                    host: info.host.clone(),
                    pid: info.pid,
                    transports: Vec::new(),
                })
                .collect(),
        }
    }
}

/// Waits for a local worker thread's message while keeping the bootstrap
/// alive (heartbeats, peers' faults).
fn wait_local<T>(
    boot: &mut Bootstrap,
    rx: &Receiver<T>,
    timeout: Duration,
    what: &str,
) -> Result<T, String> {
    let until = Instant::now() + timeout;
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(value) => return Ok(value),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(format!(
                    "{}: a worker thread ended before it could {what}",
                    boot.describe(boot.rank)
                ))
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        boot.poll_faults()?;
        if Instant::now() >= until {
            return Err(format!(
                "{}: its workers did not {what} within {:.0} s",
                boot.describe(boot.rank),
                timeout.as_secs_f64()
            ));
        }
    }
}
