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
//! one per stage (`TxnCx::primitive`, through `verbena::in_form!`), so
//! every mix of the two runs. The steps come from verbena's protocol kit
//! (`verbena::txn::kit`); this file holds the protocol's rules only:
//!
//! * lock, one-sided: CAS(lock word, 0 → owner) and READ(tuple) in one
//!   round (`kit::queue_cas_then_read_tuple`); the queue pair's order makes
//!   the READ see the tuple after the CAS. RPC: one call
//!   (`kit::call_access`) whose handler looks the key up, CASes the same
//!   word locally and replies `[status, slot, seq, record…]`; the slot
//!   lets a later one-sided stage address the tuple.
//! * commit: the kit's update-and-unlock (`kit::post_commit`): per written
//!   record WRITE `seq_end`, WRITE record, WRITE `[seq, lock = 0]` (the
//!   store's order, which a torn READ is checked against); per read record
//!   WRITE lock = 0. RPC: the kit's `WRITE_BACK` and `UNLOCK` calls, one
//!   each per node, served by `kit::serve_shared`.
//! * release: the unlocks alone (`kit::post_release`).
//!
//! Commit and release do not wait for their completions (passive ACK,
//! DrTM+H §3.2): the locks are dropped by the time anyone could see them.
//!
//! Tuple header: one word, the lock (0 free, else the owner's
//! `TxnCx::owner`) — the kit's `lock_addr`. The version is the store's
//! `seq` word.
//!
//! RPC handler kinds: `LOCK_READ`, the first of `base::rpc_kind::EXTERNAL`,
//! the range verbena leaves to protocols written outside it (the build
//! checks it against the range), and the kit's `WRITE_BACK` and `UNLOCK`
//! (`kit::kind`).
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
use verbena::txn::kit::{self, status};
use verbena::txn::{AbortReason, TxnCx, TxnResult};

/// RPC handler kinds of this protocol, from the range left to protocols
/// written outside verbena.
pub mod kind {
    use verbena::base::rpc_kind::EXTERNAL;

    /// `[table, key, owner]` → `[status, slot, seq, record…]`.
    pub const LOCK_READ: u16 = EXTERNAL.first;

    // Fails the build if a kind leaves the range or two kinds are equal.
    const _: () = EXTERNAL.check(&[LOCK_READ]);
}

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
        verbena::in_form!(cx, Stage::Lock,
            onesided: lock_read_onesided(cx, index),
            rpc: lock_read_rpc(cx, index))?;
        if self.release_reads_early && !cx.accesses[index].write {
            unlock_early(cx, index);
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

    fn serve(&self, store: &NodeStore, kind: u16, payload: &mut Vec<u64>, _now_ns: u64) -> Served {
        match kind {
            kind::LOCK_READ => serve_lock_read(store, payload),
            other => kit::serve_shared_or_panic(store, other, payload, "strict_2pl"),
        }
    }
}

/// Lock & read by one-sided verbs: CAS and READ in one round (after an
/// index probe if the location cache misses).
async fn lock_read_onesided(cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
    kit::locate_onesided(cx, index).await?;
    let access = cx.accesses[index];
    let table = cx.table(access.table);
    let lock = (kit::lock_addr(table, access.slot), 0, cx.owner);
    let (cas, read) =
        kit::queue_cas_then_read_tuple(&mut cx.round(), access.node, table, access.slot, lock);
    cx.submit().await?;
    let batch = cx.batch();
    if batch.result_word(cas) != 0 {
        return Err(AbortReason::LockConflict);
    }
    cx.accesses[index].locked = true;
    let tuple = kit::decode(table, batch.result(read));
    // Under the lock nobody writes the tuple; a READ torn by the previous
    // holder's write-back still in flight is refused all the same.
    if tuple.seq != tuple.seq_end {
        return Err(AbortReason::ReadInconsistent);
    }
    kit::accept_record(cx, index, tuple.seq, tuple.record);
    Ok(())
}

/// Lock & read by one RPC to the record's node, which keeps the slot the
/// reply names.
async fn lock_read_rpc(cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
    let call = kit::call_access(cx, index, kind::LOCK_READ, &[cx.owner]).await?;
    let batch = cx.batch();
    let reply = batch.reply(call);
    match reply[0] {
        status::OK => {
            cx.accesses[index].locked = true;
            kit::accept_record(cx, index, reply[2], &reply[3..]);
            Ok(())
        }
        status::LOCKED => Err(AbortReason::LockConflict),
        _ => Err(AbortReason::NotFound),
    }
}

/// The broken variant's unlock of a record only read, right after its
/// read: a WRITE of its lock word, or the kit's `UNLOCK` call, in the
/// release stage's form and posted passive.
fn unlock_early(cx: &mut TxnCx<'_>, index: usize) {
    let access = cx.accesses[index];
    let table = cx.table(access.table);
    {
        let mut batch = cx.round();
        match cx.primitive(Stage::Release) {
            Primitive::OneSided => {
                batch.write_word(access.node, kit::lock_addr(table, access.slot), 0);
            }
            Primitive::Rpc => {
                let mut payload = batch.payload();
                payload.extend_from_slice(&[cx.owner, access.table as u64, access.slot]);
                batch.call(access.node, kit::kind::UNLOCK, payload, true);
            }
        }
    }
    cx.accesses[index].locked = false;
    cx.submit_passive();
}

/// `LOCK_READ`: `[table, key, owner]` → `[status, slot, seq, record…]`.
fn serve_lock_read(store: &NodeStore, payload: &mut Vec<u64>) -> Served {
    let (table_id, key, owner) = (payload[0] as u32, payload[1], payload[2]);
    let Some(slot) = kit::find_row(store, table_id, key, payload) else {
        return Served::Reply;
    };
    let table = store.layout.table(table_id);
    payload.clear();
    if store.region.cas(kit::lock_addr(table, slot), 0, owner) != 0 {
        payload.extend_from_slice(&[status::LOCKED, slot]);
        return Served::Reply;
    }
    payload.extend_from_slice(&[status::OK, slot, store.region.load(table.seq_addr(slot))]);
    kit::push_record(store, table, slot, payload);
    Served::Reply
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
