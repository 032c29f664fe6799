//! The failure detector: heartbeats in registered memory, read one-sided.
//!
//! The scheme is the lease of DrTM §4.5 and FaRM (Dragojević et al., NSDI
//! 2014, §5: a lease held by a CPU that keeps renewing it), built from the
//! fabric's own verbs so that it runs alike on `sim`, `threads` and `ucx`:
//! * worker 0 of every node bumps a heartbeat word in its node's region
//!   every `heartbeat_interval` — with its CPU, from its event loop, so a
//!   node whose CPUs stopped (crashed, or paused for longer than the
//!   timeout) stops renewing even if its NIC still serves verbs;
//! * on the same tick it READs every live peer's heartbeat word
//!   (one-sided: no peer CPU involved, one READ per peer per interval, at
//!   most one outstanding per peer);
//! * a peer is suspected once a READ posted more than `timeout` after
//!   the READ that last saw its word advance has come back without an
//!   advance (or has not come back for `timeout`); the [`FailureHook`]
//!   decides, and only a failure it accepts is declared in the node's
//!   [`Membership`]. A refused suspicion (a replicated run's recovery
//!   will not fail over the last live copy of a partition) leaves the peer
//!   a member: what this node sends it still goes out and waits, as to a
//!   slow peer, and the peer is suspected again only after its heartbeat
//!   advanced once more. A refused suspect that the membership declared
//!   anyway would drop this node's committing log rounds to it, and the
//!   backups it holds would fall behind their primaries.
//!
//! Silence is measured between the *posts* of answered READs, not by the
//! observer's clock alone: an observer whose own turns are slow (a loaded
//! worker on `sim`, whose turn can take a heartbeat or two) or whose READs
//! queue behind a busy NIC does not mistake the delay for a death — it
//! only declares one when a question asked well after the last sign of
//! life has been answered with none. A READ to a crashed peer brings no
//! news (the backend bounces it as `MSG_FAILED`), so detection takes
//! between `timeout` and `timeout + interval` plus one round trip after
//! the last heartbeat the peer wrote. On `sim` all of it runs in virtual
//! time, so detection is deterministic given the seed.
//!
//! Self-stall guard: if this worker itself did not tick for more than half
//! the timeout (an OS that descheduled the thread, a paused node), it saw
//! nothing in between, so every peer's clock restarts — a stalled observer
//! must not declare its peers dead. Likewise while the cluster recovers
//! from a failure (`FailureHook::may_suspect`): the survivor that runs the
//! recovery renews nothing until it is done, so no member is judged, and
//! their clocks restart on each tick until the survivors resume; a peer
//! the configuration already failed is still declared. A second failure
//! during a recovery is detected after it.
//!
//! Invariants: `next_tick_ns` only grows; a peer is declared once, and
//! only with the hook's consent; a peer is reported to the hook at most
//! once per silence; the heartbeat value written only grows (so a peer
//! sees it advance).

use std::sync::Arc;

use super::{FailureHook, Membership};
use crate::config::faults::DetectorSettings;
use crate::fabric::verbs::{MSG_COMPLETION, MSG_FAILED};
use crate::fabric::{Endpoint, Message, NodeId, Posted, Verb, VerbKind};
use crate::runtime::{Monitor, MONITOR_CO};

/// The `tag` of the heartbeat's own WRITE (peer READs carry the peer id).
const BEAT_TAG: u16 = u16::MAX;

#[derive(Clone, Copy, Debug)]
struct Peer {
    last_value: u64,
    /// Post time of the READ that last saw the heartbeat advance.
    last_advance_ns: u64,
    /// Post time of the latest READ that came back (with news or not).
    answered_ns: u64,
    /// Post time of the outstanding READ, if `outstanding`.
    posted_ns: u64,
    outstanding: bool,
    /// Reported to the hook, which refused to fail it; cleared when its
    /// heartbeat advances again.
    refused: bool,
}

/// One node's detector, run by its worker 0's event loop.
pub struct Detector {
    node: NodeId,
    settings: DetectorSettings,
    heartbeat_addr: u64,
    membership: Arc<Membership>,
    hook: Arc<dyn FailureHook>,
    beat: u64,
    next_tick_ns: u64,
    last_tick_ns: Option<u64>,
    peers: Vec<Peer>,
    /// Result words of READs a backend completes at once (`Posted::At`).
    results: Vec<u64>,
    write_data: [u64; 1],
}

impl Detector {
    pub fn new(
        membership: Arc<Membership>,
        hook: Arc<dyn FailureHook>,
        settings: DetectorSettings,
        heartbeat_addr: u64,
        nodes: u32,
    ) -> Detector {
        debug_assert!(settings.heartbeat_interval_ns > 0);
        Detector {
            node: membership.node(),
            settings,
            heartbeat_addr,
            membership,
            hook,
            beat: 0,
            next_tick_ns: 0,
            last_tick_ns: None,
            peers: vec![
                Peer {
                    last_value: 0,
                    last_advance_ns: 0,
                    answered_ns: 0,
                    posted_ns: 0,
                    outstanding: false,
                    refused: false,
                };
                nodes as usize
            ],
            results: vec![0; nodes as usize],
            write_data: [0],
        }
    }

    pub fn membership(&self) -> &Arc<Membership> {
        &self.membership
    }

    /// When the detector next needs a turn.
    pub fn next_tick_ns(&self) -> u64 {
        self.next_tick_ns
    }

    /// One tick if it is due: renew the heartbeat, READ the peers', judge.
    /// Returns whether it did anything.
    pub fn tick(&mut self, endpoint: &mut dyn Endpoint, now_ns: u64) -> bool {
        if now_ns < self.next_tick_ns {
            return false;
        }
        let interval = self.settings.heartbeat_interval_ns;
        let stalled = self
            .last_tick_ns
            .is_none_or(|last| now_ns.saturating_sub(last) > self.settings.timeout_ns / 2);
        for (peer, state) in self.peers.iter_mut().enumerate() {
            if stalled || !self.hook.may_suspect(peer as NodeId, now_ns) {
                state.last_advance_ns = now_ns;
                state.answered_ns = now_ns;
            }
        }
        self.last_tick_ns = Some(now_ns);
        self.next_tick_ns = now_ns + interval;

        self.beat += 1;
        self.write_data[0] = self.beat;
        let beat = Verb {
            kind: VerbKind::Write,
            node: self.node,
            addr: self.heartbeat_addr,
            len: 1,
            buf: 0,
            compare: 0,
            swap: 0,
        };
        endpoint.post(
            MONITOR_CO,
            BEAT_TAG,
            &[beat],
            &self.write_data,
            &mut self.results,
        );
        for peer in 0..self.peers.len() as NodeId {
            if peer == self.node
                || !self.membership.is_alive(peer)
                || self.peers[peer as usize].outstanding
            {
                continue;
            }
            let read = Verb {
                kind: VerbKind::Read,
                node: peer,
                addr: self.heartbeat_addr,
                len: 1,
                buf: peer as u32,
                compare: 0,
                swap: 0,
            };
            self.peers[peer as usize].posted_ns = now_ns;
            match endpoint.post(MONITOR_CO, peer, &[read], &[], &mut self.results) {
                Posted::At(_) => {
                    let value = self.results[peer as usize];
                    self.observe(peer, value, now_ns);
                }
                Posted::Deferred => self.peers[peer as usize].outstanding = true,
            }
        }
        self.judge(now_ns);
        true
    }

    /// A deferred completion of one of the detector's verbs.
    pub fn on_completion(&mut self, msg: &Message, now_ns: u64) {
        debug_assert_eq!(msg.coroutine, MONITOR_CO);
        debug_assert!(msg.flags & MSG_COMPLETION != 0);
        if msg.call == BEAT_TAG {
            return;
        }
        let peer = msg.call;
        let state = &mut self.peers[peer as usize];
        state.outstanding = false;
        let posted_ns = state.posted_ns;
        if msg.flags & MSG_FAILED == 0 {
            self.observe(peer, msg.payload[0], posted_ns);
        } else {
            state.answered_ns = state.answered_ns.max(posted_ns);
        }
        self.judge(now_ns);
    }

    /// The READ posted at `posted_ns` to `peer` came back with `value`.
    fn observe(&mut self, peer: NodeId, value: u64, posted_ns: u64) {
        let state = &mut self.peers[peer as usize];
        state.outstanding = false;
        state.answered_ns = state.answered_ns.max(posted_ns);
        if value != state.last_value {
            state.last_value = value;
            state.last_advance_ns = state.last_advance_ns.max(posted_ns);
            state.refused = false;
        }
    }

    fn judge(&mut self, now_ns: u64) {
        for peer in 0..self.peers.len() as NodeId {
            if peer == self.node
                || !self.membership.is_alive(peer)
                || !self.silent(peer, now_ns)
                || !self.hook.may_suspect(peer, now_ns)
            {
                continue;
            }
            if self.hook.on_suspected(self.node, peer, now_ns) {
                self.membership.declare_dead(peer, now_ns);
            } else {
                self.peers[peer as usize].refused = true;
            }
        }
    }

    /// Whether `peer` has been silent past the timeout and not yet been
    /// reported for this silence.
    fn silent(&self, peer: NodeId, now_ns: u64) -> bool {
        let timeout = self.settings.timeout_ns;
        let state = &self.peers[peer as usize];
        let answered_silence = state.answered_ns.saturating_sub(state.last_advance_ns);
        let unanswered = state.outstanding
            && state.posted_ns > state.last_advance_ns
            && now_ns.saturating_sub(state.posted_ns) > timeout;
        !state.refused && (answered_silence > timeout || unanswered)
    }
}

impl Monitor for Detector {
    fn tick(&mut self, endpoint: &mut dyn Endpoint, now_ns: u64) -> bool {
        Detector::tick(self, endpoint, now_ns)
    }

    fn on_completion(&mut self, msg: &Message, now_ns: u64) {
        Detector::on_completion(self, msg, now_ns)
    }

    fn next_tick_ns(&self) -> u64 {
        Detector::next_tick_ns(self)
    }
}
