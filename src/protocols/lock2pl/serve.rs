//! The 2PL family's RPC handlers: the lock & read, decided by the rule on
//! a local load and taken with a local CAS on the word a one-sided CAS
//! targets (RCC §5.2), the upgrade, the shared unlock, and WOUND_WAIT's
//! wound, wake and status CAS.
//!
//! Invariant: a handler never blocks: a request that must wait is parked
//! (`Served::Wait`) holding no lock and decided again at every offer.

use super::*;

impl<R: LockRule> Lock2pl<R> {
    /// RPC handlers of the family; `None` if `kind` is not one of them.
    pub(super) fn serve_kind(
        &self,
        store: &NodeStore,
        kind: u16,
        payload: &mut Vec<u64>,
        now_ns: u64,
    ) -> Option<Served> {
        match kind {
            kind::NO_WAIT_LOCK_READ => Some(self.serve_lock(store, payload, now_ns)),
            kind::LOCK2PL_UPGRADE => {
                let table = store.layout.table(payload[0] as u32);
                let (lock, me) = (lock_addr(table, payload[1]), payload[2]);
                let upgraded = loop {
                    let word = store.region.load(lock);
                    if word & EXCLUSIVE != 0 || word & COUNT_MASK != 1 {
                        break false;
                    }
                    if store.region.cas(lock, word, me) == word {
                        break true;
                    }
                };
                payload.clear();
                payload.push(if upgraded { status::OK } else { status::LOCKED });
                Some(Served::Reply)
            }
            kind::LOCK2PL_UNLOCK_SHARED => {
                for pair in payload.chunks_exact(2) {
                    let table = store.layout.table(pair[0] as u32);
                    let previous = store.region.faa(lock_addr(table, pair[1]), u64::MAX);
                    debug_assert!(
                        previous & EXCLUSIVE == 0 && previous & COUNT_MASK > 0,
                        "shared unlock of a word with no reader"
                    );
                }
                payload.clear();
                Some(Served::Reply)
            }
            kind::LOCK2PL_WOUND => {
                // `[victim's status address, its running value]` →
                // `[previous status, its pending-request record]`. The
                // record is read after the CAS: a request recorded before
                // it is named here, and one recorded after it reads the
                // status after its record and sees the wound itself.
                let (addr, running) = (payload[0], payload[1]);
                let previous = store.region.cas(addr, running, WOUNDED);
                let record = store.region.load(addr + META_REQUEST);
                payload.clear();
                payload.extend_from_slice(&[previous, record]);
                Some(Served::Reply)
            }
            kind::LOCK2PL_WAKE => {
                // `[wounded owner, request tag]` → `[]`: raise the owner's
                // wake mark on this node to the tag, so that its lock
                // request with this tag is answered `WOKEN` at its next
                // offer, or on arrival if it is still on its way.
                let (owner, tag) = (payload[0], payload[1]);
                store.region.fetch_max(wake_mark(store, owner), tag);
                payload.clear();
                Some(Served::Reply)
            }
            kind::LOCK2PL_STATUS_CAS => {
                let previous = store.region.cas(payload[0], payload[1], payload[2]);
                payload.clear();
                payload.push(previous);
                Some(Served::Reply)
            }
            other => kit::serve_shared(store, other, payload).then_some(Served::Reply),
        }
    }

    /// WOUND_WAIT: a parked lock request's place in the waiting list is its
    /// timestamp, so a freed lock goes to the oldest waiter, which nobody
    /// wounds. In arrival order a younger waiter parked earlier takes it,
    /// every older waiter wounds it, and the next younger one takes it
    /// after its abort: no waiter commits while the oldest keeps wounding
    /// (`verbena check --protocol wound_wait --seed 9 --hybrid 8 --workload
    /// smallbank`: nothing committed in 75 ms).
    pub(super) fn rank(&self, kind: u16, payload: &[u64]) -> u64 {
        match kind {
            kind::NO_WAIT_LOCK_READ if R::WOUNDS => payload[2] & !EXCLUSIVE,
            _ => 0,
        }
    }

    /// Lock handler: `[table, key, me, flags, offers, wounded holder,
    /// timeouts, parked at]`, and WOUND_WAIT's request tag →
    /// `[OK, slot, seq, record…]`, `[LOCKED | DIED | TIMEOUT | WOKEN, slot]`,
    /// `[WOUND, slot, holder]`, `[NOT_FOUND]`, or `Served::Wait` (the event
    /// loop's waiting list; the payload keeps the request, with its flags,
    /// offer count and the time it was first parked (+ 1; 0 = never)
    /// updated).
    pub(super) fn serve_lock(
        &self,
        store: &NodeStore,
        payload: &mut Vec<u64>,
        now_ns: u64,
    ) -> Served {
        let (table_id, key, me, flags) = (payload[0] as u32, payload[1], payload[2], payload[3]);
        let wounded_holder = payload[5];
        let Some(slot) = kit::find_row(store, table_id, key, payload) else {
            return Served::Reply;
        };
        if R::WOUNDS {
            let tag = payload[8];
            debug_assert!(tag != 0, "every WOUND_WAIT lock request is tagged");
            if store.region.load(wake_mark(store, me)) >= tag {
                // A wounder woke it: the attempt was wounded (a wake is
                // sent only after a successful wound, and names this
                // request's tag or a later one of the same coroutine).
                payload.clear();
                payload.extend_from_slice(&[REPLY_WOKEN, slot]);
                return Served::Reply;
            }
        }
        let table = store.layout.table(table_id);
        let lock = lock_addr(table, slot);
        let exclusive = flags & FLAG_EXCLUSIVE != 0;
        let registered = flags & FLAG_REGISTERED != 0;
        let waiters = self.fix().then(|| table.header_addr(slot, 1));
        let others_waiting =
            || waiters.is_some_and(|w| store.region.load(w) > u64::from(registered));
        let unregister = || {
            if let (true, Some(w)) = (registered, waiters) {
                store.region.faa(w, u64::MAX);
            }
        };
        let reply = |payload: &mut Vec<u64>, words: &[u64]| {
            payload.clear();
            payload.extend_from_slice(words);
            Served::Reply
        };
        loop {
            let word = store.region.load(lock);
            match settle(self.decide(word, me, exclusive), wounded_holder) {
                Decision::Take(new) => {
                    if !registered && others_waiting() {
                        unregister();
                        return reply(payload, &[REPLY_DIED, slot]);
                    }
                    if store.region.cas(lock, word, new) != word {
                        continue;
                    }
                    unregister();
                    payload.clear();
                    payload.extend_from_slice(&[status::OK, slot, store.seq(table_id, slot)]);
                    kit::push_record(store, table, slot, payload);
                    return Served::Reply;
                }
                Decision::Die(reason) => {
                    unregister();
                    let code = if reason == AbortReason::LockConflict {
                        status::LOCKED
                    } else {
                        REPLY_DIED
                    };
                    return reply(payload, &[code, slot]);
                }
                Decision::Wound(holder) => return reply(payload, &[REPLY_WOUND, slot, holder]),
                Decision::Wait => {
                    if let (false, Some(w)) = (registered, waiters) {
                        if others_waiting() {
                            return reply(payload, &[REPLY_DIED, slot]);
                        }
                        store.region.faa(w, 1);
                        payload[3] |= FLAG_REGISTERED;
                    }
                    if R::WOUNDS {
                        let doublings = payload[6].min(MAX_PARK_DOUBLINGS);
                        payload[4] += 1;
                        if payload[7] == 0 {
                            payload[7] = now_ns + 1;
                        }
                        let parked_ns = (now_ns + 1).saturating_sub(payload[7]);
                        if payload[4] > PARK_OFFERS << doublings || parked_ns > PARK_NS << doublings
                        {
                            return reply(payload, &[REPLY_TIMEOUT, slot]);
                        }
                    }
                    return Served::Wait;
                }
            }
        }
    }
}

/// The wake mark on `store`'s node of the coroutine whose timestamp (or
/// lock value) is `owner`.
pub(super) fn wake_mark(store: &NodeStore, owner: u64) -> u64 {
    let (node, worker, co) = ids::split_owner(owner & OWNER_MASK);
    let meta = store.layout.txn_meta;
    debug_assert!(
        meta.words > META_WAKE as u32 + node as u32,
        "a wake mark per node"
    );
    meta.addr(worker, co) + META_WAKE + node as u64
}

/// A wound of a holder the requester already wounded is a wait for it.
#[inline]
pub(super) fn settle(decision: Decision, wounded_holder: u64) -> Decision {
    match decision {
        Decision::Wound(holder) if holder == wounded_holder => Decision::Wait,
        other => other,
    }
}
