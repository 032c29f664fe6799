//! What produced a result: the verbena version, the git revision it was
//! built from (embedded by `build.rs`; `unknown` outside a git checkout) and
//! the host it ran on.

use serde::{Deserialize, Serialize};

/// The crate version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// `git rev-parse --short=12 HEAD` at build time, `-dirty` when tracked
/// files had uncommitted changes, `unknown` outside a checkout.
pub const GIT_REVISION: &str = env!("VERBENA_GIT_REVISION");

/// The machine a run ran on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Host {
    pub name: String,
    pub os: String,
    pub arch: String,
    /// Cores available to the process.
    pub cores: usize,
    /// CPU model (Linux: `/proc/cpuinfo`; else `unknown`).
    pub cpu: String,
}

impl Host {
    /// The current machine.
    pub fn current() -> Host {
        let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .or_else(|_| std::fs::read_to_string("/etc/hostname"))
            .map(|s| s.trim().to_string())
            .ok()
            .filter(|s| !s.is_empty())
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| "unknown".into());
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        Host {
            name,
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu,
        }
    }
}

/// Seconds since the Unix epoch, now.
pub fn unix_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
