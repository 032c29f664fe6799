//! NO_WAIT: two-phase locking that aborts on any conflict (RCC §4.2, Fig. 5;
//! Deneva §3.1; RCBench Alg. 4 with exclusive locks only).
//!
//! Every record a transaction touches is locked exclusively when first
//! accessed; a lock held by anyone else aborts the transaction at once, so
//! no transaction ever waits and deadlock is impossible. The shared/exclusive
//! variant comes with the protocols issue.
//!
//! Stages (RCC bits): `lock` = 1 (lock & read, at access time), `log` = 4
//! (empty without replication), `commit` = 16 (update & unlock written
//! records; read-only records are unlocked in the same passive round with the
//! `release` primitive), `release` = 8 (unlock on abort).
//!
//! * one-sided lock: CAS(lock, 0 → owner) and READ(tuple) in one doorbell
//!   batch; FIFO makes the READ see the tuple after the CAS, and if the CAS
//!   failed its data is ignored (RCC §4.2). On a location-cache miss an index
//!   probe round comes first.
//! * RPC lock: the handler looks the key up, CASes the lock word locally and
//!   replies `[status, slot, seq, record…]`; the slot fills the cache so a
//!   one-sided commit or release can address the tuple (RCC §5.2).
//! * commit / release: see `common` (WRITE record+seq_end, WRITE seq, WRITE
//!   lock=0; or one RPC per participant).
//!
//! Header layout: word 0 = lock (0 free, else owner = coroutine id + 1).
//! Hybrid handshakes (RCC §5.2): none beyond the lock word itself — every
//! form of every stage CASes or stores that one word, and the RPC lock
//! replies the slot.
//!
//! Invariant: a record is read only while this transaction holds its lock,
//! so the version read is the version the write replaces (`seq + 1`).

use crate::store::NodeStore;
use crate::txn::{AbortReason, TxnCx, TxnResult};

use super::common::{self, kind, lock_addr, status};
use super::{Primitive, Protocol, ProtocolKind, Served, Stage};

#[derive(Clone, Debug, Default)]
pub struct NoWait;

impl NoWait {
    async fn lock_onesided(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        common::locate_onesided(cx, index).await?;
        let access = cx.accesses[index];
        let table = cx.table(access.table);
        let (cas, read) = {
            let mut batch = cx.round();
            let cas = batch.cas(access.node, lock_addr(table, access.slot), 0, cx.owner);
            let read = batch.read(
                access.node,
                table.tuple_addr(access.slot),
                table.tuple_words,
            );
            (cas, read)
        };
        cx.submit().await;
        let batch = cx.batch();
        if batch.result_word(cas) != 0 {
            return Err(AbortReason::LockConflict);
        }
        cx.accesses[index].locked = true;
        let tuple = common::decode(table, batch.result(read));
        debug_assert_eq!(tuple.key, access.key, "location cache entry is stale");
        debug_assert_eq!(tuple.seq, tuple.seq_end, "a locked tuple cannot be torn");
        debug_assert_eq!(tuple.lock, cx.owner);
        common::accept_record(cx, index, tuple.seq, tuple.record);
        Ok(())
    }

    async fn lock_rpc(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let access = cx.accesses[index];
        let call = common::call_one(
            cx,
            access.node,
            kind::NO_WAIT_LOCK_READ,
            &[access.table as u64, access.key, cx.owner],
        );
        cx.submit().await;
        let batch = cx.batch();
        let reply = batch.reply(call);
        match reply[0] {
            status::OK => {
                cx.remember_slot(index, reply[1]);
                cx.accesses[index].locked = true;
                common::accept_record(cx, index, reply[2], &reply[3..]);
                Ok(())
            }
            status::LOCKED => {
                cx.remember_slot(index, reply[1]);
                Err(AbortReason::LockConflict)
            }
            _ => Err(AbortReason::NotFound),
        }
    }
}

impl Protocol for NoWait {
    const KIND: ProtocolKind = ProtocolKind::NoWait;
    const ACCESS_STAGE: Stage = Stage::Lock;

    fn header_words(_record_words: u32) -> u32 {
        1
    }

    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        match cx.primitive(Stage::Lock) {
            Primitive::OneSided => self.lock_onesided(cx, index).await,
            Primitive::Rpc => self.lock_rpc(cx, index).await,
        }
    }

    async fn commit(&self, cx: &mut TxnCx<'_>) {
        common::post_commit(cx);
    }

    async fn release(&self, cx: &mut TxnCx<'_>) {
        common::post_release(cx);
    }

    fn serve(&self, store: &NodeStore, kind: u16, payload: &mut Vec<u64>) -> Served {
        match kind {
            kind::NO_WAIT_LOCK_READ => {
                let (table_id, key, owner) = (payload[0] as u32, payload[1], payload[2]);
                payload.clear();
                let Some(slot) = store.lookup(table_id, key) else {
                    payload.push(status::NOT_FOUND);
                    return Served::Reply;
                };
                let table = store.layout.table(table_id);
                if store.region.cas(lock_addr(table, slot), 0, owner) != 0 {
                    payload.extend_from_slice(&[status::LOCKED, slot]);
                    return Served::Reply;
                }
                payload.extend_from_slice(&[status::OK, slot, store.seq(table_id, slot)]);
                let start = payload.len();
                payload.resize(start + table.record_words as usize, 0);
                store
                    .region
                    .read(table.record_addr(slot), &mut payload[start..]);
            }
            other => assert!(
                common::serve_shared(store, other, payload),
                "no_wait has no RPC handler {other}"
            ),
        }
        Served::Reply
    }
}
