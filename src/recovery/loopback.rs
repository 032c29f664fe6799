//! The failover sequencer's control channel inside one process, and the
//! recovery of `sim` and `threads` runs over it. The structural plan's one
//! sequencer (`recovery::sequencer`) runs on every fabric: between `ucx`
//! ranks its messages travel over the bootstrap connections
//! (`cluster::failover`); here, where every node lives in this process,
//! they travel through one in-process [`Mailbox`], each surviving node a
//! party over its own memory only ([`Failover::party_in_process`], as a
//! `ucx` rank is [`Failover::for_node`]) — the same phases (fail, quiet,
//! drain, decide, fetch, install, resume), the same per-party steps, the
//! same decisions. FaRM's reconfiguration is the model (DrTM+H §5.4).
//!
//! [`recover_in_process`] is the recovery the in-process failover
//! (`recovery::failover`) runs once every live coroutine is parked: the
//! first survivor decides, the failed nodes are those the cluster's
//! failover already declared (together, as one recovery), and the parties
//! are driven turn by turn until the decider resumes.
//!
//! Invariants: the run is synchronous and its message order is a pure
//! function of the parties and their memory (first in, first out, parties
//! polled in node order), so a `sim` run stays a pure function of its
//! configuration and seed — the sequencer reads the wall clock only for
//! the phase times it reports, which decide nothing; a failed node is lost
//! to the channel (nothing is sent to it, nothing heard from it) and never
//! runs as a party.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use super::sequencer::{ControlChannel, Message, PhaseTimes, Sequencer};
use super::steps::RecoveryCounts;
use super::{Failover, Membership};
use crate::fabric::NodeId;
use crate::replication::Replication;
use crate::store::{NodeStore, TableLayout};

/// Every message of one in-process cluster's parties in flight, in the
/// order sent: `(from, to, message)`.
#[derive(Clone, Default)]
pub struct Mailbox {
    queue: Rc<RefCell<VecDeque<(NodeId, NodeId, Message)>>>,
}

impl Mailbox {
    /// The oldest message in flight, if any.
    pub fn pop(&self) -> Option<(NodeId, NodeId, Message)> {
        self.queue.borrow_mut().pop_front()
    }

    fn push(&self, from: NodeId, to: NodeId, message: &Message) {
        self.queue
            .borrow_mut()
            .push_back((from, to, message.clone()));
    }
}

/// Party `party`'s end of an in-process [`Mailbox`]: a member's messages
/// go to the decider, the decider's to every party not lost.
pub struct Loopback {
    party: NodeId,
    decider: NodeId,
    /// Per party: failed, so lost to the channel.
    lost: Vec<bool>,
    mailbox: Mailbox,
}

impl Loopback {
    /// Party `party` of `parties`, whose decider is `decider`; the parties
    /// in `lost` are gone (their node crashed or was failed over).
    pub fn new(
        party: NodeId,
        parties: u32,
        decider: NodeId,
        lost: &[NodeId],
        mailbox: Mailbox,
    ) -> Loopback {
        Loopback {
            party,
            decider,
            lost: (0..parties as NodeId).map(|p| lost.contains(&p)).collect(),
            mailbox,
        }
    }
}

impl ControlChannel for Loopback {
    fn send(&mut self, message: &Message) -> Result<(), String> {
        if self.party != self.decider {
            self.mailbox.push(self.party, self.decider, message);
            return Ok(());
        }
        for to in 0..self.lost.len() as NodeId {
            if to != self.decider && !self.is_lost(to) {
                self.mailbox.push(self.party, to, message);
            }
        }
        Ok(())
    }

    fn send_to(&mut self, party: NodeId, message: &Message) -> Result<(), String> {
        if !self.is_lost(party) {
            self.mailbox.push(self.party, party, message);
        }
        Ok(())
    }

    fn is_lost(&self, party: NodeId) -> bool {
        self.lost[party as usize]
    }

    /// In one process a suspicion needs no lease to run out: a node is
    /// failed once the cluster's failover declared it, and lost then.
    fn corroborates(&self, party: NodeId) -> bool {
        self.is_lost(party)
    }

    fn expel(&mut self, party: NodeId) {
        self.lost[party as usize] = true;
    }

    fn declared_failed(&mut self) -> String {
        format!(
            "node {} was declared failed, but a failed node takes no part in an in-process recovery",
            self.party
        )
    }

    fn describe(&self, party: NodeId) -> String {
        format!("node {party}")
    }
}

/// What an in-process recovery did: the decider's totals over every party
/// and where its pause went.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InProcessRecovery {
    /// `(partition, node now serving it)` for each failed partition.
    pub promoted: Vec<(NodeId, NodeId)>,
    /// What every party's steps did to the data, headers reset included.
    pub counts: RecoveryCounts,
    /// The phases, wall-clock (reported only: they decide nothing).
    pub phase_times: PhaseTimes,
}

/// A bound on the turns of one recovery: each phase takes one turn of
/// polls and deliveries, so a recovery that has not ended after this many
/// is stuck (a bug, never a slow party).
const MAX_TURNS: u32 = 64;

/// Recovers the cluster of `stores` (every node's, in node order) from the
/// failure of `failed` through the failover sequencer, every survivor a
/// party over its own memory and the first survivor the decider; on a
/// quiet cluster (no transaction before its commit point), under the apply
/// gate of `replication` (the caller holds it). `recovered_header` is the
/// protocol's `Protocol::recovered_header`. Each failed partition is
/// served by its promoted copy afterwards (`Replication::serving`).
pub fn recover_in_process(
    replication: &Arc<Replication>,
    stores: &[Arc<NodeStore>],
    failed: &[NodeId],
    recovered_header: fn(&TableLayout, &mut [u64]),
) -> Result<InProcessRecovery, String> {
    let nodes = stores.len() as u32;
    let decider = stores
        .iter()
        .map(|store| store.node)
        .find(|node| !failed.contains(node))
        .ok_or("every node failed: nobody is left to recover")?;
    let mailbox = Mailbox::default();
    let epoch = Instant::now();
    let mut parties: Vec<Option<(Sequencer, Loopback)>> = stores
        .iter()
        .map(|store| {
            let party = store.node;
            if failed.contains(&party) {
                return None;
            }
            let failover =
                Failover::party_in_process(replication.clone(), store.clone(), recovered_header);
            let view = || Arc::new(Membership::new(party, nodes));
            let sequencer = Sequencer::new(Arc::new(failover), view(), view(), party, epoch)
                .with_decider(decider);
            let channel = Loopback::new(party, nodes, decider, failed, mailbox.clone());
            Some((sequencer, channel))
        })
        .collect();
    {
        let (sequencer, channel) = parties[decider as usize].as_mut().expect("a survivor");
        sequencer.fail_together(channel, failed)?;
    }
    drive(&mut parties, decider, &mailbox)?;
    let (sequencer, _) = parties[decider as usize].as_ref().expect("a survivor");
    let done = sequencer.report();
    Ok(InProcessRecovery {
        promoted: done.promoted,
        counts: done.counts,
        phase_times: sequencer.phase_times().last().copied().unwrap_or_default(),
    })
}

/// Polls every live party and delivers every message in flight, turn by
/// turn, until no party is recovering; the decider says why not, if they
/// never stop.
fn drive(
    parties: &mut [Option<(Sequencer, Loopback)>],
    decider: NodeId,
    mailbox: &Mailbox,
) -> Result<(), String> {
    for _turn in 0..MAX_TURNS {
        for (sequencer, channel) in parties.iter_mut().flatten() {
            sequencer.poll(channel)?;
        }
        while let Some((from, to, message)) = mailbox.pop() {
            let Some((sequencer, channel)) = parties[to as usize].as_mut() else {
                continue;
            };
            if !sequencer.on_message(channel, from, message.clone())? {
                return Err(format!("node {to} takes no {message:?} from node {from}"));
            }
        }
        if parties.iter().flatten().all(|(s, _)| !s.recovering()) {
            return Ok(());
        }
    }
    let (sequencer, channel) = parties[decider as usize].as_ref().expect("a survivor");
    Err(sequencer.stalled(channel))
}
