//! In-run failover of a multi-process (`ucx`) run: the transport of the
//! failover sequencer (`recovery::sequencer`, which holds the phases and
//! what each party and the decider do in them) over the bootstrap's
//! connections, whose hub is rank 0, the decider (issue 8 item 3; the model
//! is FaRM's reconfiguration, which DrTM+H §5.4 names and leaves
//! unimplemented).
//!
//! A process that dies (`kill -9`, or `--fault crash:N@S`, which makes
//! rank N send itself SIGKILL: `recovery::CrashInjector`) loses its memory
//! with it; its partitions live on in the backups of the survivors
//! (`--replication` ≥ 2). What is the transport's own here:
//!
//! * **Frames.** Each `recovery::sequencer::Message` travels as one
//!   bootstrap frame of its own kind (`Suspect`, `Fail`, `Quiet`, `Drain`,
//!   `Doubts`, `Decide`, `Synced`, `Fetch`, `Versions`, `Install`,
//!   `Recovered`, `Resume`), its body a list of words; a member's go to rank 0, rank 0's to every live
//!   rank or to one.
//! * **Suspicions.** Beside a rank's failure detector (`recovery::detector`:
//!   heartbeat READs through UCX, the lease scheme of DrTM §4.5), a peer
//!   UCX reports unreachable (`PeerFailure::take_unreachable`) is a
//!   suspicion; on rank 0 a bootstrap connection that closed (`Lost`) is a
//!   certain failure.
//! * **Corroboration and leases.** Rank 0 fails a suspect only when its
//!   own connection to it is silent too (no bootstrap heartbeat for two
//!   periods, each half a lease) and the lease rank 0 last gave it has run
//!   out (`[failure_detector] lease_ms`)
//!   (`Bootstrap::enable_leases`): a process that is merely slow, whose
//!   heartbeat word lags while its main thread still talks, must not be
//!   failed over while it can still write, and one that was frozen finds
//!   its lease gone when it wakes, so its endpoints post nothing before it
//!   learns it was declared. From the `Fail` on rank 0 hears nothing more
//!   from the declared rank (`Bootstrap::expel`), and every survivor's
//!   endpoints drop what it still sends: they read the membership the
//!   sequencer marks (`recovery::RankVerdicts`), complete what is
//!   outstanding to it as failed and never wait on it again. A rank
//!   declared failed that is still alive records it
//!   (`PeerFailure::declare_self_failed`) and exits.
//!
//! Rank 0 runs the bootstrap and gathers the results, so it must survive
//! (`config::faults::validate` refuses `crash:0@…` on `ucx`). The control
//! loop (`cluster::rank`) bounds every recovery by the stall timeout.
//!
//! Invariants: rank 0 is the only source of `Fail`s, so every survivor
//! applies the same ones in the same order; a frame that does not decode
//! is an error naming its sender, never a message half read.

use std::sync::Arc;
use std::time::Instant;

use super::bootstrap::Bootstrap;
use super::wire::{Dec, Enc, Frame, Kind};
use crate::fabric::ucx::PeerFailure;
use crate::fabric::NodeId;
use crate::recovery::sequencer::{ControlChannel, Message, PhaseTimes, Sequencer};
use crate::recovery::steps::{Doubts, RecoveryCounts};
use crate::recovery::{Failover, Membership};

/// One process's part in the cluster's failovers: its sequencer, and
/// what UCX tells it of its peers.
pub struct ClusterFailover<'a> {
    sequencer: Sequencer,
    peer_failure: &'a PeerFailure,
    rank: u32,
}

impl<'a> ClusterFailover<'a> {
    pub fn new(
        failover: Arc<Failover>,
        membership: Arc<Membership>,
        suspicions: Arc<Membership>,
        peer_failure: &'a PeerFailure,
        epoch: Instant,
        rank: u32,
    ) -> ClusterFailover<'a> {
        let sequencer = Sequencer::new(failover, membership, suspicions, rank as NodeId, epoch);
        ClusterFailover {
            sequencer,
            peer_failure,
            rank,
        }
    }

    /// At the run's end (rank 0): counts the suspicions never acted on.
    pub fn finish(&self) {
        self.sequencer.finish();
    }

    /// Rank 0: where each recovery's pause went, phase by phase.
    pub fn phase_times(&self) -> &[PhaseTimes] {
        self.sequencer.phase_times()
    }

    /// Whether a recovery is under way (the run must not end meanwhile).
    pub fn recovering(&self) -> bool {
        self.sequencer.recovering()
    }

    /// Why the current recovery has not ended.
    pub fn stalled(&self, boot: &mut Bootstrap) -> String {
        self.sequencer.stalled(&self.channel(boot))
    }

    /// The ranks failed over so far.
    pub fn failed(&self) -> Vec<NodeId> {
        self.sequencer.failed()
    }

    fn channel<'b>(&self, boot: &'b mut Bootstrap) -> BootChannel<'b, 'a> {
        BootChannel {
            boot,
            peer_failure: self.peer_failure,
            rank: self.rank,
        }
    }

    /// Passes on new local suspicions (UCX's unreachable peers among them)
    /// and says `Quiet` once this rank is; call it on every turn of the
    /// main loop.
    pub fn poll(&mut self, boot: &mut Bootstrap) -> Result<(), String> {
        for node in self.peer_failure.take_unreachable() {
            self.sequencer.suspect(node);
        }
        let mut channel = self.channel(boot);
        self.sequencer.poll(&mut channel)
    }

    /// Handles a failover frame; `Ok(false)` if `frame` is not one this
    /// rank takes.
    pub fn on_frame(
        &mut self,
        boot: &mut Bootstrap,
        from: u32,
        frame: &Frame,
    ) -> Result<bool, String> {
        if frame.kind == Kind::Lost {
            let mut channel = self.channel(boot);
            return self.sequencer.on_lost(&mut channel, from as NodeId);
        }
        let message = match message_of(frame) {
            Ok(Some(message)) => message,
            Ok(None) => return Ok(false),
            Err(e) => return Err(format!("{}: {e}", boot.describe(from))),
        };
        let mut channel = self.channel(boot);
        self.sequencer
            .on_message(&mut channel, from as NodeId, message)
    }
}

/// The sequencer's channel over this rank's bootstrap connections.
struct BootChannel<'b, 'a> {
    boot: &'b mut Bootstrap,
    peer_failure: &'a PeerFailure,
    rank: u32,
}

impl ControlChannel for BootChannel<'_, '_> {
    fn send(&mut self, message: &Message) -> Result<(), String> {
        let (kind, words) = frame_of(message);
        self.boot.send(kind, &encode(&words))
    }

    fn send_to(&mut self, party: NodeId, message: &Message) -> Result<(), String> {
        let (kind, words) = frame_of(message);
        self.boot.send_to(party as u32, kind, &encode(&words))
    }

    fn is_lost(&self, party: NodeId) -> bool {
        self.boot.is_lost(party as u32)
    }

    fn corroborates(&self, party: NodeId) -> bool {
        let rank = party as u32;
        self.boot.silent_for(rank) >= 2 * self.boot.beat_interval() && self.boot.lease_expired(rank)
    }

    fn expel(&mut self, party: NodeId) {
        self.boot.expel(party as u32);
    }

    fn declared_failed(&mut self) -> String {
        // The node maps this to `RunError::DeclaredFailed`.
        self.peer_failure.declare_self_failed();
        format!(
            "{}: declared failed by the cluster (its peers stopped hearing from it); its partitions are served by their backups now, so it stops",
            self.boot.describe(self.rank)
        )
    }

    fn describe(&self, party: NodeId) -> String {
        self.boot.describe(party as u32)
    }
}

/// `message` as a frame's kind and body words.
fn frame_of(message: &Message) -> (Kind, Vec<u64>) {
    let with_counts = |counts: &RecoveryCounts, rest: Vec<u64>| {
        let mut words = counts.to_words().to_vec();
        words.extend(rest);
        words
    };
    match message {
        Message::Suspect(node) => (Kind::Suspect, vec![*node as u64]),
        Message::Fail(node) => (Kind::Fail, vec![*node as u64]),
        Message::Quiet => (Kind::Quiet, Vec::new()),
        Message::Drain => (Kind::Drain, Vec::new()),
        Message::Doubts(counts, doubts) => (Kind::Doubts, with_counts(counts, doubts.encode())),
        Message::Decide(committed) => (Kind::Decide, committed.clone()),
        Message::Synced(counts, summary) => (Kind::Synced, with_counts(counts, summary.clone())),
        Message::Fetch(buckets) => (Kind::Fetch, buckets.clone()),
        Message::Versions(digest) => (Kind::Versions, digest.clone()),
        Message::Install(entries) => (Kind::Install, entries.clone()),
        Message::Recovered(counts) => (Kind::Recovered, counts.to_words().to_vec()),
        Message::Resume(recovery_ns) => (Kind::Resume, vec![*recovery_ns]),
    }
}

/// The message `frame` carries; `None` when it is no failover frame.
fn message_of(frame: &Frame) -> Result<Option<Message>, String> {
    // Quiet and Drain have no body; every other failover frame has words.
    let words = || decode(&frame.body);
    let first = |what: &str| -> Result<u64, String> {
        words()?
            .first()
            .copied()
            .ok_or_else(|| format!("empty {what}"))
    };
    let split_counts = |what: &str| -> Result<(RecoveryCounts, Vec<u64>), String> {
        let words = words()?;
        match words.split_first_chunk::<{ RecoveryCounts::WORDS }>() {
            Some((counts, rest)) => Ok((RecoveryCounts::from_words(*counts), rest.to_vec())),
            None => Err(format!("malformed {what}")),
        }
    };
    Ok(Some(match frame.kind {
        Kind::Suspect => {
            let node = first("Suspect")?;
            let node = NodeId::try_from(node)
                .map_err(|_| format!("suspects node {node}, which does not exist"))?;
            Message::Suspect(node)
        }
        Kind::Fail => Message::Fail(first("Fail")? as NodeId),
        Kind::Quiet => Message::Quiet,
        Kind::Drain => Message::Drain,
        Kind::Doubts => {
            let (counts, rest) = split_counts("Doubts")?;
            Message::Doubts(counts, Doubts::decode(&rest)?)
        }
        Kind::Decide => Message::Decide(words()?),
        Kind::Synced => {
            let (counts, summary) = split_counts("Synced")?;
            Message::Synced(counts, summary)
        }
        Kind::Fetch => Message::Fetch(words()?),
        Kind::Versions => Message::Versions(words()?),
        Kind::Install => Message::Install(words()?),
        Kind::Recovered => {
            let (counts, rest) = split_counts("Recovered")?;
            if !rest.is_empty() {
                return Err("malformed Recovered".into());
            }
            Message::Recovered(counts)
        }
        Kind::Resume => Message::Resume(first("Resume")?),
        _ => return Ok(None),
    }))
}

fn encode(words: &[u64]) -> Vec<u8> {
    let mut enc = Enc::default();
    enc.words(words);
    enc.bytes
}

fn decode(body: &[u8]) -> Result<Vec<u64>, String> {
    Dec::new(body).words("failover message")
}
