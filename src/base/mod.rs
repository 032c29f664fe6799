//! The base layer: what every other layer names and nothing else defines.
//!
//! verbena's layers (the crate doc's map) import only downward, so a name
//! that the config, the transaction context, the statistics, the protocols
//! and the CLI all speak has to live below all of them. That is this
//! module, and it imports nothing of the crate:
//! * [`stage`]: the stages of a protocol, the primitive each uses, and the
//!   run's plan of them with RCC's hybrid codes (RCC §5.1);
//! * [`protocol_kind`]: the protocols verbena names and the stages each has;
//! * [`rng`]: the seeded random number generators every deterministic part
//!   draws from;
//! * [`exit`]: the binary's exit codes, which the launcher also reads;
//! * [`rpc_kind`]: the ranges of RPC handler kinds each owner numbers in;
//! * [`placement`]: where each partition's copies live, which the config
//!   checks a run's crashes against and replication and recovery follow;
//! * [`NodeId`]: a node's index in the cluster.

pub mod exit;
pub mod placement;
pub mod protocol_kind;
pub mod rng;
pub mod rpc_kind;
pub mod stage;

pub use protocol_kind::ProtocolKind;
pub use stage::{Primitive, Stage, StagePlan};

/// A node's index in the cluster.
pub type NodeId = u16;
