//! One meaning per number in the human-readable reports: the abort rate
//! is a percentage with its sign wherever it is printed, `wire/txn` says
//! what the run's fabric counts, the key distribution names only its own
//! knobs, and the `run` report ends pointing at the page that explains it.

use verbena::config::{Config, FabricKind, KeyDistribution, YcsbConfig};
use verbena::engine::report::{describe_keys, describe_writes, percent, READING_GUIDE};
use verbena::engine::Report;
use verbena::stats::WorkerStats;
use verbena::txn::AbortReason;

/// A run's report with 300 commits and 100 aborted attempts on `fabric`.
fn report_on(fabric: FabricKind) -> Report {
    let config = Config {
        fabric,
        ..Config::default()
    };
    let mut stats = WorkerStats {
        committed: 300,
        ..WorkerStats::default()
    };
    stats.aborts[AbortReason::LockConflict.index()] = 100;
    Report::build(&config, "ycsb", &[], &stats, &[300], None)
}

#[test]
fn an_abort_rate_is_a_percentage_with_its_sign() {
    assert_eq!(percent(0.25), "25.00 %");
    assert_eq!(percent(0.0), "0.00 %");
    assert_eq!(percent(0.123_456), "12.35 %");
    let report = report_on(FabricKind::Threads);
    assert_eq!(report.abort_rate, 0.25, "the JSON keeps the fraction");
    let table = report.table();
    let line = table
        .lines()
        .find(|l| l.trim_start().starts_with("abort rate"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(line.ends_with("25.00 %"), "{line}");
    // The digits line up with the throughput's.
    let throughput = table.lines().find(|l| l.contains("txn/s (")).unwrap();
    let digits_end = |l: &str| l.rfind(|c: char| c.is_ascii_digit()).unwrap();
    assert_eq!(
        digits_end(line),
        digits_end(&throughput[..throughput.find(" txn/s").unwrap()])
    );
}

#[test]
fn wire_per_txn_counts_the_same_on_every_fabric() {
    let label = |fabric| {
        let table = report_on(fabric).table();
        let line = table
            .lines()
            .find(|l| l.trim_start().starts_with("wire/txn"))
            .unwrap()
            .to_string();
        line[line.find('(').unwrap()..].to_string()
    };
    let sim = label(FabricKind::Sim);
    assert!(sim.contains("2 per one-sided verb"), "{sim}");
    assert_eq!(label(FabricKind::Threads), sim);
    assert_eq!(label(FabricKind::Ucx), sim);
}

#[test]
fn the_run_report_ends_pointing_at_its_explanation() {
    let table = report_on(FabricKind::Sim).table();
    let last = table.lines().last().unwrap();
    assert!(last.contains(READING_GUIDE), "{last}");
    assert!(last.len() < 80, "{last}");
    let guide = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(READING_GUIDE);
    assert!(guide.is_file(), "{} is missing", guide.display());
}

#[test]
fn the_key_distribution_names_only_its_own_knobs() {
    let ycsb = |distribution| YcsbConfig {
        distribution,
        theta: 0.99,
        hot_fraction: 0.001,
        hot_probability: 0.07,
        ..YcsbConfig::default()
    };
    assert_eq!(
        describe_keys(&ycsb(KeyDistribution::Hot)),
        "hot area 0.1 % of rows gets 7 % of accesses"
    );
    assert_eq!(
        describe_keys(&ycsb(KeyDistribution::Zipf)),
        "Zipf keys (θ 0.99)"
    );
    assert_eq!(
        describe_keys(&ycsb(KeyDistribution::Uniform)),
        "uniform keys"
    );
}

/// The write mix says what the run did: a share of written operations, or
/// with Deneva's mix the share of update transactions, never a
/// `write_ratio` the workload ignored.
#[test]
fn the_write_mix_names_the_knob_the_workload_used() {
    let ycsb = YcsbConfig {
        ops_per_txn: 10,
        write_ratio: 0.2,
        ..YcsbConfig::default()
    };
    assert_eq!(describe_writes(&ycsb), "20 % writes");
    let deneva = YcsbConfig {
        update_txn_ratio: Some(0.5),
        ..ycsb
    };
    assert_eq!(
        describe_writes(&deneva),
        "50 % update transactions (5 of 10 operations write), the rest read-only"
    );
}
