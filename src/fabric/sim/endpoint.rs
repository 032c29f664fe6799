//! The worker's side of the `sim` fabric: [`SimEndpoint`] implements
//! [`Endpoint`] over the shared simulation state, charging each call's
//! modeled CPU time to its worker's virtual clock (the parent's module
//! doc, "CPU time") and counting what it sends as `ucx` would.
//!
//! Invariants: a worker's clock only moves forward; a node's verbs to
//! itself take effect at once (DrTM+H §4.1); a turn's outboxes are empty
//! when the worker goes idle (`SimFabric::turn_done` sent them).

use std::cell::RefCell;
use std::rc::Rc;

use super::{SimState, SPARE_RESULTS};
use crate::fabric::verbs::{COALESCED_HEADER_WORDS, MSG_COMPLETION, MSG_REPLY};
use crate::fabric::{CpuOp, Doorbell, Endpoint, Message, NodeId, Posted, VerbCounters};

/// One worker's endpoint on the simulated cluster.
pub struct SimEndpoint {
    state: Rc<RefCell<SimState>>,
    node: NodeId,
    worker: u16,
    index: u32,
    counters: VerbCounters,
}

impl SimEndpoint {
    pub(super) fn new(state: Rc<RefCell<SimState>>, node: NodeId, worker: u16) -> SimEndpoint {
        let index = node as u32 * state.borrow().workers_per_node as u32 + worker as u32;
        SimEndpoint {
            state,
            node,
            worker,
            index,
            counters: VerbCounters::default(),
        }
    }

    fn advance(&self, ns: u64) {
        self.state.borrow_mut().clock_ns[self.index as usize] += ns;
    }
}

impl Endpoint for SimEndpoint {
    fn node(&self) -> NodeId {
        self.node
    }

    fn crashed(&self) -> bool {
        let state = self.state.borrow();
        state.crashed(self.node, state.clock_ns[self.index as usize])
    }

    fn worker(&self) -> u16 {
        self.worker
    }

    #[inline]
    fn now_ns(&self) -> u64 {
        self.state.borrow().clock_ns[self.index as usize]
    }

    fn post_doorbell(&mut self, doorbell: Doorbell<'_>, results: &mut [u64]) -> Posted {
        let verbs = doorbell.verbs;
        let Some(target) = self.counters.count_batch(verbs) else {
            return Posted::At(0);
        };
        let mut state = self.state.borrow_mut();
        let cost = state.cpu.post_ns + state.cpu.verb_ns * verbs.len() as u64;
        state.clock_ns[self.index as usize] += cost;
        if target != self.node {
            self.counters.count_remote_verbs(verbs);
            state.post_remote(self.index, doorbell);
            return Posted::Deferred;
        }
        // Local verbs bypass the NIC and take effect at once.
        let region = &state.regions[target as usize];
        for verb in verbs {
            region.apply(verb, doorbell.write_data, results);
        }
        Posted::At(0)
    }

    fn send(&mut self, msg: Message) {
        self.counters.count_send(&msg);
        let remote_bytes = (msg.dst_node != self.node).then(|| msg.wire_bytes());
        let mut state = self.state.borrow_mut();
        state.clock_ns[self.index as usize] += state.cpu.frame_ns;
        let opened = state.send(self.index, msg);
        // Counted as `ucx` counts what leaves: a wire message when it is
        // opened (it leaves exactly once), and each frame's bytes.
        if let Some(bytes) = remote_bytes {
            if opened {
                self.counters.wire_messages += 1;
                self.counters.wire_bytes += 8 * COALESCED_HEADER_WORDS as u64;
            }
            self.counters.wire_bytes += bytes;
        }
    }

    fn receive(&mut self, out: &mut Vec<Message>) {
        let mut state = self.state.borrow_mut();
        let index = self.index as usize;
        // What this turn sent before receiving (replies to requests that
        // waited) leaves now, as `ucx` flushes at the start of `receive`.
        state.flush(self.index);
        if state.mailboxes[index].is_empty() {
            return;
        }
        let cpu = state.cpu;
        let mut cost = 0;
        for msg in state.mailboxes[index].iter() {
            cost += if msg.flags & (MSG_REPLY | MSG_COMPLETION) != 0 {
                cpu.completion_ns
            } else {
                cpu.handler_ns + cpu.handler_word_ns * msg.payload.len() as u64
            };
        }
        out.append(&mut state.mailboxes[index]);
        state.clock_ns[index] += cost;
    }

    fn spend_cpu(&mut self, ns: u64) {
        self.advance(ns);
    }

    fn charge(&mut self, op: CpuOp, count: u32) {
        let cost = {
            let cpu = &self.state.borrow().cpu;
            match op {
                CpuOp::Turn => cpu.event_loop_ns,
                CpuOp::Switch => cpu.switch_ns,
                CpuOp::Access => cpu.access_ns,
                CpuOp::RecoveryTuple => cpu.recovery_tuple_ns,
            }
        };
        self.advance(cost * count as u64);
    }

    fn idle(&mut self, _wake_at_ns: Option<u64>) {
        // The driver runs a worker only when it has something to do; the
        // gap until then is its idle time. `turn_done` already sent what
        // the last turn queued.
        debug_assert!(self.state.borrow().outboxes[self.index as usize].is_empty());
    }

    fn counters(&self) -> &VerbCounters {
        &self.counters
    }

    fn recycle(&mut self, buffer: Vec<u64>) {
        let mut state = self.state.borrow_mut();
        if state.spare_results.len() < SPARE_RESULTS {
            state.spare_results.push(buffer);
        }
    }
}
