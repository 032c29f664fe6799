//! How a line is drawn: each protocol's fixed colour, and the [`Styler`]
//! that turns a row's knobs into a colour, a dash and a marker.
//!
//! Invariants: a protocol has one colour in every figure and panel; one-sided
//! lines are solid and RPC lines dashed, other primitive, stage or hybrid
//! values get the further dashes in first-seen order; lines that colour and
//! dash do not tell apart differ by marker.

use serde_json::Value;

use super::{combinations, knob_value, point_name};
use crate::base::ProtocolKind;
use crate::experiments::svg::{self, LineStyle, Marker};

/// Each protocol's colour, the same in every figure. NO_WAIT and OCC, the
/// pair most sweeps compare (the README's), get Okabe–Ito's most distinct
/// pair, blue and vermillion; hues that are near each other (the blues)
/// go to protocols seldom drawn side by side.
pub const PROTOCOL_COLORS: [(&str, &str); 11] = [
    ("no_wait", svg::PALETTE[0]),
    ("occ", svg::PALETTE[1]),
    ("wait_die", svg::PALETTE[2]),
    ("wound_wait", svg::PALETTE[3]),
    ("timestamp", svg::PALETTE[4]),
    ("mvcc", svg::PALETTE[5]),
    ("maat", svg::PALETTE[6]),
    ("sundial", svg::PALETTE[7]),
    ("cicada", svg::PALETTE[8]),
    ("calvin", svg::PALETTE[9]),
    ("drtm", svg::PALETTE[10]),
];

/// The colour of a protocol by name (any spelling `--protocol` takes);
/// grey for a name no protocol has.
pub fn protocol_color(name: &str) -> &'static str {
    let canonical = ProtocolKind::parse(name).map(ProtocolKind::name);
    PROTOCOL_COLORS
        .iter()
        .find(|(p, _)| Some(*p) == canonical)
        .map_or(svg::PALETTE[11], |(_, c)| c)
}

/// Knobs that choose primitives: their values set a line's dash.
const PRIMITIVE_KNOBS: [&str; 3] = ["primitive", "stages", "hybrid"];

/// The protocol a row ran: its knob, else its config's.
fn protocol_of(row: &Value) -> &str {
    row["knobs"]["protocol"]
        .as_str()
        .or_else(|| row["report"]["config"]["protocol"].as_str())
        .unwrap_or("")
}

/// How each line is drawn, from the knobs of its rows.
pub(super) struct Styler {
    x: String,
    /// `protocol` is a knob other than x: colour names the protocol.
    protocol_varies: bool,
    /// Knobs choosing primitives (not x): their values pick the dash.
    dash_keys: Vec<String>,
    /// Values of `dash_keys` other than `onesided` and `rpc`, first seen
    /// first.
    other_dash_values: Vec<String>,
    /// The remaining knobs that tell lines apart.
    rest_keys: Vec<String>,
    rest_values: Vec<String>,
}

impl Styler {
    pub(super) fn new(rows: &[Value], x: &str, identity: &[String], others: &[String]) -> Styler {
        let dash_keys: Vec<String> = others
            .iter()
            .filter(|k| PRIMITIVE_KNOBS.contains(&k.as_str()))
            .cloned()
            .collect();
        let rest_keys: Vec<String> = identity
            .iter()
            .filter(|k| *k != "protocol" && !dash_keys.contains(k))
            .cloned()
            .collect();
        let mut other_dash_values: Vec<String> = Vec::new();
        for row in rows {
            let value = Self::dash_value(&dash_keys, row);
            if value != "onesided" && value != "rpc" && !other_dash_values.contains(&value) {
                other_dash_values.push(value);
            }
        }
        Styler {
            x: x.to_string(),
            protocol_varies: others.iter().any(|k| k == "protocol"),
            dash_keys,
            other_dash_values,
            rest_values: combinations(rows, &rest_keys),
            rest_keys,
        }
    }

    /// What colour, dash and marker mean in this figure.
    pub(super) fn note(&self) -> String {
        let mut parts = Vec::new();
        if self.protocol_varies {
            parts.push("colour: protocol".to_string());
        } else if !self.rest_keys.is_empty() {
            parts.push(format!("colour: {}", self.rest_keys.join(" × ")));
        }
        if !self.dash_keys.is_empty() {
            parts.push(format!(
                "dash: {} (solid one-sided, dashed RPC)",
                self.dash_keys.join(" × ")
            ));
        }
        if self.protocol_varies && !self.rest_keys.is_empty() {
            parts.push(format!("marker: {}", self.rest_keys.join(" × ")));
        }
        parts.iter().map(|p| format!("{p}; ")).collect()
    }

    fn dash_value(keys: &[String], row: &Value) -> String {
        keys.iter()
            .map(|k| knob_value(row, k))
            .collect::<Vec<_>>()
            .join("+")
    }

    pub(super) fn style(&self, row: &Value) -> LineStyle {
        let dash = if self.dash_keys.is_empty() {
            0
        } else {
            match Self::dash_value(&self.dash_keys, row).as_str() {
                "onesided" => 0,
                "rpc" => 1,
                other => {
                    2 + self
                        .other_dash_values
                        .iter()
                        .position(|v| v == other)
                        .unwrap_or(0)
                }
            }
        };
        let rest = point_name(row, &self.rest_keys, None);
        let rest_index = self
            .rest_values
            .iter()
            .position(|v| *v == rest)
            .unwrap_or(0);
        let (color, marker) = if self.protocol_varies {
            (
                protocol_color(protocol_of(row)),
                Marker::ALL[rest_index % 5],
            )
        } else if !self.rest_keys.is_empty() {
            (
                svg::PALETTE[rest_index % svg::PALETTE.len()],
                Marker::Circle,
            )
        } else if self.x == "protocol" {
            (svg::PALETTE[0], Marker::Circle)
        } else {
            (protocol_color(protocol_of(row)), Marker::Circle)
        };
        LineStyle {
            color: color.to_string(),
            dash: svg::DASHES[dash % svg::DASHES.len()].to_string(),
            marker,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_protocol_has_its_own_colour() {
        for kind in ProtocolKind::ALL {
            let color = protocol_color(kind.name());
            assert_ne!(color, svg::PALETTE[11], "{} has no colour", kind.name());
            let others = ProtocolKind::ALL
                .iter()
                .filter(|k| **k != kind && protocol_color(k.name()) == color)
                .count();
            assert_eq!(others, 0, "{} shares {color}", kind.name());
        }
        // Any spelling the CLI takes maps to the same colour.
        assert_eq!(protocol_color("NO_WAIT"), protocol_color("no_wait"));
        assert_eq!(protocol_color("nowait"), protocol_color("no_wait"));
    }
}
