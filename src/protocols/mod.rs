//! Concurrency-control protocols (ARCHITECTURE.md layer 5).

pub mod kind;
pub mod stage;

pub use kind::ProtocolKind;
pub use stage::{Primitive, Stage, StagePlan};
