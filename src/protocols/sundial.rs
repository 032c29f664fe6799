//! SUNDIAL: logical leases (RCC §4.5, after Yu et al.'s Sundial as RCC
//! describes it; RCBench §6.2).
//!
//! Every tuple carries a logical lease `[wts, rts]`: the version it holds was
//! written at logical time `wts` and may be read by any transaction that
//! commits at a logical time up to `rts`. A transaction reads without locks
//! and remembers each lease; at commit it locks its write set, computes its
//! commit timestamp `commit_ts = max(wts of every record read, rts + 1 of
//! every record written)`, and then *renews* every read lease that does not
//! reach `commit_ts` by raising the tuple's `rts` — which fails if the tuple
//! changed since it was read or is locked by a writer. Writes install
//! `wts = rts = commit_ts`. Reads never abort on a locked tuple: the version
//! they see stays valid for every timestamp up to the `rts` the writer froze.
//!
//! Stages (RCC bits): `read` = 2 (execution-phase fetch of every record,
//! written ones included), `lock` = 1 (lock the write set and check each
//! version is still the one read), `renew` = 64 (extend read leases to
//! `commit_ts`), `log` = 4 (empty without replication), `commit` = 16
//! (install the writes and the new lease, unlock), `release` = 8 (unlock on
//! abort).
//!
//! Header layout (2 words):
//!
//! ```text
//! word 0  lease word: bit 63 = write lock, bits 0..63 = rts
//! word 1  wts
//! ```
//!
//! The version number is the store's `seq`. The lock shares its word with
//! `rts` on purpose: RCC §4.5 renews a lease with one CAS on `rts`, and that
//! CAS must fail while a writer holds the lock — a writer computed its
//! timestamp from the `rts` it saw when it locked, so a renewal that slipped
//! in between would let a reader claim a logical time at or after the
//! writer's while it read the version the writer replaces. With both in one
//! word the lock *freezes* `rts`: a writer locks with
//! `CAS(lease, rts → LOCK | rts)` (learning `rts` atomically), a renewal is
//! `CAS(lease, rts → commit_ts)` and so fails on any lock, and every commit
//! strictly raises `rts` (`commit_ts ≥ rts + 1`), so the word never returns to
//! an earlier unlocked value once a newer version is installed: a renewal CAS
//! whose expected value is the unlocked lease word the reader saw succeeds
//! only if the version is still the one read (an aborted writer restores the
//! very word it locked). A failed CAS returns the current word; if it is
//! unlocked and `seq` (READ after the CAS, FIFO) is unchanged, the lease was
//! merely extended by another reader: it either covers `commit_ts` already or
//! the CAS is retried from the new value (a few rounds at most).
//!
//! * one-sided read: one READ of the whole tuple; `seq == seq_end` proves it
//!   is one version (see `store`), and `wts` and the lease word lie between
//!   the two, so they belong to it; a torn READ is retried, then aborts.
//! * RPC read: the handler copies the tuple locally (re-reading a torn copy)
//!   and replies `[status, slot, seq, wts, lease, record…]`.
//! * one-sided lock: CAS(lease) + READ(seq) per record, doorbell batched per
//!   node; RPC lock: one request per node whose handler runs the same CAS
//!   loop on the same word.
//! * one-sided renew: CAS(lease, rts → commit_ts) + READ(seq) per record;
//!   RPC renew: one request per node, the same CAS loop locally.
//! * commit: WRITE `seq_end`, WRITE record, WRITE `wts`, then one WRITE of the
//!   adjacent `[seq, lease = commit_ts]` (unlocks), per written record, with
//!   passive ACK; RPC: one `SUNDIAL_WRITE_BACK` per node storing in the same
//!   order. Release: WRITE of the lease word as it was when locked (or RPC).
//!
//! Hybrid handshakes (RCC §5.2): every form of every stage acts on the same
//! lease word with the same CAS (an RPC handler CASes locally the word a
//! one-sided CAS targets), every RPC read replies the tuple's slot and lease
//! word, and every RPC lock replies the lease word it locked, so a later
//! stage of either form can address the tuple and restore or replace the
//! word. Commit writes in the same order in both forms, so the tear check of
//! either read form holds against either commit form. No further agreed
//! region is needed.
//!
//! Per-access state (`Access::meta`): the lease word, as read (or the newer
//! one a failed CAS returned) and, once locked, the unlocked value the lock
//! froze; the `wts` read only raises `commit_ts` when it is fetched. `TxnCx::timestamp` is the
//! attempt's `commit_ts`.
//!
//! Invariants: `rts` never decreases, and rises by at least one at every
//! commit; only the lock holder changes a locked lease word; a transaction
//! commits at `commit_ts` only if every version it read has a lease covering
//! `commit_ts` while unlocked (or frozen by a writer, whose timestamp then
//! exceeds it), and every version it writes is locked and unchanged since it
//! was read.

use crate::fabric::{CallId, VerbId};
use crate::store::{NodeStore, TableLayout, HEADER_WORD};
use crate::txn::{AbortReason, Access, TxnCx, TxnResult};

use super::common::{self, kind, status};
use super::{Primitive, Protocol, ProtocolKind, Served, Stage};

/// Write-lock bit of the lease word.
pub const LOCKED: u64 = 1 << 63;
/// The `rts` bits of the lease word.
pub const RTS_MASK: u64 = LOCKED - 1;

/// Header words.
const LEASE_WORD: u32 = 0;
const WTS_WORD: u32 = 1;

/// Rounds of one-sided CAS a lock or renewal may take when other readers
/// keep extending the lease, and the bound of the handlers' local loops.
const CAS_ROUNDS: u32 = 4;
const LOCAL_CAS_TRIES: u32 = 64;
/// READs of a tuple found torn before the read aborts.
const READ_TRIES: u32 = 3;

/// Per-record status in a `SUNDIAL_LOCK` reply.
const LOCK_OK: u64 = 0;
const LOCK_CONFLICT: u64 = 1;
/// Locked, but the version is not the one read.
const LOCK_STALE: u64 = 2;
/// Not locked: the version changed before the lock was taken.
const LOCK_STALE_FREE: u64 = 3;

#[derive(Clone, Debug, Default)]
pub struct Sundial;

#[inline]
fn lease_addr(table: &TableLayout, slot: u64) -> u64 {
    table.header_addr(slot, LEASE_WORD)
}

#[inline]
fn wts_addr(table: &TableLayout, slot: u64) -> u64 {
    table.header_addr(slot, WTS_WORD)
}

/// A read lease that does not reach `commit_ts` and must be renewed.
#[inline]
fn needs_renewal(access: &Access, commit_ts: u64) -> bool {
    !access.write && access.meta & RTS_MASK < commit_ts
}

/// Takes a fetched version: its record, `seq`, and lease; `commit_ts` must
/// not precede its `wts`.
fn accept(cx: &mut TxnCx<'_>, index: usize, seq: u64, wts: u64, lease: u64, record: &[u64]) {
    common::accept_record(cx, index, seq, record);
    cx.accesses[index].meta = lease;
    cx.timestamp = cx.timestamp.max(wts);
}

/// What a failed lock or renewal CAS means for the access.
enum CasOutcome {
    /// Another transaction holds the lock.
    Locked,
    /// The version changed since it was read.
    Changed,
    /// The lease was extended by another reader; `meta` holds the new word.
    Extended,
}

fn after_failed_cas(access: &mut Access, previous: u64, seq: u64) -> CasOutcome {
    if previous & LOCKED != 0 {
        CasOutcome::Locked
    } else if seq != access.seq {
        CasOutcome::Changed
    } else {
        access.meta = previous;
        CasOutcome::Extended
    }
}

impl Sundial {
    async fn read_onesided(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        common::locate_onesided(cx, index).await?;
        let access = cx.accesses[index];
        let table = cx.table(access.table);
        for _ in 0..READ_TRIES {
            let read = cx.round().read(
                access.node,
                table.tuple_addr(access.slot),
                table.tuple_words,
            );
            cx.submit().await?;
            let batch = cx.batch();
            let words = batch.result(read);
            let tuple = common::decode(table, words);
            debug_assert_eq!(tuple.key, access.key, "location cache entry is stale");
            if tuple.seq != tuple.seq_end {
                continue;
            }
            let wts = words[(HEADER_WORD + WTS_WORD) as usize];
            accept(cx, index, tuple.seq, wts, tuple.lock, tuple.record);
            return Ok(());
        }
        Err(AbortReason::ReadInconsistent)
    }

    async fn read_rpc(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let access = cx.accesses[index];
        let call = common::call_one(
            cx,
            access.node,
            kind::SUNDIAL_READ,
            &[access.table as u64, access.key],
        );
        cx.submit().await?;
        let batch = cx.batch();
        let reply = batch.reply(call);
        if reply[0] != status::NOT_FOUND {
            cx.remember_slot(index, reply[1]);
        }
        match reply[0] {
            status::OK => {
                accept(cx, index, reply[2], reply[3], reply[4], &reply[5..]);
                Ok(())
            }
            status::INCONSISTENT => Err(AbortReason::ReadInconsistent),
            _ => Err(AbortReason::NotFound),
        }
    }

    /// Locks every unlocked write-set record, in rounds: a CAS that failed
    /// only because readers extended the lease is retried from the word it
    /// returned.
    async fn lock_onesided(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        for _ in 0..CAS_ROUNDS {
            cx.collect_nodes(|a| a.write && !a.locked);
            if cx.nodes.is_empty() {
                return Ok(());
            }
            {
                let mut batch = cx.round();
                cx.queued.clear();
                for &node in &cx.nodes {
                    for (index, access) in cx.accesses.iter().enumerate() {
                        if !(access.write && !access.locked && access.node == node) {
                            continue;
                        }
                        let table = cx.table(access.table);
                        let expected = access.meta & RTS_MASK;
                        let cas = batch.cas(
                            node,
                            lease_addr(table, access.slot),
                            expected,
                            expected | LOCKED,
                        );
                        batch.read(node, table.seq_addr(access.slot), 1);
                        cx.queued.push((index, cas.0));
                    }
                }
            }
            cx.submit().await?;
            let batch = cx.batch();
            let mut outcome = Ok(());
            for &(index, cas) in &cx.queued {
                let previous = batch.result_word(VerbId(cas));
                let seq = batch.result_word(VerbId(cas + 1));
                let access = &mut cx.accesses[index];
                let expected = access.meta & RTS_MASK;
                if previous == expected {
                    access.locked = true;
                    access.meta = expected;
                    if seq != access.seq {
                        outcome = outcome.and(Err(AbortReason::ValidationFailed));
                    }
                    continue;
                }
                match after_failed_cas(access, previous, seq) {
                    CasOutcome::Locked => outcome = outcome.and(Err(AbortReason::LockConflict)),
                    CasOutcome::Changed => {
                        outcome = outcome.and(Err(AbortReason::ValidationFailed))
                    }
                    CasOutcome::Extended => {}
                }
            }
            outcome?;
        }
        if cx.accesses.iter().any(|a| a.write && !a.locked) {
            return Err(AbortReason::LockConflict);
        }
        Ok(())
    }

    async fn lock_rpc(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        cx.collect_nodes(|a| a.write);
        {
            let mut batch = cx.round();
            cx.queued.clear();
            for (n, &node) in cx.nodes.iter().enumerate() {
                let mut payload = batch.payload();
                // The reply has [status, lease] per entry, in entry order.
                let mut position = 0u32;
                for (index, access) in cx.accesses.iter().enumerate() {
                    if access.write && access.node == node {
                        payload.extend_from_slice(&[
                            access.table as u64,
                            access.slot,
                            access.seq,
                            access.meta,
                        ]);
                        cx.queued.push((index, ((n as u32) << 16) | position));
                        position += 2;
                    }
                }
                batch.call(node, kind::SUNDIAL_LOCK, payload, false);
            }
        }
        cx.submit().await?;
        let batch = cx.batch();
        let mut outcome = Ok(());
        for &(index, at) in &cx.queued {
            let reply = batch.reply(CallId((at >> 16) as u16));
            let entry = &reply[(at & 0xffff) as usize..][..2];
            let access = &mut cx.accesses[index];
            match entry[0] {
                LOCK_OK | LOCK_STALE => {
                    access.locked = true;
                    access.meta = entry[1];
                    if entry[0] == LOCK_STALE {
                        outcome = outcome.and(Err(AbortReason::ValidationFailed));
                    }
                }
                LOCK_STALE_FREE => outcome = outcome.and(Err(AbortReason::ValidationFailed)),
                _ => outcome = outcome.and(Err(AbortReason::LockConflict)),
            }
        }
        outcome
    }

    /// Renews, in rounds, every read lease short of `commit_ts`.
    async fn renew_onesided(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        let commit_ts = cx.timestamp;
        for _ in 0..CAS_ROUNDS {
            cx.collect_nodes(|a| needs_renewal(a, commit_ts));
            if cx.nodes.is_empty() {
                return Ok(());
            }
            {
                let mut batch = cx.round();
                cx.queued.clear();
                for &node in &cx.nodes {
                    for (index, access) in cx.accesses.iter().enumerate() {
                        if access.node != node || !needs_renewal(access, commit_ts) {
                            continue;
                        }
                        let table = cx.table(access.table);
                        let expected = access.meta & RTS_MASK;
                        let cas =
                            batch.cas(node, lease_addr(table, access.slot), expected, commit_ts);
                        batch.read(node, table.seq_addr(access.slot), 1);
                        cx.queued.push((index, cas.0));
                    }
                }
            }
            cx.submit().await?;
            let batch = cx.batch();
            for &(index, cas) in &cx.queued {
                let previous = batch.result_word(VerbId(cas));
                let seq = batch.result_word(VerbId(cas + 1));
                let access = &mut cx.accesses[index];
                if previous == access.meta & RTS_MASK {
                    access.meta = commit_ts;
                    continue;
                }
                match after_failed_cas(access, previous, seq) {
                    CasOutcome::Locked | CasOutcome::Changed => {
                        return Err(AbortReason::RenewFailed)
                    }
                    CasOutcome::Extended => {}
                }
            }
        }
        if cx.accesses.iter().any(|a| needs_renewal(a, commit_ts)) {
            return Err(AbortReason::RenewFailed);
        }
        Ok(())
    }

    async fn renew_rpc(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        let commit_ts = cx.timestamp;
        cx.collect_nodes(|a| needs_renewal(a, commit_ts));
        {
            let mut batch = cx.round();
            for &node in &cx.nodes {
                let mut payload = batch.payload();
                payload.push(commit_ts);
                for access in cx.accesses.iter() {
                    if access.node == node && needs_renewal(access, commit_ts) {
                        payload.extend_from_slice(&[
                            access.table as u64,
                            access.slot,
                            access.seq,
                            access.meta,
                        ]);
                    }
                }
                batch.call(node, kind::SUNDIAL_RENEW, payload, false);
            }
        }
        cx.submit().await?;
        let batch = cx.batch();
        for n in 0..cx.nodes.len() {
            if batch.reply(CallId(n as u16))[0] != status::OK {
                return Err(AbortReason::RenewFailed);
            }
        }
        // Every lease short of commit_ts now reaches it.
        for access in cx.accesses.iter_mut() {
            if needs_renewal(access, commit_ts) {
                access.meta = commit_ts;
            }
        }
        Ok(())
    }

    /// Installs every locked (written) record at `commit_ts` and unlocks it,
    /// with passive ACK.
    fn post_commit(&self, cx: &mut TxnCx<'_>) {
        cx.collect_nodes(|a| a.locked);
        if cx.nodes.is_empty() {
            return;
        }
        let commit_ts = cx.timestamp;
        debug_assert!(commit_ts < LOCKED, "logical time ran out of rts bits");
        let primitive = cx.primitive(Stage::Commit);
        let mut batch = cx.round();
        for n in 0..cx.nodes.len() {
            let node = cx.nodes[n];
            let mut call: Option<Vec<u64>> = None;
            for index in 0..cx.accesses.len() {
                let access = cx.accesses[index];
                if access.node != node || !access.locked {
                    continue;
                }
                debug_assert!(access.write, "only write-set records are locked");
                debug_assert!(
                    access.meta < commit_ts,
                    "commit_ts is past the rts the lock froze"
                );
                let table = cx.table(access.table);
                let new_seq = access.seq + 1;
                match primitive {
                    Primitive::OneSided => {
                        let tuple = table.tuple_addr(access.slot);
                        batch.write_word(node, tuple + table.seq_end_offset() as u64, new_seq);
                        batch.write(node, table.record_addr(access.slot), cx.record(index));
                        batch.write_word(node, wts_addr(table, access.slot), commit_ts);
                        batch.write(node, table.seq_addr(access.slot), &[new_seq, commit_ts]);
                    }
                    Primitive::Rpc => {
                        let payload = call.get_or_insert_with(|| {
                            let mut payload = batch.payload();
                            payload.push(commit_ts);
                            payload
                        });
                        payload.extend_from_slice(&[access.table as u64, access.slot, new_seq]);
                        payload.extend_from_slice(cx.record(index));
                    }
                }
            }
            if let Some(payload) = call {
                batch.call(node, kind::SUNDIAL_WRITE_BACK, payload, true);
            }
        }
        drop(batch);
        for access in cx.accesses.iter_mut() {
            access.locked = false;
        }
        cx.submit_passive();
    }

    /// Restores the lease word of every locked record, with passive ACK.
    fn post_release(&self, cx: &mut TxnCx<'_>) {
        cx.collect_nodes(|a| a.locked);
        if cx.nodes.is_empty() {
            return;
        }
        let primitive = cx.primitive(Stage::Release);
        let mut batch = cx.round();
        for n in 0..cx.nodes.len() {
            let node = cx.nodes[n];
            let mut call: Option<Vec<u64>> = None;
            for access in cx.accesses.iter() {
                if access.node != node || !access.locked {
                    continue;
                }
                let table = cx.table(access.table);
                let lease = access.meta;
                debug_assert_eq!(lease & LOCKED, 0);
                match primitive {
                    Primitive::OneSided => {
                        batch.write_word(node, lease_addr(table, access.slot), lease);
                    }
                    Primitive::Rpc => {
                        call.get_or_insert_with(|| batch.payload())
                            .extend_from_slice(&[access.table as u64, access.slot, lease]);
                    }
                }
            }
            if let Some(payload) = call {
                batch.call(node, kind::SUNDIAL_RELEASE, payload, true);
            }
        }
        drop(batch);
        for access in cx.accesses.iter_mut() {
            access.locked = false;
        }
        cx.submit_passive();
    }
}

/// The lock CAS loop of the RPC lock handler: `(status, lease word locked)`.
fn lock_local(store: &NodeStore, table: &TableLayout, slot: u64, seq: u64, lease: u64) -> [u64; 2] {
    let addr = lease_addr(table, slot);
    let mut expected = lease & RTS_MASK;
    for _ in 0..LOCAL_CAS_TRIES {
        let previous = store.region.cas(addr, expected, expected | LOCKED);
        if previous == expected {
            let same = store.region.load(table.seq_addr(slot)) == seq;
            return [if same { LOCK_OK } else { LOCK_STALE }, expected];
        }
        if previous & LOCKED != 0 {
            return [LOCK_CONFLICT, 0];
        }
        if store.region.load(table.seq_addr(slot)) != seq {
            return [LOCK_STALE_FREE, 0];
        }
        expected = previous;
    }
    [LOCK_CONFLICT, 0]
}

/// The renewal CAS loop of the RPC renew handler: whether the lease of the
/// version `seq` now reaches `commit_ts`.
fn renew_local(
    store: &NodeStore,
    table: &TableLayout,
    slot: u64,
    seq: u64,
    lease: u64,
    commit_ts: u64,
) -> bool {
    let addr = lease_addr(table, slot);
    let mut expected = lease & RTS_MASK;
    for _ in 0..LOCAL_CAS_TRIES {
        if expected >= commit_ts {
            return true;
        }
        let previous = store.region.cas(addr, expected, commit_ts);
        if previous == expected {
            return true;
        }
        if previous & LOCKED != 0 || store.region.load(table.seq_addr(slot)) != seq {
            return false;
        }
        expected = previous;
    }
    false
}

impl Protocol for Sundial {
    const KIND: ProtocolKind = ProtocolKind::Sundial;
    const ACCESS_STAGE: Stage = Stage::Read;

    fn header_words(_record_words: u32) -> u32 {
        2
    }

    fn begin(&self, cx: &mut TxnCx<'_>) {
        // commit_ts of the attempt, raised by every read and lock.
        cx.timestamp = 0;
    }

    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        match cx.primitive(Stage::Read) {
            Primitive::OneSided => self.read_onesided(cx, index).await,
            Primitive::Rpc => self.read_rpc(cx, index).await,
        }
    }

    async fn lock(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        if !cx.accesses.iter().any(|a| a.write) {
            return Ok(());
        }
        match cx.primitive(Stage::Lock) {
            Primitive::OneSided => self.lock_onesided(cx).await?,
            Primitive::Rpc => self.lock_rpc(cx).await?,
        }
        // Order after every lease the written versions had when locked.
        for access in cx.accesses.iter().filter(|a| a.write) {
            debug_assert!(access.locked);
            cx.timestamp = cx.timestamp.max((access.meta & RTS_MASK) + 1);
        }
        Ok(())
    }

    async fn renew(&self, cx: &mut TxnCx<'_>) -> TxnResult<()> {
        let commit_ts = cx.timestamp;
        if !cx.accesses.iter().any(|a| needs_renewal(a, commit_ts)) {
            return Ok(());
        }
        match cx.primitive(Stage::Renew) {
            Primitive::OneSided => self.renew_onesided(cx).await,
            Primitive::Rpc => self.renew_rpc(cx).await,
        }
    }

    async fn commit(&self, cx: &mut TxnCx<'_>) {
        debug_assert!(
            cx.accesses
                .iter()
                .all(|a| a.write || a.meta & RTS_MASK >= cx.timestamp),
            "commit_ts outside a read lease"
        );
        self.post_commit(cx);
    }

    async fn release(&self, cx: &mut TxnCx<'_>) {
        self.post_release(cx);
    }

    fn serve(&self, store: &NodeStore, kind: u16, payload: &mut Vec<u64>, _now_ns: u64) -> Served {
        match kind {
            kind::SUNDIAL_READ => {
                let (table_id, key) = (payload[0] as u32, payload[1]);
                payload.clear();
                let Some(slot) = store.lookup(table_id, key) else {
                    payload.push(status::NOT_FOUND);
                    return Served::Reply;
                };
                let table = store.layout.table(table_id);
                payload.resize(table.tuple_words as usize, 0);
                let mut consistent = false;
                for _ in 0..READ_TRIES {
                    store.region.read(table.tuple_addr(slot), payload);
                    let tuple = common::decode(table, payload);
                    if tuple.seq == tuple.seq_end {
                        consistent = true;
                        break;
                    }
                }
                let tuple = common::decode(table, payload);
                let (seq, lease) = (tuple.seq, tuple.lock);
                let wts = payload[(HEADER_WORD + WTS_WORD) as usize];
                let record_at = table.record_offset() as usize;
                // Reply [status, slot, seq, wts, lease, record…] in place.
                payload.copy_within(record_at..record_at + table.record_words as usize, 5);
                payload.truncate(5 + table.record_words as usize);
                payload[0] = if consistent {
                    status::OK
                } else {
                    status::INCONSISTENT
                };
                payload[1] = slot;
                payload[2] = seq;
                payload[3] = wts;
                payload[4] = lease;
            }
            kind::SUNDIAL_LOCK => {
                let entries = payload.len() / 4;
                for entry in 0..entries {
                    let at = 4 * entry;
                    let table = store.layout.table(payload[at] as u32);
                    let (slot, seq, lease) = (payload[at + 1], payload[at + 2], payload[at + 3]);
                    let reply = lock_local(store, table, slot, seq, lease);
                    payload[2 * entry..2 * entry + 2].copy_from_slice(&reply);
                }
                payload.truncate(2 * entries);
            }
            kind::SUNDIAL_RENEW => {
                let commit_ts = payload[0];
                let renewed = payload[1..].chunks_exact(4).all(|entry| {
                    let table = store.layout.table(entry[0] as u32);
                    renew_local(store, table, entry[1], entry[2], entry[3], commit_ts)
                });
                payload.clear();
                payload.push(if renewed { status::OK } else { status::STALE });
            }
            kind::SUNDIAL_WRITE_BACK => {
                let commit_ts = payload[0];
                let mut at = 1;
                while at < payload.len() {
                    let table = store.layout.table(payload[at] as u32);
                    let (slot, new_seq) = (payload[at + 1], payload[at + 2]);
                    let record = &payload[at + 3..at + 3 + table.record_words as usize];
                    debug_assert_ne!(store.region.load(lease_addr(table, slot)) & LOCKED, 0);
                    // The order of the one-sided commit (module doc).
                    store.region.store(
                        table.tuple_addr(slot) + table.seq_end_offset() as u64,
                        new_seq,
                    );
                    store.region.write(table.record_addr(slot), record);
                    store.region.store(wts_addr(table, slot), commit_ts);
                    store.region.store(table.seq_addr(slot), new_seq);
                    store.region.store(lease_addr(table, slot), commit_ts);
                    at += 3 + table.record_words as usize;
                }
                payload.clear();
            }
            kind::SUNDIAL_RELEASE => {
                for entry in payload.chunks_exact(3) {
                    let table = store.layout.table(entry[0] as u32);
                    let addr = lease_addr(table, entry[1]);
                    debug_assert_eq!(store.region.load(addr), entry[2] | LOCKED);
                    store.region.store(addr, entry[2]);
                }
                payload.clear();
            }
            other => panic!("sundial has no RPC handler {other}"),
        }
        Served::Reply
    }
}
