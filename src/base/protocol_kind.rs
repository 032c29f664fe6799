//! The names of the concurrency-control protocols and the stages each has.
//!
//! The built-in protocols are a closed set, named on the command line and
//! in configs, each registered by one line of `builtin_protocols!` (its
//! name, its stages and its type); a protocol written outside verbena is
//! [`ProtocolKind::Custom`], which carries its own name and stage list
//! (`docs/WRITING_A_PROTOCOL.md`). A kind's stage list is what the run's
//! stage plan is resolved against (RCC §5.1) and which commit stages the
//! transaction driver calls: a stage left out of it never runs.
//!
//! Invariants: a custom name is never a built-in one, so a report's
//! protocol name says which protocol ran; the built-in kinds keep their
//! order in [`ProtocolKind::ALL`], which [`ProtocolKind::ordinal`] numbers
//! (seeded draws depend on it).

use serde::{Deserialize, Serialize, Serializer};

use super::stage::Stage;

/// A protocol defined outside verbena (its `txn::Protocol` impl names it
/// with [`ProtocolKind::custom`]): the name configs and reports give it, and
/// its stages in execution order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CustomProtocol {
    pub name: &'static str,
    pub stages: &'static [Stage],
}

/// The built-in protocols: one line each, the whole of what registers a
/// protocol of this crate. A line gives the variant, the command-line name,
/// the stages in execution order (the list a run's stage plan is resolved
/// against, RCC §5.1), and how the engine builds it: `protocol(T)` for a
/// type under `crate::protocols` that implements `txn::FromConfig`, or
/// `program(…)` for a protocol that is a node program of its own.
///
/// The order is the order of [`ProtocolKind::ALL`], which seeded draws
/// number ([`ProtocolKind::ordinal`]): a new protocol goes at the end.
/// This layer only names the types; the engine, which may import
/// `protocols`, expands the lines into its protocol switch
/// (`engine::with_protocol`).
macro_rules! builtin_protocols {
    ($callback:ident!($($args:tt)*)) => {
        $callback! { ($($args)*)
            // Lock&read at access time, update&unlock at commit (RCC §4.2).
            NoWait "no_wait" [Lock, Log, Commit, Release] => protocol(protocols::lock2pl::Lock2pl<protocols::no_wait::NoWait>);
            WaitDie "wait_die" [Lock, Log, Commit, Release] => protocol(protocols::lock2pl::Lock2pl<protocols::wait_die::WaitDie>);
            WoundWait "wound_wait" [Lock, Log, Commit, Release] => protocol(protocols::lock2pl::Lock2pl<protocols::wound_wait::WoundWait>);
            // RCBench §6.2.2 (basic T/O) and RCC §4.4: read, then lock the
            // write set at commit.
            Timestamp "timestamp" [Read, Lock, Log, Commit, Release] => protocol(protocols::timestamp::Timestamp);
            Mvcc "mvcc" [Read, Lock, Log, Commit, Release] => protocol(protocols::mvcc::Mvcc);
            // DrTM+H §5.1–5.3: read in execution, lock the write set,
            // validate the read set, write back and unlock.
            Occ "occ" [Read, Lock, Validate, Log, Commit, Release] => protocol(protocols::occ::Occ);
            // RCBench Alg. 9–10: MaaT has no lock stage — it registers in
            // the tuple's lists at access time (under a latch), adjusts
            // timestamp intervals in validation, and installs at commit.
            Maat "maat" [Read, Validate, Log, Commit, Release] => protocol(protocols::maat::Maat);
            Sundial "sundial" [Read, Lock, Renew, Log, Commit, Release] => protocol(protocols::sundial::Sundial);
            Cicada "cicada" [Read, Lock, Validate, Log, Commit, Release] => protocol(protocols::cicada::Cicada);
            // RCC §4.6's two communication stages, then the log of each
            // participant's writes to its backups (replicated runs only:
            // with replication 1 it costs nothing, as for the others).
            Calvin "calvin" [TxnBroadcastInput, ValueForwarding, Log] => program(engine::calvin);
            Drtm "drtm" [Lock, Log, Commit, Release] => protocol(protocols::drtm::Drtm);
        }
    };
}
pub(crate) use builtin_protocols;

/// Defines [`ProtocolKind`] and its table-driven methods from the lines
/// of `builtin_protocols!`.
macro_rules! define_protocol_kind {
    (() $($variant:ident $name:literal [$($stage:ident),*] => $how:ident($($build:tt)*);)*) => {
        /// Every protocol verbena names: the built-in ones of
        /// `builtin_protocols`, and [`ProtocolKind::Custom`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum ProtocolKind {
            $($variant,)*
            /// A protocol written outside verbena. It is never parsed from a name:
            /// only the program that links its code can run it
            /// (`engine::run_custom_protocol`).
            #[serde(skip_deserializing)]
            Custom(CustomProtocol),
        }

        impl ProtocolKind {
            /// The built-in kinds, in registration order.
            pub const ALL: [ProtocolKind; [$($name),*].len()] = [$(ProtocolKind::$variant),*];

            /// The command-line name (a custom protocol's own).
            pub const fn name(self) -> &'static str {
                match self {
                    $(ProtocolKind::$variant => $name,)*
                    ProtocolKind::Custom(custom) => custom.name,
                }
            }

            /// The stages of the protocol, in execution order. Each stage has a
            /// one-sided and an RPC implementation. `tests/custom_protocol.rs`
            /// runs each protocol with every stage switched on and checks that
            /// the stages left out issue nothing.
            pub const fn stages(self) -> &'static [Stage] {
                match self {
                    $(ProtocolKind::$variant => &[$(Stage::$stage),*],)*
                    ProtocolKind::Custom(custom) => custom.stages,
                }
            }
        }
    };
}
builtin_protocols!(define_protocol_kind!());

/// A kind is written as its name, built-in or custom: the form a config
/// file gives and a report shows.
impl Serialize for ProtocolKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl ProtocolKind {
    /// A protocol written outside verbena, named `name`, with `stages` in
    /// execution order ([`ProtocolKind::check_custom`] says whether a run
    /// accepts them).
    pub const fn custom(name: &'static str, stages: &'static [Stage]) -> ProtocolKind {
        ProtocolKind::Custom(CustomProtocol { name, stages })
    }

    /// A number per kind for seeded draws: a built-in kind's place in
    /// [`ProtocolKind::ALL`] (its discriminant, which the draws used before
    /// custom kinds existed), a custom kind's name hashed (FNV-1a) above
    /// them.
    pub fn ordinal(self) -> u64 {
        if let ProtocolKind::Custom(custom) = self {
            let hash = custom.name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
            });
            return hash.max(ProtocolKind::ALL.len() as u64);
        }
        ProtocolKind::ALL
            .iter()
            .position(|&kind| kind == self)
            .expect("every built-in kind is in ALL") as u64
    }

    /// Why a run refuses a custom protocol's name or stages, or `Ok` (a
    /// built-in kind is always accepted). The name must be new and read
    /// like the built-in ones; the stages must be the staged pipeline's
    /// (CALVIN's communication stages belong to its own node program), each
    /// once, `commit` and `release` among them (the driver always calls
    /// both), and `access_stage` too (the stage the execution phase's
    /// time is charged to).
    pub fn check_custom(self, access_stage: Stage) -> Result<(), String> {
        let ProtocolKind::Custom(custom) = self else {
            return Ok(());
        };
        let name = custom.name;
        let well_formed = name.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !well_formed {
            return Err(format!(
                "custom protocol name `{name}` is not allowed; allowed: lowercase letters, digits and `_`, starting with a letter"
            ));
        }
        if ProtocolKind::parse(name).is_some() {
            return Err(format!(
                "custom protocol name `{name}` is a built-in protocol's; choose another (built-in: {})",
                ProtocolKind::ALL.map(|p| p.name()).join(", ")
            ));
        }
        for (at, stage) in custom.stages.iter().enumerate() {
            if matches!(stage, Stage::TxnBroadcastInput | Stage::ValueForwarding) {
                return Err(format!(
                    "custom protocol {name} lists stage `{}`, which only CALVIN's node program runs",
                    stage.name()
                ));
            }
            if custom.stages[..at].contains(stage) {
                return Err(format!(
                    "custom protocol {name} lists stage `{}` twice",
                    stage.name()
                ));
            }
        }
        for needed in [access_stage, Stage::Commit, Stage::Release] {
            if !custom.stages.contains(&needed) {
                return Err(format!(
                    "custom protocol {name} does not list stage `{}`, which it runs (its stages: {})",
                    needed.name(),
                    custom.stages.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
                ));
            }
        }
        Ok(())
    }

    pub fn parse(text: &str) -> Option<ProtocolKind> {
        let normalized = text.to_ascii_lowercase().replace('-', "_");
        let normalized = match normalized.as_str() {
            "nowait" => "no_wait",
            "waitdie" => "wait_die",
            "woundwait" => "wound_wait",
            "to" | "t/o" => "timestamp",
            other => other,
        }
        .to_string();
        ProtocolKind::ALL
            .into_iter()
            .find(|p| p.name() == normalized)
    }

    /// Every protocol's name, in registry order: each one runs in every
    /// build (a custom one runs with its code, `engine::run_custom_protocol`).
    pub fn names() -> Vec<&'static str> {
        ProtocolKind::ALL.map(|p| p.name()).to_vec()
    }

    /// RCC bits of the stages the protocol has.
    pub fn stage_bits(self) -> u16 {
        self.stages().iter().fold(0, |acc, s| acc | s.bit())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in ProtocolKind::ALL {
            assert_eq!(ProtocolKind::parse(kind.name()), Some(kind));
        }
        assert_eq!(ProtocolKind::parse("NO_WAIT"), Some(ProtocolKind::NoWait));
        assert_eq!(ProtocolKind::parse("nowait"), Some(ProtocolKind::NoWait));
        assert_eq!(ProtocolKind::parse("2pl"), None);
    }

    #[test]
    fn kinds_serialize_as_their_names_and_number_as_before() {
        for (at, kind) in ProtocolKind::ALL.into_iter().enumerate() {
            assert_eq!(kind.ordinal(), at as u64);
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.name()));
            assert_eq!(serde_json::from_str::<ProtocolKind>(&json).unwrap(), kind);
        }
        let custom =
            ProtocolKind::custom("basic_2pl", &[Stage::Lock, Stage::Commit, Stage::Release]);
        assert_eq!(serde_json::to_string(&custom).unwrap(), "\"basic_2pl\"");
        assert!(serde_json::from_str::<ProtocolKind>("\"custom\"").is_err());
        assert!(custom.ordinal() >= ProtocolKind::ALL.len() as u64);
        assert_eq!(custom.stage_bits(), 1 | 8 | 16);
    }

    #[test]
    fn custom_kinds_are_checked() {
        let ok = ProtocolKind::custom("mine", &[Stage::Read, Stage::Commit, Stage::Release]);
        assert_eq!(ok.check_custom(Stage::Read), Ok(()));
        assert!(ok.check_custom(Stage::Lock).unwrap_err().contains("`lock`"));
        let stages = &[Stage::Lock, Stage::Commit, Stage::Release];
        for bad in ["occ", "", "Mine", "2pl", "my-proto"] {
            assert!(
                ProtocolKind::custom(bad, stages)
                    .check_custom(Stage::Lock)
                    .is_err(),
                "{bad}"
            );
        }
        let twice = ProtocolKind::custom(
            "x",
            &[Stage::Lock, Stage::Commit, Stage::Lock, Stage::Release],
        );
        assert!(twice
            .check_custom(Stage::Lock)
            .unwrap_err()
            .contains("twice"));
        let calvin = ProtocolKind::custom(
            "x",
            &[Stage::ValueForwarding, Stage::Commit, Stage::Release],
        );
        assert!(calvin.check_custom(Stage::Commit).is_err());
        assert_eq!(ProtocolKind::Occ.check_custom(Stage::Lock), Ok(()));
    }
}
