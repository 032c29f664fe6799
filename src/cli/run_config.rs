//! From run flags to a [`Config`]: defaults, then `--config`'s TOML file,
//! then every flag given (flags win, and only those given), then
//! `--hybrid`; `Config::validate` has the last word on value ranges.
//!
//! Invariant: every bad value is a usage error (exit 2) naming the value
//! and what is allowed.

use super::args::RunFlags;
use super::{usage, CliError};
use crate::base::{Primitive, Stage, StagePlan};
use crate::config::{Config, TpccMix};

pub(super) fn parse_number<T: std::str::FromStr>(
    flag: &str,
    text: &str,
    what: &str,
) -> Result<T, CliError> {
    text.trim()
        .parse()
        .map_err(|_| usage(format!("{flag} `{text}` is not {what}")))
}

pub(super) fn parse_stages(text: &str) -> Result<StagePlan, CliError> {
    let mut plan = StagePlan::empty();
    for part in text.split(',').filter(|p| !p.trim().is_empty()) {
        let (stage, primitive) = part.split_once('=').ok_or_else(|| {
            usage(format!(
                "--stages entry `{part}` is not STAGE=PRIMITIVE (e.g. read=rpc)"
            ))
        })?;
        let stage_value = Stage::parse(stage.trim()).ok_or_else(|| {
            usage(format!(
                "--stages: unknown stage `{stage}`; stages: {}",
                Stage::ALL.map(|s| s.name()).join(", ")
            ))
        })?;
        let primitive_value = Primitive::parse(primitive.trim()).ok_or_else(|| {
            usage(format!(
                "--stages: unknown primitive `{primitive}` for stage {stage}; allowed: onesided, rpc"
            ))
        })?;
        plan = plan.with(stage_value, primitive_value);
    }
    Ok(plan)
}

/// An RCC hybrid code: decimal (`28`) or binary (`0b11100`).
pub(super) fn parse_hybrid_code(text: &str) -> Result<u16, CliError> {
    let text = text.trim();
    let parsed = match text.strip_prefix("0b").or_else(|| text.strip_prefix("0B")) {
        Some(binary) => u16::from_str_radix(binary, 2),
        None => text.parse(),
    };
    parsed.map_err(|_| {
        usage(format!(
            "--hybrid `{text}` is not a hybrid code; allowed: a decimal (28) or binary (0b11100) number whose bits are stages (see `verbena protocols`)"
        ))
    })
}

/// Applies `--hybrid CODE`: every stage of the protocol whose bit is set
/// is one-sided, every other one RPC (RCC §5.1).
fn apply_hybrid(config: &mut Config, code: u16) -> Result<(), CliError> {
    let present = config.protocol.stage_bits();
    if code & !present != 0 {
        let stray: Vec<String> = Stage::ALL
            .iter()
            .filter(|s| code & s.bit() != 0 && present & s.bit() == 0)
            .map(|s| format!("{} ({})", s.name(), s.bit()))
            .collect();
        let stray_bits = code & !present;
        let stray_text = if stray.is_empty() {
            format!("bits {stray_bits:#b} name no stage")
        } else {
            format!("it has no stage {}", stray.join(", "))
        };
        return Err(usage(format!(
            "--hybrid {code} does not fit protocol {}: {stray_text}; its stages are {}",
            config.protocol.name(),
            config.stage_bits_text()
        )));
    }
    if config.stages.stages().next().is_some() {
        return Err(usage("give either --hybrid or --stages, not both"));
    }
    let plan = StagePlan::from_code(present, code);
    config.stages = config
        .protocol
        .stages()
        .iter()
        .fold(StagePlan::empty(), |acc, &stage| {
            acc.with(stage, plan.get(stage))
        });
    Ok(())
}

fn load_toml(path: &str) -> Result<Config, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read config file {path}: {e}")))?;
    toml::from_str(&text).map_err(|e| match super::config_keys::unknown_keys(&text) {
        Some(lines) => usage(format!(
            "config file {path}: {} unknown key(s):\n  {}",
            lines.len(),
            lines.join("\n  ")
        )),
        None => usage(format!("config file {path}: {e}")),
    })
}

/// Builds the configuration of a run from its flags: defaults, then
/// `--config`, then every flag given; `--hybrid` applied; validated.
pub(super) fn run_config(flags: &RunFlags) -> Result<Config, CliError> {
    let (mut config, hybrid) = run_config_unresolved(flags)?;
    if let Some(code) = hybrid {
        apply_hybrid(&mut config, code)?;
    }
    crate::engine::validate(&mut config).map_err(|e| usage(e.0))?;
    Ok(config)
}

/// A flag given overrides its config value; one not given leaves it.
fn set<T: Clone>(slot: &mut T, value: &Option<T>) {
    if let Some(value) = value {
        *slot = value.clone();
    }
}

/// The flags applied to the defaults (or `--config`), before `--hybrid` is
/// applied and the config validated: sweeps set their knobs on this and
/// then resolve each point.
pub(super) fn run_config_unresolved(flags: &RunFlags) -> Result<(Config, Option<u16>), CliError> {
    let mut config = match &flags.config {
        Some(path) => load_toml(path)?,
        None => Config::default(),
    };
    let c = &mut config;
    set(&mut c.nodes, &flags.nodes);
    set(&mut c.workers, &flags.workers);
    set(&mut c.coroutines, &flags.coroutines);
    set(&mut c.workload, &flags.workload);
    set(&mut c.protocol, &flags.protocol);
    set(&mut c.protocol_options.lock_mode, &flags.lock_mode);
    set(
        &mut c.protocol_options.wait_die_starvation_fix,
        &flags.wait_die_starvation_fix,
    );
    set(
        &mut c.protocol_options.calvin_epoch_us,
        &flags.calvin_epoch_us,
    );
    set(
        &mut c.protocol_options.calvin_inflight,
        &flags.calvin_inflight,
    );
    set(&mut c.primitive, &flags.primitive);
    for given in &flags.stages {
        for stage in given.stages() {
            c.stages = c.stages.with(stage, given.get(stage));
        }
    }
    set(&mut c.duration_s, &flags.duration);
    set(&mut c.warmup_s, &flags.warmup);
    set(&mut c.seed, &flags.seed);
    c.check |= flags.check;
    set(&mut c.fabric, &flags.fabric);
    set(&mut c.profile, &flags.profile);
    set(&mut c.sim.jitter, &flags.jitter);
    c.sim.swarm |= flags.swarm;
    set(&mut c.sim.emulated_nodes, &flags.emulated_nodes);
    set(&mut c.backoff.base_ns, &flags.backoff_base_ns);
    set(&mut c.backoff.cap_ns, &flags.backoff_cap_ns);
    set(&mut c.location_cache_entries, &flags.location_cache);
    c.location_cache_warm |= flags.warm_location_cache;
    set(&mut c.replication, &flags.replication);
    set(&mut c.replication_options.ring_bytes, &flags.log_ring_bytes);

    let f = &flags.faults;
    c.faults.extend(f.fault.iter().cloned());
    if f.heartbeat_interval_us.is_some() {
        c.failure_detector.heartbeat_interval_us = f.heartbeat_interval_us;
    }
    if f.detector_timeout_us.is_some() {
        c.failure_detector.timeout_us = f.detector_timeout_us;
    }
    if f.failure_detector.is_some() {
        c.failure_detector.enabled = f.failure_detector;
    }

    let u = &flags.ucx;
    set(&mut c.ucx.transport, &u.transport);
    set(&mut c.ucx.local_atomics, &u.local_atomics);
    set(&mut c.ucx.join_timeout_s, &u.join_timeout);
    if u.lease_ms.is_some() {
        c.failure_detector.lease_ms = u.lease_ms;
    }
    set(&mut c.ucx.stall_timeout_s, &u.stall_timeout);

    let y = &flags.ycsb;
    set(&mut c.ycsb.rows_per_node, &y.rows_per_node);
    set(&mut c.ycsb.record_bytes, &y.record_bytes);
    set(&mut c.ycsb.ops_per_txn, &y.ops_per_txn);
    set(&mut c.ycsb.write_ratio, &y.write_ratio);
    if y.update_txn_ratio.is_some() {
        c.ycsb.update_txn_ratio = y.update_txn_ratio;
    }
    set(&mut c.ycsb.distribution, &y.distribution);
    set(&mut c.ycsb.theta, &y.theta);
    set(&mut c.ycsb.hot_fraction, &y.hot_fraction);
    set(&mut c.ycsb.hot_probability, &y.hot_probability);
    set(&mut c.ycsb.compute_us, &y.compute_us);
    if y.partitions_per_txn.is_some() {
        c.ycsb.partitions_per_txn = y.partitions_per_txn;
    }

    let t = &flags.tpcc;
    set(&mut c.tpcc.warehouses_per_node, &t.warehouses);
    set(&mut c.tpcc.items, &t.items);
    set(
        &mut c.tpcc.customers_per_district,
        &t.customers_per_district,
    );
    set(&mut c.tpcc.insert_headroom_per_district, &t.insert_headroom);
    set(
        &mut c.tpcc.remote_item_probability,
        &t.remote_item_probability,
    );
    set(
        &mut c.tpcc.invalid_item_probability,
        &t.invalid_item_probability,
    );
    set(
        &mut c.tpcc.payment_remote_probability,
        &t.payment_remote_probability,
    );
    set(
        &mut c.tpcc.by_last_name_probability,
        &t.by_last_name_probability,
    );
    if let Some(v) = &t.tpcc_mix {
        if v == "new-order-distributed" {
            c.tpcc.mix = TpccMix::NEW_ORDER_ONLY;
            c.tpcc.new_order_always_distributed = true;
        } else {
            c.tpcc.mix = TpccMix::parse(v).ok_or_else(|| {
                usage(format!(
                    "--tpcc-mix `{v}` is not a mix; allowed: standard, new-order-only, new-order-distributed, or five weights NO,P,OS,D,SL such as 45,43,4,4,4"
                ))
            })?;
        }
    }
    apply_workload_flags(c, flags)?;
    Ok((config, flags.hybrid))
}

/// The SmallBank, PPS and TPC-E flags (`--sb-…`, `--pps-…`, `--tpce-…`).
fn apply_workload_flags(c: &mut Config, flags: &RunFlags) -> Result<(), CliError> {
    use crate::workloads::{common::parse_mix, pps, smallbank, tpce};
    let sb = &flags.smallbank;
    set(
        &mut c.smallbank.accounts_per_worker,
        &sb.sb_accounts_per_worker,
    );
    set(&mut c.smallbank.hot_account_fraction, &sb.sb_hot_fraction);
    set(
        &mut c.smallbank.hot_account_probability,
        &sb.sb_hot_probability,
    );
    set(&mut c.smallbank.distributed_probability, &sb.sb_distributed);
    set(&mut c.smallbank.max_amount, &sb.sb_max_amount);
    set(&mut c.smallbank.lookup_accounts, &sb.sb_lookup_accounts);
    if let Some(v) = &sb.sb_mix {
        let weights = parse_mix("--sb-mix", v, &smallbank::TXN_TYPES).map_err(usage)?;
        c.smallbank.mix = smallbank::SmallBankMix::from_weights(&weights);
    }
    let p = &flags.pps;
    set(&mut c.pps.products_per_node, &p.pps_products_per_node);
    set(&mut c.pps.parts_per_node, &p.pps_parts_per_node);
    set(&mut c.pps.suppliers_per_node, &p.pps_suppliers_per_node);
    set(&mut c.pps.parts_per_product, &p.pps_parts_per_product);
    set(&mut c.pps.parts_per_supplier, &p.pps_parts_per_supplier);
    set(&mut c.pps.local_part_probability, &p.pps_local_parts);
    set(&mut c.pps.max_quantity, &p.pps_max_quantity);
    set(&mut c.pps.initial_stock, &p.pps_initial_stock);
    if let Some(v) = &p.pps_mix {
        c.pps.mix =
            pps::PpsMix::from_weights(&parse_mix("--pps-mix", v, &pps::TXN_TYPES).map_err(usage)?);
    }
    let t = &flags.tpce;
    set(&mut c.tpce.customers_per_node, &t.tpce_customers_per_node);
    set(&mut c.tpce.max_accounts_per_customer, &t.tpce_max_accounts);
    set(
        &mut c.tpce.holdings_per_account,
        &t.tpce_holdings_per_account,
    );
    set(&mut c.tpce.securities_per_node, &t.tpce_securities_per_node);
    set(&mut c.tpce.feed_size, &t.tpce_feed_size);
    if let Some(v) = &t.tpce_mix {
        c.tpce.mix = tpce::TpceMix::from_weights(
            &parse_mix("--tpce-mix", v, &tpce::TXN_TYPES).map_err(usage)?,
        );
    }
    Ok(())
}
