//! A workload written outside verbena runs on every protocol and stage
//! choice through `engine::run_custom`: here, bank transfers with blind
//! writes (`Txn::write`), whose invariant is that money is conserved, under
//! the serializability checker.

use std::sync::Arc;

use verbena::base::rng::Rng;
use verbena::base::{Primitive, ProtocolKind};
use verbena::check::History;
use verbena::config::{Config, LockMode, ProtocolOptions};
use verbena::engine;
use verbena::fabric::NodeId;
use verbena::store::{NodeStore, StoreError, TableSpec};
use verbena::txn::{Protocol, Txn, TxnResult};
use verbena::workloads::{InvariantReport, Workload};

const ACCOUNTS_PER_NODE: u64 = 24;
const START_BALANCE: u64 = 1_000;

struct Transfers {
    nodes: u64,
}

#[derive(Clone, Copy)]
struct Transfer {
    from: (NodeId, u64),
    to: (NodeId, u64),
    amount: u64,
}

impl Transfers {
    fn account(&self, rng: &mut Rng) -> (NodeId, u64) {
        let node = rng.below(self.nodes) as NodeId;
        (
            node,
            node as u64 * ACCOUNTS_PER_NODE + rng.below(ACCOUNTS_PER_NODE),
        )
    }
}

impl Workload for Transfers {
    type Request = Transfer;

    fn name(&self) -> &'static str {
        "transfers"
    }

    fn tables(&self) -> Vec<TableSpec> {
        vec![TableSpec {
            name: "accounts",
            record_words: 1,
            capacity_per_node: ACCOUNTS_PER_NODE,
        }]
    }

    fn load(&self, store: &NodeStore) -> Result<(), StoreError> {
        for row in 0..ACCOUNTS_PER_NODE {
            store.insert(
                0,
                store.node as u64 * ACCOUNTS_PER_NODE + row,
                &[START_BALANCE],
            )?;
        }
        Ok(())
    }

    fn generate(&self, rng: &mut Rng, _node: NodeId) -> Transfer {
        let from = self.account(rng);
        let mut to = self.account(rng);
        while to == from {
            to = self.account(rng);
        }
        Transfer {
            from,
            to,
            amount: 1 + rng.below(50),
        }
    }

    async fn execute<P: Protocol>(
        &self,
        txn: &mut Txn<'_, '_, P>,
        request: &Transfer,
    ) -> TxnResult<()> {
        let from = txn.read(0, request.from.0, request.from.1).await?;
        let to = txn.read(0, request.to.0, request.to.1).await?;
        let (from_balance, to_balance) = (txn.get(from)[0], txn.get(to)[0]);
        if from_balance < request.amount {
            return Err(txn.user_abort());
        }
        txn.write(
            0,
            request.from.0,
            request.from.1,
            &[from_balance - request.amount],
        )
        .await?;
        txn.write(
            0,
            request.to.0,
            request.to.1,
            &[to_balance + request.amount],
        )
        .await?;
        Ok(())
    }

    fn check_invariants(&self, stores: &[Arc<NodeStore>], _history: &History) -> InvariantReport {
        let mut total = 0;
        let mut record = Vec::new();
        for store in stores {
            for slot in 0..store.rows(0) {
                store.record(0, slot, &mut record);
                total += record[0];
            }
        }
        let expected = START_BALANCE * ACCOUNTS_PER_NODE * self.nodes;
        InvariantReport {
            ok: total == expected,
            details: vec![format!("total balance {total}, expected {expected}")],
        }
    }
}

#[test]
fn transfers_with_blind_writes_conserve_money_on_every_protocol() {
    for protocol in [
        ProtocolKind::NoWait,
        ProtocolKind::Occ,
        ProtocolKind::Maat,
        ProtocolKind::Cicada,
        ProtocolKind::Sundial,
        ProtocolKind::Drtm,
    ] {
        for primitive in [Primitive::OneSided, Primitive::Rpc] {
            let config = Config {
                protocol,
                primitive,
                nodes: 3,
                coroutines: 6,
                duration_s: 0.3,
                warmup_s: 0.0,
                check: true,
                ..Config::default()
            };
            let workload = Transfers { nodes: 3 };
            let report = engine::run_custom(&config, &workload).expect("run").report;
            assert_eq!(report.workload, "transfers");
            let check = report.check.as_ref().expect("check on");
            assert!(
                check.passed(),
                "{} {}: {:?} {:?} {:?}",
                protocol.name(),
                primitive.name(),
                check.cycle,
                check.anomalies,
                check.invariants
            );
            assert!(
                report.committed > 100,
                "{} {}: {} committed",
                protocol.name(),
                primitive.name(),
                report.committed
            );
            assert!(
                report.abort_rate > 0.0,
                "24 accounts per node must conflict"
            );
        }
    }
}

#[test]
fn transfers_upgrade_read_locks_on_the_2pl_family_in_both_lock_modes() {
    // Each transfer reads both accounts, then writes them: with shared locks
    // the writes upgrade the read locks (`Protocol::upgrade`).
    for protocol in [
        ProtocolKind::NoWait,
        ProtocolKind::WaitDie,
        ProtocolKind::WoundWait,
    ] {
        for lock_mode in [LockMode::Exclusive, LockMode::Shared] {
            for primitive in [Primitive::OneSided, Primitive::Rpc] {
                // On sim: deterministic, whatever else the machine runs.
                let config = Config {
                    protocol,
                    primitive,
                    fabric: verbena::config::FabricKind::Sim,
                    profile: verbena::config::profile::NetworkProfile::builtin("cx4-edr").unwrap(),
                    nodes: 3,
                    coroutines: 6,
                    duration_s: 0.01,
                    warmup_s: 0.0,
                    check: true,
                    protocol_options: ProtocolOptions {
                        lock_mode,
                        ..ProtocolOptions::default()
                    },
                    ..Config::default()
                };
                let workload = Transfers { nodes: 3 };
                let report = engine::run_custom(&config, &workload).expect("run").report;
                let check = report.check.as_ref().expect("check on");
                assert!(
                    check.passed(),
                    "{} {:?} {}: {:?} {:?} {:?}",
                    protocol.name(),
                    lock_mode,
                    primitive.name(),
                    check.cycle,
                    check.anomalies,
                    check.invariants
                );
                assert!(report.committed > 50, "{} committed", report.committed);
            }
        }
    }
}

#[test]
fn transfers_upgrade_sundial_reads_to_access_time_write_locks() {
    // Each transfer reads both accounts, then writes them: with
    // `sundial_lock_at_access` each write locks a record read before
    // (`Protocol::upgrade`), which must still hold the version read. Every
    // mix of the read and lock primitives, on sim.
    for (read, lock) in [
        (Primitive::OneSided, Primitive::OneSided),
        (Primitive::OneSided, Primitive::Rpc),
        (Primitive::Rpc, Primitive::OneSided),
        (Primitive::Rpc, Primitive::Rpc),
    ] {
        let mut stale = 0;
        for seed in 1..=3 {
            let mut config = Config {
                protocol: ProtocolKind::Sundial,
                primitive: read,
                fabric: verbena::config::FabricKind::Sim,
                profile: verbena::config::profile::NetworkProfile::builtin("cx4-edr").unwrap(),
                nodes: 3,
                coroutines: 6,
                duration_s: 0.01,
                warmup_s: 0.0,
                seed,
                check: true,
                ..Config::default()
            };
            config.stages = config.stages.with(verbena::base::Stage::Lock, lock);
            config.protocol_options.sundial_lock_at_access = true;
            let workload = Transfers { nodes: 3 };
            let report = engine::run_custom(&config, &workload).expect("run").report;
            let check = report.check.as_ref().expect("check on");
            assert!(
                check.passed(),
                "read {} lock {} seed {seed}: {:?} {:?} {:?}",
                read.name(),
                lock.name(),
                check.cycle,
                check.anomalies,
                check.invariants
            );
            assert!(report.committed > 50, "{} committed", report.committed);
            stale += report
                .aborts
                .0
                .iter()
                .find(|(name, _)| *name == "validation_failed")
                .map_or(0, |&(_, n)| n);
        }
        assert!(
            stale > 0,
            "read {} lock {}: no upgrade found its version changed",
            read.name(),
            lock.name()
        );
    }
}
