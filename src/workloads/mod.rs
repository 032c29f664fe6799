//! Workloads (docs/ARCHITECTURE.md, layer 7). Each workload owns its schema, its
//! loader, its transaction programs (async functions over the `Txn` API,
//! identical for every protocol) and its invariants.
//!
//! Implemented: `ycsb`, `tpcc`, `smallbank`, `pps`, `tpce` (TPC-E
//! customer-position).
//!
//! Workloads with several transaction types (SmallBank's six, PPS's
//! four) name them with [`Workload::txn_types`] and classify each request
//! with [`Workload::txn_type`]; the engine then counts commits and aborts
//! per type and the report breaks throughput down by type. Both methods
//! have defaults (one unnamed type), so a workload with one transaction
//! type — YCSB, or one written outside verbena — implements neither.
//!
//! A program can record one signed number per transaction with
//! `Txn::note` (SmallBank: money deposited minus money withdrawn; PPS:
//! stock units taken). Only committed transactions' notes reach the
//! history (`TxnEntry::note`), which is what a workload's invariants need to
//! account per committed transaction without any shared counter on the
//! data path.

pub mod common;
pub mod footprint;
pub mod pps;
pub mod smallbank;
pub mod tpcc;
pub mod tpce;
pub mod ycsb;
pub mod zipf;

use std::sync::Arc;

use crate::base::rng::Rng;
use crate::check::History;
use crate::fabric::NodeId;
use crate::store::{NodeStore, StoreError, TableId, TableSpec};
use crate::txn::{IndexOp, Protocol, Txn, TxnResult};

pub use crate::stats::MAX_TXN_TYPES;
pub use footprint::check_footprint;

pub use crate::check::InvariantReport;

#[allow(async_fn_in_trait)]
pub trait Workload: Sync {
    /// A generated transaction: plain data, so a retry replays it exactly.
    type Request: Copy;

    fn name(&self) -> &'static str;

    fn tables(&self) -> Vec<TableSpec>;

    /// Loads `store`'s partition (version 0 of every row).
    fn load(&self, store: &NodeStore) -> Result<(), StoreError>;

    /// The next transaction of a client coordinated by `node`.
    fn generate(&self, rng: &mut Rng, node: NodeId) -> Self::Request;

    /// Runs one attempt of `request`.
    async fn execute<P: Protocol>(
        &self,
        txn: &mut Txn<'_, '_, P>,
        request: &Self::Request,
    ) -> TxnResult<()>;

    /// Names of the transaction types, indexed by [`Workload::txn_type`]
    /// (at most [`MAX_TXN_TYPES`]). Empty (the default): one type, no
    /// per-type breakdown in the report.
    fn txn_types(&self) -> &'static [&'static str] {
        &[]
    }

    /// The type of `request`: an index into [`Workload::txn_types`].
    fn txn_type(&self, _request: &Self::Request) -> usize {
        0
    }

    /// Applies a committing transaction's ordered-index changes on `node`,
    /// at its commit point (see `store::ordered`). Default: the workload
    /// keeps no ordered index.
    fn at_commit_point(&self, _node: NodeId, _ops: &[IndexOp]) {}

    /// What [`Workload::check_invariants`] reads of `node` beside its
    /// store and this process alone holds (TPC-C's ordered indexes), as
    /// words. A rank of a multi-process run sends it to rank 0 with its
    /// region image, and rank 0 installs it with
    /// [`Workload::import_node_local`], so its invariants read every node
    /// as a `threads` run's do. Default: nothing.
    fn export_node_local(&self, _node: NodeId) -> Vec<u64> {
        Vec::new()
    }

    /// Replaces this process's node-local state of `node` with what
    /// [`Workload::export_node_local`] gave on `node`'s own rank (quiescent
    /// use, after the run). False if `words` are not such an export.
    fn import_node_local(&self, _node: NodeId, words: &[u64]) -> bool {
        words.is_empty()
    }

    /// Checks the workload's invariants on the quiescent store after a run,
    /// given the committed history of the whole run.
    fn check_invariants(&self, stores: &[Arc<NodeStore>], history: &History) -> InvariantReport;

    // Deterministic protocols (CALVIN, `engine::calvin`) order requests
    // before they run and ship each one to the nodes it touches, so they
    // need a request as words and its read/write set up front (Deneva
    // §3.4). A workload that leaves these at their defaults runs under
    // every other protocol, and CALVIN refuses it with a clear error; one
    // that encodes its requests but declares no sets is reconnoitred.

    /// Most words [`Workload::encode_request`] ever writes (0: the workload
    /// does not support deterministic protocols).
    fn max_request_words(&self) -> usize {
        0
    }

    /// Most records one request accesses.
    fn max_accesses(&self) -> usize {
        0
    }

    /// Most records of one request that lie on other nodes than one node
    /// that writes (what one active participant receives in CALVIN's value
    /// forwarding; it sizes CALVIN's forward buffer). Default:
    /// [`Workload::max_accesses`]; a workload whose large sets are local
    /// (TPC-C's StockLevel, Delivery) says less.
    fn max_forwarded_accesses(&self) -> usize {
        self.max_accesses()
    }

    /// Appends `request` as words to `out`.
    fn encode_request(&self, _request: &Self::Request, _out: &mut Vec<u64>) {}

    /// The request [`Workload::encode_request`] wrote into `words`; `None`
    /// when the words are not one.
    fn decode_request(&self, _words: &[u64]) -> Option<Self::Request> {
        None
    }

    /// Appends to `out` every record `request` will access, in the order
    /// the program first accesses them, each once (an access that is
    /// written is declared written). Returns false when the set depends
    /// on data: CALVIN then finds it by a reconnaissance run (Deneva
    /// §3.4, `engine::calvin::recon`) and adds what this appended before
    /// answering false — records the program need not touch but whose
    /// locks order the request against the writers of what it finds
    /// through an ordered index (TPC-C's district rows), so that what the
    /// index shows at execution is a function of the global order.
    ///
    /// Rows the program inserts (`Txn::insert`) are not declared; their
    /// keys must come from a record the request writes, whose lock covers
    /// them (see `engine::calvin::CalvinExec`).
    fn declare_accesses(&self, _request: &Self::Request, _out: &mut Vec<Declared>) -> bool {
        false
    }
}

/// A record a request declares it will access (see
/// [`Workload::declare_accesses`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declared {
    pub table: TableId,
    pub node: NodeId,
    pub key: u64,
    pub write: bool,
}
