//! TPC-C's request generator (§2.4.1–2.8.1, §5.2.3): the mix picks the
//! transaction type, each client's home warehouse is one of its node's,
//! and NURand (§2.1.6) picks customers, last names and items, with `A`
//! scaled to a scaled range (the parent's module doc).
//!
//! Invariants: a request is a pure function of the client's generator
//! (and the workload's seed, through the NURand constants); a remote
//! warehouse is never the home one, and with
//! `new_order_always_distributed` every NewOrder has a line supplied
//! from another node.

use super::{
    CustomerSel, LineRequest, PaymentRequest, Tpcc, TpccRequest, DISTRICTS, MAX_ORDER_LINES,
};
use crate::base::rng::Rng;
use crate::fabric::NodeId;

/// NURand's parameters for one field (§2.1.6).
#[derive(Clone, Copy, Debug)]
pub(super) struct NuRand {
    a: u64,
    c: u64,
    low: u64,
    high: u64,
}

impl NuRand {
    /// `A` scaled to the range `[low, high]` (see the module doc).
    pub(super) fn new(spec_a: u64, low: u64, high: u64, c: u64) -> NuRand {
        let n = high - low + 1;
        let scaled = (n / 4).max(1).next_power_of_two() - 1;
        let a = spec_a.min(scaled).max(1);
        NuRand {
            a,
            c: c % (a + 1),
            low,
            high,
        }
    }

    pub(super) fn sample(&self, rng: &mut Rng) -> u64 {
        let x = rng.below(self.a + 1);
        let y = self.low + rng.below(self.high - self.low + 1);
        (((x | y) + self.c) % (self.high - self.low + 1)) + self.low
    }
}

impl Tpcc {
    /// The next request of a client on `node`.
    pub(super) fn generate_request(&self, rng: &mut Rng, node: NodeId) -> TpccRequest {
        let wpn = self.config.warehouses_per_node as u64;
        let w = node as u64 * wpn + rng.below(wpn);
        let mut pick = rng.below(self.weight_sum);
        let mut kind = 0;
        while pick >= self.weights[kind] as u64 {
            pick -= self.weights[kind] as u64;
            kind += 1;
        }
        let d = rng.below(DISTRICTS) as u8;
        match kind {
            0 => self.new_order_request(rng, node, w, d),
            1 => self.payment_request(rng, w, d),
            2 => TpccRequest::OrderStatus {
                w: w as u32,
                d,
                customer: self.customer_sel(rng),
            },
            3 => TpccRequest::Delivery {
                w: w as u32,
                carrier: 1 + rng.below(10) as u8,
            },
            _ => TpccRequest::StockLevel {
                w: w as u32,
                d,
                threshold: 10 + rng.below(11) as u8,
            },
        }
    }

    /// §2.4.1: 5–15 lines, each supplied by a remote warehouse with
    /// `remote_item_probability`; 1 % of orders name an invalid item.
    fn new_order_request(&self, rng: &mut Rng, node: NodeId, w: u64, d: u8) -> TpccRequest {
        let ol_cnt = 5 + rng.below(11) as usize;
        let mut lines = [LineRequest::default(); MAX_ORDER_LINES];
        for line in lines.iter_mut().take(ol_cnt) {
            let remote = self.warehouses > 1 && rng.unit() < self.config.remote_item_probability;
            *line = LineRequest {
                item: self.nurand_item.sample(rng) as u32,
                supply_w: if remote {
                    self.pick_other_warehouse(rng, w) as u32
                } else {
                    w as u32
                },
                quantity: 1 + rng.below(10) as u8,
            };
        }
        if self.config.new_order_always_distributed
            && lines[..ol_cnt]
                .iter()
                .all(|l| self.node_of(l.supply_w as u64) == node)
        {
            let at = rng.below(ol_cnt as u64) as usize;
            lines[at].supply_w = self.pick_remote_node_warehouse(rng, w) as u32;
        }
        if rng.unit() < self.config.invalid_item_probability {
            lines[ol_cnt - 1].item = self.config.items + 1;
        }
        TpccRequest::NewOrder {
            w: w as u32,
            d,
            c: self.nurand_customer.sample(rng) as u32,
            ol_cnt: ol_cnt as u8,
            lines,
        }
    }

    /// §2.5.1: the customer is remote with `payment_remote_probability`.
    fn payment_request(&self, rng: &mut Rng, w: u64, d: u8) -> TpccRequest {
        let remote = self.warehouses > 1 && rng.unit() < self.config.payment_remote_probability;
        let (c_w, c_d) = if remote {
            (
                self.pick_other_warehouse(rng, w),
                rng.below(DISTRICTS) as u8,
            )
        } else {
            (w, d)
        };
        TpccRequest::Payment(PaymentRequest {
            w: w as u32,
            d,
            c_w: c_w as u32,
            c_d,
            customer: self.customer_sel(rng),
            amount_cents: 100 + rng.below(500_000 - 100 + 1) as u32,
        })
    }

    fn pick_other_warehouse(&self, rng: &mut Rng, w: u64) -> u64 {
        let other = rng.below(self.warehouses - 1);
        if other >= w {
            other + 1
        } else {
            other
        }
    }

    /// A warehouse on a node other than `w`'s.
    fn pick_remote_node_warehouse(&self, rng: &mut Rng, w: u64) -> u64 {
        let wpn = self.config.warehouses_per_node as u64;
        let home = w / wpn;
        let mut node = rng.below(self.nodes as u64 - 1);
        if node >= home {
            node += 1;
        }
        node * wpn + rng.below(wpn)
    }

    fn customer_sel(&self, rng: &mut Rng) -> CustomerSel {
        if rng.unit() < self.config.by_last_name_probability {
            CustomerSel::LastName(self.nurand_last_run.sample(rng) as u16)
        } else {
            CustomerSel::Id(self.nurand_customer.sample(rng) as u32)
        }
    }
}
