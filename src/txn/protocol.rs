//! The contract between a transaction and its concurrency control: the
//! [`Protocol`] trait, whose methods are the stages of RCC §4.
//!
//! It lives in the transaction layer, below the protocols that implement it
//! and the workloads whose programs are generic over it, so that neither
//! imports the other. The transaction driver calls the stages in the order
//! the trait gives (execution-phase access, then `lock`, `validate`,
//! `renew`, `log`, `commit`, or `release` on abort), and each stage picks
//! its one-sided or RPC form from the run's plan (`TxnCx::primitive`).
//!
//! A protocol declares its stages with its kind ([`Protocol::KIND`]): a
//! built-in protocol's variant, whose list `ProtocolKind::stages` keeps, or
//! for a protocol written outside verbena `ProtocolKind::custom(name,
//! stages)` in its own impl. The driver calls `lock`, `validate`, `renew`
//! and `log` only when the list has them, so a stage implemented but not
//! listed would never run: `tests/custom_protocol.rs` runs every protocol
//! with all stages on and checks that the unlisted ones do nothing.

use crate::base::{ProtocolKind, Stage};
use crate::config::Config;
use crate::runtime::Served;
use crate::store::{NodeStore, StoreError};
use crate::txn::{kit, AbortReason, TxnCx, TxnResult};

/// A concurrency-control protocol: its tuple header, its stages, and the RPC
/// handlers that serve the two-sided form of its stages.
#[allow(async_fn_in_trait)]
pub trait Protocol: Sync {
    /// The protocol's name and stage list: its variant for a protocol of
    /// this crate, `ProtocolKind::custom(name, stages)` for one written
    /// outside it (`engine::run_custom_protocol` runs those). The list
    /// names every stage whose method the protocol implements, and
    /// [`Protocol::ACCESS_STAGE`], `commit` and `release`.
    const KIND: ProtocolKind;
    /// Words of protocol metadata in the header of a tuple whose record has
    /// `record_words` words. Most protocols need a fixed few (a lock word);
    /// multi-version ones (MVCC, CICADA) keep version slots, each with a copy
    /// of the record, in the header, so the size depends on the record.
    fn header_words(record_words: u32) -> u32;
    /// [`Protocol::header_words`] of this instance, for protocols whose
    /// header depends on a run-time option (MVCC's and CICADA's version
    /// slots, MAAT's list capacity). The
    /// engine lays tuples out with this one.
    fn header_words_of(&self, record_words: u32) -> u32 {
        Self::header_words(record_words)
    }
    /// Words of per-transaction global metadata each coroutine keeps in its
    /// node's region, where remote workers can READ and CAS them (see
    /// `store::TxnMetaLayout`; `TxnCx::txn_meta_addr`), in a cluster of
    /// `nodes` nodes. Default: none.
    fn txn_meta_words(_nodes: u32) -> u32 {
        0
    }
    /// The stage that [`Protocol::access`] performs.
    const ACCESS_STAGE: Stage;

    /// Rewrites the header of `tuple` (a whole tuple of `table`, whose
    /// `seq` and record hold its latest committed version) to the state of
    /// a tuple nobody is accessing: what a failover's recovery installs on
    /// every live copy once the cluster is quiet (`recovery::failover`),
    /// releasing whatever a dead coordinator held. Default: every header
    /// word 0, the state the loader leaves. Multi-version protocols whose
    /// latest version must also sit in a version slot put it there.
    fn recovered_header(table: &crate::store::TableLayout, tuple: &mut [u64]) {
        let start = crate::store::HEADER_WORD as usize;
        tuple[start..start + table.header_words as usize].fill(0);
    }

    /// Starts an attempt: `cx.attempt` is 0 for a request's first attempt
    /// and counts its retries. Timestamp protocols set `cx.timestamp` here
    /// (WAIT_DIE keeps its first one across retries so a restarted
    /// transaction ages; RCC §4.3) and may set `cx.owner`, the value their
    /// lock words hold.
    fn begin(&self, _cx: &mut TxnCx<'_>) {}

    /// Execution phase: fetch `cx.accesses[index]` (with write intent if its
    /// `write` flag is set) into the record copy, with whatever the protocol
    /// needs (a lock, a version).
    async fn access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()>;

    /// Execution phase of a row the program inserts (`Txn::insert`):
    /// `cx.accesses[index]` is a write on the program's home node
    /// (`TxnCx::home`) whose key may have no tuple yet. Default: claim the
    /// row in the home node's store (`NodeStore::ensure_row`, the slot
    /// remembered so the protocol skips an index probe), then fetch it
    /// like any write with [`Protocol::access`]. Deterministic protocols
    /// (CALVIN), which run a program on nodes other than the home and
    /// before any commit decision is final, claim rows their own way.
    async fn insert_access(&self, cx: &mut TxnCx<'_>, index: usize) -> TxnResult<()> {
        let access = cx.accesses[index];
        let store = cx
            .local_store
            .expect("the transaction driver gives every context its node's store");
        debug_assert_eq!(store.node, access.node, "inserts go to the home node");
        match store.ensure_row(access.table, access.key) {
            Ok(slot) => cx.cache_slot(access.table, access.node, access.key, slot),
            Err(StoreError::TableFull { .. } | StoreError::IndexFull { .. }) => {
                return Err(AbortReason::TableFull)
            }
            Err(StoreError::DuplicateKey { .. }) => return Err(AbortReason::RowStale),
        }
        self.access(cx, index).await
    }

    /// A record first read is now also written.
    async fn upgrade(&self, _cx: &mut TxnCx<'_>, _index: usize) -> TxnResult<()> {
        Ok(())
    }

    async fn lock(&self, _cx: &mut TxnCx<'_>) -> TxnResult<()> {
        Ok(())
    }

    async fn validate(&self, _cx: &mut TxnCx<'_>) -> TxnResult<()> {
        Ok(())
    }

    async fn renew(&self, _cx: &mut TxnCx<'_>) -> TxnResult<()> {
        Ok(())
    }

    /// The protocol's own step of the `log` stage, before the coordinator
    /// log to the backups (RCC §4.1), which the driver runs right after it
    /// for every protocol alike (`replication::log`). A protocol whose
    /// commit point comes here (DRTM's lease check, WOUND_WAIT's status
    /// CAS) decides it in this step, so nothing is logged for an attempt
    /// that then aborts. Default: nothing.
    async fn log(&self, _cx: &mut TxnCx<'_>) -> TxnResult<()> {
        Ok(())
    }

    /// Past the commit point: install the writes and drop the locks.
    /// Default: the lock-word protocols' commit (`kit::post_commit`: every
    /// locked write written back and unlocked, the other locks dropped,
    /// posted with passive ACK).
    async fn commit(&self, cx: &mut TxnCx<'_>) {
        kit::post_commit(cx);
    }

    /// Abort: drop every lock the attempt holds. Default: the lock-word
    /// protocols' release (`kit::post_release`).
    async fn release(&self, cx: &mut TxnCx<'_>) {
        kit::post_release(cx);
    }

    /// RPC handler, run on the event loop of a worker of `store`'s node:
    /// rewrites the request into its reply, or returns [`Served::Wait`] to
    /// be offered it again later (waiting protocols). `now_ns` is the
    /// serving worker's clock (see [`crate::runtime::RpcService`]).
    fn serve(&self, store: &NodeStore, kind: u16, payload: &mut Vec<u64>, now_ns: u64) -> Served;

    /// Where a request its handler parked joins the worker's waiting list
    /// ([`crate::runtime::RpcService::waiting_rank`]): lower first. Default:
    /// arrival order.
    fn waiting_rank(&self, _kind: u16, _payload: &[u64]) -> u64 {
        0
    }
}

/// How the engine builds a protocol of this crate from a run's config (its
/// options, `config.protocol_options`): what a registered protocol
/// implements beside [`Protocol`] (`base::protocol_kind`'s
/// `builtin_protocols` names the type). A protocol written outside
/// verbena needs none: its caller builds it.
pub trait FromConfig: Protocol + Sized {
    fn from_config(config: &Config) -> Self;
}
