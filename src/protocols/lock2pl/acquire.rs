//! The 2PL family's lock & read at access time, in both forms (module doc
//! of `lock2pl`; RCC §4.2–4.3, RCBench Alg. 4–5): the one-sided CAS + READ
//! round that retries, waits or wounds as the rule decides, and the lock
//! RPC, whose handler decides on the same word; WOUND_WAIT's status word,
//! request records and wakes.
//!
//! Invariant: a record is accepted only from a round whose CAS took the
//! lock, and every way out of a wait lowers what the wait raised (the
//! starvation fix's waiter count).

use super::*;

impl<R: LockRule> Lock2pl<R> {
    /// WOUND_WAIT: marks this attempt running (status = `cx.owner`) before
    /// it takes any lock; a local WRITE to the coordinator's own memory.
    pub(super) async fn arm_status(&self, cx: &mut TxnCx<'_>) {
        let (node, addr) = (cx.worker.node, cx.txn_meta_addr());
        cx.round().write_word(node, addr, cx.owner);
        // A local WRITE: it fails only when the worker gave up at the end
        // of a run with a failed peer, and then the attempt's next remote
        // round fails too.
        let _ = cx.submit().await;
    }

    pub(super) async fn lock_onesided(
        &self,
        cx: &mut TxnCx<'_>,
        index: usize,
        exclusive: bool,
    ) -> TxnResult<()> {
        let (access, table) = kit::locate_onesided(cx, index).await?;
        let lock = lock_addr(table, access.slot);
        let waiters = self.fix().then(|| table.header_addr(access.slot, 1));
        let waiters_at = table.record_offset() as usize - table.header_words as usize + 1;
        let me = cx.owner;
        let initial = if exclusive { me } else { self.first_reader(me) };
        let (mut expected, mut desired) = (0, initial);
        let mut registered = false;
        let mut register = false;
        let mut wound: Option<u64> = None;
        let mut wounded_holder = 0;
        let mut pause = WAIT_PAUSE_MIN_NS;
        loop {
            let (status, cas, read) = {
                let mut batch = cx.round();
                let status = R::WOUNDS.then(|| batch.read(cx.worker.node, cx.txn_meta_addr(), 1));
                if let Some(holder) = wound.take() {
                    let (node, addr) = cx.txn_meta_of(holder & OWNER_MASK);
                    batch.cas(node, addr, EXCLUSIVE | holder, WOUNDED);
                }
                if register {
                    batch.faa(access.node, waiters.unwrap_or_default(), 1);
                }
                let cas = batch.cas(access.node, lock, expected, desired);
                let read = batch.read(
                    access.node,
                    table.tuple_addr(access.slot),
                    table.tuple_words,
                );
                (status, cas, read)
            };
            cx.submit().await?;
            if register {
                registered = true;
                register = false;
            }
            let (previous, others_waiting, wounded) = {
                let batch = cx.batch();
                let previous = batch.result_word(cas);
                let tuple = batch.result(read);
                let others_waiting = waiters.is_some() && tuple[waiters_at] > u64::from(registered);
                let wounded = status.is_some_and(|s| batch.result_word(s) == WOUNDED);
                if previous == expected {
                    let tuple = kit::decode(table, tuple);
                    debug_assert_eq!(tuple.key, access.key, "location cache entry is stale");
                    debug_assert_eq!(tuple.seq, tuple.seq_end, "a locked tuple cannot be torn");
                    debug_assert!(
                        !exclusive || tuple.lock == me,
                        "an exclusive lock holds its owner"
                    );
                    kit::accept_record(cx, index, tuple.seq, tuple.record);
                }
                (previous, others_waiting, wounded)
            };
            if previous == expected {
                cx.accesses[index].locked = true;
                if registered {
                    self.unregister_onesided(cx, access.node, waiters);
                } else if others_waiting {
                    // RCC §4.3's fix: a newcomer gives the lock up to the
                    // waiting transactions (release frees it).
                    return Err(AbortReason::Died);
                }
                return if wounded {
                    Err(AbortReason::Wounded)
                } else {
                    Ok(())
                };
            }
            let decision = if wounded {
                Decision::Die(AbortReason::Wounded)
            } else {
                self.decide(previous, me, exclusive)
            };
            match decision {
                Decision::Take(new) => {
                    (expected, desired) = (previous, new);
                    continue;
                }
                Decision::Die(reason) => {
                    if registered {
                        self.unregister_onesided(cx, access.node, waiters);
                    }
                    return Err(reason);
                }
                Decision::Wound(holder) => {
                    // Wound with the next round, at once the first time.
                    // Wound again on every round it still holds the lock: a
                    // wounded holder may have retried with the same
                    // timestamp and taken the lock again (a failed wound
                    // costs one CAS).
                    wound = Some(holder);
                    if holder != wounded_holder {
                        wounded_holder = holder;
                        (expected, desired) = (0, initial);
                        continue;
                    }
                }
                Decision::Wait => {
                    if waiters.is_some() && !registered {
                        if others_waiting {
                            return Err(AbortReason::Died);
                        }
                        register = true;
                    }
                }
            }
            (expected, desired) = (0, initial);
            cx.worker.sleep(cx.co, pause).await;
            pause = (pause * 2).min(WAIT_PAUSE_MAX_NS);
        }
    }

    /// Lowers WAIT_DIE's waiter counter (passive FETCH_AND_ADD of −1).
    pub(super) fn unregister_onesided(&self, cx: &TxnCx<'_>, node: NodeId, waiters: Option<u64>) {
        let Some(addr) = waiters else { return };
        cx.round().faa(node, addr, u64::MAX);
        cx.submit_passive();
    }

    pub(super) async fn lock_rpc(
        &self,
        cx: &mut TxnCx<'_>,
        index: usize,
        exclusive: bool,
    ) -> TxnResult<()> {
        let access = cx.accesses[index];
        let flags = if exclusive { FLAG_EXCLUSIVE } else { 0 };
        let wound_wait = R::WOUNDS;
        let mut wounded_holder = 0;
        let mut timeouts: u64 = 0;
        // WOUND_WAIT: the tag of the next request, and whether the
        // pending-request record already names it. The first request
        // records itself in its own round; every later one was recorded,
        // and the status read after the record, by `prepare_request`.
        let mut tag = if wound_wait { request_tag(cx, 0) } else { 0 };
        let mut recorded = false;
        // A wounded holder's parked request to answer (`LOCK2PL_WAKE`).
        let mut wake: Option<Wake> = None;
        loop {
            let (status, call) = {
                let mut batch = cx.round();
                if wound_wait && !recorded {
                    let (node, addr) = (cx.worker.node, cx.txn_meta_addr());
                    batch.write_word(node, addr + META_REQUEST, request_record(access.node, tag));
                }
                let status = wound_wait.then(|| batch.read(cx.worker.node, cx.txn_meta_addr(), 1));
                if let Some(wake) = wake.take() {
                    let mut payload = batch.payload();
                    payload.extend_from_slice(&[wake.owner, wake.tag]);
                    batch.call(wake.node, kind::LOCK2PL_WAKE, payload, true);
                }
                let mut payload = batch.payload();
                payload.extend_from_slice(&[
                    access.table as u64,
                    access.key,
                    cx.owner,
                    flags,
                    0,
                    wounded_holder,
                    timeouts,
                    0,
                ]);
                if wound_wait {
                    payload.push(tag);
                }
                let call = batch.call(access.node, kind::NO_WAIT_LOCK_READ, payload, false);
                (status, call)
            };
            cx.submit().await?;
            let (outcome, slot, wound) = {
                let batch = cx.batch();
                let wounded = status.is_some_and(|s| batch.result_word(s) == WOUNDED);
                let reply = batch.reply(call);
                if reply[0] == status::NOT_FOUND {
                    return Err(AbortReason::NotFound);
                }
                let slot = reply[1];
                let mut wound = None;
                let outcome = match reply[0] {
                    status::OK => {
                        let seq = reply[2];
                        let record = &reply[3..];
                        cx.accesses[index].seq = seq;
                        let at = cx.accesses[index].data as usize;
                        cx.data[at..at + record.len()].copy_from_slice(record);
                        cx.accesses[index].locked = true;
                        Some(if wounded {
                            Err(AbortReason::Wounded)
                        } else {
                            Ok(())
                        })
                    }
                    status::LOCKED => Some(Err(AbortReason::LockConflict)),
                    REPLY_DIED => Some(Err(AbortReason::Died)),
                    REPLY_WOKEN => Some(Err(AbortReason::Wounded)),
                    _ if wounded => Some(Err(AbortReason::Wounded)),
                    REPLY_WOUND => {
                        (wound, wounded_holder) = (Some(reply[2]), reply[2]);
                        None
                    }
                    _ => {
                        debug_assert_eq!(reply[0], REPLY_TIMEOUT);
                        // The holder may be a retry of the wounded attempt
                        // (same timestamp): let the handler say WOUND again.
                        wounded_holder = 0;
                        timeouts += 1;
                        None
                    }
                };
                (outcome, slot, wound)
            };
            cx.remember_slot(index, slot);
            if let Some(outcome) = outcome {
                return outcome;
            }
            // Wound, or timed out: this round's status READ predates the
            // wait, so look again before asking again.
            tag = request_tag(cx, tag);
            wake = self.prepare_request(cx, access.node, tag, wound).await?;
            recorded = true;
        }
    }

    /// WOUND_WAIT by RPC, between a lock request answered `WOUND` or
    /// `TIMEOUT` and the next one (tagged `tag`, to `node`): one round that
    /// records the next request, reads the attempt's own status after the
    /// record (so that a wound either sees the record and wakes the request,
    /// or is seen here, before the request is sent) and wounds `wound` if
    /// given. Returns the wounded holder's parked request to wake, if the
    /// wound succeeded and its record names one.
    pub(super) async fn prepare_request(
        &self,
        cx: &mut TxnCx<'_>,
        node: NodeId,
        tag: u64,
        wound: Option<u64>,
    ) -> TxnResult<Option<Wake>> {
        debug_assert!(R::WOUNDS);
        let (own_node, own) = (cx.worker.node, cx.txn_meta_addr());
        let (status, call) = {
            let mut batch = cx.round();
            batch.write_word(own_node, own + META_REQUEST, request_record(node, tag));
            let status = batch.read(own_node, own, 1);
            let call = wound.map(|holder| {
                let (node, addr) = cx.txn_meta_of(holder & OWNER_MASK);
                let mut payload = batch.payload();
                payload.extend_from_slice(&[addr, EXCLUSIVE | holder]);
                batch.call(node, kind::LOCK2PL_WOUND, payload, false)
            });
            (status, call)
        };
        cx.submit().await?;
        let batch = cx.batch();
        if batch.result_word(status) == WOUNDED {
            return Err(AbortReason::Wounded);
        }
        let (Some(holder), Some(call)) = (wound, call) else {
            return Ok(None);
        };
        let reply = batch.reply(call);
        let (previous, record) = (reply[0], reply[1]);
        let tag = record & TAG_MASK;
        // A wound that failed found the holder committing, already wounded
        // (its wounder wakes it) or finished; tag 0: it never asked by RPC.
        Ok(
            (previous == EXCLUSIVE | holder && tag != 0).then_some(Wake {
                node: (record >> TAG_BITS) as NodeId,
                owner: holder,
                tag,
            }),
        )
    }
}

/// The tag of a coroutine's next WOUND_WAIT lock request: its clock, and
/// above the `previous` tag of the same access. A coroutine's requests
/// follow each other (each waits for the last one's reply), so its tags
/// grow, and a wake for an earlier request never matches a later one.
pub(super) fn request_tag(cx: &TxnCx<'_>, previous: u64) -> u64 {
    let tag = ((cx.now_ns() + 1) & TAG_MASK).max(previous + 1);
    debug_assert!(tag != 0 && tag <= TAG_MASK);
    tag
}

/// The pending-request record of a request tagged `tag` to `node`.
pub(super) fn request_record(node: NodeId, tag: u64) -> u64 {
    debug_assert!((node as u64) < 1 << (64 - TAG_BITS) && tag <= TAG_MASK);
    ((node as u64) << TAG_BITS) | tag
}
