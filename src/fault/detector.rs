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
//! * a peer whose word has not advanced for `timeout` is declared dead in
//!   the node's [`Membership`], and the [`FailureHook`] is told.
//!
//! A READ to a crashed peer never brings news (the backend bounces it as
//! `MSG_FAILED`, or it never completes), so detection takes between
//! `timeout` and `timeout + interval` after the last heartbeat the peer
//! wrote. On `sim` all of it runs in virtual time, so detection is
//! deterministic given the seed.
//!
//! Self-stall guard: if this worker itself did not tick for more than half
//! the timeout (an OS that descheduled the thread, a paused node), it saw
//! nothing in between, so every peer's clock restarts — a stalled observer
//! must not declare its peers dead.
//!
//! Invariants: `next_tick_ns` only grows; a peer is declared once; the
//! heartbeat value written only grows (so a peer sees it advance).

use std::sync::Arc;

use super::{DetectorSettings, FailureHook, Membership};
use crate::fabric::verbs::{MSG_COMPLETION, MSG_FAILED};
use crate::fabric::{Endpoint, Message, NodeId, Posted, Verb, VerbKind};

/// The coroutine id the detector's verbs carry on the wire (no transaction
/// coroutine has it: `config::MAX_COROUTINES` is 255).
pub const DETECTOR_CO: u16 = u16::MAX - 1;
/// The `tag` of the heartbeat's own WRITE (peer READs carry the peer id).
const BEAT_TAG: u16 = u16::MAX;

#[derive(Clone, Copy, Debug)]
struct Peer {
    last_value: u64,
    last_advance_ns: u64,
    outstanding: bool,
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
                    outstanding: false,
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
        if stalled {
            for peer in &mut self.peers {
                peer.last_advance_ns = now_ns;
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
            DETECTOR_CO,
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
            match endpoint.post(DETECTOR_CO, peer, &[read], &[], &mut self.results) {
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
        debug_assert_eq!(msg.coroutine, DETECTOR_CO);
        debug_assert!(msg.flags & MSG_COMPLETION != 0);
        if msg.call == BEAT_TAG {
            return;
        }
        let peer = msg.call;
        self.peers[peer as usize].outstanding = false;
        if msg.flags & MSG_FAILED == 0 {
            self.observe(peer, msg.payload[0], now_ns);
        }
    }

    fn observe(&mut self, peer: NodeId, value: u64, now_ns: u64) {
        let state = &mut self.peers[peer as usize];
        state.outstanding = false;
        if value != state.last_value {
            state.last_value = value;
            state.last_advance_ns = now_ns;
        }
    }

    fn judge(&mut self, now_ns: u64) {
        for peer in 0..self.peers.len() as NodeId {
            if peer == self.node || !self.membership.is_alive(peer) {
                continue;
            }
            let silent_ns = now_ns.saturating_sub(self.peers[peer as usize].last_advance_ns);
            if silent_ns > self.settings.timeout_ns && self.membership.declare_dead(peer, now_ns) {
                self.hook.on_node_failed(self.node, peer, now_ns);
            }
        }
    }
}
