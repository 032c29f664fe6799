//! Serializability checking of committed histories (ARCHITECTURE.md layer 8).
//!
//! None of the papers' systems verify their results; verbena does on every
//! test run. See `history` for what is recorded and `graph` for the check.

pub mod graph;
pub mod history;

pub use graph::{check_serializable, CheckReport};
pub use history::{History, Item, TxnEntry};
