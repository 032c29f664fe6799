//! Serializability checking of committed histories (layer 5 of the crate
//! doc's map).
//!
//! None of the papers' systems verify their results; verbena does on every
//! test run. See `history` for what is recorded, `graph` for the
//! serializability check, and `state` for the final store against the
//! history. The seeded matrix that runs whole cases under the checker is
//! an experiment (`experiments::matrix`).

pub mod graph;
pub mod history;
pub mod invariants;
pub mod state;

pub use graph::{check_serializable, CheckReport};
pub use history::{History, Item, TxnEntry};
pub use invariants::InvariantReport;
pub use state::{store_holds_history_writes, store_matches_history};
