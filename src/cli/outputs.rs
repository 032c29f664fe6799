//! Output paths are checked before a run starts, so a long run is not lost
//! to a typo in a path at its end: every path a command will write is
//! proven creatable first, and a bad one is a usage error (exit 2) that
//! names the flag and the path.
//!
//! Invariants: a check leaves no trace — a file that did not exist is
//! removed again, an existing one is opened for appending and left as it is
//! (never truncated); a directory is not created, only its nearest existing
//! ancestor is proven writable. `-` (stdout) is always fine.

use std::path::Path;

use super::args::Outputs;
use super::{usage, CliError};

impl Outputs {
    /// Checks every output path of a run; a new output flag adds its line.
    pub fn check(&self) -> Result<(), CliError> {
        if let Some(path) = &self.json {
            check_output_path("--json", path)?;
        }
        if let Some(path) = &self.history {
            check_output_path("--history", path)?;
        }
        if let Some(path) = &self.latency_log {
            check_output_path("--latency-log", path)?;
        }
        Ok(())
    }
}

/// Proves that the file `path` (given as `flag`) can be written.
pub fn check_output_path(flag: &str, path: &str) -> Result<(), CliError> {
    if path == "-" {
        return Ok(());
    }
    let file = Path::new(path);
    if file.is_dir() {
        return Err(usage(format!(
            "{flag} {path}: is a directory; give a file path"
        )));
    }
    let existed = file.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(file)
        .map_err(|e| usage(format!("{flag} {path}: cannot create this file: {e}")))?;
    if !existed {
        let _ = std::fs::remove_file(file);
    }
    Ok(())
}

/// Proves that the directory `dir` (given as `flag`) exists and is
/// writable, or can be created: its nearest existing ancestor must be a
/// writable directory (a probe file is created there and removed).
pub fn check_output_dir(flag: &str, dir: &Path) -> Result<(), CliError> {
    let shown = dir.display();
    let mut existing = dir;
    loop {
        if existing.as_os_str().is_empty() {
            existing = Path::new(".");
        }
        if existing.exists() {
            break;
        }
        existing = match existing.parent() {
            Some(parent) => parent,
            None => Path::new("."),
        };
    }
    if !existing.is_dir() {
        let what = if existing == dir {
            "is a file, not a directory".to_string()
        } else {
            format!("{} is a file, not a directory", existing.display())
        };
        return Err(usage(format!("{flag} {shown}: {what}")));
    }
    let probe = existing.join(format!(".verbena-probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| {
            usage(format!(
                "{flag} {shown}: cannot write in {}: {e}",
                existing.display()
            ))
        })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}
