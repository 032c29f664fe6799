//! Result rows as tables: flattening a JSON row into named columns
//! (`config.ycsb.theta`, `latency_us.p50`, …), CSV writing and reading
//! (RFC 4180 quoting), and per-point aggregates over repetitions.
//!
//! Invariants: a CSV written here parses back with [`parse_csv`] into the
//! same header and cells; every row has every column (empty where a row
//! lacks the value).

use serde_json::Value;

/// Flattens `value` into `(column, cell)` pairs under `prefix`. Objects
/// nest with `.`; arrays of scalars join with `;`; arrays holding objects
/// are kept as JSON text; `null` is an empty cell.
pub fn flatten(value: &Value, prefix: &str, out: &mut Vec<(String, String)>) {
    let join = |key: &str| {
        if prefix.is_empty() {
            key.to_string()
        } else {
            format!("{prefix}.{key}")
        }
    };
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                flatten(inner, &join(key), out);
            }
        }
        Value::Array(items) if items.iter().all(|v| !v.is_object() && !v.is_array()) => {
            let cells: Vec<String> = items.iter().map(scalar_text).collect();
            out.push((prefix.to_string(), cells.join(";")));
        }
        Value::Array(_) => out.push((prefix.to_string(), value.to_string())),
        scalar => out.push((prefix.to_string(), scalar_text(scalar))),
    }
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The columns of one sweep row: `run`, `point`, `repeat`, the knobs as
/// `knob.KEY`, provenance, then the report's fields without the `report.`
/// prefix.
pub fn row_columns(row: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Value::Object(map) = row {
        for (key, value) in map {
            match key.as_str() {
                "report" => flatten(value, "", &mut out),
                "knobs" => flatten(value, "knob", &mut out),
                _ => flatten(value, key, &mut out),
            }
        }
    }
    out
}

/// A CSV of `rows` (one line each), columns in `leading` order first, then
/// every other column in first-seen order.
pub fn to_csv(rows: &[Vec<(String, String)>], leading: &[String]) -> String {
    let mut header: Vec<String> = leading.to_vec();
    for row in rows {
        for (column, _) in row {
            if !header.contains(column) {
                header.push(column.clone());
            }
        }
    }
    let mut out = String::new();
    push_record(&mut out, header.iter().map(String::as_str));
    for row in rows {
        let cells = header.iter().map(|column| {
            row.iter()
                .find(|(c, _)| c == column)
                .map_or("", |(_, cell)| cell.as_str())
        });
        push_record(&mut out, cells);
    }
    out
}

fn push_record<'a>(out: &mut String, cells: impl Iterator<Item = &'a str>) {
    let mut first = true;
    for cell in cells {
        if !first {
            out.push(',');
        }
        first = false;
        if cell.contains([',', '"', '\n', '\r']) {
            out.push('"');
            out.push_str(&cell.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(cell);
        }
    }
    out.push('\n');
}

/// Parses CSV text (RFC 4180: quoted cells may hold commas, quotes as `""`
/// and line breaks) into records.
pub fn parse_csv(text: &str) -> Result<Vec<Vec<String>>, String> {
    let mut records = Vec::new();
    let mut record = Vec::new();
    let mut cell = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    let mut line = 1;
    while let Some(c) = chars.next() {
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    cell.push('"');
                }
                '"' => quoted = false,
                other => {
                    if other == '\n' {
                        line += 1;
                    }
                    cell.push(other)
                }
            }
            continue;
        }
        match c {
            '"' if cell.is_empty() => quoted = true,
            '"' => return Err(format!("line {line}: a quote inside an unquoted cell")),
            ',' => record.push(std::mem::take(&mut cell)),
            '\r' => {}
            '\n' => {
                record.push(std::mem::take(&mut cell));
                records.push(std::mem::take(&mut record));
                line += 1;
            }
            other => cell.push(other),
        }
    }
    if quoted {
        return Err(format!("line {line}: a quoted cell is not closed"));
    }
    if !cell.is_empty() || !record.is_empty() {
        record.push(cell);
        records.push(record);
    }
    Ok(records)
}

/// Mean, sample standard deviation, minimum and maximum of `values`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Spread {
    pub mean: f64,
    pub stdev: f64,
    pub min: f64,
    pub max: f64,
    pub count: usize,
}

impl Spread {
    pub fn of(values: &[f64]) -> Spread {
        let count = values.len();
        if count == 0 {
            return Spread::default();
        }
        let mean = values.iter().sum::<f64>() / count as f64;
        let stdev = if count > 1 {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (count - 1) as f64).sqrt()
        } else {
            0.0
        };
        Spread {
            mean,
            stdev,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            count,
        }
    }
}

/// The spread, over sweep `rows`, of their reports' number at `path`
/// (rows whose report lacks it left out).
pub fn report_spread(rows: &[&Value], path: &str) -> Spread {
    let values: Vec<f64> = rows
        .iter()
        .filter_map(|r| number_at(&r["report"], path))
        .collect();
    Spread::of(&values)
}

/// A number at a `.`-separated path in a JSON
/// value (`latency_us.p50`), if it is one.
pub fn number_at(value: &Value, path: &str) -> Option<f64> {
    let mut at = value;
    for part in path.split('.') {
        at = at.get(part)?;
    }
    at.as_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_and_parses_back() {
        let rows = vec![
            vec![
                ("a".to_string(), "plain".to_string()),
                (
                    "b".to_string(),
                    "with, comma and \"quote\"\nand a line".to_string(),
                ),
            ],
            vec![("c".to_string(), "only c".to_string())],
        ];
        let text = to_csv(&rows, &["c".to_string()]);
        let parsed = parse_csv(&text).unwrap();
        assert_eq!(parsed[0], ["c", "a", "b"]);
        assert_eq!(
            parsed[1],
            ["", "plain", "with, comma and \"quote\"\nand a line"]
        );
        assert_eq!(parsed[2], ["only c", "", ""]);
        assert!(parse_csv("\"open").is_err());
    }

    #[test]
    fn flatten_names_nested_columns() {
        let row = serde_json::json!({
            "knobs": {"coroutines": "4"},
            "report": {"latency_us": {"p50": 1.5}, "worker_txn_per_s": [1.0, 2.0], "check": null},
            "point": 3
        });
        let columns = row_columns(&row);
        let get = |name: &str| {
            columns
                .iter()
                .find(|(c, _)| c == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("knob.coroutines").as_deref(), Some("4"));
        assert_eq!(get("latency_us.p50").as_deref(), Some("1.5"));
        assert_eq!(get("worker_txn_per_s").as_deref(), Some("1.0;2.0"));
        assert_eq!(get("check").as_deref(), Some(""));
        assert_eq!(get("point").as_deref(), Some("3"));
        let spread = Spread::of(&[1.0, 2.0, 3.0]);
        assert_eq!(
            (spread.mean, spread.stdev, spread.min, spread.max),
            (2.0, 1.0, 1.0, 3.0)
        );
    }
}
