//! The failover sequencer: which phase of a failover follows which, what
//! each surviving party does in each, and what the decider does with every
//! survivor's answers — independent of how the messages travel. FaRM's
//! reconfiguration is the model (DrTM+H §5.4 names it and leaves it
//! unimplemented): a decider that survives (party 0; FaRM's configuration
//! manager) declares the failure, every survivor pauses, recovers on its
//! own memory what is decided, and the decider settles the rest.
//!
//! A party is a node whose memory only it reaches (a `ucx` rank: its own
//! [`Failover::for_node`]; a node of `sim` or `threads`: its
//! `Failover::party_in_process`); the sequencer runs the local steps of
//! [`Failover`] on it and exchanges [`Message`]s with the other parties
//! through a [`ControlChannel`] (on `ucx`, `cluster::failover` frames them
//! over the bootstrap connections, whose hub is rank 0; in one process,
//! `recovery::loopback` queues them in a mailbox). The phases, each a
//! barrier over the live parties at the decider:
//!
//! 1. **Suspect.** A party's failure detector (its `suspicions` view), or
//!    a peer its transport reports unreachable ([`Sequencer::suspect`]),
//!    makes it suspect a peer; a member tells the decider
//!    ([`Message::Suspect`]).
//! 2. **Fail.** The decider declares the peer failed — at once when the
//!    channel lost it; on a suspicion only once the channel bears it out
//!    ([`ControlChannel::corroborates`]: silent, and its lease over, so it
//!    can no longer write) — unless it holds the last live copy of a
//!    partition (`Failover::fail`); and tells everyone
//!    ([`Message::Fail`]). Each survivor marks it dead in its membership
//!    (rounds to it fail) and pauses: no attempt starts, attempts before
//!    their commit point fail, committing ones finish. A party declared
//!    failed that is still alive stops ([`ControlChannel::declared_failed`]).
//! 3. **Quiet.** A survivor whose coroutines are all parked says so
//!    ([`Message::Quiet`]); once all have, nothing is in flight anywhere.
//! 4. **Drain.** Each survivor recovers on its own memory what is decided
//!    (`Failover::recover_locally`) and reports the dead coordinators'
//!    records above their watermark ([`Message::Doubts`]): a coordinator
//!    killed between the WRITEs of one log round leaves its record on some
//!    backups only.
//! 5. **Decide.** The decider decides each — committed iff every backup got
//!    it (`steps::decide_doubts`) — and tells everyone
//!    ([`Message::Decide`]). Each survivor applies the committed ones, drops
//!    the rest, installs its redo writes (`Failover::resolve_locally`) and
//!    sends a summary of the partitions it shares with another survivor
//!    ([`Message::Synced`]): per bucket of keys, a sum over its versions
//!    (`steps::sync_summary`), a scan of local memory but a message that
//!    does not grow with the data.
//! 6. **Fetch.** The decider compares the summaries
//!    (`steps::differing_buckets`) — the copies differ only where the
//!    failure caught writes in flight — and asks every survivor for its
//!    versions of those buckets ([`Message::Fetch`], [`Message::Versions`]);
//!    when none differs it skips the round.
//! 7. **Install.** The decider merges them (`steps::merge_sync_digests`)
//!    and sends each survivor the newest versions its copies lack
//!    ([`Message::Install`]). Each installs them, resets its protocol
//!    headers, routes the failed partitions to their promoted copies, and
//!    says [`Message::Recovered`].
//! 8. **Resume.** The decider tells everyone ([`Message::Resume`]) and the
//!    clients go on.
//!
//! The recovery time reported on `ucx` is the decider's, from its `Fail`
//! to its `Resume`; where it went, phase by phase, is [`PhaseTimes`] (in
//! one process the failover reports the fabric's time instead: on `sim`
//! the wall clock decides nothing). One failure is recovered at a time
//! (failures the cluster declared together are one:
//! [`Sequencer::fail_together`]): a party lost during a recovery ends the
//! run with an error naming it.
//!
//! Every fabric runs this one sequencer. On `sim` and `threads`, whose
//! nodes share one address space, the worker that finds the cluster quiet
//! runs every survivor's party in turn over the loopback channel
//! (`recovery::loopback::recover_in_process`): each still reaches only its
//! own node's memory, so a coordinator's record that reached some backups
//! only is decided as on `ucx`. The decider is [`DECIDER`] on `ucx`
//! (rank 0 must survive) and the first survivor in one process
//! ([`Sequencer::with_decider`]).
//!
//! Invariants: every survivor applies the same `Fail`s in the same order
//! (the decider is their only source); no survivor starts a recovery step
//! before every live party finished the previous one; the clients resume
//! only after every survivor's headers are reset.

use std::sync::Arc;
use std::time::Instant;

use super::steps::{decide_doubts, differing_buckets, merge_sync_digests, Doubts, RecoveryCounts};
use super::{Failover, FailoverReport, Membership};
use crate::fabric::NodeId;

/// Where one recovery's pause went, as the decider saw it: each phase
/// from the moment the previous one ended to the moment every live party
/// had answered it, and the decider's own local steps within them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseTimes {
    /// From the `Fail` to every survivor parked (`Quiet`).
    pub quiet_ns: u64,
    /// From `Drain` to every survivor's doubts (`Doubts`).
    pub drain_ns: u64,
    /// From `Decide` to every survivor's sync summary (`Synced`).
    pub decide_ns: u64,
    /// From the comparison of the summaries to every survivor's versions
    /// of the buckets that differ (`Versions`; none when none differs).
    pub fetch_ns: u64,
    /// From the merge to every survivor installed and reset (`Recovered`).
    pub install_ns: u64,
    /// The decider's own steps: draining its rings, resolving the doubts,
    /// building its digest, merging every digest, installing and resetting.
    pub local_drain_ns: u64,
    pub local_resolve_ns: u64,
    pub local_summary_ns: u64,
    pub local_fetch_ns: u64,
    pub merge_ns: u64,
    pub local_install_ns: u64,
    /// The words of every survivor's summary, the buckets that differed,
    /// the words of the versions fetched, and of every install sent.
    pub summary_words: u64,
    pub differing_buckets: u64,
    pub digest_words: u64,
    pub install_words: u64,
}

impl std::fmt::Display for PhaseTimes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |ns: u64| ns as f64 / 1e6;
        write!(
            f,
            "quiet {:.2} ms, drain {:.2} ms (own {:.2}), decide {:.2} ms (own resolve {:.2}, summary {:.2}), fetch {:.2} ms (own {:.2}), install {:.2} ms (merge {:.2}, own install {:.2}); summaries {} words, {} buckets differ, versions {} words, installs {} words",
            ms(self.quiet_ns),
            ms(self.drain_ns),
            ms(self.local_drain_ns),
            ms(self.decide_ns),
            ms(self.local_resolve_ns),
            ms(self.local_summary_ns),
            ms(self.fetch_ns),
            ms(self.local_fetch_ns),
            ms(self.install_ns),
            ms(self.merge_ns),
            ms(self.local_install_ns),
            self.summary_words,
            self.differing_buckets,
            self.digest_words,
            self.install_words,
        )
    }
}

/// The party that decides (and must survive) on `ucx`: rank 0.
pub const DECIDER: NodeId = 0;

/// What the parties of a failover tell each other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A member suspects `node` dead (to the decider).
    Suspect(NodeId),
    /// The decider declared `node` failed (to everyone): pause.
    Fail(NodeId),
    /// A party's coroutines are all parked.
    Quiet,
    /// The decider: every survivor is quiet; recover what is decided.
    Drain,
    /// What a party's recovery of the decided part did, and its doubts.
    Doubts(RecoveryCounts, Doubts),
    /// The decider: the dead coordinators' transactions that committed
    /// (sorted).
    Decide(Vec<u64>),
    /// What a party's resolution of the rest did, and its sync summary
    /// (`steps::sync_summary`: a sum per bucket of each shared copy).
    Synced(RecoveryCounts, Vec<u64>),
    /// The decider: the buckets whose copies differ
    /// (`steps::differing_buckets`); send their versions.
    Fetch(Vec<u64>),
    /// A party's versions in those buckets (`steps::sync_digest_where`).
    Versions(Vec<u64>),
    /// The decider (to one party): the versions its copies lack.
    Install(Vec<u64>),
    /// A party installed them and reset its headers: how many of each.
    Recovered(RecoveryCounts),
    /// The decider: every survivor recovered; resume. The recovery's
    /// time, ns.
    Resume(u64),
}

/// How a party's failover messages travel: on `ucx` rank 0's bootstrap
/// connections (`cluster::failover`), in one process a mailbox
/// (`recovery::loopback`). A member's messages go to the decider, the
/// decider's to every live party or to one.
pub trait ControlChannel {
    /// Sends `message` from this party: a member's to the decider, the
    /// decider's to every live party.
    fn send(&mut self, message: &Message) -> Result<(), String>;

    /// The decider: sends `message` to `party` alone.
    fn send_to(&mut self, party: NodeId, message: &Message) -> Result<(), String>;

    /// Whether the channel lost `party` (its connection is gone).
    fn is_lost(&self, party: NodeId) -> bool;

    /// The decider: whether the channel bears out a suspicion of `party`
    /// — it has not heard from it for long enough, and the lease it last
    /// gave it is over, so `party` can no longer write.
    fn corroborates(&self, party: NodeId) -> bool;

    /// The decider: `party` was declared failed; hear nothing more from it.
    fn expel(&mut self, party: NodeId);

    /// This party was declared failed (it is alive: it was frozen, or
    /// slow): records it, and says why this party stops.
    fn declared_failed(&mut self) -> String;

    /// How messages name `party`.
    fn describe(&self, party: NodeId) -> String;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Running,
    /// Declared; waiting for every survivor to be quiet.
    Pausing,
    /// The decider: waiting for every survivor's doubts.
    Deciding,
    /// The decider: waiting for every survivor's summary.
    Draining,
    /// The decider: waiting for every survivor's versions of the buckets
    /// that differ.
    Fetching,
    /// The decider: waiting for every survivor to have installed and reset.
    Installing,
}

/// One party's part in the cluster's failovers.
pub struct Sequencer {
    failover: Arc<Failover>,
    membership: Arc<Membership>,
    /// What this party's detector suspects (it declares there, not in
    /// `membership`, which only the decider's `Fail`s change).
    suspicions: Arc<Membership>,
    party: NodeId,
    /// The party that decides: [`DECIDER`] on `ucx`, the first survivor
    /// in one process (`recovery::loopback`).
    decider: NodeId,
    parties: u32,
    epoch: Instant,
    phase: Phase,
    /// The decider: suspected by some member.
    suspected_by_peer: Vec<bool>,
    /// Peers this party's transport reported unreachable: suspicions it
    /// passes on (members) or judges (the decider) as its detector's.
    unreachable: Vec<bool>,
    /// Suspicions already passed on (members) or decided (the decider).
    reported: Vec<bool>,
    /// This party said `Quiet` in the current recovery.
    quiet_sent: bool,
    /// The decider: who is quiet / drained / synced / recovered in the
    /// current recovery.
    quiet: Vec<bool>,
    doubts: Vec<Option<(RecoveryCounts, Doubts)>>,
    synced: Vec<Option<(RecoveryCounts, Vec<u64>)>>,
    versions: Vec<Option<Vec<u64>>>,
    recovered: Vec<bool>,
    /// The decider: the current recovery's totals, and when it was
    /// declared.
    totals: FailoverReport,
    declared_at_ns: u64,
    /// The decider: the parties recovered from (or being recovered from).
    failed: Vec<NodeId>,
    /// The decider: where each recovery's pause went (the current one
    /// last), and when its current phase began.
    phase_times: Vec<PhaseTimes>,
    phase_began_ns: u64,
}

impl Sequencer {
    /// Party `party`, running `failover`'s local steps (every node of its
    /// placement is a party); its detector declares in `suspicions`, the
    /// decider's `Fail`s in `membership`; times count from `epoch`.
    pub fn new(
        failover: Arc<Failover>,
        membership: Arc<Membership>,
        suspicions: Arc<Membership>,
        party: NodeId,
        epoch: Instant,
    ) -> Sequencer {
        let parties = failover.placement().nodes;
        let each = |value| vec![value; parties as usize];
        Sequencer {
            failover,
            membership,
            suspicions,
            party,
            decider: DECIDER,
            parties,
            epoch,
            phase: Phase::Running,
            suspected_by_peer: each(false),
            unreachable: each(false),
            reported: each(false),
            quiet_sent: false,
            quiet: each(false),
            doubts: vec![None; parties as usize],
            synced: vec![None; parties as usize],
            versions: vec![None; parties as usize],
            recovered: each(false),
            totals: FailoverReport::default(),
            declared_at_ns: 0,
            failed: Vec::new(),
            phase_times: Vec::new(),
            phase_began_ns: 0,
        }
    }

    /// This party with `decider` deciding instead of [`DECIDER`] (every
    /// party of a cluster must be given the same one, and it must survive).
    pub fn with_decider(mut self, decider: NodeId) -> Sequencer {
        self.decider = decider;
        self
    }

    fn is_decider(&self) -> bool {
        self.party == self.decider
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// At the run's end (the decider): counts the suspicions never acted
    /// on — a detector that suspected a party the channel showed alive.
    pub fn finish(&self) {
        for node in 0..self.parties as NodeId {
            if self.reported[node as usize] && !self.failover.is_failed(node) {
                self.failover.ignore_suspicion();
            }
        }
    }

    /// Whether a recovery is under way (the run must not end meanwhile).
    pub fn recovering(&self) -> bool {
        self.phase != Phase::Running || self.failover.paused()
    }

    /// The decider: where each recovery's pause went, in order.
    pub fn phase_times(&self) -> &[PhaseTimes] {
        &self.phase_times
    }

    /// The decider: the current phase ended now; returns its length and
    /// starts the next.
    fn end_phase(&mut self) -> u64 {
        let now = self.now_ns();
        let took = now.saturating_sub(self.phase_began_ns);
        self.phase_began_ns = now;
        took
    }

    /// The decider: the current recovery's times.
    fn times(&mut self) -> &mut PhaseTimes {
        if self.phase_times.is_empty() {
            self.phase_times.push(PhaseTimes::default());
        }
        self.phase_times.last_mut().expect("just pushed")
    }

    /// What this party's failovers did: on the decider, the whole
    /// cluster's totals.
    pub fn report(&self) -> FailoverReport {
        self.failover.report()
    }

    /// The parties failed over so far.
    pub fn failed(&self) -> Vec<NodeId> {
        self.failover.failed_nodes()
    }

    /// Why the current recovery has not ended: its phase and, on the
    /// decider, the live parties it still waits for.
    pub fn stalled(&self, channel: &dyn ControlChannel) -> String {
        let failed: Vec<String> = self
            .failover
            .failed_nodes()
            .into_iter()
            .map(|n| channel.describe(n))
            .collect();
        let phase = match self.phase {
            Phase::Running => "resuming",
            Phase::Pausing => "quiescing",
            Phase::Deciding => "collecting in-doubt transactions",
            Phase::Draining => "collecting version summaries",
            Phase::Fetching => "collecting the versions that differ",
            Phase::Installing => "installing versions",
        };
        let waiting: Vec<String> = if self.is_decider() {
            self.live(channel)
                .into_iter()
                .filter(|&party| !self.answered(party))
                .map(|party| channel.describe(party))
                .collect()
        } else {
            vec![channel.describe(self.decider)]
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

    /// The decider: whether `party` is where the current phase waits for
    /// it.
    fn answered(&self, party: NodeId) -> bool {
        let p = party as usize;
        match self.phase {
            Phase::Running => true,
            Phase::Pausing => self.quiet[p],
            Phase::Deciding => self.doubts[p].is_some(),
            Phase::Draining => self.synced[p].is_some(),
            Phase::Fetching => self.versions[p].is_some(),
            Phase::Installing => self.recovered[p],
        }
    }

    /// This party's transport reports `node` unreachable: a suspicion that
    /// stands from now on, passed on or judged as the detector's.
    pub fn suspect(&mut self, node: NodeId) {
        self.unreachable[node as usize] = true;
    }

    /// Passes on new local suspicions (the decider judges them) and says
    /// `Quiet` once this party is; call it on every turn of the party's
    /// control loop.
    pub fn poll(&mut self, channel: &mut dyn ControlChannel) -> Result<(), String> {
        let mut suspects: Vec<NodeId> = self
            .suspicions
            .failed_nodes()
            .into_iter()
            .map(|(node, _)| node)
            .collect();
        suspects.extend((0..self.parties as NodeId).filter(|&n| self.unreachable[n as usize]));
        for node in suspects {
            if self.failover.is_failed(node) {
                continue;
            }
            if self.is_decider() {
                // Re-judged every turn: a suspicion stands once the
                // channel corroborates it.
                self.consider(channel, node, false)?;
            } else if !self.reported[node as usize] {
                self.reported[node as usize] = true;
                channel.send(&Message::Suspect(node))?;
            }
        }
        if self.is_decider() {
            for node in 0..self.parties as NodeId {
                if self.suspected_by_peer[node as usize] && !self.failover.is_failed(node) {
                    self.consider(channel, node, false)?;
                }
            }
        }
        if self.phase == Phase::Pausing && !self.quiet_sent && self.failover.quiet_locally() {
            self.quiet_sent = true;
            if self.is_decider() {
                self.quiet[self.decider as usize] = true;
                self.advance(channel)?;
            } else {
                channel.send(&Message::Quiet)?;
            }
        }
        Ok(())
    }

    /// The decider: the channel lost `party` (certainly dead). `Ok(false)`
    /// on a member, which hears of losses from the decider only.
    pub fn on_lost(
        &mut self,
        channel: &mut dyn ControlChannel,
        party: NodeId,
    ) -> Result<bool, String> {
        if !self.is_decider() {
            return Ok(false);
        }
        self.consider(channel, party, true)?;
        Ok(true)
    }

    /// Handles `message` from `from`; `Ok(false)` when this party's role
    /// takes no such message (a member is sent what only the decider
    /// takes, or the other way round).
    pub fn on_message(
        &mut self,
        channel: &mut dyn ControlChannel,
        from: NodeId,
        message: Message,
    ) -> Result<bool, String> {
        if self.is_decider() {
            self.on_member_message(channel, from, message)
        } else {
            self.on_decider_message(channel, message)
        }
    }

    /// The decider: a member's message.
    fn on_member_message(
        &mut self,
        channel: &mut dyn ControlChannel,
        from: NodeId,
        message: Message,
    ) -> Result<bool, String> {
        let from_index = from as usize;
        match message {
            Message::Suspect(node) => {
                if node as u32 >= self.parties {
                    return Err(format!(
                        "{}: suspects node {node}, which does not exist",
                        channel.describe(from)
                    ));
                }
                self.suspected_by_peer[node as usize] = true;
                self.consider(channel, node, false)?;
                return Ok(true);
            }
            Message::Quiet => self.quiet[from_index] = true,
            Message::Doubts(counts, doubts) => self.doubts[from_index] = Some((counts, doubts)),
            Message::Synced(counts, summary) => self.synced[from_index] = Some((counts, summary)),
            Message::Versions(digest) => self.versions[from_index] = Some(digest),
            Message::Recovered(counts) => {
                self.totals.counts.add(&counts);
                self.recovered[from_index] = true;
            }
            _ => return Ok(false),
        }
        self.advance(channel)?;
        Ok(true)
    }

    /// A member: the decider's message.
    fn on_decider_message(
        &mut self,
        channel: &mut dyn ControlChannel,
        message: Message,
    ) -> Result<bool, String> {
        match message {
            Message::Fail(node) if node == self.party => return Err(channel.declared_failed()),
            Message::Fail(node) => self.declare(node),
            Message::Drain => {
                let (counts, doubts) = self.drain();
                channel.send(&Message::Doubts(counts, doubts))?;
            }
            Message::Decide(committed) => {
                let (counts, summary) = self.resolve(committed);
                channel.send(&Message::Synced(counts, summary))?;
            }
            Message::Fetch(buckets) => {
                let digest = self.failover.sync_digest_of(&buckets);
                channel.send(&Message::Versions(digest))?;
            }
            Message::Install(entries) => {
                let recovered = self.install(&entries)?;
                channel.send(&Message::Recovered(recovered))?;
            }
            Message::Resume(recovery_ns) => {
                self.failover
                    .resume(recovery_ns, &FailoverReport::default());
                self.phase = Phase::Running;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The decider: a suspicion of `node` (`lost`: the channel lost it, so
    /// it is certainly dead).
    fn consider(
        &mut self,
        channel: &mut dyn ControlChannel,
        node: NodeId,
        lost: bool,
    ) -> Result<(), String> {
        if node == self.decider || self.failover.is_failed(node) {
            return Ok(());
        }
        self.reported[node as usize] = true;
        if !lost && !channel.is_lost(node) && !channel.corroborates(node) {
            // Not corroborated (yet): the party still talks, or may still
            // hold a lease, so it could still write.
            return Ok(());
        }
        if self.phase != Phase::Running {
            if lost {
                return Err(format!(
                    "lost {} while the cluster recovered from the failure of rank(s) {:?}; this build recovers one failure at a time",
                    channel.describe(node),
                    self.failed
                ));
            }
            self.failover.ignore_suspicion();
            return Ok(());
        }
        if !self.failover.fail(node, self.now_ns()) {
            // It holds a partition's last live copy (`Failover::fail`).
            if lost {
                return Err(format!(
                    "lost {}, which held the last live copy of a partition: committed data is gone (raise --replication)",
                    channel.describe(node)
                ));
            }
            return Ok(());
        }
        self.fail_together(channel, &[node])
    }

    /// The decider: `nodes` are failed — judged here ([`Sequencer::poll`],
    /// [`Sequencer::on_lost`]) or already decided by the cluster, as in one
    /// process, where the detectors' hook fails them
    /// (`recovery::loopback`) — and recovered from together: tells
    /// everyone, and starts the recovery.
    pub fn fail_together(
        &mut self,
        channel: &mut dyn ControlChannel,
        nodes: &[NodeId],
    ) -> Result<(), String> {
        debug_assert!(self.is_decider() && self.phase == Phase::Running);
        let now = self.now_ns();
        for &node in nodes {
            if !self.failover.fail(node, now) {
                return Err(format!(
                    "{} holds the last live copy of a partition: it cannot be failed over",
                    channel.describe(node)
                ));
            }
        }
        self.failed.extend_from_slice(nodes);
        self.declared_at_ns = now;
        self.phase_began_ns = now;
        self.phase_times.push(PhaseTimes::default());
        self.start_recovery();
        for &node in nodes {
            channel.send(&Message::Fail(node))?;
            channel.expel(node);
            self.declare(node);
        }
        Ok(())
    }

    /// The decider, on declaring a failure: nobody has answered yet, but
    /// the failed parties, which take no part (nor wait for anything).
    fn start_recovery(&mut self) {
        let parties = self.parties as usize;
        self.totals = FailoverReport::default();
        self.quiet = vec![false; parties];
        self.doubts = vec![None; parties];
        self.synced = vec![None; parties];
        self.versions = vec![None; parties];
        self.recovered = vec![false; parties];
        for party in self.failover.failed_nodes() {
            self.quiet[party as usize] = true;
            self.recovered[party as usize] = true;
        }
    }

    /// Every party, on a `Fail`: the node is dead to this party.
    fn declare(&mut self, node: NodeId) {
        let now = self.now_ns();
        self.reported[node as usize] = true;
        self.membership.declare_dead(node, now);
        self.failover.fail(node, now);
        self.phase = Phase::Pausing;
        self.quiet_sent = false;
    }

    /// Step 4 on this party: the decided part's counts, then the doubts.
    fn drain(&mut self) -> (RecoveryCounts, Doubts) {
        let (outcome, doubts) = self.failover.recover_locally();
        (outcome.counts(), doubts)
    }

    /// Step 5 on this party: the rest's counts, then the sync summary.
    fn resolve(&mut self, mut committed: Vec<u64>) -> (RecoveryCounts, Vec<u64>) {
        committed.sort_unstable();
        let began = self.now_ns();
        let outcome = self.failover.resolve_locally(&committed);
        let resolved = self.now_ns();
        let summary = self.failover.sync_summary();
        if self.is_decider() {
            let summed = self.now_ns();
            let times = self.times();
            times.local_resolve_ns = resolved - began;
            times.local_summary_ns = summed - resolved;
        }
        (outcome.counts(), summary)
    }

    /// Step 6 on this party: the versions installed and the headers reset.
    fn install(&mut self, entries: &[u64]) -> Result<RecoveryCounts, String> {
        let installed = self.failover.install_sync(entries)?;
        let (headers_reset, promoted) = self.failover.reset_locally();
        if self.is_decider() {
            self.totals.promoted = promoted;
        }
        Ok(RecoveryCounts {
            versions_rolled_forward: installed,
            headers_reset,
            ..RecoveryCounts::default()
        })
    }

    fn live(&self, channel: &dyn ControlChannel) -> Vec<NodeId> {
        (0..self.parties as NodeId)
            .filter(|&party| !channel.is_lost(party) && !self.failover.is_failed(party))
            .collect()
    }

    /// The decider: moves to the next phase once every live party is
    /// there, doing its own part of each as a party.
    fn advance(&mut self, channel: &mut dyn ControlChannel) -> Result<(), String> {
        loop {
            let live = self.live(channel);
            if !live.iter().all(|&party| self.answered(party)) {
                return Ok(());
            }
            match self.phase {
                Phase::Running => return Ok(()),
                Phase::Pausing => {
                    self.times().quiet_ns = self.end_phase();
                    self.phase = Phase::Deciding;
                    channel.send(&Message::Drain)?;
                    let began = self.now_ns();
                    self.doubts[self.decider as usize] = Some(self.drain());
                    self.times().local_drain_ns = self.now_ns() - began;
                }
                Phase::Deciding => {
                    let mut all = Vec::new();
                    for &party in &live {
                        let (counts, doubts) =
                            self.doubts[party as usize].take().unwrap_or_default();
                        self.totals.counts.add(&counts);
                        all.push(doubts);
                    }
                    let committed = decide_doubts(&all);
                    self.times().drain_ns = self.end_phase();
                    self.phase = Phase::Draining;
                    channel.send(&Message::Decide(committed.clone()))?;
                    self.synced[self.decider as usize] = Some(self.resolve(committed));
                }
                Phase::Draining => {
                    self.times().decide_ns = self.end_phase();
                    self.fetch_differences(channel, &live)?;
                }
                Phase::Fetching => {
                    self.times().fetch_ns = self.end_phase();
                    self.send_installs(channel, &live)?;
                }
                Phase::Installing => {
                    self.times().install_ns = self.end_phase();
                    let recovery_ns = self.now_ns().saturating_sub(self.declared_at_ns);
                    channel.send(&Message::Resume(recovery_ns))?;
                    self.failover.resume(recovery_ns, &self.totals);
                    self.phase = Phase::Running;
                    return Ok(());
                }
            }
        }
    }

    /// The decider, once every live party's summary is in: asks every
    /// live party for its versions of the buckets whose copies differ —
    /// or, when none does, goes straight to the installs.
    fn fetch_differences(
        &mut self,
        channel: &mut dyn ControlChannel,
        live: &[NodeId],
    ) -> Result<(), String> {
        let mut summaries = Vec::new();
        for &party in live {
            let (counts, summary) = self.synced[party as usize].take().unwrap_or_default();
            self.totals.counts.add(&counts);
            summaries.push((party, summary));
        }
        let began = self.now_ns();
        let failed = self.failover.failed_nodes();
        let buckets = differing_buckets(&self.failover.placement(), &failed, &summaries)?;
        let times = self.times();
        times.summary_words = summaries.iter().map(|(_, s)| s.len() as u64).sum();
        times.differing_buckets = buckets.len() as u64 / 3;
        self.phase = Phase::Fetching;
        if buckets.is_empty() {
            for &party in live {
                self.versions[party as usize] = Some(Vec::new());
            }
            return Ok(());
        }
        channel.send(&Message::Fetch(buckets.clone()))?;
        let own = self.failover.sync_digest_of(&buckets);
        self.times().local_fetch_ns = self.now_ns() - began;
        self.versions[self.decider as usize] = Some(own);
        Ok(())
    }

    /// The decider, once every live party's versions of the differing
    /// buckets are in: merges them, sends each party the versions its
    /// copies lack, and installs its own.
    fn send_installs(
        &mut self,
        channel: &mut dyn ControlChannel,
        live: &[NodeId],
    ) -> Result<(), String> {
        let failed = self.failover.failed_nodes();
        let digests: Vec<(NodeId, Vec<u64>)> = live
            .iter()
            .map(|&party| {
                (
                    party,
                    self.versions[party as usize].take().unwrap_or_default(),
                )
            })
            .collect();
        let placement = self.failover.placement();
        let began = self.now_ns();
        let installs = merge_sync_digests(&placement, &failed, &digests)?;
        let merged = self.now_ns();
        self.times().digest_words = digests.iter().map(|(_, d)| d.len() as u64).sum();
        self.times().merge_ns = merged - began;
        self.times().install_words = installs.iter().map(|(_, e)| e.len() as u64).sum();
        self.phase = Phase::Installing;
        let mut own = Vec::new();
        for (party, entries) in installs {
            if party == self.decider {
                own = entries;
            } else {
                channel.send_to(party, &Message::Install(entries))?;
            }
        }
        let began = self.now_ns();
        let counts = self.install(&own)?;
        self.times().local_install_ns = self.now_ns() - began;
        self.totals.counts.add(&counts);
        self.recovered[self.decider as usize] = true;
        Ok(())
    }
}
