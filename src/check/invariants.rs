//! The verdict of a workload's invariants after a run, and of the other
//! final-state checks a run adds to it (every tuple's version, every
//! backup against its primary): `ok` is false once any check failed, and
//! `details` says what was checked and what was wrong.

use serde::Serialize;

/// The verdict of a workload's invariants after a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct InvariantReport {
    pub ok: bool,
    /// What was checked, and every violation found (capped).
    pub details: Vec<String>,
}

impl InvariantReport {
    /// Adds the comparison of every tuple's version with the last
    /// committed write of it (`mismatches`: one line per tuple that
    /// differs, none when all agree); `scope` says which stores were read.
    pub fn add_version_check(&mut self, mismatches: Vec<String>, scope: &str) {
        if mismatches.is_empty() {
            self.details.push(format!(
                "every tuple's version is the one its last committed write installed{scope}"
            ));
        } else {
            self.ok = false;
            self.details.extend(mismatches);
        }
    }
}
