//! What comes back to a worker's coroutines, filed into their slots: RPC
//! replies, deferred verb completions, passive acknowledgements, and
//! `MSG_FAILED` messages — held until the membership declares their peer
//! dead, then filed as failures (the parent's module doc, "Failed
//! peers"); and, at the give-up time, everything still awaited, abandoned.
//!
//! Invariants: each filed reply or completion lowers its slot's `pending`
//! (awaited) or `unacked` (passive) count by exactly one; a failure is
//! filed only for a peer the membership no longer counts alive (or one
//! that refused); payload buffers go back to the coroutine's pool or, when
//! it is full, to the fabric that allocated them.

use super::{Worker, MONITOR_CO, PASSIVE_TAG};
use crate::fabric::verbs::{MSG_COMPLETION, MSG_PASSIVE, MSG_REFUSED};
use crate::fabric::{Batch, Message, VerbKind};

impl Worker {
    /// Keeps a payload buffer in a coroutine's pool, or, when that is
    /// full, hands it back to the fabric that allocated it.
    /// (Not while the endpoint is borrowed: `post` recycles itself.)
    pub(super) fn keep_buffer(&self, pool: &mut Vec<Vec<u64>>, buffer: Vec<u64>) {
        if let Some(excess) = Batch::keep(pool, buffer) {
            self.endpoint.borrow_mut().recycle(excess);
        }
    }

    pub(super) fn file_reply(&self, msg: Message) {
        let slot = &self.slots[msg.coroutine as usize];
        let mut batch = slot.batch.borrow_mut();
        if msg.flags & MSG_COMPLETION != 0 && msg.call == PASSIVE_TAG {
            debug_assert!(slot.unacked.get() > 0);
            slot.unacked.set(slot.unacked.get() - 1);
            self.keep_buffer(&mut batch.pool, msg.payload);
        } else if msg.flags & MSG_COMPLETION != 0 {
            // A deferred doorbell batch: scatter its results.
            let first = msg.call as usize;
            let mut from = 0;
            let Batch { verbs, results, .. } = &mut *batch;
            for verb in &verbs[first..first + msg.kind as usize] {
                if verb.kind != VerbKind::Write {
                    let len = verb.len as usize;
                    let at = verb.buf as usize;
                    results[at..at + len].copy_from_slice(&msg.payload[from..from + len]);
                    from += len;
                }
            }
            debug_assert_eq!(from, msg.payload.len(), "completion carries every result");
            debug_assert!(slot.pending.get() > 0, "completion nobody waits for");
            slot.pending.set(slot.pending.get() - 1);
            self.keep_buffer(&mut batch.pool, msg.payload);
        } else if msg.flags & MSG_PASSIVE != 0 {
            debug_assert!(slot.unacked.get() > 0);
            slot.unacked.set(slot.unacked.get() - 1);
            self.keep_buffer(&mut batch.pool, msg.payload);
        } else {
            debug_assert!(slot.pending.get() > 0, "reply nobody waits for");
            let call = msg.call as usize;
            debug_assert!(batch.replies[call].is_none());
            batch.replies[call] = Some(msg.payload);
            slot.pending.set(slot.pending.get() - 1);
        }
    }

    /// Files a `MSG_FAILED` message whose peer is declared dead: the
    /// operation it stands for completes, as a failure.
    pub(super) fn file_failed(&self, msg: Message) {
        if msg.coroutine as usize >= self.slots.len() {
            return; // the detector's: it judged the peer already
        }
        let slot = &self.slots[msg.coroutine as usize];
        let mut batch = slot.batch.borrow_mut();
        let passive = if msg.flags & MSG_COMPLETION != 0 {
            msg.call == PASSIVE_TAG
        } else {
            msg.flags & MSG_PASSIVE != 0
        };
        if passive {
            debug_assert!(slot.unacked.get() > 0);
            slot.unacked.set(slot.unacked.get().saturating_sub(1));
            self.keep_buffer(&mut batch.pool, msg.payload);
            return;
        }
        debug_assert!(slot.pending.get() > 0, "failure nobody waits for");
        slot.pending.set(slot.pending.get().saturating_sub(1));
        slot.fail_round();
        if msg.flags & MSG_COMPLETION != 0 {
            self.keep_buffer(&mut batch.pool, msg.payload);
        } else {
            // A bounced request: its buffer returns through the round's
            // replies, as a reply's would.
            let call = msg.call as usize;
            debug_assert!(batch.replies[call].is_none());
            batch.replies[call] = Some(msg.payload);
        }
    }

    /// Handles a `MSG_FAILED` message: filed at once if its peer is
    /// declared dead, held until then otherwise. A worker without a
    /// membership view drops it (the operation never completes, as before
    /// failures were handled).
    pub(super) fn on_failed(&self, msg: Message) {
        let Some(faults) = &self.faults else {
            return;
        };
        if faults.gave_up.get() {
            return;
        }
        if msg.coroutine == MONITOR_CO {
            if let Some(detector) = &faults.detector {
                let now = self.now_ns();
                detector.borrow_mut().on_completion(&msg, now);
            }
            return;
        }
        if faults.membership.is_alive(msg.src_node) && msg.flags & MSG_REFUSED == 0 {
            faults.parked.borrow_mut().push(msg);
        } else {
            self.file_failed(msg);
        }
    }

    /// After the membership changed: files the held failures of peers now
    /// declared dead. Returns whether any was.
    pub(super) fn file_parked(&self) -> bool {
        let Some(faults) = &self.faults else {
            return false;
        };
        let epoch = faults.membership.epoch();
        if epoch == faults.seen_epoch.get() {
            return false;
        }
        faults.seen_epoch.set(epoch);
        let mut parked = faults.parked.borrow_mut();
        let mut filed = false;
        let mut index = 0;
        while index < parked.len() {
            if faults.membership.is_alive(parked[index].src_node) {
                index += 1;
            } else {
                self.file_failed(parked.remove(index));
                filed = true;
            }
        }
        filed
    }

    /// At the give-up time: every awaited and passive operation of every
    /// coroutine is abandoned (counted), and every later round fails.
    pub(super) fn give_up(&self) {
        let Some(faults) = &self.faults else {
            return;
        };
        if faults.gave_up.replace(true) {
            return;
        }
        for slot in self.slots.iter() {
            if slot.pending.get() > 0 {
                faults
                    .abandoned_rounds
                    .set(faults.abandoned_rounds.get() + 1);
                slot.pending.set(0);
                slot.fail_round();
            }
            slot.unacked.set(0);
        }
        faults.parked.borrow_mut().clear();
    }
}
