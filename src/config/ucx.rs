//! The `[ucx]` section: how a multi-process run reaches its peers (UCX's
//! transports, local atomics), with its value checks.

use serde::{Deserialize, Serialize};

use super::{check_real, Config, ConfigError, FabricKind};

/// Which transports UCX may use (`UCX_TLS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UcxTransport {
    /// Shared memory between processes of one host (`sm,self`).
    Shm,
    /// TCP sockets (`tcp,self`): the commodity-network baseline.
    Tcp,
    /// InfiniBand/RoCE verbs: RC, UD, DC (`ib,self`).
    Rdma,
    /// UCX's own choice among everything it finds.
    Auto,
}

impl UcxTransport {
    pub fn name(self) -> &'static str {
        match self {
            UcxTransport::Shm => "shm",
            UcxTransport::Tcp => "tcp",
            UcxTransport::Rdma => "rdma",
            UcxTransport::Auto => "auto",
        }
    }

    pub fn parse(text: &str) -> Option<UcxTransport> {
        Some(match text {
            "shm" => UcxTransport::Shm,
            "tcp" => UcxTransport::Tcp,
            "rdma" => UcxTransport::Rdma,
            "auto" => UcxTransport::Auto,
            _ => return None,
        })
    }
}

/// Where a node's own one-sided verbs (its lock CASes among them) execute
/// (DrTM §4.2, DrTM+H §5.2: NIC atomics are not atomic with CPU atomics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LocalAtomics {
    /// Through the node's own NIC (loopback endpoint), like remote verbs.
    Nic,
    /// On the CPU, directly: only where remote atomics are CPU atomics too.
    Cpu,
}

impl LocalAtomics {
    pub fn name(self) -> &'static str {
        match self {
            LocalAtomics::Nic => "nic",
            LocalAtomics::Cpu => "cpu",
        }
    }

    pub fn parse(text: &str) -> Option<LocalAtomics> {
        match text {
            "nic" => Some(LocalAtomics::Nic),
            "cpu" => Some(LocalAtomics::Cpu),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UcxConfig {
    pub transport: UcxTransport,
    pub local_atomics: LocalAtomics,
    /// How long rank 0 waits for every rank to join, seconds.
    pub join_timeout_s: f64,
    /// A rank silent this long (no heartbeat), or not finished this long
    /// after the measured interval, is declared hung, seconds.
    pub stall_timeout_s: f64,
}

impl Default for UcxConfig {
    fn default() -> Self {
        UcxConfig {
            transport: UcxTransport::Auto,
            local_atomics: LocalAtomics::Nic,
            join_timeout_s: 60.0,
            stall_timeout_s: 10.0,
        }
    }
}

impl Config {
    pub(super) fn validate_ucx(&self) -> Result<(), ConfigError> {
        let u = &self.ucx;
        check_real("ucx.join_timeout_s", u.join_timeout_s, 0.1, 3600.0, false)?;
        check_real("ucx.stall_timeout_s", u.stall_timeout_s, 0.5, 3600.0, false)?;
        if self.fabric == FabricKind::Ucx
            && u.local_atomics == LocalAtomics::Cpu
            && !matches!(u.transport, UcxTransport::Shm | UcxTransport::Tcp)
        {
            return Err(ConfigError(format!(
                "ucx.local_atomics = cpu with transport {}: allowed only with shm or tcp, whose remote atomics are CPU atomics; an RDMA NIC's atomics are not atomic with the CPU's (DrTM §4.2), so use local_atomics = nic",
                u.transport.name()
            )));
        }
        if self.fabric == FabricKind::Ucx && !cfg!(feature = "ucx") {
            return Err(ConfigError(UCX_MISSING.into()));
        }
        if self.fabric == FabricKind::Ucx
            && self.protocol == crate::base::ProtocolKind::Calvin
            && self.tolerates_rank_loss()
        {
            // Said here, once, rather than by every rank that starts.
            return Err(ConfigError(
                "protocol calvin does not fail over a lost rank on the ucx fabric: its failover resolves sequenced transactions from every node's scheduler state, which only one process holds (--fabric threads or sim); on ucx run calvin without --fault and --failure-detector (a rank that dies then ends the run with an error), or fail over another protocol".into(),
            ));
        }
        Ok(())
    }
}

/// What a user who asks for the `ucx` fabric in a build without it is told.
pub const UCX_MISSING: &str = "fabric ucx is not in this build of verbena: install UCX (Debian/Ubuntu: `apt-get install libucx-dev ucx-utils`; elsewhere UCX >= 1.13 from https://openucx.org) and rebuild with `cargo build --release --features ucx`";
