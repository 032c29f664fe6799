//! PPS, the Product-Parts-Supplier workload (Deneva §4.1 and §4.9): five
//! tables and transactions that reach parts through foreign keys, so their
//! read and write sets depend on data — the case that forces CALVIN into
//! reconnaissance (Deneva §4.9).
//!
//! Schema (each table partitioned by its own primary key; id `i` of node
//! `n` is `n · per_node + i`):
//!
//! * `products`: id → `[orders, units_ordered]`, counters of the committed
//!   OrderProducts of this product and of the stock units they took.
//! * `parts`: id → `[stock, price]`; stock starts at `initial_stock`.
//! * `suppliers`: id → `[id, name]`.
//! * `uses`: `product · parts_per_product + j` → `[part id]`, on the
//!   product's node: the parts a product is built from.
//! * `supplies`: `supplier · parts_per_supplier + j` → `[part id]`, on the
//!   supplier's node.
//!
//! Parts are assigned to products and suppliers uniformly over the whole
//! cluster (Deneva: "randomly with a uniform distribution"), so the part
//! lookups span partitions; `local_part_probability` instead keeps that
//! share of the assignments on the product's (supplier's) own node.
//!
//! Transactions (Deneva §4.1), each coordinated by the node of its product
//! or supplier, drawn uniformly there:
//!
//! * `order_product(p, q)`: reads p's `uses` rows, then takes `q` units of
//!   each part found (gives up, user abort, if a part has fewer left), and
//!   counts the order and the units in p's `products` row.
//! * `lookup_product(p)`: reads p, its `uses` rows and their parts.
//! * `update_product_part(p, j, part)`: points p's j-th `uses` row at
//!   another part.
//! * `lookup_supplier(s)`: reads s, its `supplies` rows and their parts
//!   (Deneva's parts-by-supplier lookup; weight 0 in the default mix).
//!
//! Every program reads the mapping rows before it touches a part: that
//! read-only prefix is the reconnaissance a deterministic protocol runs to
//! learn the read and write sets, and the sets it learns are invalidated
//! when an `update_product_part` commits in between (Deneva §4.9).
//!
//! Invariants after a run: the stock taken from all parts (initial stock −
//! stock) equals the units the committed OrderProducts noted (`Txn::note`)
//! and equals the products' `units_ordered` sum; the products' `orders` sum
//! equals the committed OrderProducts in the history; no stock is negative;
//! every mapping row names an existing part; suppliers are never written.

use std::sync::Arc;

use crate::base::rng::Rng;
use crate::check::History;
use crate::fabric::NodeId;
use crate::store::{NodeStore, StoreError, TableId, TableSpec};
use crate::txn::{Protocol, Txn, TxnResult};

use super::common::{for_each_row, mix64, txn_types, Findings, Mix};
use super::{Declared, InvariantReport, Workload};

pub const PRODUCTS: TableId = 0;
pub const PARTS: TableId = 1;
pub const SUPPLIERS: TableId = 2;
pub const USES: TableId = 3;
pub const SUPPLIES: TableId = 4;

pub use crate::config::pps::{PpsConfig, PpsMix, MAX_PARTS_PER_ENTITY, TXN_TYPES};

txn_types! {
    pub enum PpsTxn { OrderProduct, LookupProduct, UpdateProductPart, LookupSupplier }
}

#[derive(Clone, Copy, Debug)]
pub struct PpsRequest {
    pub txn: PpsTxn,
    pub node: NodeId,
    /// The product (or, for lookup_supplier, the supplier).
    pub id: u64,
    /// order_product: units of each part; update_product_part: the `uses`
    /// row's index.
    pub quantity: u64,
    /// update_product_part: the part the row will name.
    pub new_part: u64,
}

pub struct Pps {
    config: PpsConfig,
    nodes: u32,
    mix: Mix,
}

impl Pps {
    /// `config` must have passed validation.
    pub fn new(config: &PpsConfig, nodes: u32) -> Pps {
        Pps {
            config: *config,
            nodes,
            mix: Mix::new(&config.mix.weights()),
        }
    }

    fn part_node(&self, part: u64) -> NodeId {
        (part / self.config.parts_per_node) as NodeId
    }

    /// A part for an owner on `node`: local with `local_part_probability`,
    /// else uniform over the cluster. `unit` and `pick` are two uniform
    /// draws.
    fn assign_part(&self, node: NodeId, unit: f64, pick: u64) -> u64 {
        let per_node = self.config.parts_per_node;
        if unit < self.config.local_part_probability {
            node as u64 * per_node + pick % per_node
        } else {
            pick % (per_node * self.nodes as u64)
        }
    }

    /// The part the loader assigns to mapping row `key` of `table`.
    fn loaded_part(&self, table: TableId, node: NodeId, key: u64) -> u64 {
        let hash = mix64(key.wrapping_mul(5).wrapping_add(table as u64));
        let unit = (mix64(hash) >> 11) as f64 / (1u64 << 53) as f64;
        self.assign_part(node, unit, hash)
    }

    /// Reads the `count` mapping rows of `owner` in `table` (on `node`),
    /// then visits the parts they name.
    async fn parts_of<P: Protocol>(
        &self,
        txn: &mut Txn<'_, '_, P>,
        table: TableId,
        node: NodeId,
        owner: u64,
        count: u32,
        parts: &mut [u64; MAX_PARTS_PER_ENTITY as usize],
    ) -> TxnResult<usize> {
        for (j, part) in parts.iter_mut().enumerate().take(count as usize) {
            let row = txn
                .read(table, node, owner * count as u64 + j as u64)
                .await?;
            *part = txn.get(row)[0];
        }
        Ok(count as usize)
    }
}

impl Workload for Pps {
    type Request = PpsRequest;

    fn name(&self) -> &'static str {
        "pps"
    }

    fn tables(&self) -> Vec<TableSpec> {
        let c = &self.config;
        vec![
            TableSpec {
                name: "products",
                record_words: 2,
                capacity_per_node: c.products_per_node,
            },
            TableSpec {
                name: "parts",
                record_words: 2,
                capacity_per_node: c.parts_per_node,
            },
            TableSpec {
                name: "suppliers",
                record_words: 2,
                capacity_per_node: c.suppliers_per_node,
            },
            TableSpec {
                name: "uses",
                record_words: 1,
                capacity_per_node: c.products_per_node * c.parts_per_product as u64,
            },
            TableSpec {
                name: "supplies",
                record_words: 1,
                capacity_per_node: c.suppliers_per_node * c.parts_per_supplier as u64,
            },
        ]
    }

    fn load(&self, store: &NodeStore) -> Result<(), StoreError> {
        let c = &self.config;
        let node = store.node;
        for i in 0..c.products_per_node {
            let product = node as u64 * c.products_per_node + i;
            store.insert(PRODUCTS, product, &[0, 0])?;
            for j in 0..c.parts_per_product as u64 {
                let key = product * c.parts_per_product as u64 + j;
                store.insert(USES, key, &[self.loaded_part(USES, node, key)])?;
            }
        }
        for i in 0..c.parts_per_node {
            let part = node as u64 * c.parts_per_node + i;
            store.insert(PARTS, part, &[c.initial_stock, 1 + mix64(part) % 1000])?;
        }
        for i in 0..c.suppliers_per_node {
            let supplier = node as u64 * c.suppliers_per_node + i;
            store.insert(SUPPLIERS, supplier, &[supplier, mix64(supplier)])?;
            for j in 0..c.parts_per_supplier as u64 {
                let key = supplier * c.parts_per_supplier as u64 + j;
                store.insert(SUPPLIES, key, &[self.loaded_part(SUPPLIES, node, key)])?;
            }
        }
        Ok(())
    }

    fn generate(&self, rng: &mut Rng, node: NodeId) -> PpsRequest {
        let c = &self.config;
        let txn = PpsTxn::ALL[self.mix.pick(rng)];
        let (per_node, quantity) = match txn {
            PpsTxn::OrderProduct => (c.products_per_node, 1 + rng.below(c.max_quantity)),
            PpsTxn::UpdateProductPart => {
                (c.products_per_node, rng.below(c.parts_per_product as u64))
            }
            PpsTxn::LookupProduct => (c.products_per_node, 0),
            PpsTxn::LookupSupplier => (c.suppliers_per_node, 0),
        };
        let id = node as u64 * per_node + rng.below(per_node);
        let new_part = if txn == PpsTxn::UpdateProductPart {
            let unit = rng.unit();
            self.assign_part(node, unit, rng.next_u64())
        } else {
            0
        };
        PpsRequest {
            txn,
            node,
            id,
            quantity,
            new_part,
        }
    }

    async fn execute<P: Protocol>(
        &self,
        txn: &mut Txn<'_, '_, P>,
        request: &PpsRequest,
    ) -> TxnResult<()> {
        let c = &self.config;
        let node = request.node;
        let mut parts = [0u64; MAX_PARTS_PER_ENTITY as usize];
        match request.txn {
            PpsTxn::OrderProduct => {
                // Reconnaissance prefix: the mapping decides the write set.
                let count = self
                    .parts_of(txn, USES, node, request.id, c.parts_per_product, &mut parts)
                    .await?;
                let quantity = request.quantity;
                for &part in &parts[..count] {
                    let row = txn.update(PARTS, self.part_node(part), part).await?;
                    let stock = txn.get(row)[0];
                    if stock < quantity {
                        return Err(txn.user_abort());
                    }
                    txn.get_mut(row)[0] = stock - quantity;
                }
                let units = quantity * count as u64;
                let product = txn.update(PRODUCTS, node, request.id).await?;
                let record = txn.get_mut(product);
                record[0] += 1;
                record[1] += units;
                txn.note(units as i64);
            }
            PpsTxn::LookupProduct => {
                txn.read(PRODUCTS, node, request.id).await?;
                let count = self
                    .parts_of(txn, USES, node, request.id, c.parts_per_product, &mut parts)
                    .await?;
                for &part in &parts[..count] {
                    txn.read(PARTS, self.part_node(part), part).await?;
                }
            }
            PpsTxn::UpdateProductPart => {
                let key = request.id * c.parts_per_product as u64 + request.quantity;
                let row = txn.update(USES, node, key).await?;
                txn.get_mut(row)[0] = request.new_part;
            }
            PpsTxn::LookupSupplier => {
                txn.read(SUPPLIERS, node, request.id).await?;
                let count = self
                    .parts_of(
                        txn,
                        SUPPLIES,
                        node,
                        request.id,
                        c.parts_per_supplier,
                        &mut parts,
                    )
                    .await?;
                for &part in &parts[..count] {
                    txn.read(PARTS, self.part_node(part), part).await?;
                }
            }
        }
        Ok(())
    }

    fn txn_types(&self) -> &'static [&'static str] {
        &TXN_TYPES
    }

    fn txn_type(&self, request: &PpsRequest) -> usize {
        request.txn as usize
    }

    fn max_request_words(&self) -> usize {
        5
    }

    fn max_accesses(&self) -> usize {
        let c = &self.config;
        1 + 2 * c.parts_per_product.max(c.parts_per_supplier) as usize
    }

    /// `[type, node, id, quantity, new_part]`.
    fn encode_request(&self, request: &PpsRequest, out: &mut Vec<u64>) {
        out.extend_from_slice(&[
            request.txn as u64,
            request.node as u64,
            request.id,
            request.quantity,
            request.new_part,
        ]);
    }

    fn decode_request(&self, words: &[u64]) -> Option<PpsRequest> {
        let &[txn, node, id, quantity, new_part] = words else {
            return None;
        };
        if node >= self.nodes as u64 {
            return None;
        }
        Some(PpsRequest {
            txn: *PpsTxn::ALL.get(txn as usize)?,
            node: node as NodeId,
            id,
            quantity,
            new_part,
        })
    }

    /// Only update_product_part's record follows from its request; the
    /// others reach parts through the `uses`/`supplies` rows, so a
    /// deterministic protocol learns their sets by reconnaissance (Deneva
    /// §4.9).
    fn declare_accesses(&self, request: &PpsRequest, out: &mut Vec<Declared>) -> bool {
        if request.txn != PpsTxn::UpdateProductPart {
            return false;
        }
        out.push(Declared {
            table: USES,
            node: request.node,
            key: request.id * self.config.parts_per_product as u64 + request.quantity,
            write: true,
        });
        true
    }

    fn check_invariants(&self, stores: &[Arc<NodeStore>], history: &History) -> InvariantReport {
        let c = &self.config;
        let mut findings = Findings::default();
        let total_parts = c.parts_per_node * stores.len() as u64;
        let mut taken = 0u64;
        for_each_row(stores, PARTS, |part, _, record| {
            if record[0] > c.initial_stock {
                findings.violation(|| {
                    format!(
                        "part {part} holds stock {} (as signed: {}), more than the {} loaded",
                        record[0], record[0] as i64, c.initial_stock
                    )
                });
            } else {
                taken += c.initial_stock - record[0];
            }
        });
        let (mut orders, mut units) = (0u64, 0u64);
        for_each_row(stores, PRODUCTS, |_, _, record| {
            orders += record[0];
            units += record[1];
        });
        for table in [USES, SUPPLIES] {
            for_each_row(stores, table, |key, _, record| {
                if record[0] >= total_parts {
                    findings.violation(|| {
                        format!(
                            "mapping row {key} of table {table} names part {}, beyond the {total_parts} parts",
                            record[0]
                        )
                    });
                }
            });
        }
        for_each_row(stores, SUPPLIERS, |id, seq, record| {
            if seq != 0 || record != [id, mix64(id)] {
                findings.violation(|| format!("supplier {id} changed (version {seq})"));
            }
        });
        let (noted, committed_orders) = history.notes(Some(PpsTxn::OrderProduct as u8));
        if taken as i64 != noted || units != taken || orders != committed_orders {
            findings.violation(|| {
                format!(
                    "stock taken from parts {taken}, units the {committed_orders} committed order_products took {noted}, units counted in products {units}, orders counted in products {orders}: all pairs must agree"
                )
            });
        } else {
            findings.note(format!(
                "stock decrements match committed orders: {committed_orders} order_products took {taken} units, as the parts and the products both record"
            ));
        }
        findings.into_report()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_follow_the_locality_knob() {
        let local = Pps::new(
            &PpsConfig {
                local_part_probability: 1.0,
                ..PpsConfig::default()
            },
            4,
        );
        let spread = Pps::new(&PpsConfig::default(), 4);
        let mut remote = 0;
        for key in 0..4000 {
            assert_eq!(local.part_node(local.loaded_part(USES, 2, key)), 2);
            let part = spread.loaded_part(USES, 2, key);
            assert!(part < 4 * 10_000);
            remote += (spread.part_node(part) != 2) as u32;
        }
        assert!((2700..3300).contains(&remote), "{remote} of 4000 remote");
    }

    #[test]
    fn requests_stay_on_their_home_node() {
        let pps = Pps::new(
            &PpsConfig {
                mix: PpsMix::from_weights(&[1, 1, 1, 1]),
                ..PpsConfig::default()
            },
            3,
        );
        let mut rng = Rng::new(2);
        for _ in 0..1000 {
            let r = pps.generate(&mut rng, 1);
            let per_node = if r.txn == PpsTxn::LookupSupplier {
                1_000
            } else {
                10_000
            };
            assert_eq!(r.id / per_node, 1, "{r:?}");
            match r.txn {
                PpsTxn::OrderProduct => assert!((1..=10).contains(&r.quantity)),
                PpsTxn::UpdateProductPart => {
                    assert!(r.quantity < 10 && r.new_part < 30_000)
                }
                _ => {}
            }
        }
    }

    /// Loaded two-node PPS whose node 1 `tamper` changes, checked against a
    /// history of committed order_products taking `units` each.
    fn check_after(units: &[i64], tamper: impl Fn(&NodeStore)) -> InvariantReport {
        use crate::store::StoreLayout;
        let pps = Pps::new(
            &PpsConfig {
                products_per_node: 5,
                parts_per_node: 5,
                suppliers_per_node: 2,
                ..PpsConfig::default()
            },
            2,
        );
        let layout = Arc::new(StoreLayout::new(&pps.tables(), |_| 1));
        let stores: Vec<Arc<NodeStore>> = (0..2)
            .map(|node| {
                let store = NodeStore::new(node, layout.clone());
                pps.load(&store).unwrap();
                Arc::new(store)
            })
            .collect();
        tamper(&stores[1]);
        let mut history = History::new();
        for (i, &note) in units.iter().enumerate() {
            history.push_noted(i as u64 + 1, 0, 0, note, &[], &[]);
        }
        pps.check_invariants(&stores, &history)
    }

    fn add(store: &NodeStore, table: TableId, key: u64, word: u64, amount: i64) {
        let slot = store.lookup(table, key).unwrap();
        let addr = store.layout.table(table).record_addr(slot) + word;
        store
            .region
            .store(addr, (store.region.load(addr) as i64 + amount) as u64);
    }

    #[test]
    fn stock_invariant_catches_lost_and_unrecorded_decrements() {
        assert!(check_after(&[], |_| {}).ok);
        let order = |s: &NodeStore| {
            add(s, PARTS, 6, 0, -3);
            add(s, PARTS, 7, 0, -3);
            add(s, PRODUCTS, 5, 0, 1);
            add(s, PRODUCTS, 5, 1, 6);
        };
        let report = check_after(&[6], order);
        assert!(report.ok, "{:?}", report.details);
        // The decrement of part 7 was lost.
        let lost = check_after(&[6], |s| {
            order(s);
            add(s, PARTS, 7, 0, 3);
        });
        assert!(!lost.ok && lost.details[0].contains("stock taken from parts 3"));
        // Stock taken by an order that never committed.
        assert!(!check_after(&[], order).ok);
        // A mapping row naming a part that does not exist.
        let dangling = check_after(&[], |s| add(s, USES, 55, 0, 1_000));
        assert!(!dangling.ok && dangling.details[0].contains("mapping row 55"));
    }

    #[test]
    fn bad_knobs_are_named() {
        let base = PpsConfig::default();
        let bad = |c: PpsConfig| c.validate().unwrap_err().0;
        assert!(bad(PpsConfig {
            parts_per_product: 0,
            ..base
        })
        .contains("pps.parts_per_product = 0"));
        assert!(bad(PpsConfig {
            local_part_probability: -0.1,
            ..base
        })
        .contains("pps.local_part_probability"));
        assert!(bad(PpsConfig {
            mix: PpsMix::from_weights(&[0; 4]),
            ..base
        })
        .contains("weight 0"));
    }
}
