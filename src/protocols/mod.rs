//! Concurrency-control protocols (docs/ARCHITECTURE.md, layer 7).
//!
//! One module per protocol, all implementing [`Protocol`], whose methods are
//! the stages of RCC §4: the execution-phase access (a protocol's `read` or
//! `lock` stage, named by [`Protocol::ACCESS_STAGE`]), then at commit `lock`,
//! `validate`, `renew`, `log`, `commit`, and `release` on abort. The
//! transaction driver (`engine::coroutine`) calls them in that order and
//! times each. Every stage has a one-sided and an RPC implementation and
//! picks one per call from the run's [`StagePlan`] (`TxnCx::primitive`), so
//! any mix of stage primitives runs without a rebuild (RCC §5).
//!
//! Mixed stage choices stay correct (RCC §5.2) because both forms of a stage
//! act on the same tuple words: an RPC handler locks with a local CAS on the
//! very lock word a one-sided CAS targets, and every RPC reply carries the
//! tuple's slot so that a later one-sided stage knows its address.
//!
//! Implemented here: `no_wait` (RCC §4.2), `wait_die` (RCC §4.3),
//! `wound_wait` (RCBench Alg. 5) — the 2PL family, on `lock2pl` — `occ`
//! (DrTM+H §5.1–5.3), `timestamp` (basic T/O, RCBench §6.2.2), `mvcc` (RCC
//! §4.4), `maat` (RCBench Alg. 9–10), `sundial` (RCC §4.5), `cicada`
//! (RCBench Alg. 11) and `drtm` (DrTM §4). The other names exist in
//! [`ProtocolKind`] and are refused by config validation until their issue
//! lands. CALVIN orders transactions before they run and has no
//! coordinator stages, so it is a node program (`engine::calvin`), not a
//! module here.

pub mod cicada;
pub mod common;
pub mod drtm;
pub mod lock2pl;
pub mod maat;
pub mod mvcc;
pub mod no_wait;
pub mod occ;
pub mod sundial;
pub mod timestamp;
pub mod wait_die;
pub mod wound_wait;

// The names a protocol speaks, re-exported so that a protocol's module
// (in this crate or outside it) finds them in one place.
pub use crate::base::{Primitive, ProtocolKind, Stage, StagePlan};
pub use crate::runtime::Served;
pub use crate::txn::Protocol;
