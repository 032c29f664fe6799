//! Network profiles: the latency, bandwidth and op-rate model of a network,
//! shared by the `sim` fabric (which runs on it in virtual time) and by the
//! injected latency of `threads`.
//!
//! A profile gives round-trip times per verb class, a per-byte wire cost and
//! a per-NIC cap on verbs per second. The built-in profiles follow the
//! papers; where a paper gives throughput but no latency in its text, the
//! latency is the usual figure for that hardware generation and the comment
//! says so. A custom profile comes from TOML (`[profile]` with every field,
//! or `verbena run --profile FILE.toml`).
//!
//! Invariants: every field is finite and within the bounds `validate`
//! names; `nic_mops == 0` means no cap; `qp_cache == 0` means the NIC
//! holds every connection (no connection-cache model).
//!
//! # The NIC's connection cache
//!
//! An RDMA NIC keeps the state of its reliable connections (RC queue
//! pairs) in a small on-chip cache; a verb on a connection whose state is
//! not cached waits while the NIC fetches it from host memory over PCIe.
//! One-sided verbs need an RC connection per (thread, remote machine), so
//! the connections a NIC serves grow with the cluster; RPCs over
//! unreliable datagrams (FaSST, DrTM+H §3.1) use a few connectionless QPs
//! per thread and do not. Two fields model it, used by the `sim` fabric
//! only: `qp_cache`, the connections one NIC caches (LRU), and
//! `qp_miss_ns`, what a miss adds to the verb. Published figures:
//!
//! * DrTM+H §4.2 and §6.2 (ConnectX-4 EDR): 5 RC QPs per remote machine and
//!   thread, 960 per NIC, "exceeded the total number of QPs that can be
//!   cached at RNIC"; small one-sided READs then stop scaling (Fig. 5b),
//!   and end to end SmallBank loses 9 % and TPC-C new-order 5 % of their
//!   throughput (Fig. 12) against 192 QPs per NIC, which showed no such
//!   loss. So a ConnectX-4 caches somewhere between about 200 and 960
//!   connections; the paper gives no exact number.
//! * RCC §6.6, Fig. 20 (ConnectX-4 EDR): with QPs chosen round-robin to
//!   emulate clusters of up to 160 nodes, one-sided implementations stay
//!   ahead of RPC ones but the gap closes as the connections grow, which
//!   RCC attributes to "limited NIC capabilities"; it gives no cache size.
//! * FaSST (Kalia et al., OSDI'16) and "Design guidelines for high
//!   performance RDMA systems" (Kalia et al., ATC'16) show the same effect
//!   on ConnectX-3 and Connect-IB: throughput of connected transports falls
//!   once a NIC serves more QPs than its SRAM caches (a few hundred on
//!   ConnectX-3), which is why FaSST uses datagram RPCs; eRPC (Kalia et
//!   al., NSDI'19) estimates a few hundred bytes of NIC state per RC
//!   connection against a few MB of NIC SRAM. We could not consult these
//!   three texts here; the figures are as we recall them, to be read as
//!   orders of magnitude.
//! * The miss cost is a PCIe round trip for the connection context: several
//!   hundred ns on PCIe 3 hosts (an estimate; none of the papers above
//!   states a per-miss time).
//!
//! No shipped profile but `cx4-edr-qp` turns the model on (so the other
//! profiles and every recorded hash stay as they were); it is `cx4-edr` with
//! `qp_cache = 512` (an estimate inside DrTM+H's bounds) and
//! `qp_miss_ns = 500` (an estimate of one PCIe round trip).

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

/// One network's model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkProfile {
    pub name: String,
    /// Round trip of a one-sided READ or WRITE of one word, ns.
    pub onesided_rtt_ns: u64,
    /// Round trip of a CAS or FETCH_AND_ADD, ns.
    pub atomic_rtt_ns: u64,
    /// Round trip of an RPC, excluding the handler's CPU time, ns.
    pub rpc_rtt_ns: u64,
    /// Wire cost of each payload byte, picoseconds (8000 / link Gb/s).
    pub per_byte_ps: u64,
    /// Verbs one NIC processes per µs (million per second); 0 = no cap.
    pub nic_mops: f64,
    /// Reliable connections one NIC caches (LRU); 0 = all of them, no
    /// connection-cache model (`sim` only; see the module doc).
    #[serde(default)]
    pub qp_cache: u32,
    /// What a connection-cache miss adds to a one-sided verb at each NIC
    /// that misses (initiator's, target's), ns.
    #[serde(default)]
    pub qp_miss_ns: u64,
}

/// Names of the built-in profiles, in the order `verbena help` lists them.
pub const BUILTIN_PROFILES: [&str; 7] = [
    "none",
    "cx4-edr",
    "cx4-edr-qp",
    "cx3",
    "roce",
    "tcp-10g",
    "cloud-lan",
];

impl NetworkProfile {
    /// No network cost at all (the `threads` default: real memory speed).
    pub fn none() -> NetworkProfile {
        NetworkProfile {
            name: "none".into(),
            onesided_rtt_ns: 0,
            atomic_rtt_ns: 0,
            rpc_rtt_ns: 0,
            per_byte_ps: 0,
            nic_mops: 0.0,
            qp_cache: 0,
            qp_miss_ns: 0,
        }
    }

    /// A built-in profile by name.
    pub fn builtin(name: &str) -> Option<NetworkProfile> {
        let (onesided_rtt_ns, atomic_rtt_ns, rpc_rtt_ns, per_byte_ps, nic_mops) = match name {
            "none" => return Some(NetworkProfile::none()),
            // `cx4-edr` with its connection cache modeled (module doc).
            "cx4-edr-qp" => {
                return Some(NetworkProfile {
                    name: name.into(),
                    qp_cache: 512,
                    qp_miss_ns: 500,
                    ..NetworkProfile::builtin("cx4-edr")?
                })
            }
            // ConnectX-4 EDR 100 Gb/s InfiniBand, the cluster of RCC §6 and
            // DrTM+H §4. Op rate: DrTM+H §4 (Fig. 5) measures one-sided
            // WRITE peaking at 130 M reqs/s and UD RPC at 79 M; ATOMIC at
            // 48 M (§5.2). Latencies are the usual CX4 figures (about 2 µs
            // for a READ, atomics slower, an RPC a round trip plus polling);
            // the papers plot but do not state them.
            "cx4-edr" => (2_000, 2_500, 3_000, 80, 130.0),
            // ConnectX-3 40 Gb/s (DrTM+H Appendix, Table of clusters, and
            // Fig. 16): one-sided is no faster than two-sided, and atomics
            // block the NIC; its op rate is far below CX4's.
            "cx3" => (3_000, 4_500, 3_000, 200, 35.0),
            // ConnectX-4 100 Gb/s RoCE (DrTM+H Appendix, Fig. 18): the same
            // NIC over Ethernet, a little slower per round trip.
            "roce" => (2_500, 3_000, 3_500, 80, 110.0),
            // Kernel TCP over 10 GbE: no one-sided verbs in hardware, so
            // "one-sided" ones are served by the target's progress engine
            // (UCX over TCP) and cost about an RPC; tens of µs per round
            // trip; a few M messages/s per host.
            "tcp-10g" => (25_000, 25_000, 25_000, 800, 2.0),
            // Deneva §4: EC2 m4.2xlarge, "high" network performance, 1 ms
            // average RTT; about 1 Gb/s.
            "cloud-lan" => (1_000_000, 1_000_000, 1_000_000, 8_000, 0.5),
            _ => return None,
        };
        Some(NetworkProfile {
            name: name.into(),
            onesided_rtt_ns,
            atomic_rtt_ns,
            rpc_rtt_ns,
            per_byte_ps,
            nic_mops,
            qp_cache: 0,
            qp_miss_ns: 0,
        })
    }

    /// A profile by built-in name, or read from a TOML file with every
    /// field (a `.toml` path).
    pub fn resolve(name_or_path: &str) -> Result<NetworkProfile, String> {
        if let Some(profile) = NetworkProfile::builtin(name_or_path) {
            return Ok(profile);
        }
        if name_or_path.ends_with(".toml") {
            let text = std::fs::read_to_string(name_or_path)
                .map_err(|e| format!("cannot read profile file {name_or_path}: {e}"))?;
            let profile: NetworkProfile =
                toml::from_str(&text).map_err(|e| format!("profile file {name_or_path}: {e}"))?;
            profile.validate()?;
            return Ok(profile);
        }
        Err(format!(
            "unknown network profile `{name_or_path}`; allowed: {} or a TOML file (name, onesided_rtt_ns, atomic_rtt_ns, rpc_rtt_ns, per_byte_ps, nic_mops; optional qp_cache, qp_miss_ns)",
            BUILTIN_PROFILES.join(", ")
        ))
    }

    pub fn validate(&self) -> Result<(), String> {
        for (field, value) in [
            ("onesided_rtt_ns", self.onesided_rtt_ns),
            ("atomic_rtt_ns", self.atomic_rtt_ns),
            ("rpc_rtt_ns", self.rpc_rtt_ns),
            ("qp_miss_ns", self.qp_miss_ns),
        ] {
            if value > 1_000_000_000 {
                return Err(format!(
                    "profile {}: {field} = {value} is out of range; allowed: 0..=1000000000 (1 s)",
                    self.name
                ));
            }
        }
        if self.per_byte_ps > 1_000_000 {
            return Err(format!(
                "profile {}: per_byte_ps = {} is out of range; allowed: 0..=1000000",
                self.name, self.per_byte_ps
            ));
        }
        if !self.nic_mops.is_finite() || self.nic_mops < 0.0 || self.nic_mops > 100_000.0 {
            return Err(format!(
                "profile {}: nic_mops = {} is out of range; allowed: 0 (no cap) or up to 100000",
                self.name, self.nic_mops
            ));
        }
        if self.name.is_empty() {
            return Err("a network profile needs a non-empty name".into());
        }
        Ok(())
    }

    /// Wire time of `bytes`, ns (rounded up).
    #[inline]
    pub fn wire_ns(&self, bytes: u64) -> u64 {
        (bytes * self.per_byte_ps).div_ceil(1000)
    }

    /// Time a NIC is busy per verb under the op-rate cap, ns (0: no cap).
    pub fn nic_op_ns(&self) -> u64 {
        if self.nic_mops == 0.0 {
            0
        } else {
            (1000.0 / self.nic_mops).ceil() as u64
        }
    }
}

/// Injected latency of the `threads` fabric, per verb class, in ns (from
/// the run's network profile). Remote verbs only: a node's accesses to
/// itself take no injected latency.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencyConfig {
    /// Round trip of a one-sided READ or WRITE.
    pub onesided_ns: u64,
    /// Round trip of a CAS or FETCH_AND_ADD.
    pub atomic_ns: u64,
    /// Round trip of an RPC, excluding the handler's own (real) CPU time.
    pub rpc_ns: u64,
}

impl Default for NetworkProfile {
    fn default() -> Self {
        NetworkProfile::none()
    }
}

/// A profile in a config file: a built-in's name, or a table of fields.
pub fn deserialize_profile<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<NetworkProfile, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Input {
        Name(String),
        Table(NetworkProfile),
    }
    match Input::deserialize(deserializer)? {
        Input::Name(name) => NetworkProfile::builtin(&name).ok_or_else(|| {
            de::Error::custom(format!(
                "unknown network profile `{name}`; allowed: {} or a table with name, onesided_rtt_ns, atomic_rtt_ns, rpc_rtt_ns, per_byte_ps, nic_mops (optional qp_cache, qp_miss_ns)",
                BUILTIN_PROFILES.join(", ")
            ))
        }),
        Input::Table(profile) => Ok(profile),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_resolves_and_validates() {
        for name in BUILTIN_PROFILES {
            let profile = NetworkProfile::resolve(name).expect(name);
            assert_eq!(profile.name, name);
            profile.validate().expect(name);
        }
        let cx4 = NetworkProfile::builtin("cx4-edr").unwrap();
        assert!(cx4.atomic_rtt_ns > cx4.onesided_rtt_ns);
        assert_eq!(cx4.nic_op_ns(), 8);
        assert_eq!(cx4.wire_ns(64), 6);
        let qp = NetworkProfile::builtin("cx4-edr-qp").unwrap();
        assert_eq!((qp.qp_cache, qp.qp_miss_ns), (512, 500));
        assert_eq!(qp.onesided_rtt_ns, cx4.onesided_rtt_ns);
        for name in BUILTIN_PROFILES.iter().filter(|n| **n != "cx4-edr-qp") {
            assert_eq!(NetworkProfile::builtin(name).unwrap().qp_cache, 0, "{name}");
        }
        let cloud = NetworkProfile::builtin("cloud-lan").unwrap();
        assert_eq!(cloud.rpc_rtt_ns, 1_000_000, "Deneva's 1 ms EC2 RTT");
        let err = NetworkProfile::resolve("infiniband").unwrap_err();
        assert!(
            err.contains("cx4-edr") && err.contains("infiniband"),
            "{err}"
        );
    }
}

#[cfg(test)]
mod qp_field_tests {
    use super::*;

    #[test]
    fn a_profile_file_without_the_connection_cache_fields_still_reads() {
        let text = "name = \"x\"\nonesided_rtt_ns = 1\natomic_rtt_ns = 1\nrpc_rtt_ns = 1\nper_byte_ps = 1\nnic_mops = 1.0\n";
        let profile: NetworkProfile = toml::from_str(text).unwrap();
        assert_eq!((profile.qp_cache, profile.qp_miss_ns), (0, 0));
        let bad = NetworkProfile {
            qp_miss_ns: 2_000_000_000,
            ..profile
        };
        let err = bad.validate().unwrap_err();
        assert!(err.contains("qp_miss_ns"), "{err}");
    }
}
