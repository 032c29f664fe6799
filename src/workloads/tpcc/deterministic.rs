//! TPC-C under deterministic protocols (CALVIN, `engine::calvin`;
//! Deneva §3.4, Calvin §3.2.1): each request as words, and its read/write
//! set before it runs (`Workload::declare_accesses`).
//!
//! * **NewOrder** and **Payment** declare their whole set from the request:
//!   warehouse, district, customer, and per line the item (on the home
//!   node) and the stock (on the supplying warehouse's node). Payment by
//!   last name resolves its customer through the by-name index, which is
//!   read-only after loading, so that set is known too: no reconnaissance
//!   and no restart. The rows they insert (ORDER, NEW-ORDER, ORDER-LINE,
//!   HISTORY) are not declared: their keys come from `D_NEXT_O_ID` and
//!   `D_NEXT_H_ID` of the district row they update, whose exclusive lock
//!   covers every key not yet inserted (see `CalvinExec::insert_access`).
//! * **OrderStatus**, **Delivery** and **StockLevel** find their rows
//!   through data (the customers' last order, the oldest new-orders, the
//!   last 20 orders) and are reconnoitred; a set gone stale by execution
//!   restarts the request (Deneva §3.4). OrderStatus and Delivery also
//!   declare their district rows (read) although the programs never read
//!   them: the ordered indexes they consult change only under those rows'
//!   exclusive locks (NewOrder inserts under its district's), so the
//!   shared lock orders them against every NewOrder of the district and
//!   what they see in the index at execution is a function of the global
//!   order — the replica property CALVIN rests on, which an unlocked range
//!   read would lose. StockLevel reads its district anyway.
//!
//! Words: `[type, w, d, …]` — NewOrder `[0, w, d, c, ol_cnt, line…]` with a
//! line as `item | supply_w << 32 | quantity << 48`; Payment `[1, w, d,
//! c_w, c_d, by_name, customer, amount]`; OrderStatus `[2, w, d, by_name,
//! customer]`; Delivery `[3, w, carrier]`; StockLevel `[4, w, d,
//! threshold]`. Decoding checks every field's range.

use super::txns::resolve_customer;
use super::{
    table, CustomerSel, LineRequest, PaymentRequest, Tpcc, TpccRequest, DISTRICTS, MAX_ORDER_LINES,
};
use crate::workloads::Declared;

/// Most words of an encoded request (a NewOrder with 15 lines).
pub const MAX_REQUEST_WORDS: usize = 5 + MAX_ORDER_LINES;

/// Orders StockLevel examines (§2.8.2.2).
const STOCK_LEVEL_ORDERS: usize = 20;

impl Tpcc {
    /// Most records one request accesses: StockLevel's district, 20
    /// orders, their lines and the distinct items' stock (at most 300, and
    /// at most the items there are).
    pub(super) fn deterministic_max_accesses(&self) -> usize {
        let lines = STOCK_LEVEL_ORDERS * MAX_ORDER_LINES;
        let stock_level = 1 + STOCK_LEVEL_ORDERS + lines + lines.min(self.config.items as usize);
        let delivery = DISTRICTS as usize * (1 + 1 + 1 + MAX_ORDER_LINES + 1);
        let new_order = 3 + 2 * MAX_ORDER_LINES;
        stock_level.max(delivery).max(new_order)
    }

    /// Most records on other nodes than one that writes: a NewOrder's
    /// supplying node receives everything but its own stock rows; every
    /// other transaction writes only on its home node and reads at most a
    /// remote customer (Payment).
    pub(super) fn deterministic_max_forwarded(&self) -> usize {
        3 + 2 * MAX_ORDER_LINES
    }

    pub(super) fn encode(&self, request: &TpccRequest, out: &mut Vec<u64>) {
        let sel = |customer: CustomerSel| match customer {
            CustomerSel::Id(c) => [0, c as u64],
            CustomerSel::LastName(last) => [1, last as u64],
        };
        match *request {
            TpccRequest::NewOrder {
                w,
                d,
                c,
                ol_cnt,
                ref lines,
            } => {
                out.extend_from_slice(&[0, w as u64, d as u64, c as u64, ol_cnt as u64]);
                out.extend(lines[..ol_cnt as usize].iter().map(|l| {
                    l.item as u64 | (l.supply_w as u64) << 32 | (l.quantity as u64) << 48
                }));
            }
            TpccRequest::Payment(p) => {
                out.extend_from_slice(&[1, p.w as u64, p.d as u64, p.c_w as u64, p.c_d as u64]);
                out.extend_from_slice(&sel(p.customer));
                out.push(p.amount_cents as u64);
            }
            TpccRequest::OrderStatus { w, d, customer } => {
                out.extend_from_slice(&[2, w as u64, d as u64]);
                out.extend_from_slice(&sel(customer));
            }
            TpccRequest::Delivery { w, carrier } => {
                out.extend_from_slice(&[3, w as u64, carrier as u64]);
            }
            TpccRequest::StockLevel { w, d, threshold } => {
                out.extend_from_slice(&[4, w as u64, d as u64, threshold as u64]);
            }
        }
    }

    pub(super) fn decode(&self, words: &[u64]) -> Option<TpccRequest> {
        let warehouse = |w: u64| (w < self.warehouses).then_some(w as u32);
        let district = |d: u64| (d < DISTRICTS).then_some(d as u8);
        let customer = |by_name: u64, value: u64| match by_name {
            0 if value < self.customers => Some(CustomerSel::Id(value as u32)),
            1 if value <= u16::MAX as u64 => Some(CustomerSel::LastName(value as u16)),
            _ => None,
        };
        let small = |v: u64| u8::try_from(v).ok();
        match *words.first()? {
            0 => {
                let &[_, w, d, c, ol_cnt, ref lines @ ..] = words else {
                    return None;
                };
                if !(1..=MAX_ORDER_LINES as u64).contains(&ol_cnt)
                    || lines.len() != ol_cnt as usize
                    || c >= self.customers
                {
                    return None;
                }
                let mut decoded = [LineRequest::default(); MAX_ORDER_LINES];
                for (line, &word) in decoded.iter_mut().zip(lines) {
                    let item = word & u32::MAX as u64;
                    if item == 0 || item > self.config.items as u64 + 1 || word >> 56 != 0 {
                        return None;
                    }
                    *line = LineRequest {
                        item: item as u32,
                        supply_w: warehouse((word >> 32) & 0xffff)?,
                        quantity: (word >> 48) as u8,
                    };
                }
                Some(TpccRequest::NewOrder {
                    w: warehouse(w)?,
                    d: district(d)?,
                    c: c as u32,
                    ol_cnt: ol_cnt as u8,
                    lines: decoded,
                })
            }
            1 => {
                let &[_, w, d, c_w, c_d, by_name, value, amount] = words else {
                    return None;
                };
                Some(TpccRequest::Payment(PaymentRequest {
                    w: warehouse(w)?,
                    d: district(d)?,
                    c_w: warehouse(c_w)?,
                    c_d: district(c_d)?,
                    customer: customer(by_name, value)?,
                    amount_cents: u32::try_from(amount).ok()?,
                }))
            }
            2 => {
                let &[_, w, d, by_name, value] = words else {
                    return None;
                };
                Some(TpccRequest::OrderStatus {
                    w: warehouse(w)?,
                    d: district(d)?,
                    customer: customer(by_name, value)?,
                })
            }
            3 => {
                let &[_, w, carrier] = words else {
                    return None;
                };
                Some(TpccRequest::Delivery {
                    w: warehouse(w)?,
                    carrier: small(carrier)?,
                })
            }
            4 => {
                let &[_, w, d, threshold] = words else {
                    return None;
                };
                Some(TpccRequest::StockLevel {
                    w: warehouse(w)?,
                    d: district(d)?,
                    threshold: small(threshold)?,
                })
            }
            _ => None,
        }
    }

    pub(super) fn declare(&self, request: &TpccRequest, out: &mut Vec<Declared>) -> bool {
        let at = |table, node, key, write| Declared {
            table,
            node,
            key,
            write,
        };
        // A read of district `(w, d)`.
        let district_read = |w: u64, d: u64| {
            at(
                table::DISTRICT,
                self.node_of(w),
                Tpcc::district_key(w, d),
                false,
            )
        };
        match *request {
            TpccRequest::NewOrder {
                w,
                d,
                c,
                ol_cnt,
                ref lines,
            } => {
                let (w, d) = (w as u64, d as u64);
                let home = self.node_of(w);
                out.push(at(table::WAREHOUSE, home, w, false));
                out.push(at(table::DISTRICT, home, Tpcc::district_key(w, d), true));
                out.push(at(
                    table::CUSTOMER,
                    home,
                    self.customer_key(w, d, c as u64),
                    false,
                ));
                for line in &lines[..ol_cnt as usize] {
                    let (i, supply_w) = (line.item as u64, line.supply_w as u64);
                    let item = at(table::ITEM, home, Tpcc::item_key(home, i), false);
                    if !out.contains(&item) {
                        out.push(item);
                    }
                    if i > self.config.items as u64 {
                        // The unused id: the program rolls back here.
                        break;
                    }
                    let stock = at(
                        table::STOCK,
                        self.node_of(supply_w),
                        self.stock_key(supply_w, i),
                        true,
                    );
                    if !out.contains(&stock) {
                        out.push(stock);
                    }
                }
                true
            }
            TpccRequest::Payment(PaymentRequest {
                w,
                d,
                c_w,
                c_d,
                customer,
                ..
            }) => {
                let (w, d, c_w, c_d) = (w as u64, d as u64, c_w as u64, c_d as u64);
                let home = self.node_of(w);
                out.push(at(table::WAREHOUSE, home, w, true));
                out.push(at(table::DISTRICT, home, Tpcc::district_key(w, d), true));
                // No customer of that name: the program rolls back after
                // the district.
                if let Some(c) = resolve_customer(self, c_w, c_d, customer) {
                    out.push(at(
                        table::CUSTOMER,
                        self.node_of(c_w),
                        self.customer_key(c_w, c_d, c),
                        true,
                    ));
                }
                true
            }
            TpccRequest::OrderStatus { w, d, .. } => {
                out.push(district_read(w as u64, d as u64));
                false
            }
            TpccRequest::Delivery { w, .. } => {
                out.extend((0..DISTRICTS).map(|d| district_read(w as u64, d)));
                false
            }
            TpccRequest::StockLevel { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::rng::Rng;
    use crate::config::{TpccConfig, TpccMix};
    use crate::store::{NodeStore, StoreLayout};
    use crate::workloads::Workload;
    use std::sync::Arc;

    fn tpcc() -> Tpcc {
        let config = TpccConfig {
            warehouses_per_node: 2,
            items: 200,
            customers_per_district: 30,
            insert_headroom_per_district: 10,
            remote_item_probability: 0.3,
            payment_remote_probability: 0.5,
            invalid_item_probability: 0.1,
            mix: TpccMix::parse("1,1,1,1,1").unwrap(),
            ..TpccConfig::default()
        };
        let tpcc = Tpcc::new(&config, 3, 7);
        // Loading fills the by-name index Payment's set is resolved with.
        let layout = Arc::new(StoreLayout::new(&tpcc.tables(), |_| 1));
        for node in 0..3 {
            tpcc.load(&NodeStore::new(node, layout.clone()))
                .expect("load fits");
        }
        tpcc
    }

    #[test]
    fn every_request_round_trips_through_words() {
        let tpcc = tpcc();
        let mut rng = Rng::new(3);
        let (mut words, mut again) = (Vec::new(), Vec::new());
        for i in 0..2_000 {
            let request = tpcc.generate(&mut rng, (i % 3) as u16);
            words.clear();
            tpcc.encode_request(&request, &mut words);
            assert!(words.len() <= tpcc.max_request_words(), "{request:?}");
            let decoded = tpcc.decode_request(&words).expect("decodes");
            again.clear();
            tpcc.encode_request(&decoded, &mut again);
            assert_eq!(words, again, "{request:?}");
            assert_eq!(tpcc.txn_type(&decoded), tpcc.txn_type(&request));
        }
    }

    #[test]
    fn malformed_words_are_no_request() {
        let tpcc = tpcc();
        for words in [
            &[][..],
            &[9, 0, 0],
            // Warehouse 6 does not exist (3 nodes × 2).
            &[3, 6, 1],
            &[4, 0, 10, 15],
            // 2 lines announced, 1 given.
            &[0, 0, 0, 0, 2, 1 | 1 << 48],
            // Item 0, and a customer past the district's 30.
            &[0, 0, 0, 0, 1, 1 << 48],
            &[2, 0, 0, 0, 30],
            &[1, 0, 0, 0, 0, 2, 0, 100],
        ] {
            assert!(tpcc.decode_request(words).is_none(), "{words:?}");
        }
    }

    #[test]
    fn new_order_and_payment_declare_their_sets_and_others_are_reconnoitred() {
        let tpcc = tpcc();
        let mut rng = Rng::new(5);
        let mut declared = Vec::new();
        let mut seen = [false; 5];
        for _ in 0..2_000 {
            let request = tpcc.generate(&mut rng, 1);
            declared.clear();
            let known = tpcc.declare_accesses(&request, &mut declared);
            seen[tpcc.txn_type(&request)] = true;
            assert!(declared.len() <= tpcc.max_accesses());
            for (i, a) in declared.iter().enumerate() {
                assert!(!declared[..i].contains(a), "declared twice: {a:?}");
                assert!(
                    ![
                        table::ORDER,
                        table::NEW_ORDER,
                        table::ORDER_LINE,
                        table::HISTORY
                    ]
                    .contains(&a.table),
                    "inserted rows are not declared"
                );
            }
            match request {
                TpccRequest::NewOrder { ol_cnt, lines, .. } => {
                    assert!(known);
                    assert!(declared[1].table == table::DISTRICT && declared[1].write);
                    for line in &lines[..ol_cnt as usize] {
                        if line.item > tpcc.config.items {
                            break;
                        }
                        let key = tpcc.stock_key(line.supply_w as u64, line.item as u64);
                        assert!(declared.iter().any(|a| a.table == table::STOCK
                            && a.key == key
                            && a.write
                            && a.node == tpcc.node_of(line.supply_w as u64)));
                    }
                    // What a writer receives fits the forward buffer.
                    for writer in declared.iter().filter(|a| a.write) {
                        let elsewhere = declared.iter().filter(|a| a.node != writer.node).count();
                        assert!(elsewhere <= tpcc.max_forwarded_accesses());
                    }
                }
                TpccRequest::Payment(_) => {
                    assert!(known);
                    assert_eq!(declared.len(), 3, "a loaded customer always resolves");
                    assert!(declared.iter().all(|a| a.write));
                }
                TpccRequest::OrderStatus { .. } => {
                    assert!(!known);
                    assert_eq!(declared.len(), 1, "the district guard");
                    assert!(!declared[0].write);
                }
                TpccRequest::Delivery { .. } => {
                    assert!(!known);
                    assert_eq!(declared.len(), DISTRICTS as usize);
                    assert!(declared
                        .iter()
                        .all(|a| a.table == table::DISTRICT && !a.write));
                }
                TpccRequest::StockLevel { .. } => {
                    assert!(!known);
                    assert!(declared.is_empty());
                }
            }
        }
        assert!(seen.iter().all(|&s| s));
    }
}
