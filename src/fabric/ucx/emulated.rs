//! One-sided verbs the CPU runs: on a region mapped into this process, on
//! this node's own region, or — where the transport has no RMA (TCP) — on
//! the target, which runs a batch sent as an active message for the
//! sender and answers with its results (see the module docs of
//! `fabric::ucx`).

use super::endpoint::Awaited;
use super::*;
use crate::fabric::Doorbell;

impl UcxEndpoint {
    /// One-sided verbs run for the sender, by this worker (a peer's
    /// `MSG_VERBS` requests), and results of its own (`MSG_VERBS` replies,
    /// turned into the batch's completion). Every other message in
    /// `out[first_new..]` stays, in order.
    pub(super) fn serve_verbs(&mut self, out: &mut Vec<Message>, first_new: usize) {
        if !out[first_new..].iter().any(|m| m.flags & MSG_VERBS != 0) {
            return;
        }
        let mut arrivals = std::mem::take(&mut self.arrivals);
        arrivals.extend(out.drain(first_new..));
        for msg in arrivals.drain(..) {
            if msg.flags & MSG_VERBS == 0 {
                out.push(msg);
            } else if msg.flags & MSG_REPLY == 0 {
                self.run_for_peer(msg);
            } else {
                self.complete_verbs(msg, out);
            }
        }
        self.arrivals = arrivals;
    }

    /// Runs a peer's batch on this node's region and answers it with the
    /// results of its READs, CASes and FAAs, in verb order.
    pub(super) fn run_for_peer(&mut self, msg: Message) {
        let mut results = self.state().pool.pop().unwrap_or_default();
        results.clear();
        let words = self.region.len_words();
        let request = &msg.payload;
        let mut at = 0;
        let mut well_formed = true;
        while at + 2 <= request.len() {
            let (code, len, addr) = (request[at] & 0xff, request[at] >> 8, request[at + 1]);
            at += 2;
            let operands = match code {
                VERB_WRITE => len as usize,
                VERB_CAS => 2,
                VERB_FAA => 1,
                _ => 0,
            };
            if code > VERB_FAA
                || at + operands > request.len()
                || addr.checked_add(len).is_none_or(|end| end > words)
            {
                well_formed = false;
                break;
            }
            match code {
                VERB_READ => {
                    let start = results.len();
                    results.resize(start + len as usize, 0);
                    self.region.read(addr, &mut results[start..]);
                }
                VERB_WRITE => self.region.write(addr, &request[at..at + operands]),
                VERB_CAS => results.push(self.region.cas(addr, request[at], request[at + 1])),
                _ => results.push(self.region.faa(addr, request[at])),
            }
            at += operands;
        }
        let well_formed = well_formed && at == request.len();
        let peer = msg.src_node;
        self.state().pool.push(msg.payload);
        if !well_formed {
            // Only a peer built otherwise (another verbena) sends this.
            self.failure.set(peer, UCS_ERR_INVALID_PARAM);
            self.state().pool.push(results);
            return;
        }
        if self.track && self.failure.is_dead(peer) {
            self.state().pool.push(results);
            return;
        }
        self.send_am(Message {
            src_node: self.node,
            src_worker: self.worker_index,
            dst_node: peer,
            dst_worker: msg.src_worker,
            coroutine: msg.coroutine,
            call: msg.call,
            kind: msg.kind,
            flags: MSG_VERBS | MSG_REPLY,
            deliver_at_ns: 0,
            payload: results,
        });
    }

    /// A peer's answer to one of this worker's batches: its completion,
    /// unless the batch was already failed (the peer declared dead).
    pub(super) fn complete_verbs(&mut self, msg: Message, out: &mut Vec<Message>) {
        if self.track {
            let Some(index) = self.awaiting.iter().position(|a| {
                a.verbs
                    && a.node == msg.src_node
                    && a.coroutine == msg.coroutine
                    && a.call == msg.call
            }) else {
                self.state().pool.push(msg.payload);
                return;
            };
            self.awaiting.swap_remove(index);
        }
        out.push(Message {
            src_node: self.node,
            src_worker: self.worker_index,
            dst_node: self.node,
            dst_worker: self.worker_index,
            coroutine: msg.coroutine,
            call: msg.call,
            kind: msg.kind,
            flags: MSG_COMPLETION,
            deliver_at_ns: 0,
            payload: msg.payload,
        });
    }

    /// Sends a batch to `target` for its fabric to run (`emulate`).
    pub(super) fn post_to_peer(&mut self, doorbell: Doorbell<'_>, target: NodeId) {
        let verbs = doorbell.verbs;
        let mut payload = self.state().pool.pop().unwrap_or_default();
        payload.clear();
        for verb in verbs {
            debug_assert_eq!(verb.node, target, "a doorbell batch targets one node");
            self.counters.count(verb);
            let len = verb.len as u64;
            let buf = verb.buf as usize;
            match verb.kind {
                VerbKind::Read => payload.extend_from_slice(&[VERB_READ | len << 8, verb.addr]),
                VerbKind::Write => {
                    payload.extend_from_slice(&[VERB_WRITE | len << 8, verb.addr]);
                    payload.extend_from_slice(&doorbell.write_data[buf..buf + verb.len as usize]);
                }
                VerbKind::Cas => payload.extend_from_slice(&[
                    VERB_CAS | 1 << 8,
                    verb.addr,
                    verb.compare,
                    verb.swap,
                ]),
                VerbKind::Faa => {
                    payload.extend_from_slice(&[VERB_FAA | 1 << 8, verb.addr, verb.compare])
                }
            }
        }
        self.counters.doorbells += 1;
        if self.track {
            self.awaiting.push(Awaited {
                node: target,
                coroutine: doorbell.coroutine,
                call: doorbell.tag,
                kind: verbs.len() as u16,
                fail_flags: MSG_COMPLETION | MSG_FAILED,
                verbs: true,
            });
        }
        self.send_am(Message {
            src_node: self.node,
            src_worker: self.worker_index,
            dst_node: target,
            dst_worker: self.worker_index,
            coroutine: doorbell.coroutine,
            call: doorbell.tag,
            kind: verbs.len() as u16,
            flags: MSG_VERBS,
            deliver_at_ns: 0,
            payload,
        });
    }

    /// Runs a batch on `region` with CPU loads, stores and atomics, word by
    /// word (this node's own region with `local_atomics = cpu`, or a mapped
    /// one): complete when it returns.
    pub(super) fn run_on(
        region: &Region,
        counters: &mut VerbCounters,
        verbs: &[Verb],
        write_data: &[u64],
        results: &mut [u64],
    ) {
        for verb in verbs {
            counters.count(verb);
            region.apply(verb, write_data, results);
        }
        counters.doorbells += 1;
    }
}
