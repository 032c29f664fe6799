//! DRTM: two-phase locking with lease-based shared locks (DrTM §4.2–4.5,
//! without HTM).
//!
//! Every record a transaction reads is locked in *shared* mode with a read
//! lease: a contract, written into the tuple's state word, that no writer
//! may lock the record before the lease's end time (DrTM §4.2). A reader
//! installs its lease (`now + lease`) with a CAS if the record is free or
//! its lease has expired, and shares an unexpired lease; a write takes the
//! exclusive lock with a CAS and aborts if the record is write-locked or
//! holds an unexpired lease (DrTM §4.3, Fig. 5). Leases are never released:
//! they lapse.
//!
//! One departure from Fig. 5, on the reader's side only: a lease that is no
//! longer valid but not yet expired (within `DELTA` of its end) can neither
//! be shared (the commit confirmation would fail) nor replaced; Fig. 5
//! shares it and the reader aborts at commit. verbena extends it instead, by
//! CAS from that word to the reader's own, later end time (never an earlier
//! one) — as safe as installing a lease, since no writer holds the word and
//! the end only moves later for everyone sharing it. Every valid lease is
//! shared, as in Fig. 5, on purpose: extending leases that were still valid
//! (tried: any with less than half, or a quarter, of a lease left) keeps hot
//! records leased for good and starved the writers of the sim matrix's hot
//! shapes.
//!
//! At the commit point the transaction confirms that every lease it relies
//! on is still valid, `now < end − DELTA` (Fig. 3's COMMIT), then writes
//! back and unlocks its write set. DrTM §4.4's argument carries over:
//! a lease is a shared lock held from the read to the confirmation, and the
//! writer waits it out (by aborting and retrying), so the protocol is strict
//! 2PL. `DELTA` (`ProtocolOptions::drtm_delta_ns`) bounds the clock skew
//! between nodes: a writer treats a lease as expired only when
//! `now > end + DELTA`, a reader trusts it only while `now < end − DELTA`, so
//! the two never overlap on clocks that disagree by less than `DELTA`.
//!
//! Stages (RCC bits, RCC's encoding kept): `lock` = 1 — the execution-phase
//! access, both the shared lease of a read and the exclusive lock of a write
//! (DrTM's REMOTE_READ and REMOTE_WRITE; a reader's lease is a lock and takes
//! the same primitive); `log` = 4 — empty without replication, and then the
//! lease confirmation, which must be the last step before the commit point;
//! `commit` = 16 (write back and unlock, DrTM's REMOTE_WRITE_BACK);
//! `release` = 8 (unlock on abort). There is no commit-time lock stage.
//!
//! State word (header word 0), one 64-bit word per tuple, bit 0 first:
//!
//! ```text
//! bit 0      write lock (1 = exclusively locked)
//! bits 1..64 if locked: the owner (coroutine id + 1, 29 bits used)
//!            else: the read lease's end time in ns (0 with the word = INIT)
//! ```
//!
//! DrTM packs `lock:1 | owner:8 | lease:55`. A lease and a writer never
//! coexist (a writer CASes the whole word from a free or expired state to
//! `LOCKED(owner)`), so verbena overlays the two fields instead: the owner
//! keeps the full 28-bit coroutine id that verbena's locks hold (DrTM's 8
//! bits name only a machine), and the end time keeps 63 bits of ns (about
//! 290 years), where 55 bits minus a 28-bit owner would leave 2^27 ns.
//! `cx.owner` is `LOCKED(owner)` itself, so the shared commit and release of
//! `txn::kit` (which store 0 = INIT, or CAS the owner to 0) apply unchanged.
//!
//! * one-sided access: CAS(state, expected → desired) and READ(tuple) in one
//!   doorbell batch (FIFO: the READ sees the tuple after the CAS); `expected`
//!   starts at INIT and a CAS that found an expired lease (or, for a read, a
//!   lease to extend) is retried from that word (Fig. 5's RETRY), a few
//!   rounds at most. For a shared read whose CAS found an unexpired lease,
//!   the READ is covered by that lease.
//! * RPC access: the handler runs the same CAS loop on the same word with a
//!   local CAS, then copies the tuple, and replies
//!   `[status, slot, seq, lease end, record…]`. A handler has no clock of its
//!   own: the request carries the coordinator's `now` (read before sending,
//!   so never later than the handler's time), which is the clock a
//!   one-sided CAS decides with too. A stale `now` only makes a writer see a
//!   lease as unexpired a little longer (an abort, never a conflict missed);
//!   a reader's lease is confirmed at commit against the real clock.
//! * commit / release: `txn::kit`'s (WRITE `seq_end`, record, then
//!   `[seq, state = INIT]`; or one RPC per participant).
//!
//! Time is `TxnCx::now_ns`: one clock for the whole cluster on the `threads`
//! fabric (so `DELTA` may be 0 there), virtual time on a simulated one.
//!
//! Read-only transactions (DrTM §4.5): a transaction that wrote nothing
//! holds no lock; its commit is the lease confirmation alone, with no
//! commit-stage verbs, and a failed confirmation retries the whole
//! transaction (DrTM's `goto L`). Without HTM every transaction in verbena
//! reads through leases, local records included, as DrTM's read-only path
//! does. DrTM fixes one end time per transaction because it acquires every
//! lease before executing; verbena acquires them as the program reads, so
//! each read asks for `now + lease` and the transaction relies on the
//! earliest end time of the leases it holds, which is what DrTM confirms.
//!
//! Upgrades: DrTM needs the write set in advance. A record first read (under
//! a lease, possibly shared with other readers) and then written cannot be
//! locked without waiting out its own lease, so the attempt aborts
//! (`lease_conflict`) and its retries lock every record exclusively —
//! recorded in `TxnCx::timestamp`, which DrTM otherwise does not use
//! (`EXCLUSIVE_RETRY`; reset on a request's first attempt).
//!
//! Hybrid handshakes (RCC §5.2): every form of every stage acts on the one
//! state word with CAS or a store by the lock holder, and the RPC access
//! replies the slot, so any one-sided stage can address a tuple first
//! reached by RPC. No further agreed region is needed.
//!
//! Per-access state (`Access::meta`): the end time of the lease a read
//! relies on (`u64::MAX` for an exclusively locked record).
//!
//! Invariants: a record is written only under its exclusive lock; the lock
//! is taken only from INIT or a lease expired by more than `DELTA`; a
//! transaction commits only if at its commit point every lease it read
//! under is valid by more than `DELTA`.

use crate::store::NodeStore;
use crate::txn::{ids, AbortReason, TxnCx, TxnResult};

use super::common::kind;
use super::{Protocol, ProtocolKind, Served, Stage};
use crate::txn::kit::{self, lock_addr, status};

/// The write-lock bit of the state word.
pub const W_LOCKED: u64 = 1;
/// The free state.
pub const INIT: u64 = 0;

/// `TxnCx::timestamp` when the request's retries lock every record
/// exclusively (an earlier attempt upgraded a read).
const EXCLUSIVE_RETRY: u64 = 1;

/// CAS rounds of one access (each retry follows an expired lease).
const CAS_ROUNDS: u32 = 4;

/// Access status of an RPC reply beyond `kit::status`: a write met an
/// unexpired lease.
const LEASE_HELD: u64 = 10;

/// `LOCKED(owner)` of DrTM Fig. 4.
#[inline]
pub fn locked(owner: u64) -> u64 {
    (owner << 1) | W_LOCKED
}

/// `R_LEASED(end_time)`.
#[inline]
pub fn leased(end_ns: u64) -> u64 {
    debug_assert!(end_ns > 0 && end_ns < 1 << 63);
    end_ns << 1
}

/// `END_TIME(state)` of a state that is not write-locked.
#[inline]
pub fn end_time(state: u64) -> u64 {
    debug_assert_eq!(state & W_LOCKED, 0);
    state >> 1
}

#[derive(Clone, Debug)]
pub struct Drtm {
    /// Length of a read lease, ns.
    pub lease_ns: u64,
    /// Bound on clock skew between nodes, ns (DrTM's DELTA).
    pub delta_ns: u64,
}

impl Default for Drtm {
    fn default() -> Self {
        let options = crate::config::ProtocolOptions::default();
        Drtm {
            lease_ns: crate::config::DRTM_LEASE_NS,
            delta_ns: options.drtm_delta_ns,
        }
    }
}

/// What one CAS of an access found.
enum Step {
    /// The desired state is installed, or (shared) an unexpired lease with
    /// this end time covers the read.
    Acquired(u64),
    /// An expired lease: retry the CAS from this word.
    Retry(u64),
    Abort(AbortReason),
}

impl Drtm {
    /// `EXPIRED(end)` at `now`: past the end by more than the skew bound.
    #[inline]
    pub fn expired(&self, now_ns: u64, end_ns: u64) -> bool {
        now_ns > end_ns.saturating_add(self.delta_ns)
    }

    /// `VALID(end)` at `now`: before the end by more than the skew bound.
    #[inline]
    pub fn valid(&self, now_ns: u64, end_ns: u64) -> bool {
        now_ns.saturating_add(self.delta_ns) < end_ns
    }

    /// Decides on the word `previous` that a CAS from `expected` to
    /// `desired` returned (DrTM Fig. 5, both REMOTE_READ and REMOTE_WRITE).
    fn step(&self, now_ns: u64, expected: u64, desired: u64, previous: u64) -> Step {
        let exclusive = desired & W_LOCKED != 0;
        if previous == expected {
            return Step::Acquired(if exclusive {
                u64::MAX
            } else {
                end_time(desired)
            });
        }
        if previous & W_LOCKED != 0 {
            return Step::Abort(AbortReason::LockConflict);
        }
        let end = end_time(previous);
        if self.expired(now_ns, end) {
            // RETRY: correct state.
            Step::Retry(previous)
        } else if exclusive {
            Step::Abort(AbortReason::LeaseConflict)
        } else if self.valid(now_ns, end) || end >= end_time(desired) {
            // SUCCESS: unexpired read leased.
            Step::Acquired(end)
        } else {
            // Neither valid nor expired: extend it to the later end time.
            Step::Retry(previous)
        }
    }

    /// The state an access installs: the exclusive lock, or a fresh lease.
    fn desired(&self, cx: &TxnCx<'_>, index: usize, now_ns: u64) -> u64 {
        if cx.accesses[index].write || cx.timestamp == EXCLUSIVE_RETRY {
            cx.owner
        } else {
            leased(now_ns.saturating_add(self.lease_ns).min((1 << 63) - 1))
        }
    }

    async fn access_onesided(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let (access, table) = kit::locate_onesided(cx, index).await?;
        let mut expected = INIT;
        for _ in 0..CAS_ROUNDS {
            let now = cx.now_ns();
            let desired = self.desired(cx, index, now);
            let (cas, read) = kit::queue_cas_then_read_tuple(
                &mut cx.round(),
                access.node,
                table,
                access.slot,
                (lock_addr(table, access.slot), expected, desired),
            );
            cx.submit().await?;
            let batch = cx.batch();
            match self.step(now, expected, desired, batch.result_word(cas)) {
                Step::Acquired(end) => {
                    if desired & W_LOCKED != 0 {
                        cx.accesses[index].locked = true;
                    }
                    let tuple = kit::decode(table, batch.result(read));
                    debug_assert_eq!(tuple.key, access.key, "location cache entry is stale");
                    // Under a lock or a lease nobody writes; a lease that
                    // lapsed before the READ fails the confirmation anyway.
                    if tuple.seq != tuple.seq_end {
                        return Err(AbortReason::ReadInconsistent);
                    }
                    kit::accept_record(cx, index, tuple.seq, tuple.record);
                    cx.accesses[index].meta = end;
                    return Ok(());
                }
                Step::Retry(previous) => expected = previous,
                Step::Abort(reason) => return Err(reason),
            }
        }
        Err(AbortReason::LockConflict)
    }

    async fn access_rpc(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let now = cx.now_ns();
        let desired = self.desired(cx, index, now);
        let reply = kit::access_reply(cx, index, kind::DRTM_ACCESS, &[desired, now]).await?;
        match reply[0] {
            status::OK | status::INCONSISTENT => {
                if desired & W_LOCKED != 0 {
                    cx.accesses[index].locked = true;
                }
                if reply[0] == status::INCONSISTENT {
                    return Err(AbortReason::ReadInconsistent);
                }
                kit::accept_record(cx, index, reply[2], &reply[4..]);
                cx.accesses[index].meta = reply[3];
                Ok(())
            }
            status::LOCKED => Err(AbortReason::LockConflict),
            LEASE_HELD => Err(AbortReason::LeaseConflict),
            _ => Err(AbortReason::NotFound),
        }
    }

    /// The handler of `DRTM_ACCESS`: `[table, key, desired, now]`.
    fn serve_access(&self, store: &NodeStore, payload: &mut Vec<u64>) {
        let (table_id, key, desired, now) = (payload[0] as u32, payload[1], payload[2], payload[3]);
        payload.clear();
        let Some(slot) = kit::find_row(store, table_id, key, payload) else {
            return;
        };
        let table = store.layout.table(table_id);
        let addr = lock_addr(table, slot);
        let mut expected = INIT;
        let mut outcome = Step::Abort(AbortReason::LockConflict);
        for _ in 0..CAS_ROUNDS {
            let previous = store.region.cas(addr, expected, desired);
            match self.step(now, expected, desired, previous) {
                Step::Retry(previous) => expected = previous,
                decided => {
                    outcome = decided;
                    break;
                }
            }
        }
        let end = match outcome {
            Step::Acquired(end) => end,
            refused => {
                let code = match refused {
                    Step::Abort(AbortReason::LeaseConflict) => LEASE_HELD,
                    _ => status::LOCKED,
                };
                payload.extend_from_slice(&[code, slot]);
                return;
            }
        };
        payload.resize(table.tuple_words as usize, 0);
        store.region.read(table.tuple_addr(slot), payload);
        let tuple = kit::decode(table, payload);
        let (seq, code) = (tuple.seq, kit::read_status(tuple.seq == tuple.seq_end));
        kit::reply_with_tuple_record(payload, table, &[code, slot, seq, end]);
    }
}

impl crate::txn::FromConfig for Drtm {
    fn from_config(config: &crate::config::Config) -> Self {
        Drtm {
            lease_ns: config.drtm_lease_ns(),
            delta_ns: config.protocol_options.drtm_delta_ns,
        }
    }
}

impl Protocol for Drtm {
    const KIND: ProtocolKind = ProtocolKind::Drtm;
    const ACCESS_STAGE: Stage = Stage::Lock;

    fn header_words(_record_words: u32) -> u32 {
        1
    }

    fn begin(&self, cx: &mut TxnCx<'_>) {
        let coroutine = ids::coroutine_id(cx.worker.node, cx.worker.worker, cx.co);
        cx.owner = locked(ids::lock_owner(coroutine));
        if cx.attempt == 0 {
            cx.timestamp = 0;
        }
    }

    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        kit::in_form!(cx, Stage::Lock,
            onesided: self.access_onesided(cx, index),
            rpc: self.access_rpc(cx, index))
    }

    async fn upgrade(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        if cx.accesses[index].locked {
            return Ok(());
        }
        // Its own lease (and perhaps others') holds the record: lock every
        // record exclusively from the next attempt on.
        cx.timestamp = EXCLUSIVE_RETRY;
        Err(AbortReason::LeaseConflict)
    }

    /// Nothing to log without replication; then the lease confirmation of
    /// DrTM's COMMIT, the last step before the commit point.
    async fn log(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        let earliest = cx
            .accesses
            .iter()
            .filter(|a| !a.locked)
            .map(|a| a.meta)
            .min();
        match earliest {
            Some(end) if !self.valid(cx.now_ns(), end) => Err(AbortReason::LeaseExpired),
            _ => Ok(()),
        }
    }

    fn serve(&self, store: &NodeStore, kind: u16, payload: &mut Vec<u64>, _now_ns: u64) -> Served {
        match kind {
            kind::DRTM_ACCESS => self.serve_access(store, payload),
            other => return kit::serve_shared_or_panic(store, other, payload, "drtm"),
        }
        Served::Reply
    }
}
