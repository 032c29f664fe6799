//! The two-phase-locking family on one lock word: the lock word's layout,
//! the conflict rules of NO_WAIT, WAIT_DIE and WOUND_WAIT (RCC §4.2–4.3;
//! RCBench §6.2.1, Alg. 4–5; Deneva §3.1), and every stage of the three
//! protocols in one-sided and RPC form. [`Lock2pl`] is the protocol,
//! generic over its rule: `no_wait`, `wait_die` and `wound_wait` each hold
//! only their [`LockRule`], the decisions in which the three differ.
//!
//! # The lock word (protocol header word 0)
//!
//! ```text
//! free:       0                          (or a shared word whose count is 0)
//! exclusive:  1 | id:63                  bit 63 set; id = the holder's tag
//! shared:     0 | bound:47 | count:16    bit 63 clear; count = readers
//! ```
//!
//! * `id` (the transaction's `cx.owner` without bit 63) is NO_WAIT's
//!   coroutine owner (`txn::ids::lock_owner`), or WAIT_DIE's and
//!   WOUND_WAIT's timestamp `clock:34 | owner:29` (RCC §4.3: local clock
//!   with the coroutine's id in the low bits). The owner bits make a
//!   timestamp unique and name the holder's coroutine, so a requester reads
//!   both the holder's priority and, for a wound, where its status word is
//!   (`TxnCx::txn_meta_of`). A smaller timestamp is older. The clock part
//!   (≈ µs, wrapping) only orders transactions fairly; correctness needs
//!   only that timestamps are unique and fixed during a transaction.
//! * `count` is the number of shared holders (E/S mode, RCBench §6.2.1:
//!   Alg. 4's reader count). A reader joins with a CAS computed from the
//!   word it saw (Read-Cas) and leaves with a FETCH_AND_ADD of −1, so a
//!   release is one passive verb. The last reader leaves `bound << 16`
//!   behind: a shared word with count 0 is free, and an acquirer whose
//!   `CAS(0 → …)` returns it retries its CAS against that value.
//! * `bound` is a coarse (`timestamp >> 16`) bound on the readers' timestamps
//!   since the word was last free, kept by every join: WAIT_DIE keeps the
//!   minimum (no reader is older than it), WOUND_WAIT the maximum (no
//!   reader is younger than it), NO_WAIT 0. A departing reader cannot undo
//!   its contribution, so the bound is conservative, never wrong.
//!
//! WAIT_DIE also has header word 1, the starvation-fix counter (RCC §4.3's
//! "limitation"): the number of transactions currently waiting for the
//! tuple, raised by FETCH_AND_ADD when a transaction starts waiting and
//! lowered when it gets the lock or dies. While it is non-zero, a requester
//! that is not itself waiting dies, even on a free lock, so the lock goes to
//! a waiter — who by WAIT_DIE's rule is older than the holder it waited for.
//! The counter names nobody, so the newcomer dies whatever its age.
//!
//! # Conflict rules (requester R, holders H; "older" = smaller timestamp)
//!
//! | policy     | R vs exclusive H                    | R exclusive vs readers           |
//! |------------|-------------------------------------|----------------------------------|
//! | NO_WAIT    | abort                               | abort                            |
//! | WAIT_DIE   | R older: wait; else die             | R older than `bound`: wait; else die |
//! | WOUND_WAIT | R older: wound H, wait; else wait   | R younger than `bound`: wait; else die |
//!
//! A shared request on a shared word joins it (readers bypass waiting
//! writers, as in Deneva §3.1). Readers are anonymous, so WOUND_WAIT cannot
//! wound them: an older writer dies instead (keeping its timestamp). A
//! read→write upgrade succeeds only if the upgrader is the sole reader;
//! otherwise it aborts under every policy (the other readers' ages are not
//! known). A lock held by the requester's own earlier attempt (same
//! timestamp, its release still in flight) is waited for.
//!
//! Deadlock freedom: WAIT_DIE waits only for holders strictly younger than
//! the waiter, so wait-for chains have increasing timestamps and no cycle.
//! WOUND_WAIT waits for older holders, or for younger ones it has wounded;
//! every cycle contains a wounded transaction, and a wounded transaction
//! notices: it checks its status word at every access, in every one-sided
//! wait round, and at the commit point; a parked lock RPC of a wounded
//! transaction is answered when its wounder wakes it (below), or at the
//! latest when it times out (`PARK_OFFERS`). Every decision is re-taken on
//! the word as it is now, on every retry, so a stale view only costs a
//! retry.
//!
//! # WOUND_WAIT's status word and commit point (RCBench Alg. 5)
//!
//! Word 0 of the per-transaction global metadata
//! (`Protocol::txn_meta_words`), the status word: the transaction's own
//! lock value `cx.owner` while it runs (written at its first access, before
//! it holds any lock), [`WOUNDED`] once an older transaction wounded it
//! (`CAS(owner → WOUNDED)`: one CAS on the holder's status, by one-sided
//! CAS or by an RPC whose handler CASes locally), and [`COMMITTING`] once
//! it passed its commit point: the last fallible step of the attempt (in
//! the `log` stage) is `CAS(owner → COMMITTING)` on its own status; if it
//! returns `WOUNDED` the attempt aborts, otherwise no wound can succeed any
//! more (a wound expects `owner`), and the commit stage installs the
//! writes. A wound that arrives late, after the wounded attempt already
//! ended, either fails (the next request has a new timestamp) or aborts a
//! retry of the same request, which is older than its wounder's view and
//! only loses an attempt.
//!
//! # Waking a wounded waiter (WOUND_WAIT by RPC)
//!
//! A lock RPC that must wait is parked in the serving worker's waiting
//! list, and its coroutine sees nothing until the reply. A wound on its
//! status word alone would go unnoticed until the parked request times out,
//! while the victim keeps its other locks and its wounder waits for them
//! (the timeout doubles while an access waits, up to milliseconds). So the
//! wound also goes to where the victim waits:
//!
//! * Before each lock RPC the requester records it in word 1 of its
//!   metadata: `node:12 | tag:52`, the tag growing per coroutine.
//! * A wound by RPC (`LOCK2PL_WOUND`) CASes the victim's status, then reads
//!   that record. If the CAS succeeded, the wounder's next round sends
//!   `LOCK2PL_WAKE [victim, tag]` (passive) to the recorded node, which
//!   raises the victim's wake mark there to the tag (words 2.., one per
//!   node, in the block of the victim's `(worker, coroutine)`). The lock
//!   handler answers a request whose tag the mark reaches `WOKEN`:
//!   at its next offer if parked, on arrival if the wake came first. A mark
//!   left by an earlier request is below every later tag, so it wakes
//!   nothing else.
//! * The requester writes the record, then reads its status; the wound
//!   CASes the status, then reads the record. Either the wound sees the
//!   record or the requester sees the wound. A request after a `WOUND` or
//!   `TIMEOUT` reply is recorded, and the status read, in the round before
//!   it is sent, so it is never sent unwoken while wounded. An access's
//!   first request is recorded in its own round; a wound that slips in
//!   before it is told by its first timeout, not yet doubled. (On
//!   `threads` the WRITE and the READ are a plain store and load, which a
//!   CPU may reorder; the timeout covers that rare miss too.)
//! * The timeout remains for those misses and for a wounder whose victim's
//!   retry, with the same timestamp and its status armed again, took the
//!   lock back before the wounder's request arrived: it waits for a holder
//!   it believes wounded until its request times out and wounds again.
//!
//! # Mixed plans (RCC §5.2)
//!
//! Both forms of every stage act on the same words with the same atomic
//! steps: a lock handler runs the one-sided algorithm's decision on a local
//! load and takes the lock with a local CAS on the word a one-sided CAS
//! targets; a handler's waiting list plays the one-sided wait loop's
//! retries; every lock reply carries the tuple's slot, so a one-sided
//! upgrade, commit or release can address a tuple locked by RPC, and
//! `Access::locked` records whether the attempt holds it (the "agreed
//! region" handshake is the lock word itself plus the reply's slot). The
//! release forms agree on who holds what: exclusive — a one-sided WRITE of
//! 0 or an RPC CAS from the owner's value; shared — a FETCH_AND_ADD of −1,
//! one-sided or in the handler. The wound and the commit-point CAS act on
//! the status word in either form; the status check is a local READ of the
//! coordinator's own memory under both primitives.
//!
//! Here: the lock word, the rule trait, the protocol's stages, the upgrade,
//! the commit point and the unlock; `acquire` holds the lock & read in both
//! forms, `serve` the RPC handlers.

use std::marker::PhantomData;

use crate::fabric::NodeId;
use crate::store::NodeStore;
use crate::txn::{ids, AbortReason, TxnCx, TxnResult};

use super::common::kind;
use super::{Protocol, ProtocolKind, Served, Stage};
use crate::txn::kit::{self, lock_addr, status};

/// Bit 63: the word is held exclusively; the rest is the holder's id.
pub const EXCLUSIVE: u64 = 1 << 63;
/// Reader count of a shared word: bits 0..16.
const COUNT_BITS: u32 = 16;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
/// A timestamp's low bits are its coroutine's lock owner (`ids`, 29 bits).
pub const OWNER_BITS: u32 = 29;
pub const OWNER_MASK: u64 = (1 << OWNER_BITS) - 1;
/// A timestamp's clock part: 34 bits of ≈µs (`now_ns >> 10`), wrapping.
const CLOCK_MASK: u64 = (1 << (63 - OWNER_BITS)) - 1;

/// WOUND_WAIT status word values besides the running `cx.owner` (whose bit
/// 63 is set, so they cannot collide).
pub const WOUNDED: u64 = 1;
pub const COMMITTING: u64 = 2;

/// WOUND_WAIT transaction metadata, per coroutine at its own node (see the
/// module doc, "Waking a wounded waiter"): word 0 is the status word.
/// Word 1 is the pending-request record `node:12 | tag:52`: the node of
/// the lock RPC it may be parked in, and that request's tag.
const META_REQUEST: u64 = 1;
/// Words 2.. are wake marks, one per node: in the block of `(worker, co)`
/// on node M, word `META_WAKE + n` holds the largest tag of a request of
/// coroutine `(n, worker, co)` that a wounder told M to answer.
const META_WAKE: u64 = 2;
const TAG_BITS: u32 = 52;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;

/// WOUND_WAIT's words of transaction metadata per coroutine in a cluster
/// of `nodes` nodes: the status, the pending-request record, and a wake
/// mark per node.
pub fn wound_wait_meta_words(nodes: u32) -> u32 {
    META_WAKE as u32 + nodes
}

/// How long a parked WOUND_WAIT lock request may wait (in offers by the
/// event loop, one per turn, at least every 2 µs when idle) before the
/// handler answers [`REPLY_TIMEOUT`] so that the requester can check whether
/// it was wounded meanwhile. A wounder wakes its victim's parked request at
/// once (module doc, "Waking a wounded waiter"); the timeout is the
/// fallback for the wounds that cannot. The limit doubles with each
/// timeout the same access has had (up to `PARK_OFFERS <<
/// MAX_PARK_DOUBLINGS`): a waiter that keeps timing out is an old one that
/// nobody wounds, and it must be parked when the lock frees rather than on its way back with a fresh
/// request — otherwise the wounded holder's retry, which timed out on the
/// same period, takes the lock again first, forever (a livelock the sim
/// matrix found: `verbena check --protocol wound_wait --seed 9 --hybrid 8`).
const PARK_OFFERS: u64 = 8;
/// The same limit in time, ns of the serving worker's clock, whichever
/// comes first: 8 offers of an idle loop that offers every 2 µs, doubled
/// as the offers are. An idle event loop on a loaded host does not offer
/// every 2 µs but once per scheduler wake-up (tens of µs, or a time slice
/// of another process), and 4096 offers then let a wounded waiter sleep
/// through a quarter of a second while its wounder waited for it (CI:
/// `tests/tpcc.rs`, WOUND_WAIT over RPC on `threads`, nothing committed).
/// On `sim` a busy loop reaches the offers bound first and an idle one,
/// whose turns come a little over 2 µs apart, the time bound an offer
/// earlier.
const PARK_NS: u64 = PARK_OFFERS * 2_000;
const MAX_PARK_DOUBLINGS: u64 = 9;
/// One-sided wait loop: pause between retries, doubling up to the cap.
pub(super) const WAIT_PAUSE_MIN_NS: u64 = 500;
pub(super) const WAIT_PAUSE_MAX_NS: u64 = 8_000;

/// Lock request flags (payload word 3).
const FLAG_EXCLUSIVE: u64 = 1;
/// WAIT_DIE starvation fix: this parked request is counted in word 1.
const FLAG_REGISTERED: u64 = 2;

/// Reply statuses of the lock handler besides `status::{OK, LOCKED,
/// NOT_FOUND}` (`LOCKED`: NO_WAIT conflict or a full reader count).
const REPLY_DIED: u64 = 10;
const REPLY_WOUND: u64 = 11;
const REPLY_TIMEOUT: u64 = 12;
/// WOUND_WAIT: a wounder woke this request (`LOCK2PL_WAKE`); the attempt
/// was wounded and aborts.
const REPLY_WOKEN: u64 = 13;

/// A new WAIT_DIE / WOUND_WAIT timestamp for the transaction in `cx`: the
/// clock part `clock:34` (≈ µs) above its coroutine's lock owner
/// `owner:29` (module doc, "The lock word"). A request takes one when it
/// first starts and keeps it across retries.
pub fn wait_die_timestamp(cx: &TxnCx<'_>) -> u64 {
    let base = ids::lock_owner(ids::coroutine_id(cx.worker.node, cx.worker.worker, cx.co));
    debug_assert!(base <= OWNER_MASK);
    (((cx.now_ns() >> 10) & CLOCK_MASK) << OWNER_BITS) | base
}

/// The rule of one protocol of the family: the decisions in which NO_WAIT,
/// WAIT_DIE and WOUND_WAIT differ (module doc, "Conflict rules"). Every
/// timestamp here is a lock value without bit 63; "older" is smaller.
pub trait LockRule: Sync {
    const KIND: ProtocolKind;
    /// Lock values are timestamps taken at a request's first attempt and
    /// kept across its retries (RCC §4.3); otherwise the coroutine's owner.
    const TIMESTAMPED: bool;
    /// Header word 1 counts the tuple's waiters, for RCC §4.3's starvation
    /// fix (`protocol_options.wait_die_starvation_fix`).
    const COUNTS_WAITERS: bool;
    /// The rule wounds younger holders (RCBench Alg. 5): a status word per
    /// transaction, a commit point in `log`, and tagged, time-limited
    /// parked lock requests that a wounder can wake.
    const WOUNDS: bool;
    /// Why an attempt that may neither take nor wait for a lock aborts.
    const CONFLICT: AbortReason;
    /// Requester `mine` meets a lock held exclusively by its own earlier
    /// attempt, whose release is in flight.
    const OWN_EARLIER_LOCK: Decision;

    /// Requester `mine` meets the exclusive holder `holder` (not itself).
    fn against_holder(mine: u64, holder: u64) -> Decision;
    /// Exclusive requester `mine` meets readers whose coarse timestamps
    /// are bounded by `bound` (both coarse, `timestamp >> 16`).
    fn against_readers(mine: u64, bound: u64) -> Decision;
    /// The readers' bound after the reader `mine` joins readers bounded by
    /// `bound` (both coarse); a first reader joins its own bound.
    fn merge_bound(bound: u64, mine: u64) -> u64;
}

/// The 2PL family's protocol under rule `R`, configured per run.
#[derive(Debug)]
pub struct Lock2pl<R> {
    /// E/S mode: reads take shared locks (`LockMode::Shared`).
    pub shared: bool,
    /// RCC §4.3's starvation fix (header word 1); only for a rule that
    /// [`LockRule::COUNTS_WAITERS`].
    pub starvation_fix: bool,
    rule: PhantomData<R>,
}

impl<R> Clone for Lock2pl<R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R> Copy for Lock2pl<R> {}

impl<R> Default for Lock2pl<R> {
    fn default() -> Self {
        Lock2pl::new(false, false)
    }
}

/// What a requester does about the lock word it saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// CAS the word from what was seen to this value.
    Take(u64),
    Wait,
    Die(AbortReason),
    /// Wound the exclusive holder with this timestamp, then wait.
    Wound(u64),
}

#[inline]
fn coarse(ts: u64) -> u64 {
    ts >> COUNT_BITS
}

impl<R> Lock2pl<R> {
    pub const fn new(shared: bool, starvation_fix: bool) -> Lock2pl<R> {
        Lock2pl {
            shared,
            starvation_fix,
            rule: PhantomData,
        }
    }
}

mod acquire;
mod serve;

impl<R: LockRule> crate::txn::FromConfig for Lock2pl<R> {
    fn from_config(config: &crate::config::Config) -> Self {
        let options = &config.protocol_options;
        Lock2pl::new(
            options.lock_mode == crate::config::LockMode::Shared,
            options.wait_die_starvation_fix,
        )
    }
}

impl<R: LockRule> Protocol for Lock2pl<R> {
    const KIND: ProtocolKind = R::KIND;
    const ACCESS_STAGE: Stage = Stage::Lock;

    /// The lock word, and the waiter counter of a rule that counts them.
    fn header_words(_record_words: u32) -> u32 {
        1 + u32::from(R::COUNTS_WAITERS)
    }

    fn txn_meta_words(nodes: u32) -> u32 {
        if R::WOUNDS {
            wound_wait_meta_words(nodes)
        } else {
            0
        }
    }

    fn begin(&self, cx: &mut TxnCx<'_>) {
        self.begin_attempt(cx);
    }

    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        self.lock_and_read(cx, index).await
    }

    async fn upgrade(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        self.upgrade_lock(cx, index).await
    }

    async fn log(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        self.commit_point(cx).await
    }

    async fn commit(&self, cx: &mut TxnCx<'_>) {
        kit::post_unlock(cx, true, |cx, index| !self.exclusive(cx, index));
    }

    async fn release(&self, cx: &mut TxnCx<'_>) {
        kit::post_unlock(cx, false, |cx, index| !self.exclusive(cx, index));
    }

    fn serve(&self, store: &NodeStore, kind: u16, payload: &mut Vec<u64>, now_ns: u64) -> Served {
        let served = self.serve_kind(store, kind, payload, now_ns);
        assert!(served.is_some(), "{:?} has no RPC handler {kind}", R::KIND);
        served.unwrap_or(Served::Reply)
    }

    /// Parked lock requests oldest first, under a wounding rule (see
    /// `serve::rank`).
    fn waiting_rank(&self, kind: u16, payload: &[u64]) -> u64 {
        self.rank(kind, payload)
    }
}

impl<R: LockRule> Lock2pl<R> {
    fn fix(&self) -> bool {
        self.starvation_fix && R::COUNTS_WAITERS
    }

    /// Whether access `index` holds (or asks for) an exclusive lock.
    #[inline]
    fn exclusive(&self, cx: &TxnCx<'_>, index: usize) -> bool {
        !self.shared || cx.accesses[index].write
    }

    /// Sets the attempt's lock value: NO_WAIT's coroutine owner, or the
    /// timestamp, new for a request's first attempt and kept across its
    /// retries so that a restarted transaction ages (RCC §4.3).
    fn begin_attempt(&self, cx: &mut TxnCx<'_>) {
        if !R::TIMESTAMPED {
            let base = ids::lock_owner(ids::coroutine_id(cx.worker.node, cx.worker.worker, cx.co));
            debug_assert!(base <= OWNER_MASK);
            cx.owner = EXCLUSIVE | base;
            return;
        }
        if cx.attempt == 0 {
            cx.timestamp = wait_die_timestamp(cx);
        }
        cx.owner = EXCLUSIVE | cx.timestamp;
    }

    /// The shared word of a first reader `me`.
    fn first_reader(&self, me: u64) -> u64 {
        let mine = coarse(me & !EXCLUSIVE);
        (R::merge_bound(mine, mine) << COUNT_BITS) | 1
    }

    /// The word after `me` joins the readers of `word` (count below max).
    fn join(&self, word: u64, me: u64) -> u64 {
        let count = (word & COUNT_MASK) + 1;
        let bound = word >> COUNT_BITS;
        let bound = R::merge_bound(bound, coarse(me & !EXCLUSIVE));
        (bound << COUNT_BITS) | count
    }

    /// The conflict rules of the module doc, for requester `me` (its lock
    /// value) seeing `word`.
    pub fn decide(&self, word: u64, me: u64, exclusive: bool) -> Decision {
        let mine = me & !EXCLUSIVE;
        if word & EXCLUSIVE != 0 {
            let holder = word & !EXCLUSIVE;
            if holder == mine {
                return R::OWN_EARLIER_LOCK;
            }
            return R::against_holder(mine, holder);
        }
        let count = word & COUNT_MASK;
        if count == 0 {
            return Decision::Take(if exclusive { me } else { self.first_reader(me) });
        }
        if !exclusive {
            if count == COUNT_MASK {
                return Decision::Die(AbortReason::LockConflict);
            }
            return Decision::Take(self.join(word, me));
        }
        R::against_readers(coarse(mine), word >> COUNT_BITS)
    }

    /// Execution-phase lock & read of `cx.accesses[index]`: exclusive for a
    /// write (or always, in exclusive mode), shared for a read.
    async fn lock_and_read(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let exclusive = self.exclusive(cx, index);
        if R::WOUNDS && index == 0 {
            self.arm_status(cx).await;
        }
        kit::in_form!(cx, Stage::Lock,
            onesided: self.lock_onesided(cx, index, exclusive),
            rpc: self.lock_rpc(cx, index, exclusive))
    }

    /// A record first read is now also written: in E/S mode, turn the
    /// shared lock into an exclusive one (only a sole reader can).
    async fn upgrade_lock(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        if !self.shared {
            return Ok(());
        }
        debug_assert!(cx.accesses[index].locked && !cx.accesses[index].write);
        let upgraded = kit::in_form!(cx, Stage::Lock,
            onesided: self.upgrade_onesided(cx, index),
            rpc: self.upgrade_rpc(cx, index))?;
        if upgraded {
            Ok(())
        } else {
            Err(R::CONFLICT)
        }
    }

    /// WOUND_WAIT's commit point (see the module doc): `CAS(owner →
    /// COMMITTING)` on the attempt's own status word.
    async fn commit_point(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        if !R::WOUNDS || cx.accesses.is_empty() {
            // No access, no lock, status never armed: nothing to protect.
            return Ok(());
        }
        let previous = kit::in_form!(cx, Stage::Log,
            onesided: self.commit_point_onesided(cx),
            rpc: self.commit_point_rpc(cx))?;
        if previous == cx.owner {
            Ok(())
        } else {
            debug_assert_eq!(previous, WOUNDED, "only a wound changes a running status");
            Err(AbortReason::Wounded)
        }
    }

    /// The upgrade's CAS from the word of a sole reader to `cx.owner`,
    /// again from each shared word with one reader it finds; whether it
    /// took the lock.
    async fn upgrade_onesided(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<bool> {
        let access = cx.accesses[index];
        let lock = lock_addr(cx.table(access.table), access.slot);
        let mut expected = self.first_reader(cx.owner);
        loop {
            let cas = cx.round().cas(access.node, lock, expected, cx.owner);
            cx.submit().await?;
            let previous = cx.batch().result_word(cas);
            if previous == expected {
                return Ok(true);
            }
            debug_assert!(previous & EXCLUSIVE == 0 && previous & COUNT_MASK >= 1);
            if previous & EXCLUSIVE != 0 || previous & COUNT_MASK != 1 {
                return Ok(false);
            }
            expected = previous;
        }
    }

    /// The upgrade by `LOCK2PL_UPGRADE`; whether it took the lock.
    async fn upgrade_rpc(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<bool> {
        let access = cx.accesses[index];
        let words = [access.table as u64, access.slot, cx.owner];
        let call = kit::call_one(cx, access.node, kind::LOCK2PL_UPGRADE, &words);
        cx.submit().await?;
        let ok = cx.batch().reply(call)[0] == status::OK;
        Ok(ok)
    }

    /// The commit point's CAS as a verb on the coordinator's own memory;
    /// the status it replaced.
    async fn commit_point_onesided(&self, cx: &mut TxnCx<'_>) -> TxnResult<u64> {
        let (node, addr) = (cx.worker.node, cx.txn_meta_addr());
        let cas = cx.round().cas(node, addr, cx.owner, COMMITTING);
        cx.submit().await?;
        let previous = cx.batch().result_word(cas);
        Ok(previous)
    }

    /// The commit point's CAS by `LOCK2PL_STATUS_CAS` to its own worker;
    /// the status it replaced.
    async fn commit_point_rpc(&self, cx: &mut TxnCx<'_>) -> TxnResult<u64> {
        let (node, addr) = (cx.worker.node, cx.txn_meta_addr());
        let words = [addr, cx.owner, COMMITTING];
        let call = kit::call_one(cx, node, kind::LOCK2PL_STATUS_CAS, &words);
        cx.submit().await?;
        let previous = cx.batch().reply(call)[0];
        Ok(previous)
    }
}

/// A wounded holder's lock request to answer: `LOCK2PL_WAKE` to `node`.
#[derive(Clone, Copy, Debug)]
struct Wake {
    node: NodeId,
    /// The holder's timestamp (its lock value without bit 63).
    owner: u64,
    tag: u64,
}

#[cfg(test)]
mod tests {
    use super::acquire::request_record;
    use super::*;
    use crate::protocols::no_wait::NoWait;
    use crate::protocols::wait_die::WaitDie;
    use crate::protocols::wound_wait::WoundWait;

    fn ts(clock: u64, owner: u64) -> u64 {
        EXCLUSIVE | (clock << OWNER_BITS) | owner
    }

    #[test]
    fn wait_die_waits_only_for_younger_holders() {
        let wd = Lock2pl::<WaitDie>::default();
        let (old, young) = (ts(5, 1), ts(9, 2));
        assert_eq!(wd.decide(young, old, true), Decision::Wait);
        assert_eq!(
            wd.decide(old, young, true),
            Decision::Die(AbortReason::Died)
        );
        assert_eq!(wd.decide(old, old, false), Decision::Wait, "own stale lock");
        assert_eq!(wd.decide(0, old, true), Decision::Take(old));
    }

    #[test]
    fn wound_wait_wounds_younger_holders_and_waits_for_older_ones() {
        let ww = Lock2pl::<WoundWait>::default();
        let (old, young) = (ts(5, 1), ts(9, 2));
        assert_eq!(
            ww.decide(young, old, true),
            Decision::Wound(young & !EXCLUSIVE)
        );
        assert_eq!(ww.decide(old, young, false), Decision::Wait);
    }

    /// One node of a 2-node cluster, 1 worker × 4 coroutines, whose record
    /// 7 is locked by `holder`.
    fn locked_store(holder: u64) -> NodeStore {
        use crate::store::{StoreLayout, TableSpec};
        let layout = StoreLayout::new(
            &[TableSpec {
                name: "t",
                record_words: 1,
                capacity_per_node: 4,
            }],
            |_| Lock2pl::<WoundWait>::header_words(1),
        )
        .with_txn_meta(1, 4, wound_wait_meta_words(2));
        let store = NodeStore::new(0, std::sync::Arc::new(layout));
        store.insert(0, 7, &[0]).unwrap();
        let slot = store.lookup(0, 7).unwrap();
        store
            .region
            .store(lock_addr(store.layout.table(0), slot), holder);
        store
    }

    /// A WOUND_WAIT lock request for record 7 by `me`, tagged `tag`.
    fn request(me: u64, timeouts: u64, tag: u64) -> Vec<u64> {
        vec![0, 7, me, FLAG_EXCLUSIVE, 0, 0, timeouts, 0, tag]
    }

    /// A parked WOUND_WAIT request must come back within its bound on a
    /// busy event loop (offers) and on one that is rarely scheduled (its
    /// clock), so that a wounded waiter notices the wound either way.
    #[test]
    fn a_parked_wound_wait_request_times_out_by_offers_or_by_time() {
        let ww = Lock2pl::<WoundWait>::default();
        let (old, young) = (ts(5, 1), ts(9, 2));
        let store = locked_store(old);
        let request = |timeouts: u64| request(young, timeouts, 1);
        let timed_out = |served: Served, payload: &[u64]| {
            served == Served::Reply && payload[0] == REPLY_TIMEOUT
        };

        let mut busy = request(0);
        for offer in 0..PARK_OFFERS {
            let served = ww.serve_lock(&store, &mut busy, 1_000 + offer);
            assert!(served == Served::Wait, "offer {offer}");
        }
        let served = ww.serve_lock(&store, &mut busy, 1_000 + PARK_OFFERS);
        assert!(timed_out(served, &busy), "the offers bound");

        for timeouts in [0, 3, MAX_PARK_DOUBLINGS + 2] {
            let limit_ns = PARK_NS << timeouts.min(MAX_PARK_DOUBLINGS);
            let mut idle = request(timeouts);
            assert!(ww.serve_lock(&store, &mut idle, 1_000) == Served::Wait);
            assert!(ww.serve_lock(&store, &mut idle, 1_000 + limit_ns) == Served::Wait);
            let served = ww.serve_lock(&store, &mut idle, 1_001 + limit_ns);
            assert!(
                timed_out(served, &idle),
                "the time bound after {timeouts} timeouts"
            );
        }
    }

    /// A wound by RPC reports the victim's pending request, and a wake for
    /// it answers that parked request `WOKEN` at its next offer, or on
    /// arrival if the wake came first; it never answers a later request of
    /// the same coroutine, nor another coroutine's.
    #[test]
    fn a_wake_answers_the_wounded_waiters_parked_request_and_no_other() {
        let ww = Lock2pl::<WoundWait>::default();
        // The victim: owner 2 = node 0, worker 0, coroutine 1.
        let (old, victim, other) = (ts(5, 1), ts(9, 2), ts(11, 3));
        let store = locked_store(old);
        let woken =
            |served: Served, payload: &[u64]| served == Served::Reply && payload[0] == REPLY_WOKEN;
        let status = store.layout.txn_meta.addr(0, 1);
        store.region.store(status, victim);
        store
            .region
            .store(status + META_REQUEST, request_record(1, 40));
        let mut wound = vec![status, victim];
        assert!(ww.serve_kind(&store, kind::LOCK2PL_WOUND, &mut wound, 0) == Some(Served::Reply));
        assert_eq!(wound, [victim, request_record(1, 40)], "previous, record");
        assert_eq!(store.region.load(status), WOUNDED);

        let mut parked = request(victim, 0, 40);
        let mut bystander = request(other, 0, 40);
        assert!(ww.serve_lock(&store, &mut parked, 1) == Served::Wait);
        assert!(ww.serve_lock(&store, &mut bystander, 1) == Served::Wait);
        let mut wake = vec![victim & !EXCLUSIVE, 40];
        assert!(ww.serve_kind(&store, kind::LOCK2PL_WAKE, &mut wake, 2) == Some(Served::Reply));
        assert!(woken(ww.serve_lock(&store, &mut parked, 3), &parked));
        assert!(ww.serve_lock(&store, &mut bystander, 3) == Served::Wait);
        // A stale wake lowers nothing; the next request is not answered.
        let mut stale = vec![victim & !EXCLUSIVE, 30];
        ww.serve_kind(&store, kind::LOCK2PL_WAKE, &mut stale, 4);
        let mut next = request(victim, 0, 41);
        assert!(ww.serve_lock(&store, &mut next, 5) == Served::Wait);
        // A wake that overtakes its request answers it on arrival.
        let mut early = vec![victim & !EXCLUSIVE, 50];
        ww.serve_kind(&store, kind::LOCK2PL_WAKE, &mut early, 6);
        let mut late = request(victim, 0, 50);
        assert!(woken(ww.serve_lock(&store, &mut late, 7), &late));
    }

    #[test]
    fn shared_words_count_readers_and_keep_a_conservative_bound() {
        let wd = Lock2pl::<WaitDie>::new(true, false);
        let (a, b, c) = (ts(1 << 20, 1), ts(2 << 20, 2), ts(3 << 20, 3));
        let Decision::Take(one) = wd.decide(0, b, false) else {
            panic!()
        };
        let Decision::Take(two) = wd.decide(one, c, false) else {
            panic!()
        };
        assert_eq!(two & COUNT_MASK, 2);
        assert_eq!(two >> COUNT_BITS, coarse(b & !EXCLUSIVE), "minimum kept");
        assert_eq!(
            wd.decide(two, a, true),
            Decision::Wait,
            "older than all readers"
        );
        assert_eq!(wd.decide(two, c, true), Decision::Die(AbortReason::Died));
        // The last reader leaves the bound behind: still free.
        let left = two - 2;
        assert_eq!(wd.decide(left, c, true), Decision::Take(c));
        let ww = Lock2pl::<WoundWait>::new(true, false);
        let Decision::Take(w) = ww.decide(0, b, false) else {
            panic!()
        };
        assert_eq!(
            ww.decide(w, c, true),
            Decision::Wait,
            "younger than all readers"
        );
        assert_eq!(ww.decide(w, a, true), Decision::Die(AbortReason::Died));
        let nw = Lock2pl::<NoWait>::new(true, false);
        assert_eq!(nw.decide(1, EXCLUSIVE | 7, false), Decision::Take(2));
        assert_eq!(
            nw.decide(COUNT_MASK, EXCLUSIVE | 7, false),
            Decision::Die(AbortReason::LockConflict)
        );
    }
}
