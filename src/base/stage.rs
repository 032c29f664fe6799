//! Stages, primitives and hybrid codes (RCC §5.1).
//!
//! A protocol is a sequence of stages; each stage reaches remote data either
//! with one-sided verbs or with a two-sided RPC. A [`StagePlan`] fixes that
//! choice per stage, at run time. RCC encodes a plan as a *hybrid code*: one
//! binary digit per stage, 1 = one-sided, with the bit values below. verbena
//! uses RCC's published encoding so results compare with RCC's.
//!
//! Invariant: a plan's `onesided` bits are a subset of its `present` bits,
//! and `present` is exactly the stage set of the protocol it was resolved for.

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Network primitive a stage uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Primitive {
    #[serde(rename = "onesided")]
    OneSided,
    Rpc,
}

impl Primitive {
    pub fn name(self) -> &'static str {
        match self {
            Primitive::OneSided => "onesided",
            Primitive::Rpc => "rpc",
        }
    }

    pub fn parse(text: &str) -> Option<Primitive> {
        match text {
            "onesided" | "one-sided" | "one_sided" => Some(Primitive::OneSided),
            "rpc" | "two-sided" | "twosided" => Some(Primitive::Rpc),
            _ => None,
        }
    }
}

/// A protocol stage, named as in RCC. The discriminant is RCC's bit value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u16)]
pub enum Stage {
    Lock = 1,
    Read = 2,
    Log = 4,
    Release = 8,
    Commit = 16,
    Validate = 32,
    Renew = 64,
    TxnBroadcastInput = 128,
    ValueForwarding = 256,
}

impl Stage {
    pub const ALL: [Stage; 9] = [
        Stage::Lock,
        Stage::Read,
        Stage::Log,
        Stage::Release,
        Stage::Commit,
        Stage::Validate,
        Stage::Renew,
        Stage::TxnBroadcastInput,
        Stage::ValueForwarding,
    ];

    /// RCC's bit value of this stage in a hybrid code.
    pub fn bit(self) -> u16 {
        self as u16
    }

    /// Dense index in `0..Stage::ALL.len()`, for per-stage arrays.
    pub fn index(self) -> usize {
        (self as u16).trailing_zeros() as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            Stage::Lock => "lock",
            Stage::Read => "read",
            Stage::Log => "log",
            Stage::Release => "release",
            Stage::Commit => "commit",
            Stage::Validate => "validate",
            Stage::Renew => "renew",
            Stage::TxnBroadcastInput => "txn_broadcast_input",
            Stage::ValueForwarding => "value_forwarding",
        }
    }

    pub fn parse(text: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.name() == text)
    }
}

/// Which primitive each stage of one protocol uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StagePlan {
    /// Stages the protocol has (RCC bits).
    present: u16,
    /// Stages that use one-sided verbs (RCC bits); the rest use RPC.
    onesided: u16,
}

impl StagePlan {
    /// Every stage uses `primitive`; `present` is widened to all stages until
    /// [`StagePlan::restrict_to`] narrows it to one protocol's stages.
    pub fn uniform(primitive: Primitive) -> StagePlan {
        let all = Stage::ALL.iter().fold(0, |acc, s| acc | s.bit());
        StagePlan {
            present: all,
            onesided: if primitive == Primitive::OneSided {
                all
            } else {
                0
            },
        }
    }

    /// A plan that names no stage (the user's explicit choices, before
    /// resolution, start from it).
    pub fn empty() -> StagePlan {
        StagePlan {
            present: 0,
            onesided: 0,
        }
    }

    /// A plan from an RCC hybrid code over the stages `present`.
    pub fn from_code(present: u16, code: u16) -> StagePlan {
        debug_assert_eq!(code & !present, 0, "code has bits outside the protocol");
        StagePlan {
            present,
            onesided: code & present,
        }
    }

    pub fn restrict_to(self, present: u16) -> StagePlan {
        StagePlan {
            present,
            onesided: self.onesided & present,
        }
    }

    pub fn with(mut self, stage: Stage, primitive: Primitive) -> StagePlan {
        self.present |= stage.bit();
        match primitive {
            Primitive::OneSided => self.onesided |= stage.bit(),
            Primitive::Rpc => self.onesided &= !stage.bit(),
        }
        self
    }

    #[inline]
    pub fn get(self, stage: Stage) -> Primitive {
        if self.onesided & stage.bit() != 0 {
            Primitive::OneSided
        } else {
            Primitive::Rpc
        }
    }

    pub fn present(self) -> u16 {
        self.present
    }

    /// RCC hybrid code: bit set = stage is one-sided.
    pub fn code(self) -> u16 {
        self.onesided & self.present
    }

    pub fn stages(self) -> impl Iterator<Item = Stage> {
        Stage::ALL
            .into_iter()
            .filter(move |s| self.present & s.bit() != 0)
    }

    /// `lock=onesided,read=rpc,...` over the present stages.
    pub fn describe(self) -> String {
        self.stages()
            .map(|s| format!("{}={}", s.name(), self.get(s).name()))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl Serialize for StagePlan {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for stage in self.stages() {
            map.serialize_entry(stage.name(), self.get(stage).name())?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for StagePlan {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PlanVisitor;
        impl<'de> Visitor<'de> for PlanVisitor {
            type Value = StagePlan;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table of stage = \"onesided\" | \"rpc\"")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StagePlan, A::Error> {
                let mut plan = StagePlan::empty();
                while let Some((stage, primitive)) = map.next_entry::<String, String>()? {
                    let stage_value = Stage::parse(&stage).ok_or_else(|| {
                        de::Error::custom(format!(
                            "unknown stage `{stage}`; stages are {}",
                            Stage::ALL.map(|s| s.name()).join(", ")
                        ))
                    })?;
                    let primitive_value = Primitive::parse(&primitive).ok_or_else(|| {
                        de::Error::custom(format!(
                            "unknown primitive `{primitive}` for stage `{stage}`; allowed: onesided, rpc"
                        ))
                    })?;
                    plan = plan.with(stage_value, primitive_value);
                }
                Ok(plan)
            }
        }
        deserializer.deserialize_map(PlanVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rcc_bit_values_are_kept() {
        assert_eq!(Stage::Lock.bit(), 1);
        assert_eq!(Stage::Read.bit(), 2);
        assert_eq!(Stage::Log.bit(), 4);
        assert_eq!(Stage::Release.bit(), 8);
        assert_eq!(Stage::Commit.bit(), 16);
        assert_eq!(Stage::Validate.bit(), 32);
        assert_eq!(Stage::Renew.bit(), 64);
        assert_eq!(Stage::TxnBroadcastInput.bit(), 128);
        assert_eq!(Stage::ValueForwarding.bit(), 256);
        let indexes: Vec<usize> = Stage::ALL.iter().map(|s| s.index()).collect();
        assert_eq!(indexes, (0..9).collect::<Vec<_>>());
    }

    #[test]
    fn code_round_trips_and_ignores_absent_stages() {
        let present = Stage::Lock.bit() | Stage::Commit.bit() | Stage::Release.bit();
        let plan = StagePlan::from_code(present, 17);
        assert_eq!(plan.get(Stage::Lock), Primitive::OneSided);
        assert_eq!(plan.get(Stage::Commit), Primitive::OneSided);
        assert_eq!(plan.get(Stage::Release), Primitive::Rpc);
        assert_eq!(plan.code(), 17);
        let widened = StagePlan::uniform(Primitive::OneSided).restrict_to(present);
        assert_eq!(widened.code(), present);
        assert_eq!(
            widened.describe(),
            "lock=onesided,release=onesided,commit=onesided"
        );
    }
}
