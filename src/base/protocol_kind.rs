//! The names of the concurrency-control protocols and the stages each has.

use serde::{Deserialize, Serialize};

use super::stage::Stage;

/// Every protocol verbena names. `implemented()` says which run today.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProtocolKind {
    NoWait,
    WaitDie,
    WoundWait,
    Timestamp,
    Mvcc,
    Occ,
    Maat,
    Sundial,
    Cicada,
    Calvin,
    Drtm,
}

impl ProtocolKind {
    pub const ALL: [ProtocolKind; 11] = [
        ProtocolKind::NoWait,
        ProtocolKind::WaitDie,
        ProtocolKind::WoundWait,
        ProtocolKind::Timestamp,
        ProtocolKind::Mvcc,
        ProtocolKind::Occ,
        ProtocolKind::Maat,
        ProtocolKind::Sundial,
        ProtocolKind::Cicada,
        ProtocolKind::Calvin,
        ProtocolKind::Drtm,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            ProtocolKind::NoWait => "no_wait",
            ProtocolKind::WaitDie => "wait_die",
            ProtocolKind::WoundWait => "wound_wait",
            ProtocolKind::Timestamp => "timestamp",
            ProtocolKind::Mvcc => "mvcc",
            ProtocolKind::Occ => "occ",
            ProtocolKind::Maat => "maat",
            ProtocolKind::Sundial => "sundial",
            ProtocolKind::Cicada => "cicada",
            ProtocolKind::Calvin => "calvin",
            ProtocolKind::Drtm => "drtm",
        }
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

    /// Whether this build can run the protocol.
    pub fn implemented(self) -> bool {
        matches!(
            self,
            ProtocolKind::NoWait
                | ProtocolKind::WaitDie
                | ProtocolKind::WoundWait
                | ProtocolKind::Occ
                | ProtocolKind::Timestamp
                | ProtocolKind::Mvcc
                | ProtocolKind::Maat
                | ProtocolKind::Cicada
                | ProtocolKind::Sundial
                | ProtocolKind::Drtm
                | ProtocolKind::Calvin
        )
    }

    pub fn implemented_names() -> Vec<&'static str> {
        ProtocolKind::ALL
            .into_iter()
            .filter(|p| p.implemented())
            .map(|p| p.name())
            .collect()
    }

    /// The stages of the protocol, in execution order. Each stage has a
    /// one-sided and an RPC implementation.
    pub fn stages(self) -> &'static [Stage] {
        use Stage::*;
        match self {
            // Lock&read at access time, update&unlock at commit (RCC §4.2).
            ProtocolKind::NoWait | ProtocolKind::WaitDie | ProtocolKind::WoundWait => {
                &[Lock, Log, Commit, Release]
            }
            ProtocolKind::Drtm => &[Lock, Log, Commit, Release],
            // DrTM+H §5.1–5.3: read in execution, lock the write set,
            // validate the read set, write back and unlock.
            ProtocolKind::Occ | ProtocolKind::Cicada => {
                &[Read, Lock, Validate, Log, Commit, Release]
            }
            // RCBench Alg. 9–10: MaaT has no lock stage — it registers in
            // the tuple's lists at access time (under a latch), adjusts
            // timestamp intervals in validation, and installs at commit.
            ProtocolKind::Maat => &[Read, Validate, Log, Commit, Release],
            ProtocolKind::Timestamp | ProtocolKind::Mvcc => &[Read, Lock, Log, Commit, Release],
            ProtocolKind::Sundial => &[Read, Lock, Renew, Log, Commit, Release],
            // RCC §4.6's two communication stages, then the log of each
            // participant's writes to its backups (replicated runs only:
            // with replication 1 it costs nothing, as for the others).
            ProtocolKind::Calvin => &[TxnBroadcastInput, ValueForwarding, Log],
        }
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
}
