//! TPC-C population (§4.3.3.1, scaled as the parent module documents) and
//! the consistency conditions checked after a run (§3.3.2).

use std::sync::Arc;

use crate::base::rng::Rng;
use crate::check::History;
use crate::store::{row_live, NodeStore, StoreError, KEY_WORD, ROW_LIVE};
use crate::workloads::InvariantReport;

use super::{col, table, Tpcc, DISTRICTS};

/// Per-row generator tags (a row's generator is `derive(seed, [tag, key])`).
const TAG_ITEM: u64 = 1;
const TAG_WAREHOUSE: u64 = 2;
const TAG_STOCK: u64 = 3;
const TAG_DISTRICT: u64 = 4;
const TAG_CUSTOMER: u64 = 5;
const TAG_ORDER: u64 = 6;

/// Money of the loaded history rows and of C_YTD_PAYMENT: 10.00.
const LOADED_PAYMENT_CENTS: u64 = 1_000;

/// Writes a random a-string (§4.3.2.2: alphanumeric) of `min..=max` bytes
/// into `out`, zero-padded.
pub(super) fn fill_text(rng: &mut Rng, out: &mut [u64], min: usize, max: usize) {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    debug_assert!(max <= out.len() * 8 && min <= max);
    let len = min + rng.below((max - min + 1) as u64) as usize;
    out.fill(0);
    for at in 0..len {
        let byte = CHARS[rng.below(CHARS.len() as u64) as usize] as u64;
        out[at / 8] |= byte << (8 * (at % 8));
    }
}

/// A 26..=50-byte data column; with probability 10 % "ORIGINAL" is written
/// at a random position (§4.3.3.1, I_DATA and S_DATA).
fn fill_data(rng: &mut Rng, out: &mut [u64]) {
    fill_text(rng, out, 26, 50);
    if rng.below(10) == 0 {
        let len = text_len(out);
        let at = rng.below((len - 8 + 1) as u64) as usize;
        for (i, &byte) in b"ORIGINAL".iter().enumerate() {
            let pos = at + i;
            let shift = 8 * (pos % 8);
            out[pos / 8] = (out[pos / 8] & !(0xff << shift)) | ((byte as u64) << shift);
        }
    }
}

fn text_len(words: &[u64]) -> usize {
    let mut len = 0;
    for (i, &word) in words.iter().enumerate() {
        for b in 0..8 {
            if (word >> (8 * b)) & 0xff != 0 {
                len = i * 8 + b + 1;
            }
        }
    }
    len
}

/// Whether a data column contains "ORIGINAL" (NewOrder's brand check).
pub(super) fn contains_original(words: &[u64]) -> bool {
    let mut bytes = [0u8; 64];
    for (i, &word) in words.iter().enumerate().take(8) {
        bytes[i * 8..i * 8 + 8].copy_from_slice(&word.to_le_bytes());
    }
    bytes[..words.len() * 8]
        .windows(8)
        .any(|window| window == b"ORIGINAL")
}

/// Loads the partition of `store.node`: its warehouses and everything under
/// them, its replica of ITEM, and its ordered indexes.
pub(super) fn load_node(tpcc: &Tpcc, store: &NodeStore) -> Result<(), StoreError> {
    let t = &tpcc.config;
    let node = store.node;
    let seed = tpcc.seed;
    let items = t.items as u64;
    let customers = tpcc.customers;
    let row_rng = |tag: u64, key: u64| Rng::derive(seed, &[tag, key]);

    let mut item = vec![0u64; col::I_WORDS as usize];
    for i in 1..=items {
        // Identical on every node: the generator depends on the item only.
        let mut rng = row_rng(TAG_ITEM, i);
        item[col::I_IM_ID] = 1 + rng.below(10_000);
        item[col::I_PRICE] = 100 + rng.below(9_901);
        fill_text(&mut rng, &mut item[col::I_NAME..col::I_DATA], 14, 24);
        fill_data(&mut rng, &mut item[col::I_DATA..col::I_WORDS as usize]);
        store.insert(table::ITEM, Tpcc::item_key(node, i), &item)?;
    }

    let wpn = t.warehouses_per_node as u64;
    let mut warehouse = vec![0u64; col::W_WORDS as usize];
    let mut stock = vec![0u64; col::S_WORDS as usize];
    let mut district = vec![0u64; col::D_WORDS as usize];
    let mut customer = vec![0u64; col::C_WORDS as usize];
    let mut history = vec![0u64; col::H_WORDS as usize];
    let mut order = vec![0u64; col::O_WORDS as usize];
    let mut line = vec![0u64; col::OL_WORDS as usize];
    let mut new_order = vec![0u64; col::NO_WORDS as usize];
    let indexes = tpcc.nodes_indexes(node);
    let delivered = customers - tpcc.initial_new_orders;
    for w in node as u64 * wpn..(node as u64 + 1) * wpn {
        let mut rng = row_rng(TAG_WAREHOUSE, w);
        warehouse[col::W_YTD] = DISTRICTS * customers * LOADED_PAYMENT_CENTS;
        warehouse[col::W_TAX] = rng.below(2_001);
        fill_text(&mut rng, &mut warehouse[col::W_TEXT..], 60, 81);
        store.insert(table::WAREHOUSE, w, &warehouse)?;

        for i in 1..=items {
            let key = tpcc.stock_key(w, i);
            let mut rng = row_rng(TAG_STOCK, key);
            stock.fill(0);
            stock[col::S_QUANTITY] = 10 + rng.below(91);
            for d in 0..DISTRICTS as usize {
                let at = col::S_DIST + d * col::TEXT24_WORDS;
                fill_text(&mut rng, &mut stock[at..at + col::TEXT24_WORDS], 24, 24);
            }
            fill_data(&mut rng, &mut stock[col::S_DATA..col::S_WORDS as usize]);
            store.insert(table::STOCK, key, &stock)?;
        }

        for d in 0..DISTRICTS {
            let dkey = Tpcc::district_key(w, d);
            let mut rng = row_rng(TAG_DISTRICT, dkey);
            district[col::D_YTD] = customers * LOADED_PAYMENT_CENTS;
            district[col::D_TAX] = rng.below(2_001);
            district[col::D_NEXT_O_ID] = customers + 1;
            district[col::D_NEXT_H_ID] = customers + 1;
            fill_text(&mut rng, &mut district[col::D_TEXT..], 60, 81);
            store.insert(table::DISTRICT, dkey, &district)?;

            let mut names: Vec<(u64, [u64; 2], u64)> = Vec::with_capacity(customers as usize);
            for c in 0..customers {
                let ckey = tpcc.customer_key(w, d, c);
                let mut rng = row_rng(TAG_CUSTOMER, ckey);
                customer.fill(0);
                customer[col::C_BALANCE] = (-(LOADED_PAYMENT_CENTS as i64)) as u64;
                customer[col::C_YTD_PAYMENT] = LOADED_PAYMENT_CENTS;
                customer[col::C_PAYMENT_CNT] = 1;
                customer[col::C_DISCOUNT] = rng.below(5_001);
                customer[col::C_CREDIT] = (rng.below(10) == 0) as u64;
                customer[col::C_CREDIT_LIM] = 5_000_000;
                // §4.3.3.1: the first 1,000 customers take every name once.
                let last = if c < 1000 {
                    c
                } else {
                    tpcc.nurand_last_load.sample(&mut rng)
                };
                customer[col::C_LAST] = last;
                fill_text(&mut rng, &mut customer[col::C_FIRST..col::C_SINCE], 8, 16);
                customer[col::C_SINCE] = 1;
                fill_text(&mut rng, &mut customer[col::C_TEXT..col::C_DATA], 70, 89);
                fill_text(
                    &mut rng,
                    &mut customer[col::C_DATA..col::C_DATA + col::C_DATA_WORDS],
                    300,
                    500,
                );
                store.insert(table::CUSTOMER, ckey, &customer)?;
                names.push((
                    last,
                    [
                        customer[col::C_FIRST].swap_bytes(),
                        customer[col::C_FIRST + 1].swap_bytes(),
                    ],
                    c,
                ));

                history.fill(0);
                history[0] = ROW_LIVE;
                history[col::H_C_ID] = c;
                history[col::H_C_D_ID] = d;
                history[col::H_C_W_ID] = w;
                history[col::H_D_ID] = d;
                history[col::H_W_ID] = w;
                history[col::H_DATE] = 1;
                history[col::H_AMOUNT] = LOADED_PAYMENT_CENTS;
                fill_text(&mut rng, &mut history[col::H_DATA..], 12, 24);
                store.insert(table::HISTORY, Tpcc::history_key(w, d, c + 1), &history)?;
            }
            // By (last name, first name bytes in order, id): byte-swapped
            // little-endian words compare as the strings do.
            names.sort_unstable();
            let mut rank = 0;
            for (i, &(last, _, c)) in names.iter().enumerate() {
                rank = if i > 0 && names[i - 1].0 == last {
                    rank + 1
                } else {
                    0
                };
                tpcc.by_name.insert(Tpcc::by_name_key(w, d, last, rank), c);
            }

            // Orders: O_C_ID a random permutation of the customers.
            let mut order_rng = row_rng(TAG_ORDER, dkey);
            let mut permutation: Vec<u64> = (0..customers).collect();
            for i in (1..permutation.len()).rev() {
                let j = order_rng.below(i as u64 + 1) as usize;
                permutation.swap(i, j);
            }
            for o in 1..=customers {
                let okey = Tpcc::order_key(w, d, o);
                let c = permutation[o as usize - 1];
                let ol_cnt = 5 + order_rng.below(11);
                let is_delivered = o <= delivered;
                order.fill(0);
                order[0] = ROW_LIVE;
                order[col::O_ID] = o;
                order[col::O_C_ID] = c;
                order[col::O_D_ID] = d;
                order[col::O_W_ID] = w;
                order[col::O_ENTRY_D] = 1;
                order[col::O_CARRIER_ID] = if is_delivered {
                    1 + order_rng.below(10)
                } else {
                    0
                };
                order[col::O_OL_CNT] = ol_cnt;
                order[col::O_ALL_LOCAL] = 1;
                store.insert(table::ORDER, okey, &order)?;
                indexes
                    .orders_by_customer
                    .insert(tpcc.order_by_customer_key(w, d, c, o), 0);
                for ol in 1..=ol_cnt {
                    line.fill(0);
                    line[0] = ROW_LIVE;
                    line[col::OL_O_ID] = o;
                    line[col::OL_D_ID] = d;
                    line[col::OL_W_ID] = w;
                    line[col::OL_NUMBER] = ol;
                    line[col::OL_I_ID] = 1 + order_rng.below(items);
                    line[col::OL_SUPPLY_W_ID] = w;
                    line[col::OL_DELIVERY_D] = is_delivered as u64;
                    line[col::OL_QUANTITY] = 5;
                    line[col::OL_AMOUNT] = if is_delivered {
                        0
                    } else {
                        1 + order_rng.below(999_999)
                    };
                    fill_text(&mut order_rng, &mut line[col::OL_DIST_INFO..], 24, 24);
                    store.insert(table::ORDER_LINE, Tpcc::order_line_key(okey, ol), &line)?;
                }
                if !is_delivered {
                    new_order.fill(0);
                    new_order[0] = ROW_LIVE;
                    new_order[col::NO_O_ID] = o;
                    new_order[col::NO_D_ID] = d;
                    new_order[col::NO_W_ID] = w;
                    store.insert(table::NEW_ORDER, okey, &new_order)?;
                    indexes.new_orders.insert(okey, 0);
                }
            }
        }
    }
    Ok(())
}

/// Per-district tallies of the consistency check.
#[derive(Clone, Copy, Default)]
struct DistrictTally {
    ytd: u64,
    next_o_id: u64,
    max_o_id: u64,
    orders: u64,
    ol_cnt_sum: u64,
    order_lines: u64,
    new_orders: u64,
    min_no: u64,
    max_no: u64,
    history_amount: u64,
}

/// The consistency conditions of §3.3.2 (1–4 and 8) on the quiescent
/// store, and each node's ordered indexes against its live rows.
pub(super) fn check_consistency(
    tpcc: &Tpcc,
    stores: &[Arc<NodeStore>],
    _history: &History,
) -> InvariantReport {
    let warehouses = tpcc.warehouses as usize;
    let mut w_ytd = vec![0u64; warehouses];
    let mut districts = vec![
        DistrictTally {
            min_no: u64::MAX,
            ..DistrictTally::default()
        };
        warehouses * DISTRICTS as usize
    ];
    let mut problems: Vec<String> = Vec::new();
    let mut violations = 0u64;
    let mut note = |text: String| {
        violations += 1;
        if problems.len() < 20 {
            problems.push(text);
        }
    };
    let mut record = Vec::new();
    let dindex = |w: u64, d: u64| Tpcc::district_key(w, d) as usize;
    for store in stores {
        let mut live_new_orders = 0usize;
        let mut live_orders = 0usize;
        let indexes = tpcc.nodes_indexes(store.node);
        for table_id in [
            table::WAREHOUSE,
            table::DISTRICT,
            table::HISTORY,
            table::NEW_ORDER,
            table::ORDER,
            table::ORDER_LINE,
        ] {
            let layout = store.layout.table(table_id);
            for slot in 0..store.rows(table_id) {
                let key = store.region.load(layout.tuple_addr(slot) + KEY_WORD as u64);
                store.record(table_id, slot, &mut record);
                let r = &record;
                match table_id {
                    table::WAREHOUSE => w_ytd[key as usize] = r[col::W_YTD],
                    table::DISTRICT => {
                        let tally = &mut districts[key as usize];
                        tally.ytd = r[col::D_YTD];
                        tally.next_o_id = r[col::D_NEXT_O_ID];
                    }
                    _ if !row_live(r) => {}
                    table::HISTORY => {
                        districts[dindex(r[col::H_W_ID], r[col::H_D_ID])].history_amount +=
                            r[col::H_AMOUNT];
                    }
                    table::NEW_ORDER => {
                        live_new_orders += 1;
                        if indexes.new_orders.get(key).is_none() {
                            note(format!(
                                "node {}: live new-order {key} is missing from the new-order index",
                                store.node
                            ));
                        }
                        let tally = &mut districts[dindex(r[col::NO_W_ID], r[col::NO_D_ID])];
                        let o = r[col::NO_O_ID];
                        tally.new_orders += 1;
                        tally.min_no = tally.min_no.min(o);
                        tally.max_no = tally.max_no.max(o);
                    }
                    table::ORDER => {
                        live_orders += 1;
                        let tally = &mut districts[dindex(r[col::O_W_ID], r[col::O_D_ID])];
                        tally.orders += 1;
                        tally.max_o_id = tally.max_o_id.max(r[col::O_ID]);
                        tally.ol_cnt_sum += r[col::O_OL_CNT];
                    }
                    table::ORDER_LINE => {
                        districts[dindex(r[col::OL_W_ID], r[col::OL_D_ID])].order_lines += 1;
                    }
                    _ => unreachable!(),
                }
            }
        }
        if indexes.new_orders.len() != live_new_orders {
            note(format!(
                "node {}: the new-order index holds {} entries but {} new-order rows are live",
                store.node,
                indexes.new_orders.len(),
                live_new_orders
            ));
        }
        if indexes.orders_by_customer.len() != live_orders {
            note(format!(
                "node {}: the orders-by-customer index holds {} entries but {} order rows are live",
                store.node,
                indexes.orders_by_customer.len(),
                live_orders
            ));
        }
    }
    let mut delivered_out = 0;
    for w in 0..warehouses as u64 {
        let tallies = &districts[dindex(w, 0)..dindex(w, DISTRICTS)];
        let d_sum: u64 = tallies.iter().map(|t| t.ytd).sum();
        if w_ytd[w as usize] != d_sum {
            note(format!(
                "condition 1: warehouse {w}: W_YTD {} != Σ D_YTD {d_sum}",
                w_ytd[w as usize]
            ));
        }
        let h_sum: u64 = tallies.iter().map(|t| t.history_amount).sum();
        if w_ytd[w as usize] != h_sum {
            note(format!(
                "condition 8: warehouse {w}: W_YTD {} != Σ H_AMOUNT {h_sum}",
                w_ytd[w as usize]
            ));
        }
        for (d, t) in tallies.iter().enumerate() {
            if t.next_o_id - 1 != t.max_o_id {
                note(format!(
                    "condition 2: warehouse {w} district {d}: D_NEXT_O_ID − 1 = {} but max(O_ID) = {}",
                    t.next_o_id - 1,
                    t.max_o_id
                ));
            }
            if t.new_orders == 0 {
                // Every order delivered: conditions 2 and 3 say nothing
                // about NEW-ORDER.
                delivered_out += 1;
                continue;
            }
            if t.max_no != t.max_o_id {
                note(format!(
                    "condition 2: warehouse {w} district {d}: max(NO_O_ID) = {} but max(O_ID) = {}",
                    t.max_no, t.max_o_id
                ));
            }
            if t.max_no - t.min_no + 1 != t.new_orders {
                note(format!(
                    "condition 3: warehouse {w} district {d}: max(NO_O_ID) − min(NO_O_ID) + 1 = {} but {} new-order rows",
                    t.max_no - t.min_no + 1,
                    t.new_orders
                ));
            }
            if t.ol_cnt_sum != t.order_lines {
                note(format!(
                    "condition 4: warehouse {w} district {d}: Σ O_OL_CNT = {} but {} order lines",
                    t.ol_cnt_sum, t.order_lines
                ));
            }
        }
    }
    let orders: u64 = districts.iter().map(|t| t.orders).sum();
    let new_orders: u64 = districts.iter().map(|t| t.new_orders).sum();
    let mut report = InvariantReport {
        ok: violations == 0,
        details: problems,
    };
    if violations > report.details.len() as u64 {
        report
            .details
            .push(format!("{violations} violations in all"));
    }
    if report.ok {
        report.details.push(format!(
            "TPC-C consistency conditions 1-4 and 8 hold in all {} districts ({orders} orders, {new_orders} undelivered{}); the ordered indexes match the live rows",
            districts.len(),
            if delivered_out > 0 {
                format!(", {delivered_out} districts fully delivered")
            } else {
                String::new()
            }
        ));
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn original_is_found_only_where_written() {
        let mut rng = Rng::new(5);
        let (mut with, mut without) = (0, 0);
        for _ in 0..2_000 {
            let mut words = [0u64; col::DATA_WORDS];
            fill_data(&mut rng, &mut words);
            let len = text_len(&words);
            assert!((26..=50).contains(&len), "{len}");
            if contains_original(&words) {
                with += 1;
            } else {
                without += 1;
            }
        }
        // 10 % by the specification (random strings almost never hold it).
        assert!((140..=260).contains(&with), "{with} of {}", with + without);
    }
}
