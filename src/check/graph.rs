//! Dependency graph and cycle search. (Being written.)

use serde::Serialize;

use super::history::History;

#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    pub serializable: bool,
    pub txn_count: usize,
    pub edge_count: usize,
    pub cycle: Option<Vec<u64>>,
    pub anomalies: Vec<String>,
}

pub fn check_serializable(history: &History) -> CheckReport {
    let _ = history;
    unimplemented!()
}
