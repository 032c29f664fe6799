//! One-sided verbs on the `sim` fabric (the parent's module doc, "Latency
//! model per verb"): a doorbell batch is posted with its operands copied,
//! each verb takes effect at the target at its modeled arrival time (a
//! multi-word READ one word per step, lazily, see `PendingRead`), and the
//! batch completes at its poster as a `MSG_COMPLETION` message.
//!
//! Invariants: verbs of one queue pair apply in issue order, each after
//! the previous one's last step; a batch completes strictly after its
//! last step; a verb a drop loses arrives late, once (the transport sends
//! it again, `transport`); a batch lost to a crash, or to a connection
//! that ran out of retries, comes back as `MSG_FAILED` from its target.

use super::transport::Transfer;
use super::{Event, InFlight, PendingRead, SimState, SimVerb, NO_PENDING};
use crate::fabric::verbs::{VerbKind, MSG_COMPLETION, MSG_FAILED};
use crate::fabric::{Doorbell, Message};

impl SimState {
    pub(super) fn post_remote(&mut self, initiator: u32, doorbell: Doorbell<'_>) {
        let verbs = doorbell.verbs;
        let issue_ns = self.clock_ns[initiator as usize];
        let source = self.node_of(initiator);
        let target = verbs[0].node;
        // The results become the completion's payload (the runtime keeps
        // it, and hands it back once its coroutine's pool is full), so they
        // are reserved once at their final size; the verbs and write data
        // come back for reuse when the batch completes.
        let result_words = verbs
            .iter()
            .filter(|v| v.kind != VerbKind::Write)
            .map(|v| v.len as usize)
            .sum();
        let mut results = self.spare_results.pop().unwrap_or_default();
        results.clear();
        results.reserve(result_words);
        let mut batch = InFlight {
            initiator,
            coroutine: doorbell.coroutine,
            tag: doorbell.tag,
            target,
            verbs: self.spare_verbs.pop().unwrap_or_default(),
            write_data: self.spare_write_data.pop().unwrap_or_default(),
            results,
            lost: false,
        };
        debug_assert!(batch.verbs.is_empty() && batch.write_data.is_empty());
        let batch_id = match self.free_batches.pop() {
            Some(id) => id,
            None => {
                self.batches.push(None);
                (self.batches.len() - 1) as u32
            }
        };
        let connection_ns = match self.connections.as_mut() {
            Some(caches) => caches.batch_extra_ns(initiator, source, target),
            None => 0,
        };
        let mut complete_ns = issue_ns + 1;
        let qp = initiator as usize * self.regions.len() + target as usize;
        let mut qp_free = self.qp_free_ns[qp];
        for (index, verb) in verbs.iter().enumerate() {
            let (one_way, out_bytes, back_bytes) = match verb.kind {
                VerbKind::Read => (self.timing.onesided_one_way_ns, 16, 8 * verb.len as u64),
                VerbKind::Write => (self.timing.onesided_one_way_ns, 16 + 8 * verb.len as u64, 8),
                VerbKind::Cas | VerbKind::Faa => (self.timing.atomic_one_way_ns, 32, 8),
            };
            let buf = match verb.kind {
                VerbKind::Write => {
                    let at = batch.write_data.len() as u32;
                    let from = verb.buf as usize;
                    batch
                        .write_data
                        .extend_from_slice(&doorbell.write_data[from..from + verb.len as usize]);
                    at
                }
                _ => {
                    let at = batch.results.len() as u32;
                    batch.results.resize(at as usize + verb.len as usize, 0);
                    at
                }
            };
            batch.verbs.push(SimVerb {
                kind: verb.kind,
                addr: verb.addr,
                len: verb.len,
                buf,
                compare: verb.compare,
                swap: verb.swap,
            });
            let out = self.jittered(one_way) + self.wire_ns(out_bytes);
            let extra = match self.transfer(source, target, issue_ns) {
                Transfer::Delivered { extra_ns } => extra_ns,
                Transfer::Failed { at_ns } => {
                    // Every copy was lost on the way out: the verb takes
                    // effect nowhere, and the batch completes with an
                    // error once the transport gives up.
                    batch.lost = true;
                    complete_ns = complete_ns.max(at_ns + 1);
                    continue;
                }
            };
            let arrival = self.through_nic(target, issue_ns + out + extra + connection_ns);
            let start = arrival.max(qp_free);
            let steps = if verb.kind == VerbKind::Read {
                verb.len as u64
            } else {
                1
            };
            let last_step = start + (steps - 1) * self.timing.word_ns;
            qp_free = last_step + 1;
            self.schedule(
                target,
                start,
                Event::Step {
                    batch: batch_id,
                    verb: index as u16,
                },
            );
            let back = (self.jittered(one_way) + self.wire_ns(back_bytes)).max(1);
            complete_ns = complete_ns.max(last_step + back);
        }
        self.qp_free_ns[qp] = qp_free;
        self.batches[batch_id as usize] = Some(batch);
        self.schedule(source, complete_ns, Event::Complete { batch: batch_id });
    }

    /// A verb lands on its target: a WRITE whole, a CAS/FAA atomically,
    /// a READ's first word and the words after it that no other event can
    /// come between; the step that would copy its next word is left
    /// pending ([`PendingRead`]).
    pub(super) fn step(&mut self, batch_id: u32, verb_index: u16) {
        let Some(batch) = self.batches[batch_id as usize].as_ref() else {
            return;
        };
        if self.now_ns >= self.crash_at_ns[batch.target as usize] {
            let batch = self.batches[batch_id as usize].as_mut().expect("checked");
            batch.lost = true;
            return;
        }
        let verb = &batch.verbs[verb_index as usize];
        if verb.kind == VerbKind::Read {
            // The next event: a queued one or another READ's pending step.
            let next_key = self
                .queue
                .peek_key()
                .unwrap_or(u64::MAX)
                .min(self.pending_min.0);
            let read = PendingRead {
                at_ns: self.now_ns,
                seq: 0,
                batch: batch_id,
                verb: verb_index,
                node: batch.target,
                word: 0,
            };
            if let Some(rest) = self.copy_words(read, next_key) {
                self.pending_reads.push(rest);
                self.pending_min = self.pending_min.min(self.read_key(&rest));
            }
            return;
        }
        let batch = self.batches[batch_id as usize].as_mut().expect("checked");
        let region = &self.regions[batch.target as usize];
        let verb = &batch.verbs[verb_index as usize];
        match verb.kind {
            // A WRITE's payload lands at once (it arrived whole); only
            // READs are copied out word by word, so a READ overlapping a
            // WRITE sees some words before it and some after: a torn READ.
            VerbKind::Write => {
                let data = &batch.write_data[verb.buf as usize..(verb.buf + verb.len) as usize];
                region.write(verb.addr, data);
            }
            VerbKind::Cas => {
                batch.results[verb.buf as usize] = region.cas(verb.addr, verb.compare, verb.swap)
            }
            VerbKind::Faa => batch.results[verb.buf as usize] = region.faa(verb.addr, verb.compare),
            VerbKind::Read => unreachable!("handled above"),
        }
    }

    /// A pending READ step's place in the processing order.
    pub(super) fn read_key(&self, read: &PendingRead) -> (u64, u64) {
        (self.order.key(read.node, read.at_ns), read.seq)
    }

    /// Copies the words of a READ from `read.word` (due at `read.at_ns`)
    /// on, one `word_ns` apart, while the next word comes before
    /// `next_key` (the next event's key): what one step of the READ does.
    /// Returns its next step when words remain, keyed with a fresh
    /// insertion number as a queued step would be.
    pub(super) fn copy_words(
        &mut self,
        mut read: PendingRead,
        next_key: u64,
    ) -> Option<PendingRead> {
        let word_ns = self.timing.word_ns;
        let next_ns = self.order.first_time_at_or_after(read.node, next_key);
        let batch = self.batches[read.batch as usize]
            .as_mut()
            .expect("a READ's batch is in flight until it completes");
        let region = &self.regions[batch.target as usize];
        let verb = &batch.verbs[read.verb as usize];
        debug_assert_eq!(verb.kind, VerbKind::Read);
        loop {
            batch.results[verb.buf as usize + read.word as usize] =
                region.load(verb.addr + read.word as u64);
            read.word += 1;
            if read.word == verb.len {
                return None;
            }
            read.at_ns += word_ns;
            if next_ns <= read.at_ns {
                break;
            }
        }
        read.seq = self.next_seq;
        self.next_seq += 1;
        Some(read)
    }

    /// Runs, in order, every pending READ step that comes before `(key,
    /// seq)`, the queued event about to be processed: where the queue
    /// would have popped each.
    pub(super) fn catch_up(&mut self, key: u64, seq: u64) {
        while self.pending_min < (key, seq) {
            let (mut first, mut next_key) = (0, key);
            for (index, read) in self.pending_reads.iter().enumerate() {
                let read_key = self.read_key(read);
                if read_key == self.pending_min {
                    first = index;
                } else {
                    next_key = next_key.min(read_key.0);
                }
            }
            let read = self.pending_reads.swap_remove(first);
            debug_assert_eq!(self.read_key(&read), self.pending_min);
            debug_assert!(self.pending_min.0 >= self.now_key, "went back in the order");
            self.now_key = self.pending_min.0;
            self.now_ns = read.at_ns;
            self.frontier_ns = self.frontier_ns.max(read.at_ns);
            let batch = self.batches[read.batch as usize]
                .as_mut()
                .expect("a READ's batch is in flight until it completes");
            if read.at_ns >= self.crash_at_ns[batch.target as usize] {
                batch.lost = true;
            } else if let Some(rest) = self.copy_words(read, next_key) {
                self.pending_reads.push(rest);
            }
            self.pending_min = self
                .pending_reads
                .iter()
                .map(|r| self.read_key(r))
                .min()
                .unwrap_or(NO_PENDING);
        }
    }

    pub(super) fn complete(&mut self, batch_id: u32) {
        // Its READs' last steps came before now (a batch completes
        // strictly after its last step).
        debug_assert!(self.pending_reads.iter().all(|p| p.batch != batch_id));
        let mut batch = self.batches[batch_id as usize]
            .take()
            .expect("a batch completes once");
        self.free_batches.push(batch_id);
        let (mut verbs, mut write_data) = (
            std::mem::take(&mut batch.verbs),
            std::mem::take(&mut batch.write_data),
        );
        let verb_count = verbs.len() as u16;
        verbs.clear();
        write_data.clear();
        self.spare_verbs.push(verbs);
        self.spare_write_data.push(write_data);
        let initiator_node = self.node_of(batch.initiator);
        if self.crashed(initiator_node, self.now_ns) {
            self.lost_count += 1;
            return;
        }
        let failed = batch.lost;
        if failed {
            self.lost_count += 1;
        }
        let worker = batch.initiator;
        let msg = Message {
            // A failed batch names the crashed node as its source.
            src_node: if failed { batch.target } else { initiator_node },
            src_worker: (worker % self.workers_per_node as u32) as u16,
            dst_node: initiator_node,
            dst_worker: (worker % self.workers_per_node as u32) as u16,
            coroutine: batch.coroutine,
            call: batch.tag,
            kind: verb_count,
            flags: if failed {
                MSG_COMPLETION | MSG_FAILED
            } else {
                MSG_COMPLETION
            },
            deliver_at_ns: self.now_ns,
            payload: batch.results,
        };
        self.mailboxes[worker as usize].push(msg);
        self.wake(worker, self.now_ns);
    }
}
