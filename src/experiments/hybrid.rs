//! Hybrid stage codes (RCC §5.1): which primitive each stage of a protocol
//! should use, found by RCC's two methods.
//!
//! - **Exhaustive enumeration**: run every code of the protocol — one bit
//!   per stage it has, 2^stages codes — rank them by throughput and by
//!   latency (p50, ties by p99), and mark the hybrids (neither pure form)
//!   that beat *both* pure forms: RCC Fig. 14's finding that a few hybrids
//!   outperform the better pure form.
//! - **Latency breakdown** (RCC Fig. 13): run the two pure forms, compare
//!   each stage's mean latency, pick per stage the primitive with the lower
//!   one (one-sided on a tie: it spares the remote CPU), and run the picked
//!   code to test it against both pure forms. RCC does this with one
//!   coroutine, where stage latency is not hidden by other coroutines; run
//!   with `--coroutines 1` to follow it.
//!
//! Both run as sweeps (resumable, one row per run) over the knob `hybrid`,
//! generic over `ProtocolKind::stages()`, so every protocol this build
//! implements is covered. Other knobs (`--vary coroutines=1,8`) make one
//! analysis per value. "Beats" compares means over repetitions. Where
//! the hybrid and the better pure form each ran at least twice, a higher
//! throughput counts only beyond the noise: by more than twice the
//! standard error of the difference of the means (about a 95 % margin),
//! and a lower p50 latency likewise; a hybrid better than both only
//! within the noise is listed apart. A single run per code has no spread,
//! and the table says its margins may be noise.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::matrix::plan_of;
use super::sweep::{self, Knob, SweepOptions, SweepSpec};
use super::table;
use crate::base::{Primitive, ProtocolKind};
use crate::engine::report::percent;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Exhaustive,
    Breakdown,
    Both,
}

impl Method {
    pub fn parse(text: &str) -> Option<Method> {
        match text {
            "exhaustive" | "all" => Some(Method::Exhaustive),
            "breakdown" | "latency-breakdown" => Some(Method::Breakdown),
            "both" => Some(Method::Both),
            _ => None,
        }
    }
}

/// One code's measurements (means over its runs).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CodeResult {
    pub code: u16,
    /// `read:rpc lock:1s …` in the protocol's stage order.
    pub plan: String,
    pub runs: usize,
    pub throughput_txn_per_s: f64,
    pub throughput_stdev: f64,
    pub latency_p50_us: f64,
    /// Standard deviation of the p50 over the runs (0 for one run).
    #[serde(default)]
    pub latency_p50_stdev: f64,
    pub latency_p99_us: f64,
    pub abort_rate: f64,
    /// Mean µs per stage of committed transactions, then `execution`.
    pub stages_us: Vec<(String, f64)>,
    pub check_passed: Option<bool>,
}

/// One stage's comparison in the latency-breakdown method.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StageChoice {
    pub stage: String,
    pub onesided_us: f64,
    pub rpc_us: f64,
    pub pick: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Breakdown {
    pub stages: Vec<StageChoice>,
    pub proposed_code: u16,
    /// The proposal's measurements (absent if it could not run).
    pub proposed: Option<CodeResult>,
    /// Its place among all codes by throughput (exhaustive runs only).
    pub throughput_rank: Option<usize>,
}

/// The analysis of one group (one value of each other knob).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Group {
    /// `coroutines=8`, or `base`.
    pub label: String,
    /// Every code run, by code.
    pub codes: Vec<CodeResult>,
    /// Codes, best first.
    pub by_throughput: Vec<u16>,
    pub by_latency: Vec<u16>,
    /// Hybrids with more throughput than both pure forms, beyond the
    /// run-to-run noise where repetitions measure it (module doc).
    pub beat_both_throughput: Vec<u16>,
    /// Hybrids whose mean throughput is above both pure forms' by less
    /// than the noise: not a finding.
    #[serde(default)]
    pub above_both_within_noise: Vec<u16>,
    /// Hybrids with lower p50 latency than both pure forms, beyond the
    /// noise likewise.
    pub beat_both_latency: Vec<u16>,
    /// Hybrids whose mean p50 is below both pure forms' by less than the
    /// noise.
    #[serde(default)]
    pub below_both_latency_within_noise: Vec<u16>,
    pub breakdown: Option<Breakdown>,
}

/// What `verbena hybrid` found; written to `hybrid.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Analysis {
    pub protocol: String,
    /// `stage=bit` in the protocol's order.
    pub stage_bits: Vec<(String, u16)>,
    pub all_onesided_code: u16,
    pub groups: Vec<Group>,
    pub check_failures: usize,
}

/// `read:rpc lock:1s …`.
pub fn short_plan(protocol: ProtocolKind, code: u16) -> String {
    let plan = plan_of(protocol, code);
    protocol
        .stages()
        .iter()
        .map(|s| {
            let p = match plan.get(*s) {
                Primitive::OneSided => "1s",
                Primitive::Rpc => "rpc",
            };
            format!("{}:{p}", s.name())
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every code of `protocol`: the subsets of its stage bits, ascending.
pub fn all_codes(protocol: ProtocolKind) -> Vec<u16> {
    let present = protocol.stage_bits();
    (0..=present).filter(|c| c & !present == 0).collect()
}

fn code_of(row: &Value) -> Option<u16> {
    row["knobs"]["hybrid"].as_str()?.parse().ok()
}

fn group_label(row: &Value, keys: &[String]) -> String {
    let label = sweep::point_label(row, keys);
    if keys.is_empty() {
        "base".into()
    } else {
        label
    }
}

fn code_result(protocol: ProtocolKind, code: u16, rows: &[&Value]) -> CodeResult {
    let spread = |path: &str| table::report_spread(rows, path);
    let throughput = spread("throughput_txn_per_s");
    let mut stages_us = Vec::new();
    if let Some(Value::Object(first)) = rows.first().map(|r| &r["report"]["stages"]) {
        for name in first.keys() {
            stages_us.push((name.clone(), spread(&format!("stages.{name}")).mean));
        }
    }
    // Keep the protocol's stage order (JSON objects come back sorted).
    let order: Vec<&str> = protocol
        .stages()
        .iter()
        .map(|s| s.name())
        .chain(["execution"])
        .collect();
    stages_us.sort_by_key(|(name, _)| order.iter().position(|o| o == name).unwrap_or(usize::MAX));
    let checks: Vec<bool> = rows
        .iter()
        .filter_map(|r| r["report"]["check"].as_object())
        .map(|c| c["serializable"] == true && c["invariants_ok"] == true)
        .collect();
    CodeResult {
        code,
        plan: short_plan(protocol, code),
        runs: rows.len(),
        throughput_txn_per_s: throughput.mean,
        throughput_stdev: throughput.stdev,
        latency_p50_us: spread("latency_us.p50").mean,
        latency_p50_stdev: spread("latency_us.p50").stdev,
        latency_p99_us: spread("latency_us.p99").mean,
        abort_rate: spread("abort_rate").mean,
        stages_us,
        check_passed: (!checks.is_empty()).then(|| checks.iter().all(|&ok| ok)),
    }
}

/// The per-stage pick from the two pure forms.
pub fn breakdown_pick(
    protocol: ProtocolKind,
    onesided: &CodeResult,
    rpc: &CodeResult,
) -> (Vec<StageChoice>, u16) {
    let mut code = 0;
    let mut choices = Vec::new();
    for stage in protocol.stages() {
        let find = |r: &CodeResult| {
            r.stages_us
                .iter()
                .find(|(n, _)| n == stage.name())
                .map_or(0.0, |(_, us)| *us)
        };
        let (o, r) = (find(onesided), find(rpc));
        let pick_onesided = o <= r;
        if pick_onesided {
            code |= stage.bit();
        }
        choices.push(StageChoice {
            stage: stage.name().into(),
            onesided_us: o,
            rpc_us: r,
            pick: if pick_onesided { "onesided" } else { "rpc" }.into(),
        });
    }
    (choices, code)
}

/// Builds the analysis of finished rows (codes as the `hybrid` knob; other
/// knobs form groups).
pub fn analyse(protocol: ProtocolKind, rows: &[Value], other_keys: &[String]) -> Analysis {
    let all = protocol.stage_bits();
    let mut labels: Vec<String> = Vec::new();
    for row in rows {
        let label = group_label(row, other_keys);
        if !labels.contains(&label) {
            labels.push(label);
        }
    }
    let groups = labels
        .into_iter()
        .map(|label| {
            let members: Vec<&Value> = rows
                .iter()
                .filter(|r| group_label(r, other_keys) == label)
                .collect();
            let mut codes: Vec<u16> = members.iter().filter_map(|r| code_of(r)).collect();
            codes.sort_unstable();
            codes.dedup();
            let results: Vec<CodeResult> = codes
                .iter()
                .map(|&code| {
                    let runs: Vec<&Value> = members
                        .iter()
                        .copied()
                        .filter(|r| code_of(r) == Some(code))
                        .collect();
                    code_result(protocol, code, &runs)
                })
                .collect();
            rank(protocol, label, results)
        })
        .collect();
    let check_failures = rows
        .iter()
        .filter(|r| {
            r["report"]["check"]
                .as_object()
                .is_some_and(|c| c["serializable"] != true || c["invariants_ok"] != true)
        })
        .count();
    Analysis {
        protocol: protocol.name().into(),
        stage_bits: protocol
            .stages()
            .iter()
            .map(|s| (s.name().to_string(), s.bit()))
            .collect(),
        all_onesided_code: all,
        groups,
        check_failures,
    }
}

/// Whether `better`'s mean of a measure exceeds `worse`'s by more than
/// twice the standard error of their difference (`measure` gives a code's
/// mean and standard deviation, signed so that more is better). Without
/// two runs of each there is no spread to judge by, and any margin counts.
fn beyond_noise(
    better: &CodeResult,
    worse: &CodeResult,
    measure: impl Fn(&CodeResult) -> (f64, f64),
) -> bool {
    if better.runs < 2 || worse.runs < 2 {
        return true;
    }
    let ((better_mean, better_sd), (worse_mean, worse_sd)) = (measure(better), measure(worse));
    let standard_error =
        (better_sd.powi(2) / better.runs as f64 + worse_sd.powi(2) / worse.runs as f64).sqrt();
    better_mean - worse_mean > 2.0 * standard_error
}

/// The hybrids among `codes` whose mean `measure` (more is better) is
/// above both pure forms' (`onesided`, `rpc`): those beyond the noise, and
/// those within it.
fn better_than_both(
    codes: &[CodeResult],
    onesided: &CodeResult,
    rpc: &CodeResult,
    measure: impl Fn(&CodeResult) -> (f64, f64) + Copy,
) -> (Vec<u16>, Vec<u16>) {
    let best = if measure(onesided).0 >= measure(rpc).0 {
        onesided
    } else {
        rpc
    };
    let (mut beyond, mut within) = (Vec::new(), Vec::new());
    for c in codes {
        if c.code == onesided.code || c.code == rpc.code || measure(c).0 <= measure(best).0 {
            continue;
        }
        if beyond_noise(c, best, measure) {
            beyond.push(c.code);
        } else {
            within.push(c.code);
        }
    }
    (beyond, within)
}

fn rank(protocol: ProtocolKind, label: String, codes: Vec<CodeResult>) -> Group {
    let all = protocol.stage_bits();
    // On a tie a pure form ranks first: a hybrid must do strictly better.
    let hybrid = |c: &CodeResult| c.code != 0 && c.code != all;
    let mut by_throughput: Vec<&CodeResult> = codes.iter().collect();
    by_throughput.sort_by(|a, b| {
        b.throughput_txn_per_s
            .total_cmp(&a.throughput_txn_per_s)
            .then(hybrid(a).cmp(&hybrid(b)))
    });
    let mut by_latency: Vec<&CodeResult> = codes.iter().collect();
    by_latency.sort_by(|a, b| {
        a.latency_p50_us
            .total_cmp(&b.latency_p50_us)
            .then(a.latency_p99_us.total_cmp(&b.latency_p99_us))
            .then(hybrid(a).cmp(&hybrid(b)))
    });
    let find = |code: u16| codes.iter().find(|c| c.code == code);
    let throughput = |c: &CodeResult| (c.throughput_txn_per_s, c.throughput_stdev);
    let latency = |c: &CodeResult| (-c.latency_p50_us, c.latency_p50_stdev);
    let ((beat_throughput, throughput_within_noise), (beat_latency, latency_within_noise)) =
        match (find(all), find(0)) {
            (Some(o), Some(r)) => (
                better_than_both(&codes, o, r, throughput),
                better_than_both(&codes, o, r, latency),
            ),
            _ => Default::default(),
        };
    let breakdown = match (find(all), find(0)) {
        (Some(o), Some(r)) => {
            let (stages, proposed_code) = breakdown_pick(protocol, o, r);
            let proposed = find(proposed_code).cloned();
            let throughput_rank = (codes.len() > 2 && proposed.is_some()).then(|| {
                1 + by_throughput
                    .iter()
                    .position(|c| c.code == proposed_code)
                    .unwrap_or(0)
            });
            Some(Breakdown {
                stages,
                proposed_code,
                proposed,
                throughput_rank,
            })
        }
        _ => None,
    };
    Group {
        label,
        by_throughput: by_throughput.iter().map(|c| c.code).collect(),
        by_latency: by_latency.iter().map(|c| c.code).collect(),
        beat_both_throughput: beat_throughput,
        above_both_within_noise: throughput_within_noise,
        beat_both_latency: beat_latency,
        below_both_latency_within_noise: latency_within_noise,
        breakdown,
        codes,
    }
}

/// Runs the method for the protocol of `base` and writes `hybrid.json`.
pub fn run(base: &SweepSpec, options: &SweepOptions, method: Method) -> Result<Analysis, String> {
    let protocol = base.base.protocol;
    let all = protocol.stage_bits();
    let other_keys: Vec<String> = base.knobs.iter().map(|k| k.key.clone()).collect();
    let codes: Vec<u16> = match method {
        Method::Exhaustive | Method::Both => all_codes(protocol),
        Method::Breakdown => vec![all, 0],
    };
    let mut spec = base.clone();
    spec.knobs = base.knobs.clone();
    spec.knobs.push(Knob {
        key: "hybrid".into(),
        values: codes.iter().map(|c| c.to_string()).collect(),
    });
    spec.points()?;
    let outcome = sweep::run_sweep(&spec, options)?;
    let mut rows = outcome.rows;
    if method == Method::Breakdown {
        // Test each group's pick in a sweep of its own.
        let first = analyse(protocol, &rows, &other_keys);
        for (index, group) in first.groups.iter().enumerate() {
            let Some(breakdown) = &group.breakdown else {
                continue;
            };
            let code = breakdown.proposed_code;
            if code == 0 || code == all {
                continue; // a pure form: already measured
            }
            let member = rows
                .iter()
                .find(|r| group_label(r, &other_keys) == group.label)
                .cloned()
                .ok_or("a group without rows")?;
            let mut knobs: Vec<Knob> = other_keys
                .iter()
                .map(|k| Knob {
                    key: k.clone(),
                    values: vec![member["knobs"][k].as_str().unwrap_or("").to_string()],
                })
                .collect();
            knobs.push(Knob {
                key: "hybrid".into(),
                values: vec![code.to_string()],
            });
            let proposal = SweepSpec {
                knobs,
                ..base.clone()
            };
            let proposal_options = SweepOptions {
                out_dir: options.out_dir.join(format!("proposed-{index}")),
                ..options.clone()
            };
            rows.extend(sweep::run_sweep(&proposal, &proposal_options)?.rows);
        }
    }
    let analysis = analyse(protocol, &rows, &other_keys);
    let text = serde_json::to_string_pretty(&analysis).map_err(|e| e.to_string())?;
    let path = options.out_dir.join("hybrid.json");
    std::fs::write(&path, text + "\n")
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(analysis)
}

/// `hybrid.json` beside results, if there is one.
pub fn read_analysis(results: &Path) -> Option<Analysis> {
    let dir = if results.is_dir() {
        results.to_path_buf()
    } else {
        results.parent()?.to_path_buf()
    };
    let text = std::fs::read_to_string(dir.join("hybrid.json")).ok()?;
    serde_json::from_str(&text).ok()
}

impl Analysis {
    /// The ranking tables and verdicts.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let bits = self
            .stage_bits
            .iter()
            .map(|(s, b)| format!("{s}={b}"))
            .collect::<Vec<_>>()
            .join(" ");
        for group in &self.groups {
            let _ = writeln!(
                out,
                "\n{} hybrid codes · {} · {} code(s) · bits: {bits} (set = one-sided)",
                self.protocol,
                group.label,
                group.codes.len()
            );
            self.write_rankings(&mut out, group);
            write_verdicts(&mut out, group);
            if let Some(b) = &group.breakdown {
                self.write_breakdown(&mut out, group, b);
            }
        }
        out
    }

    /// What the table says of `code` after its numbers: a pure form, or a
    /// hybrid beating both pure forms (or better only within the noise).
    fn marks(&self, group: &Group, code: u16) -> String {
        let mut m = String::new();
        if code == self.all_onesided_code {
            m.push_str(" [all one-sided]");
        }
        if code == 0 {
            m.push_str(" [all RPC]");
        }
        if group.beat_both_throughput.contains(&code) {
            m.push_str(" *throughput beats both pure forms*");
        }
        if group.above_both_within_noise.contains(&code) {
            m.push_str(" (throughput above both pure forms, within the noise)");
        }
        if group.below_both_latency_within_noise.contains(&code) {
            m.push_str(" (latency below both pure forms, within the noise)");
        }
        if group.beat_both_latency.contains(&code) {
            m.push_str(" *latency beats both pure forms*");
        }
        m
    }

    /// The group's top ten codes by throughput, then by p50 latency.
    fn write_rankings(&self, out: &mut String, group: &Group) {
        let find = |code: u16| group.codes.iter().find(|c| c.code == code);
        let width = group.codes.iter().map(|c| c.plan.len()).max().unwrap_or(4);
        let row = |out: &mut String, rank: usize, c: &CodeResult| {
            let _ = writeln!(
                out,
                "  {:>3}  {:>5}  {:<width$} {:>11.0} {:>8.0} {:>8.1} {:>8.1} {:>8}{}",
                rank,
                c.code,
                c.plan,
                c.throughput_txn_per_s,
                c.throughput_stdev,
                c.latency_p50_us,
                c.latency_p99_us,
                percent(c.abort_rate),
                self.marks(group, c.code)
            );
        };
        let header = format!(
            "  {:>3}  {:>5}  {:<width$} {:>11} {:>8} {:>8} {:>8} {:>8}",
            "#", "code", "plan", "txn/s", "± sd", "p50 µs", "p99 µs", "abort"
        );
        let show = 10.min(group.codes.len());
        for (title, order) in [
            ("by throughput", &group.by_throughput),
            ("by latency (p50)", &group.by_latency),
        ] {
            let _ = writeln!(
                out,
                " ranked {title}{}:",
                if show < order.len() {
                    format!(" (top {show} of {})", order.len())
                } else {
                    String::new()
                }
            );
            let _ = writeln!(out, "{header}");
            for (i, code) in order.iter().take(show).enumerate() {
                if let Some(c) = find(*code) {
                    row(out, i + 1, c);
                }
            }
        }
    }

    /// The latency-breakdown method's lines: each stage's pure-form
    /// latencies and pick, then the proposed code and how it did.
    fn write_breakdown(&self, out: &mut String, group: &Group, b: &Breakdown) {
        let find = |code: u16| group.codes.iter().find(|c| c.code == code);
        let _ = writeln!(
            out,
            " latency-breakdown method (pure forms' stage latencies, µs):"
        );
        for s in &b.stages {
            let _ = writeln!(
                out,
                "    {:<10} one-sided {:>9.2}  rpc {:>9.2}  → {}",
                s.stage, s.onesided_us, s.rpc_us, s.pick
            );
        }
        let pure = |code: u16| find(code).map_or(0.0, |c| c.throughput_txn_per_s);
        let best_pure = pure(self.all_onesided_code).max(pure(0));
        match &b.proposed {
            Some(p) => {
                let _ = writeln!(
                    out,
                    "    proposed code {} ({}): {:.0} txn/s ({:+.1} % vs the better pure form), p50 {:.1} µs{}",
                    b.proposed_code,
                    p.plan,
                    p.throughput_txn_per_s,
                    if best_pure > 0.0 {
                        100.0 * (p.throughput_txn_per_s / best_pure - 1.0)
                    } else {
                        0.0
                    },
                    p.latency_p50_us,
                    b.throughput_rank
                        .map_or(String::new(), |r| format!(", rank {r} of {} by throughput", group.codes.len()))
                );
            }
            None => {
                let _ = writeln!(out, "    proposed code {} (not run)", b.proposed_code);
            }
        }
    }
}

/// Which hybrids beat both pure forms, and which are better only within
/// the noise; said only when the group has hybrids at all.
fn write_verdicts(out: &mut String, group: &Group) {
    let describe = |codes: &[u16]| {
        if codes.is_empty() {
            "none".to_string()
        } else {
            codes
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    if group.codes.len() > 2 {
        let _ = writeln!(
            out,
            " hybrids beating both pure forms: throughput {}; latency {}",
            describe(&group.beat_both_throughput),
            describe(&group.beat_both_latency)
        );
        if !group.above_both_within_noise.is_empty()
            || !group.below_both_latency_within_noise.is_empty()
        {
            let _ = writeln!(
                out,
                " better than both pure forms by less than twice the standard error of the difference (noise, not a finding): throughput {}; latency {}",
                describe(&group.above_both_within_noise),
                describe(&group.below_both_latency_within_noise)
            );
        }
        if group.codes.iter().any(|c| c.runs < 3) {
            let _ = writeln!(
                out,
                " (fewer than 3 runs per code: a margin of a few % may be run-to-run noise; --repeat 3 shows the spread)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_cover_every_stage_subset() {
        let codes = all_codes(ProtocolKind::Occ);
        assert_eq!(codes.len(), 1 << ProtocolKind::Occ.stages().len());
        assert!(codes.contains(&0) && codes.contains(&ProtocolKind::Occ.stage_bits()));
        assert_eq!(all_codes(ProtocolKind::NoWait).len(), 16);
        assert_eq!(
            short_plan(ProtocolKind::NoWait, 1),
            "lock:1s log:rpc commit:rpc release:rpc"
        );
    }

    /// A hybrid whose mean is above both pure forms' beats them only by
    /// more than the noise its repetitions measure; one run each has no
    /// spread, and any margin counts.
    #[test]
    fn beating_both_pure_forms_takes_a_margin_beyond_the_noise() {
        let measured = |code, runs, throughput_txn_per_s, throughput_stdev| CodeResult {
            code,
            plan: String::new(),
            runs,
            throughput_txn_per_s,
            throughput_stdev,
            latency_p50_us: 10.0,
            latency_p50_stdev: 0.0,
            latency_p99_us: 20.0,
            abort_rate: 0.0,
            stages_us: Vec::new(),
            check_passed: None,
        };
        let all = ProtocolKind::NoWait.stage_bits();
        let rank_no_wait = |codes| rank(ProtocolKind::NoWait, "base".into(), codes);
        // 3 runs each: the 1 % margin of code 5 is inside a 2 % spread, the
        // 10 % margin of code 6 is not.
        let group = rank_no_wait(vec![
            measured(0, 3, 90_000.0, 1_000.0),
            measured(all, 3, 100_000.0, 2_000.0),
            measured(5, 3, 101_000.0, 2_000.0),
            measured(6, 3, 110_000.0, 1_000.0),
            measured(7, 3, 95_000.0, 1_000.0),
        ]);
        assert_eq!(group.beat_both_throughput, vec![6]);
        assert_eq!(group.above_both_within_noise, vec![5]);
        // Latency alike: 0.2 µs lower p50 with a 0.3 µs spread is noise,
        // 2 µs lower with the same spread is not.
        let timed = |code, p50, sd| CodeResult {
            latency_p50_us: p50,
            latency_p50_stdev: sd,
            ..measured(code, 3, 90_000.0, 1_000.0)
        };
        let group = rank_no_wait(vec![
            timed(0, 80.6, 0.3),
            timed(all, 81.0, 0.3),
            timed(5, 80.4, 0.3),
            timed(6, 78.6, 0.3),
        ]);
        assert_eq!(group.beat_both_latency, vec![6]);
        assert_eq!(group.below_both_latency_within_noise, vec![5]);
        // One run each: no spread to judge by.
        let group = rank_no_wait(vec![
            measured(0, 1, 90_000.0, 0.0),
            measured(all, 1, 100_000.0, 0.0),
            measured(5, 1, 101_000.0, 0.0),
        ]);
        assert_eq!(group.beat_both_throughput, vec![5]);
        assert!(group.above_both_within_noise.is_empty());
    }

    #[test]
    fn breakdown_picks_the_faster_primitive_per_stage() {
        let result = |code, stages: &[(&str, f64)]| CodeResult {
            code,
            plan: String::new(),
            runs: 1,
            throughput_txn_per_s: 0.0,
            throughput_stdev: 0.0,
            latency_p50_us: 0.0,
            latency_p50_stdev: 0.0,
            latency_p99_us: 0.0,
            abort_rate: 0.0,
            stages_us: stages.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            check_passed: None,
        };
        let onesided = result(
            29,
            &[
                ("lock", 5.0),
                ("log", 1.0),
                ("commit", 2.0),
                ("release", 1.0),
            ],
        );
        let rpc = result(
            0,
            &[
                ("lock", 3.0),
                ("log", 4.0),
                ("commit", 2.0),
                ("release", 0.5),
            ],
        );
        let (choices, code) = breakdown_pick(ProtocolKind::NoWait, &onesided, &rpc);
        // lock and release to RPC; log one-sided; commit ties → one-sided.
        assert_eq!(code, 4 | 16);
        assert_eq!(choices[0].pick, "rpc");
        assert_eq!(choices[2].pick, "onesided");
    }
}
