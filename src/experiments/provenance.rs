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

/// `unix_s` (seconds since the Unix epoch) as an ISO 8601 UTC timestamp to
/// the second: `2026-11-28T20:47:06Z`. The civil date from the day count
/// follows Howard Hinnant's `civil_from_days` (proleptic Gregorian, eras
/// of 400 years), so no date crate is needed for one line of a report.
pub fn iso8601_utc(unix_s: f64) -> String {
    let seconds = unix_s.floor() as i64;
    let (days, of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        of_day / 3_600,
        of_day % 3_600 / 60,
        of_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso_8601_in_utc() {
        // The epoch, the example, a leap day, the last second of
        // a day in a century year that is not a leap year, before 1970.
        let cases = [
            (0.0, "1970-01-01T00:00:00Z"),
            (1_795_837_591.0, "2026-11-28T03:46:31Z"),
            (951_782_400.0, "2000-02-29T00:00:00Z"),
            (4_107_542_399.9, "2100-02-28T23:59:59Z"),
            (-1.0, "1969-12-31T23:59:59Z"),
        ];
        for (unix_s, expected) in cases {
            assert_eq!(iso8601_utc(unix_s), expected, "{unix_s}");
        }
    }
}
