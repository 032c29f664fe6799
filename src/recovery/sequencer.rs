//! The failover sequencer: which phase of a failover follows which, what
//! each surviving party does in each, and what the decider does with every
//! survivor's answers — independent of how the messages travel. FaRM's
//! reconfiguration is the model (DrTM+H §5.4 names it and leaves it
//! unimplemented): a decider that survives (party 0; FaRM's configuration
//! manager) declares the failure, every survivor pauses, recovers on its
//! own memory what is decided, and the decider settles the rest.
//!
//! A party is a node whose memory only it reaches (a `ucx` rank: its own
//! [`Failover::for_node`]); the sequencer runs the local steps of
//! [`Failover`] on it and exchanges [`Message`]s with the other parties
//! through a [`ControlChannel`] (on `ucx`, `cluster::failover` frames them
//! over the bootstrap connections, whose hub is rank 0). The phases, each
//! a barrier over the live parties at the decider:
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
//!    sends the versions of the partitions it shares with another survivor
//!    ([`Message::Synced`]).
//! 6. **Install.** The decider merges them (`steps::merge_sync_digests`)
//!    and sends each survivor the newest versions its copies lack
//!    ([`Message::Install`]). Each installs them, resets its protocol
//!    headers, routes the failed partitions to their promoted copies, and
//!    says [`Message::Recovered`].
//! 7. **Resume.** The decider tells everyone ([`Message::Resume`]) and the
//!    clients go on.
//!
//! The recovery time reported is the decider's, from its `Fail` to its
//! `Resume`. One failure is recovered at a time: a party lost during a
//! recovery ends the run with an error naming it.
//!
//! On `sim` and `threads`, whose nodes share one address space, the whole
//! recovery is one call on one worker over every node's memory
//! (`Failover::recover`), which is not a party of this sequencer: its
//! shared-memory steps (a whole record anywhere is a round every backup
//! got; `steps::sync_copies` compares every copy directly) are not the
//! per-party steps, and the simulator's hashes pin what they do.
//!
//! Invariants: every survivor applies the same `Fail`s in the same order
//! (the decider is their only source); no survivor starts a recovery step
//! before every live party finished the previous one; the clients resume
//! only after every survivor's headers are reset.

use std::sync::Arc;
use std::time::Instant;

use super::steps::{decide_doubts, merge_sync_digests, Doubts, RecoveryCounts};
use super::{Failover, FailoverReport, Membership};
use crate::fabric::NodeId;

/// The party that decides (and must survive): rank 0 on `ucx`.
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
    /// What a party's resolution of the rest did, and its sync digest
    /// (`steps::sync_digest`).
    Synced(RecoveryCounts, Vec<u64>),
    /// The decider (to one party): the versions its copies lack.
    Install(Vec<u64>),
    /// A party installed them and reset its headers: how many of each.
    Recovered(RecoveryCounts),
    /// The decider: every survivor recovered; resume. The recovery's
    /// time, ns.
    Resume(u64),
}

/// How a party's failover messages travel: on `ucx` rank 0's bootstrap
/// connections (`cluster::failover`). A member's messages go to the
/// decider, the decider's to every live party or to one.
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
    /// The decider: waiting for every survivor's digest.
    Draining,
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
    recovered: Vec<bool>,
    /// The decider: the current recovery's totals, and when it was
    /// declared.
    totals: FailoverReport,
    declared_at_ns: u64,
    /// The decider: the parties recovered from (or being recovered from).
    failed: Vec<NodeId>,
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
            recovered: each(false),
            totals: FailoverReport::default(),
            declared_at_ns: 0,
            failed: Vec::new(),
        }
    }

    fn is_decider(&self) -> bool {
        self.party == DECIDER
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
            Phase::Draining => "collecting version digests",
            Phase::Installing => "installing versions",
        };
        let waiting: Vec<String> = if self.is_decider() {
            self.live(channel)
                .into_iter()
                .filter(|&party| !self.answered(party))
                .map(|party| channel.describe(party))
                .collect()
        } else {
            vec![channel.describe(DECIDER)]
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
                self.quiet[DECIDER as usize] = true;
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
            Message::Synced(counts, digest) => self.synced[from_index] = Some((counts, digest)),
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
                let (counts, digest) = self.resolve(committed);
                channel.send(&Message::Synced(counts, digest))?;
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
        if node == DECIDER || self.failover.is_failed(node) {
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
        let now = self.now_ns();
        if !self.failover.fail(node, now) {
            // It holds a partition's last live copy (`Failover::fail`).
            if lost {
                return Err(format!(
                    "lost {}, which held the last live copy of a partition: committed data is gone (raise --replication)",
                    channel.describe(node)
                ));
            }
            return Ok(());
        }
        self.failed.push(node);
        self.declared_at_ns = now;
        self.start_recovery();
        channel.send(&Message::Fail(node))?;
        channel.expel(node);
        self.declare(node);
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

    /// Step 5 on this party: the rest's counts, then the sync digest.
    fn resolve(&mut self, mut committed: Vec<u64>) -> (RecoveryCounts, Vec<u64>) {
        committed.sort_unstable();
        let outcome = self.failover.resolve_locally(&committed);
        (outcome.counts(), self.failover.sync_digest())
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
                    self.phase = Phase::Deciding;
                    channel.send(&Message::Drain)?;
                    self.doubts[DECIDER as usize] = Some(self.drain());
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
                    self.phase = Phase::Draining;
                    channel.send(&Message::Decide(committed.clone()))?;
                    self.synced[DECIDER as usize] = Some(self.resolve(committed));
                }
                Phase::Draining => self.send_installs(channel, &live)?,
                Phase::Installing => {
                    let recovery_ns = self.now_ns().saturating_sub(self.declared_at_ns);
                    channel.send(&Message::Resume(recovery_ns))?;
                    self.failover.resume(recovery_ns, &self.totals);
                    self.phase = Phase::Running;
                    return Ok(());
                }
            }
        }
    }

    /// The decider, once every live party's digest is in: merges them,
    /// sends each party the versions its copies lack, and installs its
    /// own.
    fn send_installs(
        &mut self,
        channel: &mut dyn ControlChannel,
        live: &[NodeId],
    ) -> Result<(), String> {
        let failed = self.failover.failed_nodes();
        let mut digests = Vec::new();
        for &party in live {
            let (counts, digest) = self.synced[party as usize].take().unwrap_or_default();
            self.totals.counts.add(&counts);
            digests.push((party, digest));
        }
        let placement = self.failover.placement();
        let installs = merge_sync_digests(&placement, &failed, &digests)?;
        self.phase = Phase::Installing;
        let mut own = Vec::new();
        for (party, entries) in installs {
            if party == DECIDER {
                own = entries;
            } else {
                channel.send_to(party, &Message::Install(entries))?;
            }
        }
        let counts = self.install(&own)?;
        self.totals.counts.add(&counts);
        self.recovered[DECIDER as usize] = true;
        Ok(())
    }
}
