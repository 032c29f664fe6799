//! Strict two-phase locking with exclusive locks and no waiting, written
//! outside verbena against its public API only: the running example of
//! `docs/WRITING_A_PROTOCOL.md`.
//!
//! Every record a transaction touches is locked when first accessed and
//! stays locked until the transaction's writes are installed (commit) or
//! it aborts (release); a lock held by another transaction aborts at once,
//! so nothing ever waits and no deadlock can form (the textbook protocol:
//! Bernstein, Hadzilacos and Goodman, ch. 3; RCC §4.2 is its distributed,
//! one-sided form).
//!
//! Stages (RCC §4, bits of RCC §5.1): `lock` = 1 (lock & read, at access
//! time), `log` = 4 (the coordinator log, which verbena runs for every
//! protocol), `commit` = 16 (install & unlock), `release` = 8 (unlock on
//! abort). Each has a one-sided and an RPC form; the run's stage plan picks
//! one per stage (`TxnCx::primitive`), so every mix of the two runs:
//!
//! * lock, one-sided: CAS(lock word, 0 → owner) and READ(tuple) in one
//!   round; the queue pair's order makes the READ see the tuple after the
//!   CAS. RPC: one call whose handler looks the key up, CASes the same
//!   word locally and replies `[status, slot, seq, record…]`; the slot
//!   lets a later one-sided stage address the tuple.
//! * commit, one-sided: per written record WRITE `seq_end`, WRITE record,
//!   WRITE `[seq, lock = 0]` (the store's order, which a torn READ is
//!   checked against); per read record WRITE lock = 0. RPC: one
//!   `WRITE_BACK` and one `UNLOCK` call per node doing the same locally.
//! * release: the unlocks alone.
//!
//! Commit and release do not wait for their completions (passive ACK,
//! DrTM+H §3.2): the locks are dropped by the time anyone could see them.
//!
//! Tuple header: one word, the lock (0 free, else the owner's
//! `TxnCx::owner`). The version is the store's `seq` word.
//!
//! RPC handler kinds: the first three of `base::rpc_kind::EXTERNAL`, the
//! range verbena leaves to protocols written outside it (`LOCK_READ`,
//! `WRITE_BACK`, `UNLOCK`); the build checks them against the range.
//!
//! `release_reads_early` breaks the protocol on purpose: a record only read
//! is unlocked right after its read, so the locking is no longer two-phase
//! and a write skew can commit. `tests/custom_protocol.rs` checks that the
//! serializability checker catches it.
//!
//! `cargo run --release --example strict_2pl` runs it on `sim` and
//! `threads` under the checker, with both pure stage plans and a mixed one.

use verbena::config::{Config, FabricKind, WorkloadKind};
use verbena::engine;
use verbena::protocols::{Primitive, Protocol, ProtocolKind, Served, Stage};
use verbena::store::NodeStore;
use verbena::store::SEQ_WORD;
use verbena::txn::kit::locate_onesided;
use verbena::txn::{AbortReason, Access, TxnCx, TxnResult};

/// RPC handler kinds of this protocol, from the range left to protocols
/// written outside verbena.
pub mod kind {
    use verbena::base::rpc_kind::EXTERNAL;

    /// `[owner, table, key]` → `[status, slot, seq, record…]`.
    pub const LOCK_READ: u16 = EXTERNAL.first;
    /// `[(table, slot, new seq, record…)…]` → nothing (passive): install
    /// and unlock.
    pub const WRITE_BACK: u16 = EXTERNAL.first + 1;
    /// `[owner, (table, slot)…]` → nothing (passive).
    pub const UNLOCK: u16 = EXTERNAL.first + 2;

    // Fails the build if a kind leaves the range or two kinds are equal.
    const _: () = EXTERNAL.check(&[LOCK_READ, WRITE_BACK, UNLOCK]);
}

/// Reply status of `LOCK_READ`.
const OK: u64 = 0;
const LOCKED: u64 = 1;
const NOT_FOUND: u64 = 2;

/// The stages, in execution order, as the run's stage plan sees them.
pub const STAGES: &[Stage] = &[Stage::Lock, Stage::Log, Stage::Commit, Stage::Release];

/// Strict 2PL, exclusive locks, NO_WAIT.
#[derive(Clone, Copy, Debug, Default)]
pub struct Strict2pl {
    /// Broken on purpose: unlock a record only read right after reading it.
    pub release_reads_early: bool,
}

impl Protocol for Strict2pl {
    const KIND: ProtocolKind = ProtocolKind::custom("strict_2pl", STAGES);
    const ACCESS_STAGE: Stage = Stage::Lock;

    fn header_words(_record_words: u32) -> u32 {
        1
    }

    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        match cx.primitive(Stage::Lock) {
            Primitive::OneSided => lock_read_onesided(cx, index).await?,
            Primitive::Rpc => lock_read_rpc(cx, index).await?,
        }
        if self.release_reads_early && !cx.accesses[index].write {
            finish(cx, Stage::Release, |a| a.locked && !a.write);
        }
        Ok(())
    }

    /// A record read, now written: its lock is already exclusive, unless
    /// the broken variant dropped it, which takes it again (and reads the
    /// record anew).
    async fn upgrade(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        if cx.accesses[index].locked {
            return Ok(());
        }
        self.access(cx, index).await
    }

    async fn commit(&self, cx: &mut TxnCx<'_>) {
        finish(cx, Stage::Commit, |a| a.locked);
    }

    async fn release(&self, cx: &mut TxnCx<'_>) {
        finish(cx, Stage::Release, |a| a.locked);
    }

    fn serve(&self, store: &NodeStore, kind: u16, payload: &mut Vec<u64>, _now_ns: u64) -> Served {
        match kind {
            kind::LOCK_READ => serve_lock_read(store, payload),
            kind::WRITE_BACK => serve_write_back(store, payload),
            kind::UNLOCK => serve_unlock(store, payload),
            other => panic!("strict_2pl has no RPC handler {other}"),
        }
        Served::Reply
    }
}

/// Lock & read by one-sided verbs: CAS and READ in one round (after an
/// index probe if the location cache misses).
async fn lock_read_onesided(cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
    locate_onesided(cx, index).await?;
    let access = cx.accesses[index];
    let table = cx.table(access.table);
    let (cas, read) = {
        let mut batch = cx.round();
        let cas = batch.cas(access.node, lock_addr(cx, index), 0, cx.owner);
        let read = batch.read(
            access.node,
            table.tuple_addr(access.slot),
            table.tuple_words,
        );
        (cas, read)
    };
    cx.submit().await?;
    let batch = cx.batch();
    if batch.result_word(cas) != 0 {
        return Err(AbortReason::LockConflict);
    }
    let tuple = batch.result(read);
    let seq = tuple[SEQ_WORD as usize];
    let seq_end = tuple[table.seq_end_offset() as usize];
    let record_at = table.record_offset() as usize;
    let record = tuple[record_at..record_at + table.record_words as usize].to_vec();
    drop(batch);
    cx.accesses[index].locked = true;
    // Under the lock nobody writes the tuple; a READ torn by the previous
    // holder's write-back still in flight is refused all the same.
    if seq != seq_end {
        return Err(AbortReason::ReadInconsistent);
    }
    accept(cx, index, seq, &record);
    Ok(())
}

/// Lock & read by one RPC to the record's node.
async fn lock_read_rpc(cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
    let access = cx.accesses[index];
    let call = {
        let mut batch = cx.round();
        let mut payload = batch.payload();
        payload.extend_from_slice(&[cx.owner, access.table as u64, access.key]);
        batch.call(access.node, kind::LOCK_READ, payload, false)
    };
    cx.submit().await?;
    let reply = cx.batch().reply(call).to_vec();
    match reply[0] {
        OK => {
            cx.remember_slot(index, reply[1]);
            cx.accesses[index].locked = true;
            accept(cx, index, reply[2], &reply[3..]);
            Ok(())
        }
        LOCKED => {
            cx.remember_slot(index, reply[1]);
            Err(AbortReason::LockConflict)
        }
        _ => Err(AbortReason::NotFound),
    }
}

/// Keeps a record fetched under its lock and the version it had.
fn accept(cx: &mut TxnCx<'_>, index: usize, seq: u64, record: &[u64]) {
    cx.accesses[index].seq = seq;
    cx.record_mut(index).copy_from_slice(record);
}

fn lock_addr(cx: &TxnCx<'_>, index: usize) -> u64 {
    let access = &cx.accesses[index];
    cx.table(access.table).header_addr(access.slot, 0)
}

/// Drops the locks of the records `which` picks, in one passive round in
/// `stage`'s primitive. At commit a written record is installed with its
/// next version in the same step (`WRITE_BACK`); otherwise only the lock
/// word changes (`UNLOCK`).
fn finish(cx: &mut TxnCx<'_>, stage: Stage, which: fn(&Access) -> bool) {
    cx.collect_nodes(which);
    if cx.nodes.is_empty() {
        return;
    }
    let install = stage == Stage::Commit;
    let onesided = cx.primitive(stage) == Primitive::OneSided;
    let mut batch = cx.round();
    for &node in &cx.nodes {
        // The RPC form's two calls to this node, filled on first use.
        let (mut write_back, mut unlock): (Option<Vec<u64>>, Option<Vec<u64>>) = (None, None);
        for (index, access) in cx.accesses.iter().enumerate() {
            if !(which(access) && access.node == node) {
                continue;
            }
            let table = cx.table(access.table);
            let new_seq = access.seq + 1;
            match (install && access.write, onesided) {
                (true, true) => {
                    let tuple = table.tuple_addr(access.slot);
                    batch.write_word(node, tuple + table.seq_end_offset() as u64, new_seq);
                    batch.write(node, table.record_addr(access.slot), cx.record(index));
                    // seq and the lock word are adjacent: one WRITE, the
                    // lock freed last.
                    batch.write(node, table.seq_addr(access.slot), &[new_seq, 0]);
                }
                (false, true) => {
                    batch.write_word(node, lock_addr(cx, index), 0);
                }
                (true, false) => {
                    let payload = write_back.get_or_insert_with(|| batch.payload());
                    payload.extend_from_slice(&[access.table as u64, access.slot, new_seq]);
                    payload.extend_from_slice(cx.record(index));
                }
                (false, false) => {
                    let payload = unlock.get_or_insert_with(|| {
                        let mut payload = batch.payload();
                        payload.push(cx.owner);
                        payload
                    });
                    payload.extend_from_slice(&[access.table as u64, access.slot]);
                }
            }
        }
        if let Some(payload) = write_back {
            batch.call(node, kind::WRITE_BACK, payload, true);
        }
        if let Some(payload) = unlock {
            batch.call(node, kind::UNLOCK, payload, true);
        }
    }
    drop(batch);
    for access in cx.accesses.iter_mut().filter(|a| which(a)) {
        access.locked = false;
    }
    cx.submit_passive();
}

/// `LOCK_READ`: `[owner, table, key]` → `[status, slot, seq, record…]`.
fn serve_lock_read(store: &NodeStore, payload: &mut Vec<u64>) {
    let (owner, table_id, key) = (payload[0], payload[1] as u32, payload[2]);
    payload.clear();
    let Some(slot) = store.lookup(table_id, key) else {
        payload.push(NOT_FOUND);
        return;
    };
    let table = store.layout.table(table_id);
    if store.region.cas(table.header_addr(slot, 0), 0, owner) != 0 {
        payload.extend_from_slice(&[LOCKED, slot]);
        return;
    }
    payload.extend_from_slice(&[OK, slot, store.region.load(table.seq_addr(slot))]);
    let record_at = payload.len();
    payload.resize(record_at + table.record_words as usize, 0);
    store
        .region
        .read(table.record_addr(slot), &mut payload[record_at..]);
}

/// `WRITE_BACK`: `[(table, slot, new seq, record…)…]`, in the one-sided
/// form's order: `seq_end`, the record, `seq`, then the lock freed.
fn serve_write_back(store: &NodeStore, payload: &mut Vec<u64>) {
    let mut at = 0;
    while at < payload.len() {
        let table = store.layout.table(payload[at] as u32);
        let (slot, new_seq) = (payload[at + 1], payload[at + 2]);
        let record = &payload[at + 3..at + 3 + table.record_words as usize];
        let tuple = table.tuple_addr(slot);
        store
            .region
            .store(tuple + table.seq_end_offset() as u64, new_seq);
        store.region.write(table.record_addr(slot), record);
        store.region.store(table.seq_addr(slot), new_seq);
        store.region.store(table.header_addr(slot, 0), 0);
        at += 3 + table.record_words as usize;
    }
    payload.clear();
}

/// `UNLOCK`: `[owner, (table, slot)…]`; frees only what `owner` holds.
fn serve_unlock(store: &NodeStore, payload: &mut Vec<u64>) {
    let owner = payload[0];
    for pair in payload[1..].chunks_exact(2) {
        let table = store.layout.table(pair[0] as u32);
        let previous = store.region.cas(table.header_addr(pair[1], 0), owner, 0);
        assert_eq!(previous, owner, "unlock of a lock this owner does not hold");
    }
    payload.clear();
}

/// A small, contended run of `workload` on `fabric` with the checker on,
/// under the plan `primitive` with the lock stage's form flipped when
/// `mixed`.
pub fn checked_config(
    fabric: FabricKind,
    workload: WorkloadKind,
    primitive: Primitive,
    mixed: bool,
    seed: u64,
) -> Config {
    let mut config = Config {
        fabric,
        workload,
        primitive,
        nodes: 3,
        workers: 2,
        coroutines: 4,
        duration_s: if fabric == FabricKind::Sim {
            0.002
        } else {
            0.2
        },
        warmup_s: 0.0,
        seed,
        check: true,
        ..Config::default()
    };
    if fabric == FabricKind::Sim {
        config.profile = verbena::config::profile::NetworkProfile::builtin("cx4-edr")
            .expect("a built-in profile");
    }
    if mixed {
        let other = match primitive {
            Primitive::OneSided => Primitive::Rpc,
            Primitive::Rpc => Primitive::OneSided,
        };
        config.stages = config.stages.with(Stage::Lock, other);
    }
    config.ycsb.rows_per_node = 32;
    config.ycsb.write_ratio = 0.5;
    config.ycsb.theta = 0.9;
    config.smallbank.accounts_per_worker = 8;
    config
}

fn main() {
    for fabric in [FabricKind::Sim, FabricKind::Threads] {
        for workload in [WorkloadKind::Ycsb, WorkloadKind::SmallBank] {
            for (primitive, mixed) in [
                (Primitive::OneSided, false),
                (Primitive::Rpc, false),
                (Primitive::OneSided, true),
            ] {
                let config = checked_config(fabric, workload, primitive, mixed, 1);
                let output = engine::run_custom_protocol(&config, &Strict2pl::default())
                    .unwrap_or_else(|e| panic!("the run failed: {e}"));
                let report = output.report;
                let check = report.check.as_ref().expect("the checker ran");
                println!(
                    "{} on {:?}, {:?}, plan {}: {} committed, abort rate {:.2}, serializable {}, invariants {}",
                    report.config.protocol.name(),
                    fabric,
                    workload,
                    report.config.stages.describe(),
                    report.committed,
                    report.abort_rate,
                    check.serializable,
                    check.invariants_ok
                );
                assert!(check.passed(), "{:?} {:?}", check.cycle, check.invariants);
            }
        }
    }
}
