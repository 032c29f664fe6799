//! How a CALVIN program runs: [`CalvinRun`], the one [`Protocol`] of the
//! executor's program runs ([`CalvinExec`], over the preloaded declared
//! set) and of the sequencer's reconnaissance (`recon::Recon`). Neither
//! has a per-transaction stage but the first access of a record (RCC
//! §4.6: the executor, not a coordinator, installs writes and releases
//! locks); how that access reaches the record is what differs
//! ([`Reach`]).
//!
//! Invariants: a program that reaches past its declared set aborts
//! alike on every active participant (`Undeclared`, or `NotFound` for a
//! declared record that is missing); a row the program inserts is claimed
//! in the store only on its home node, and every participant sees it
//! absent, so all decide alike.

use super::{read_consistent, MISSING};
use crate::base::{ProtocolKind, Stage};
use crate::protocols::Served;
use crate::store::{NodeStore, StoreError};
use crate::txn::{AbortReason, Protocol, TxnCx, TxnResult};
use crate::workloads::Declared;

/// How a CALVIN program run reaches a record its context does not hold:
/// the part of its [`Protocol`] that differs between the executor's run
/// and the reconnaissance. [`CalvinRun`] is the rest.
#[allow(async_fn_in_trait)]
pub trait Reach: Sync {
    /// The stage a first access counts in ([`Protocol::ACCESS_STAGE`]).
    const STAGE: Stage;

    /// [`Protocol::access`].
    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()>;

    /// [`Protocol::upgrade`]. Default: the record is now written.
    async fn upgrade(&self, _cx: &mut TxnCx<'_>, _index: usize) -> TxnResult<()> {
        Ok(())
    }

    /// [`Protocol::insert_access`].
    async fn insert_access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()>;
}

/// A CALVIN program run, reaching records through `R`. Installing writes
/// and releasing locks belong to the executor, so `commit` and `release`
/// have nothing to do, and CALVIN's RPCs are served by
/// [`CalvinService`](super::CalvinService).
pub struct CalvinRun<R>(pub R);

impl<R: Reach> Protocol for CalvinRun<R> {
    const KIND: ProtocolKind = ProtocolKind::Calvin;
    const ACCESS_STAGE: Stage = R::STAGE;

    /// Locks live in the scheduler's lock manager, not in tuples.
    fn header_words(_record_words: u32) -> u32 {
        0
    }

    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        self.0.access(cx, index).await
    }

    async fn upgrade(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        self.0.upgrade(cx, index).await
    }

    async fn insert_access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        self.0.insert_access(cx, index).await
    }

    async fn commit(&self, _cx: &mut TxnCx<'_>) {}

    async fn release(&self, _cx: &mut TxnCx<'_>) {}

    fn serve(
        &self,
        _store: &NodeStore,
        _kind: u16,
        payload: &mut Vec<u64>,
        _now_ns: u64,
    ) -> Served {
        payload.clear();
        Served::Reply
    }
}

/// How a CALVIN executor's program run reaches records. Every record the
/// program may touch is preloaded into its context (`TxnCx::preload`)
/// before it runs, so reaching `access` or `upgrade` means the program
/// left its declared set: an abort every active participant reaches
/// identically.
pub struct CalvinExec<'a> {
    /// The transaction's declared set (records in it that are missing are
    /// not preloaded: reaching them is `NotFound`, not a stale set).
    pub declared: &'a [Declared],
    /// This node's store (where the executor runs).
    pub store: &'a NodeStore,
}

/// `Access::meta` of a row the program inserts (see [`CalvinExec`]'s
/// `insert_access`): installed by the executor of the home node, absent
/// from the declared set.
pub const INSERTED: u64 = 1;

impl Reach for CalvinExec<'_> {
    const STAGE: Stage = Stage::ValueForwarding;

    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let access = cx.accesses[index];
        let declared = self
            .declared
            .iter()
            .any(|d| d.table == access.table && d.node == access.node && d.key == access.key);
        Err(if declared {
            AbortReason::NotFound
        } else {
            AbortReason::Undeclared
        })
    }

    async fn upgrade(&self, _cx: &mut TxnCx<'_>, _index: usize) -> TxnResult<()> {
        Err(AbortReason::Undeclared)
    }

    /// A row the program inserts, on its home node (the origin). Its key
    /// need not be declared: the workload must derive it from a record
    /// the transaction writes (TPC-C: `D_NEXT_O_ID`, `D_NEXT_H_ID` of the
    /// district it updates), whose exclusive lock then covers the new key
    /// — no other transaction can name it before this one installs it,
    /// except by reading that record (ordered by its lock) or through an
    /// ordered index this transaction changes only as it installs. On the
    /// home node the row is claimed now (`NodeStore::ensure_row`, as every
    /// protocol's insert does) and its current version read; every other
    /// active participant runs the program on an absent version-0 copy
    /// that it never installs. Both see it absent, so both decide alike.
    async fn insert_access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let access = cx.accesses[index];
        cx.accesses[index].meta = INSERTED;
        if access.node != self.store.node {
            // The copy is zeroed: row state absent, version 0.
            return Ok(());
        }
        let slot = match self.store.ensure_row(access.table, access.key) {
            Ok(slot) => slot,
            Err(StoreError::TableFull { .. } | StoreError::IndexFull { .. }) => {
                return Err(AbortReason::TableFull)
            }
            Err(StoreError::DuplicateKey { .. }) => return Err(AbortReason::RowStale),
        };
        cx.accesses[index].slot = slot;
        let seq = read_consistent(self.store, access.table, access.key, cx.record_mut(index));
        debug_assert_ne!(seq, MISSING, "the row was just claimed");
        cx.accesses[index].seq = seq;
        Ok(())
    }
}
