//! Workloads (ARCHITECTURE.md layer 7). Each workload owns its schema, its
//! loader, its transaction programs (async functions over the `Txn` API,
//! identical for every protocol) and its invariants.
//!
//! Implemented: `ycsb`. SmallBank, TPC-C, PPS and TPC-E customer-position
//! come with the workloads issue.

pub mod ycsb;
pub mod zipf;

use std::sync::Arc;

use serde::Serialize;

use crate::check::History;
use crate::fabric::NodeId;
use crate::protocols::Protocol;
use crate::rng::Rng;
use crate::store::{NodeStore, StoreError, TableSpec};
use crate::txn::{Txn, TxnResult};

/// The verdict of a workload's invariants after a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct InvariantReport {
    pub ok: bool,
    /// What was checked, and every violation found (capped).
    pub details: Vec<String>,
}

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

    /// Checks the workload's invariants on the quiescent store after a run,
    /// given the committed history of the whole run.
    fn check_invariants(&self, stores: &[Arc<NodeStore>], history: &History) -> InvariantReport;
}
