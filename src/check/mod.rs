//! Serializability checking of committed histories (ARCHITECTURE.md layer 8).
//!
//! None of the papers' systems verify their results; verbena does on every
//! test run. See `history` for what is recorded, `graph` for the
//! serializability check, `state` for the final store against the
//! history, and `matrix` for the seeded protocol × plan × seed matrix.

pub mod graph;
pub mod history;
pub mod matrix;
pub mod state;

pub use graph::{check_serializable, CheckReport};
pub use history::{History, Item, TxnEntry};
pub use state::{store_holds_history_writes, store_matches_history};
