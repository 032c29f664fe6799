//! The protocol kit (docs/WRITING_A_PROTOCOL.md): the stage steps that
//! every protocol, in this crate or outside it, builds its stages from —
//! each in its one-sided and its RPC form, with the RPC handlers the latter
//! needs. A protocol (`protocols`, layer 7) then holds its own rules only:
//! what it checks, in which order, and what a conflict costs.
//!
//! * Fetching ([`locate_onesided`], [`call_access`], [`access_reply`], [`decode`],
//!   [`accept_record`], [`queue_cas_then_read_tuple`],
//!   [`queue_lock_then_read_seq`]): find a record's tuple by one-sided
//!   index probes or ask its node, read it, lock it in the same round,
//!   keep the record and its version.
//! * Rounds of calls ([`queue_calls_per_node`], [`reply_entry`],
//!   [`lock_outcome`], [`call_payload`], [`call_one`]): one call per
//!   participant node carrying every entry for it, and the reply read
//!   back per access.
//! * Finishing ([`post_commit`], [`post_release`], [`post_unlock`],
//!   [`post_locked`], [`submit_before_commit`]): the update-and-unlock
//!   commit and the unlock release of the lock-word protocols (RCC §4.2
//!   Fig. 5; DrTM+H §5.3), posted with passive ACK.
//! * Serving ([`serve_shared`], [`serve_write_back`], [`serve_unlock`],
//!   [`serve_lock`], [`find_row`], [`load_tuple`], [`push_record`],
//!   [`reply_with_record`]): the handler side of the above, on the serving
//!   node's own memory.
//! * [`in_form!`](crate::in_form): runs a stage in the form the run's plan
//!   gives it.
//!
//! Commit write-back order, which `store`'s tear check relies on: a WRITE of
//! `seq_end`, then a WRITE of the record, then one WRITE of the adjacent
//! words `[seq, lock = 0]` — three verbs in one doorbell batch, FIFO on the
//! queue pair (the RPC handler stores in the same order). The trailer is
//! written first and the header last, against the reader's increasing
//! address order, so a READ that saw any new record word also saw the new
//! `seq_end`, and one that saw the new `seq` saw the whole new record: a
//! reader that sees `seq == seq_end` read one version only.
//!
//! Both commit and release use passive ACK (DrTM+H §3.2, §5.3): the
//! coordinator does not wait for them; the runtime drains them before the
//! run ends.
//!
//! Invariants: the lock word is protocol header word 0 ([`lock_addr`]);
//! every RPC reply to a fetch starts `[status, slot, …]`, so a later
//! one-sided stage knows the tuple's address (RCC §5.2); a lock the kit
//! frees is one the attempt holds (`Access::locked`).

mod access;
mod calls;
mod finish;
mod serve;

use crate::store::{TableLayout, KEY_WORD, SEQ_WORD};

pub use access::{
    accept_record, access_reply, call_access, judge_locks, locate_onesided,
    queue_cas_then_read_tuple, queue_lock_then_read_seq, queue_per_node, read_tuple_onesided,
    remember_reply_slot, Reply,
};
pub use calls::{
    call_nodes_all_ok, call_one, call_payload, lock_outcome, queue_calls_per_node, reply_entry,
};
pub use finish::{
    post_commit, post_locked, post_release, post_unlock, push_write_back,
    queue_write_back_onesided, submit_before_commit,
};
pub use serve::{
    answer_entries, find_row, load_tuple, push_record, read_status, reply_with_record,
    reply_with_tuple_record, serve_lock, serve_shared, serve_shared_or_panic, serve_unlock,
    serve_write_back, write_back_entries, WriteBack,
};

/// The RPC kinds of the kit's handlers, in the range of the crate's
/// protocols (`base::rpc_kind::PROTOCOLS`, whose table in
/// `protocols::common::kind` lists them too). A protocol that finishes
/// with [`post_commit`] or [`post_release`] serves them with
/// [`serve_shared`] (and, if it holds shared locks, `UNLOCK_SHARED`
/// itself).
pub mod kind {
    /// `[owner, (table, slot, new_seq, record…)…]`: install and unlock.
    pub const WRITE_BACK: u16 = 1;
    /// `[owner, (table, slot)…]`: unlock what `owner` holds.
    pub const UNLOCK: u16 = 2;
    /// `[(table, slot)…]`: drop one holder of a shared lock word.
    pub const UNLOCK_SHARED: u16 = 12;
}

/// Status words in RPC replies.
pub mod status {
    pub const OK: u64 = 0;
    pub const LOCKED: u64 = 1;
    pub const NOT_FOUND: u64 = 2;
    pub const INCONSISTENT: u64 = 3;
    pub const STALE: u64 = 4;
    pub const FULL: u64 = 5;
    pub const PENDING: u64 = 6;
    pub const UNAVAILABLE: u64 = 7;
}

/// Address of the lock word: protocol header word 0.
#[inline]
pub fn lock_addr(table: &TableLayout, slot: u64) -> u64 {
    table.header_addr(slot, 0)
}

/// Address of the tuple's trailer word `seq_end`, which a write-back
/// stores first (the module doc's order).
#[inline]
pub fn seq_end_addr(table: &TableLayout, slot: u64) -> u64 {
    table.tuple_addr(slot) + table.seq_end_offset() as u64
}

/// A fetched tuple, decoded.
pub struct TupleView<'a> {
    pub key: u64,
    pub seq: u64,
    pub seq_end: u64,
    pub lock: u64,
    pub record: &'a [u64],
}

pub fn decode<'a>(table: &TableLayout, tuple: &'a [u64]) -> TupleView<'a> {
    debug_assert_eq!(tuple.len(), table.tuple_words as usize);
    let record = table.record_offset() as usize;
    TupleView {
        key: tuple[KEY_WORD as usize],
        seq: tuple[SEQ_WORD as usize],
        seq_end: tuple[table.seq_end_offset() as usize],
        lock: tuple[table.record_offset() as usize - table.header_words as usize],
        record: &tuple[record..record + table.record_words as usize],
    }
}

/// Per-record statuses of a commit-time lock reply (`OCC_LOCK`,
/// `MVCC_LOCK`, `TS_LOCK`, `SUNDIAL_LOCK`): locked, held by another, or
/// locked but no longer the version read.
pub mod lock_reply {
    pub const OK: u64 = 0;
    pub const CONFLICT: u64 = 1;
    pub const STALE: u64 = 2;
}

/// Runs a stage in the form the run's plan gives it (`TxnCx::primitive`):
/// `in_form!(cx, stage, onesided: A, rpc: B)` awaits the future `A` or the
/// future `B`, and builds only the one it awaits, so both may borrow `cx`.
/// Every stage with both forms chooses here, so no protocol decides the
/// form on its own.
///
/// A protocol outside the crate writes `verbena::in_form!(cx, Stage::Lock,
/// onesided: lock_onesided(cx), rpc: lock_rpc(cx))` inside an `async` stage.
#[macro_export]
macro_rules! in_form {
    ($cx:ident, $stage:expr, onesided: $onesided:expr, rpc: $rpc:expr $(,)?) => {
        match $cx.primitive($stage) {
            $crate::base::Primitive::OneSided => $onesided.await,
            $crate::base::Primitive::Rpc => $rpc.await,
        }
    };
}
// The macro under the kit's path too (`kit::in_form!`), beside the steps.
pub use in_form;
