//! The latency interval log (`--latency-log PATH`): the text format of
//! HdrHistogram's `HistogramLogWriter`, which its `HistogramLogProcessor`
//! (Java) and [`hdrhistogram::serialization::interval_log`] (Rust) read.
//!
//! Layout: comment lines saying what the log is, `#[Histogram log format
//! version 1.3]`, `#[StartTime: …]` and `#[BaseTime: …]` (both the wall
//! clock when the run began), the legend line, `#[MaxValueDivisor: …]`,
//! then per interval ([`super::hist::INTERVAL_NS`]: one second of the run's
//! clock, virtual on `sim`) one untagged line with every committed
//! transaction and, for workloads with several transaction types, one line
//! per type that committed in it, tagged with the type's name
//! (`Tag=new_order,…`). Each line is `start,length,max,histogram`: the
//! start in seconds since the start of the measured interval (BaseTime
//! plus that is the interval's wall time on `threads` only roughly, since
//! loading and warm-up come first), the length (the last interval may be
//! shorter), the largest latency in ms (values are recorded in ns; the
//! divisor 10⁶ is what Java's writer uses, so its tools' default unit
//! ratio applies), and the histogram, V2 deflate-compressed and base64
//! encoded, exactly the slices the report's percentiles come from.

use std::io::{self, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;

use super::hist::{new_histogram, Latencies, INTERVAL_NS};

/// What the log's header says about the run.
pub struct LogHeader<'a> {
    /// One line describing the run (protocol, workload, fabric).
    pub run: &'a str,
    /// When the run began (wall clock).
    pub started: SystemTime,
    /// The measured interval's length, s (bounds the last interval).
    pub measured_s: f64,
    /// `wall` or `simulated`, as the report's `time`.
    pub time: &'a str,
}

/// Nanoseconds per unit of a line's max column (ms, as Java's writer).
pub const MAX_VALUE_DIVISOR: f64 = 1e6;

/// Writes `latencies` as an interval log to `out`; `types` names the
/// workload's transaction types (empty: only untagged lines).
pub fn write_interval_log(
    out: &mut impl Write,
    latencies: &Latencies,
    types: &[&str],
    header: &LogHeader<'_>,
) -> io::Result<()> {
    let started = header
        .started
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    writeln!(
        out,
        "#verbena {} latency log: {}",
        env!("CARGO_PKG_VERSION"),
        header.run
    )?;
    writeln!(
        out,
        "#values: transaction latency in ns (first attempt to commit); intervals: {} s of {} time from the start of the measured interval; untagged: all types",
        INTERVAL_NS as f64 / 1e9,
        header.time
    )?;
    writeln!(out, "#[Histogram log format version 1.3]")?;
    writeln!(out, "#[StartTime: {started:.3} (seconds since epoch)]")?;
    writeln!(out, "#[BaseTime: {started:.3} (seconds since epoch)]")?;
    writeln!(
        out,
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
    )?;
    let mut serializer = V2DeflateSerializer::new();
    let mut writer = IntervalLogWriterBuilder::new()
        .with_max_value_divisor(MAX_VALUE_DIVISOR)
        .begin_log_with(out, &mut serializer)?;
    let measured_ns = (header.measured_s * 1e9) as u64;
    let mut all = new_histogram();
    let mut one = new_histogram();
    for (interval, slices) in latencies.intervals() {
        let start_ns = interval as u64 * INTERVAL_NS;
        let length_ns = INTERVAL_NS.min(measured_ns.saturating_sub(start_ns).max(1));
        let (start, length) = (
            Duration::from_nanos(start_ns),
            Duration::from_nanos(length_ns),
        );
        all.reset();
        for slice in &slices {
            slice.add_to(&mut all);
        }
        writer
            .write_histogram(&all, start, length, None)
            .map_err(io::Error::other)?;
        if types.is_empty() {
            continue;
        }
        for slice in &slices {
            one.reset();
            slice.add_to(&mut one);
            let name = types.get(slice.kind as usize).copied().unwrap_or("unnamed");
            // Type names are identifiers; a tag cannot hold `,` or spaces.
            let tag = Tag::new(name).ok_or_else(|| {
                io::Error::other(format!("transaction type `{name}` cannot be a log tag"))
            })?;
            writer
                .write_histogram(&one, start, length, Some(tag))
                .map_err(io::Error::other)?;
        }
    }
    Ok(())
}
