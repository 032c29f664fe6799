//! In-run failover of a multi-process (`ucx`) run: the steps of
//! `recovery::failover` sequenced across processes over the bootstrap's
//! connections, with rank 0 as the one that decides (issue 8 item 3; the
//! model is FaRM's reconfiguration, which DrTM+H §5.4 names and leaves
//! unimplemented).
//!
//! A process that dies (`kill -9`, or `--fault crash:N@S`, which makes
//! rank N send itself SIGKILL) loses its memory with it; its partitions
//! live on in the backups of the survivors (`--replication` ≥ 2). The
//! phases, each a barrier over the live ranks:
//!
//! 1. **Suspect.** A rank's failure detector (`recovery::detector`: heartbeat
//!    READs through UCX, the lease scheme of DrTM §4.5), a peer UCX
//!    reports unreachable (`PeerFailure::take_unreachable`), or — on rank
//!    0 — a bootstrap connection that closed or went silent makes a rank
//!    suspect a peer; members tell rank 0 (`Suspect`).
//! 2. **Fail.** Rank 0 declares the peer failed — at once when its
//!    connection is lost; on a suspicion only when its own connection to
//!    the peer is silent too (no bootstrap heartbeat for two periods) and
//!    the lease rank 0 last gave it has run out
//!    (`Bootstrap::enable_leases`): a process that is merely slow, whose
//!    heartbeat word lags while its main thread still talks, must not be
//!    failed over while it can still write, and one that was frozen finds
//!    its lease gone when it wakes, so its endpoints post nothing before
//!    it learns it was declared — unless it holds the last live copy of a
//!    partition (`Failover::fail`); and tells everyone (`Fail`). From then
//!    on every survivor's endpoints drop what the declared rank still
//!    sends. Each survivor then marks it dead in its membership: rounds
//!    to it fail, and its UCX endpoints, which read that membership
//!    (`recovery::RankVerdicts`), complete what is outstanding to it as
//!    failed and never wait on it again; and it pauses: no
//!    attempt starts, attempts before their commit point fail, committing
//!    ones finish. A rank declared failed that is still alive exits.
//! 3. **Quiet.** A survivor whose coroutines are all parked says so
//!    (`Quiet`); once all have, nothing is in flight anywhere.
//! 4. **Drain.** Each survivor recovers on its own memory what is
//!    decided (`Failover::recover_locally`: the dead coordinators' records
//!    below their watermark rolled forward, every live coordinator's ring
//!    drained) and reports the dead coordinators' records above it
//!    (`Doubts`): a process killed between the WRITEs of one log round
//!    leaves its record on some backups only.
//! 5. **Decide.** Rank 0 decides each: committed iff every backup got it —
//!    held whole by as many survivors as it had targets, or below a
//!    watermark some survivor heard (`recovery::decide_doubts`) — and
//!    tells everyone (`Decide`). Each survivor applies the committed ones,
//!    drops the rest, installs its redo writes (`Failover::resolve_locally`)
//!    and sends rank 0 the versions of the partitions it shares with
//!    another survivor (`Synced`).
//! 6. **Install.** Rank 0 merges them and sends each survivor the newest
//!    versions its copies lack (`Install`) — the cross-process form of
//!    `recovery::sync_copies`, which finishes a dead coordinator's installs
//!    on live primaries. Each installs them, resets its protocol headers
//!    (releasing the dead coordinators' locks), routes the failed
//!    partitions to their promoted copies, and says `Recovered`.
//! 7. **Resume.** Rank 0 tells everyone (`Resume`) and the clients go on.
//!
//! The recovery time reported is rank 0's, from its `Fail` to its
//! `Resume`. Rank 0 runs the bootstrap and gathers the results, so it must
//! survive (`config::faults::validate` refuses `crash:0@…` on `ucx`); one failure
//! is recovered at a time — a second rank lost during a recovery ends the
//! run with an error naming it.
//!
//! Invariants: every survivor applies the same `Fail`s in the same order
//! (rank 0 is their only source); no survivor starts a recovery step
//! before every live rank finished the previous one; the clients resume
//! only after every survivor's headers are reset.

use std::sync::Arc;
use std::time::Instant;

use super::bootstrap::{Bootstrap, HEARTBEAT};
use super::wire::{Dec, Enc, Frame, Kind};
use crate::fabric::ucx::PeerFailure;
use crate::fabric::NodeId;
use crate::recovery::steps as recovery;
use crate::recovery::{Failover, FailoverReport, Membership};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Running,
    /// Declared; waiting for every survivor to be quiet.
    Pausing,
    /// Rank 0: waiting for every survivor's doubts.
    Deciding,
    /// Rank 0: waiting for every survivor's digest.
    Draining,
    /// Rank 0: waiting for every survivor to have installed and reset.
    Installing,
}

/// One process's part in the cluster's failovers.
pub struct ClusterFailover<'a> {
    failover: Arc<Failover>,
    membership: Arc<Membership>,
    /// What this process's detector suspects (it declares there, not in
    /// `membership`, which only rank 0's `Fail`s change).
    suspicions: Arc<Membership>,
    /// Rank 0: suspected by some member.
    suspected_by_peer: Vec<bool>,
    /// Peers this rank's UCX reported unreachable: suspicions it passes
    /// on (members) or judges (rank 0) as its detector's.
    unreachable: Vec<bool>,
    peer_failure: &'a PeerFailure,
    epoch: Instant,
    rank: u32,
    nodes: u32,
    phase: Phase,
    /// Suspicions already passed on (members) or decided (rank 0).
    reported: Vec<bool>,
    /// This rank said `Quiet` in the current recovery.
    quiet_sent: bool,
    /// Rank 0: who is quiet / synced / recovered in the current recovery.
    quiet: Vec<bool>,
    doubts: Vec<Option<Vec<u64>>>,
    synced: Vec<Option<Vec<u64>>>,
    recovered: Vec<bool>,
    /// Rank 0: the current recovery's totals, and when it was declared.
    totals: FailoverReport,
    declared_at_ns: u64,
    /// Rank 0: the ranks recovered from (or being recovered from).
    failed: Vec<NodeId>,
}

impl<'a> ClusterFailover<'a> {
    pub fn new(
        failover: Arc<Failover>,
        membership: Arc<Membership>,
        suspicions: Arc<Membership>,
        peer_failure: &'a PeerFailure,
        epoch: Instant,
        rank: u32,
        nodes: u32,
    ) -> ClusterFailover<'a> {
        ClusterFailover {
            failover,
            membership,
            suspicions,
            suspected_by_peer: vec![false; nodes as usize],
            unreachable: vec![false; nodes as usize],
            peer_failure,
            epoch,
            rank,
            nodes,
            phase: Phase::Running,
            reported: vec![false; nodes as usize],
            quiet_sent: false,
            quiet: vec![false; nodes as usize],
            doubts: vec![None; nodes as usize],
            synced: vec![None; nodes as usize],
            recovered: vec![false; nodes as usize],
            totals: FailoverReport::default(),
            declared_at_ns: 0,
            failed: Vec::new(),
        }
    }

    /// At the run's end (rank 0): counts the suspicions never acted on —
    /// a detector that suspected a rank the connection showed alive.
    pub fn finish(&self) {
        for node in 0..self.nodes as NodeId {
            if self.reported[node as usize] && !self.failover.is_failed(node) {
                self.failover.ignore_suspicion();
            }
        }
    }

    /// Whether a recovery is under way (the run must not end meanwhile).
    pub fn recovering(&self) -> bool {
        self.phase != Phase::Running || self.failover.paused()
    }

    /// Why the current recovery has not ended: its phase and, on rank 0,
    /// the live ranks it still waits for.
    pub fn stalled(&self, boot: &Bootstrap) -> String {
        let failed: Vec<String> = self
            .failover
            .failed_nodes()
            .into_iter()
            .map(|n| boot.describe(n as u32))
            .collect();
        let phase = match self.phase {
            Phase::Running => "resuming",
            Phase::Pausing => "quiescing",
            Phase::Deciding => "collecting in-doubt transactions",
            Phase::Draining => "collecting version digests",
            Phase::Installing => "installing versions",
        };
        let waiting: Vec<String> = if self.rank == 0 {
            self.live(boot)
                .into_iter()
                .filter(|&r| !self.answered(r))
                .map(|r| boot.describe(r))
                .collect()
        } else {
            vec![boot.describe(0)]
        };
        format!(
            "the recovery from the failure of {} stalled while {phase}: no answer from {}",
            failed.join(", "),
            if waiting.is_empty() {
                "anyone (all answered)".to_string()
            } else {
                waiting.join(", ")
            }
        )
    }

    /// Rank 0: whether `rank` is where the current phase waits for it.
    fn answered(&self, rank: u32) -> bool {
        let r = rank as usize;
        match self.phase {
            Phase::Running => true,
            Phase::Pausing => self.quiet[r],
            Phase::Deciding => self.doubts[r].is_some(),
            Phase::Draining => self.synced[r].is_some(),
            Phase::Installing => self.recovered[r],
        }
    }

    /// The ranks failed over so far.
    pub fn failed(&self) -> Vec<NodeId> {
        self.failover.failed_nodes()
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Passes on new local suspicions and says `Quiet` once this rank is;
    /// call it on every turn of the main loop.
    pub fn poll(&mut self, boot: &mut Bootstrap) -> Result<(), String> {
        let mut suspects: Vec<NodeId> = self
            .suspicions
            .failed_nodes()
            .into_iter()
            .map(|(node, _)| node)
            .collect();
        for node in self.peer_failure.take_unreachable() {
            self.unreachable[node as usize] = true;
        }
        suspects.extend((0..self.nodes as NodeId).filter(|&n| self.unreachable[n as usize]));
        for node in suspects {
            if self.failover.is_failed(node) {
                continue;
            }
            if self.rank == 0 {
                // Re-judged every turn: a suspicion stands once the
                // connection corroborates it.
                self.consider(boot, node, false)?;
            } else if !self.reported[node as usize] {
                self.reported[node as usize] = true;
                boot.send(Kind::Suspect, &encode(&[node as u64]))?;
            }
        }
        if self.rank == 0 {
            for node in 0..self.nodes {
                if self.suspected_by_peer[node as usize] && !self.failover.is_failed(node as NodeId)
                {
                    self.consider(boot, node as NodeId, false)?;
                }
            }
        }
        if self.phase == Phase::Pausing && !self.quiet_sent && self.failover.quiet_locally() {
            self.quiet_sent = true;
            if self.rank == 0 {
                self.quiet[0] = true;
                self.advance(boot)?;
            } else {
                boot.send(Kind::Quiet, &[])?;
            }
        }
        Ok(())
    }

    /// Handles a failover frame; `Ok(false)` if `frame` is not one.
    pub fn on_frame(
        &mut self,
        boot: &mut Bootstrap,
        from: u32,
        frame: &Frame,
    ) -> Result<bool, String> {
        let who = boot.describe(from);
        let bad = |e: String| format!("{who}: {e}");
        match frame.kind {
            Kind::Lost if self.rank == 0 => self.consider(boot, from as NodeId, true)?,
            Kind::Suspect if self.rank == 0 => {
                let node = decode(&frame.body).map_err(bad)?;
                let node = *node.first().ok_or_else(|| bad("empty Suspect".into()))?;
                if node >= self.nodes as u64 {
                    return Err(bad(format!("suspects node {node}, which does not exist")));
                }
                self.suspected_by_peer[node as usize] = true;
                self.consider(boot, node as NodeId, false)?;
            }
            Kind::Quiet if self.rank == 0 => {
                self.quiet[from as usize] = true;
                self.advance(boot)?;
            }
            Kind::Doubts if self.rank == 0 => {
                self.doubts[from as usize] = Some(decode(&frame.body).map_err(bad)?);
                self.advance(boot)?;
            }
            Kind::Synced if self.rank == 0 => {
                self.synced[from as usize] = Some(decode(&frame.body).map_err(bad)?);
                self.advance(boot)?;
            }
            Kind::Recovered if self.rank == 0 => {
                let counts = decode(&frame.body).map_err(bad)?;
                if counts.len() != 2 {
                    return Err(bad("malformed Recovered".into()));
                }
                self.totals.versions_rolled_forward += counts[0];
                self.totals.headers_reset += counts[1];
                self.recovered[from as usize] = true;
                self.advance(boot)?;
            }
            Kind::Fail if self.rank != 0 => {
                let node = decode(&frame.body).map_err(bad)?;
                let node = *node.first().ok_or_else(|| bad("empty Fail".into()))? as NodeId;
                if node as u32 == self.rank {
                    // The node maps this to `RunError::DeclaredFailed`.
                    self.peer_failure.declare_self_failed();
                    return Err(format!(
                        "{}: declared failed by the cluster (its peers stopped hearing from it); its partitions are served by their backups now, so it stops",
                        boot.describe(self.rank)
                    ));
                }
                self.declare(node);
            }
            Kind::Drain if self.rank != 0 => {
                let words = self.drain();
                boot.send(Kind::Doubts, &encode(&words))?;
            }
            Kind::Decide if self.rank != 0 => {
                let committed = decode(&frame.body).map_err(bad)?;
                let words = self.resolve(&committed);
                boot.send(Kind::Synced, &encode(&words))?;
            }
            Kind::Install if self.rank != 0 => {
                let entries = decode(&frame.body).map_err(bad)?;
                let counts = self.install(&entries)?;
                boot.send(Kind::Recovered, &encode(&counts))?;
            }
            Kind::Resume if self.rank != 0 => {
                let words = decode(&frame.body).map_err(bad)?;
                let recovery_ns = *words.first().ok_or_else(|| bad("empty Resume".into()))?;
                self.failover
                    .resume(recovery_ns, &FailoverReport::default());
                self.phase = Phase::Running;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Rank 0: a suspicion of `node` (`lost`: its connection is gone, so
    /// it is certainly dead).
    fn consider(&mut self, boot: &mut Bootstrap, node: NodeId, lost: bool) -> Result<(), String> {
        if node == 0 || self.failover.is_failed(node) {
            return Ok(());
        }
        if !lost
            && !boot.is_lost(node as u32)
            && (boot.silent_for(node as u32) < 2 * HEARTBEAT || !boot.lease_expired(node as u32))
        {
            // Not corroborated (yet): the process still talks, or may
            // still hold a lease, so it could still write.
            self.reported[node as usize] = true;
            return Ok(());
        }
        self.reported[node as usize] = true;
        if self.phase != Phase::Running {
            if lost {
                return Err(format!(
                    "lost {} while the cluster recovered from the failure of rank(s) {:?}; this build recovers one failure at a time",
                    boot.describe(node as u32),
                    self.failed
                ));
            }
            self.failover.ignore_suspicion();
            return Ok(());
        }
        let now = self.now_ns();
        if !self.failover.fail(node, now) {
            // It holds a partition's last live copy (`Failover::fail`).
            if lost {
                return Err(format!(
                    "lost {}, which held the last live copy of a partition: committed data is gone (raise --replication)",
                    boot.describe(node as u32)
                ));
            }
            return Ok(());
        }
        self.failed.push(node);
        self.declared_at_ns = now;
        self.totals = FailoverReport::default();
        self.quiet = vec![false; self.nodes as usize];
        self.doubts = vec![None; self.nodes as usize];
        self.synced = vec![None; self.nodes as usize];
        self.recovered = vec![false; self.nodes as usize];
        for rank in self.failover.failed_nodes() {
            // Failed ranks take no part (nor wait for anything).
            self.quiet[rank as usize] = true;
            self.recovered[rank as usize] = true;
        }
        boot.send(Kind::Fail, &encode(&[node as u64]))?;
        boot.expel(node as u32);
        self.declare(node);
        Ok(())
    }

    /// Every rank, on a `Fail`: the node is dead to this process.
    fn declare(&mut self, node: NodeId) {
        let now = self.now_ns();
        self.reported[node as usize] = true;
        self.membership.declare_dead(node, now);
        self.failover.fail(node, now);
        self.phase = Phase::Pausing;
        self.quiet_sent = false;
    }

    /// Step 4 on this rank: the decided part's counts, then the doubts.
    fn drain(&mut self) -> Vec<u64> {
        let (outcome, doubts) = self.failover.recover_locally();
        let mut words = counts(&outcome).to_vec();
        words.extend(doubts.encode());
        words
    }

    /// Step 5 on this rank: the rest's counts, then the sync digest.
    fn resolve(&mut self, committed: &[u64]) -> Vec<u64> {
        let mut committed = committed.to_vec();
        committed.sort_unstable();
        let outcome = self.failover.resolve_locally(&committed);
        let mut words = counts(&outcome).to_vec();
        words.extend(self.failover.sync_digest());
        words
    }

    /// Adds a rank's counts (the first four words of its `Doubts` or
    /// `Synced`) to the totals.
    fn add_counts(&mut self, words: &[u64]) {
        self.totals.resolved_from_log_count += words[0];
        self.totals.resolved_committed_count += words[1];
        self.totals.resolved_aborted_count += words[2];
        self.totals.versions_rolled_forward += words[3];
    }

    /// Step 5 on this rank: `[versions installed, headers reset]`.
    fn install(&mut self, entries: &[u64]) -> Result<[u64; 2], String> {
        let installed = self.failover.install_sync(entries)?;
        let (headers_reset, promoted) = self.failover.reset_locally();
        if self.rank == 0 {
            self.totals.promoted = promoted;
        }
        Ok([installed, headers_reset])
    }

    fn live(&self, boot: &Bootstrap) -> Vec<u32> {
        (0..self.nodes)
            .filter(|&r| !boot.is_lost(r) && !self.failover.is_failed(r as NodeId))
            .collect()
    }

    /// Rank 0: moves to the next phase once every live rank is there.
    fn advance(&mut self, boot: &mut Bootstrap) -> Result<(), String> {
        loop {
            let live = self.live(boot);
            match self.phase {
                Phase::Running => return Ok(()),
                Phase::Pausing => {
                    if !live.iter().all(|&r| self.quiet[r as usize]) {
                        return Ok(());
                    }
                    self.phase = Phase::Deciding;
                    boot.send(Kind::Drain, &[])?;
                    let words = self.drain();
                    self.doubts[0] = Some(words);
                }
                Phase::Deciding => {
                    if !live.iter().all(|&r| self.doubts[r as usize].is_some()) {
                        return Ok(());
                    }
                    let mut all = Vec::new();
                    for &rank in &live {
                        let words = self.doubts[rank as usize].take().unwrap_or_default();
                        if words.len() < 4 {
                            return Err(format!("{}: malformed Doubts", boot.describe(rank)));
                        }
                        self.add_counts(&words);
                        all.push(
                            recovery::Doubts::decode(&words[4..])
                                .map_err(|e| format!("{}: {e}", boot.describe(rank)))?,
                        );
                    }
                    let committed = recovery::decide_doubts(&all);
                    self.phase = Phase::Draining;
                    boot.send(Kind::Decide, &encode(&committed))?;
                    let words = self.resolve(&committed);
                    self.synced[0] = Some(words);
                }
                Phase::Draining => {
                    if !live.iter().all(|&r| self.synced[r as usize].is_some()) {
                        return Ok(());
                    }
                    let failed = self.failover.failed_nodes();
                    let mut digests = Vec::new();
                    for &rank in &live {
                        let words = self.synced[rank as usize].take().unwrap_or_default();
                        if words.len() < 4 {
                            return Err(format!("{}: malformed Synced", boot.describe(rank)));
                        }
                        self.add_counts(&words);
                        digests.push((rank as NodeId, words[4..].to_vec()));
                    }
                    let placement = self.failover.placement();
                    let installs = recovery::merge_sync_digests(&placement, &failed, &digests)?;
                    self.phase = Phase::Installing;
                    let mut own = Vec::new();
                    for (rank, entries) in installs {
                        if rank == 0 {
                            own = entries;
                        } else {
                            boot.send_to(rank as u32, Kind::Install, &encode(&entries))?;
                        }
                    }
                    let counts = self.install(&own)?;
                    self.totals.versions_rolled_forward += counts[0];
                    self.totals.headers_reset += counts[1];
                    self.recovered[0] = true;
                }
                Phase::Installing => {
                    if !live.iter().all(|&r| self.recovered[r as usize]) {
                        return Ok(());
                    }
                    let recovery_ns = self.now_ns().saturating_sub(self.declared_at_ns);
                    boot.send(Kind::Resume, &encode(&[recovery_ns]))?;
                    self.failover.resume(recovery_ns, &self.totals);
                    self.phase = Phase::Running;
                    return Ok(());
                }
            }
        }
    }
}

fn counts(outcome: &recovery::RecoveryOutcome) -> [u64; 4] {
    [
        outcome.resolved_from_log_count,
        outcome.resolved_committed_count,
        outcome.resolved_aborted_count,
        outcome.versions_rolled_forward,
    ]
}

fn encode(words: &[u64]) -> Vec<u8> {
    let mut enc = Enc::default();
    enc.words(words);
    enc.bytes
}

fn decode(body: &[u8]) -> Result<Vec<u64>, String> {
    Dec::new(body).words("failover message")
}
