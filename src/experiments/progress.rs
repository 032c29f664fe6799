//! The progress line of long work on stderr: a bar, runs done of all,
//! elapsed time and the estimated time left, and what runs now.
//!
//! On a terminal the line redraws in place; otherwise (a log file, CI) one
//! line is printed per finished run. The estimate is the mean wall time of
//! the runs finished in this session (resumed runs do not count) times the
//! runs left, divided by the runs in flight at once; before the first run
//! finishes it uses `first_guess_s` per run when the caller knows one.
//!
//! Why hand-written and not `indicatif`: indicatif draws only on a
//! terminal and is silent otherwise, but a sweep run under `nohup`, in CI
//! or with stderr in a file is exactly where a line per finished run (what
//! ran, how many are left, the estimate) is wanted in the log; and its ETA
//! is a rate over the steps of this process, which neither counts runs
//! resumed from an earlier session as done-but-free nor uses the caller's
//! first guess before any run finishes. Keeping those would leave most of
//! this module beside the dependency (and its `console`, `unicode-width`
//! and `portable-atomic`) for a one-line bar; the redraw here is one
//! `\r\x1b[2K` on a terminal.

use std::io::{IsTerminal, Write};
use std::time::Instant;

pub struct Progress {
    total: usize,
    done: usize,
    done_in_session: usize,
    started: Instant,
    first_guess_s: Option<f64>,
    tty: bool,
    enabled: bool,
    drawn: bool,
}

/// `1:05` or `1:02:03`.
pub fn clock(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

impl Progress {
    /// `done` runs of `total` are already finished (a resumed sweep).
    pub fn new(total: usize, done: usize, first_guess_s: Option<f64>, enabled: bool) -> Progress {
        Progress {
            total,
            done,
            done_in_session: 0,
            started: Instant::now(),
            first_guess_s,
            tty: std::io::stderr().is_terminal(),
            enabled,
            drawn: false,
        }
    }

    /// Seconds left, if they can be estimated.
    pub fn eta_s(&self) -> Option<f64> {
        let left = self.total.saturating_sub(self.done) as f64;
        if self.done_in_session > 0 {
            Some(self.started.elapsed().as_secs_f64() / self.done_in_session as f64 * left)
        } else {
            self.first_guess_s.map(|per_run| per_run * left)
        }
    }

    fn line(&self, doing: &str) -> String {
        const WIDTH: usize = 24;
        let fraction = if self.total == 0 {
            1.0
        } else {
            self.done as f64 / self.total as f64
        };
        let filled = ((fraction * WIDTH as f64) as usize).min(WIDTH);
        let eta = self
            .eta_s()
            .map_or_else(|| "?".to_string(), |s| format!("~{}", clock(s)));
        format!(
            "[{}{}] {}/{} runs ({:.0} %) · elapsed {} · left {} · {}",
            "#".repeat(filled),
            ".".repeat(WIDTH - filled),
            self.done,
            self.total,
            100.0 * fraction,
            clock(self.started.elapsed().as_secs_f64()),
            eta,
            doing
        )
    }

    /// A run starts (terminal only: the line shows it).
    pub fn starting(&mut self, doing: &str) {
        if self.enabled && self.tty {
            self.draw(doing);
        }
    }

    /// A run finished.
    pub fn finished(&mut self, did: &str) {
        self.done += 1;
        self.done_in_session += 1;
        if !self.enabled {
            return;
        }
        if self.tty {
            self.draw(did);
        } else {
            eprintln!("{}", self.line(did));
        }
    }

    fn draw(&mut self, doing: &str) {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{}", self.line(doing));
        let _ = err.flush();
        self.drawn = true;
    }

    /// Ends the redrawn line so later output starts on its own line.
    pub fn close(&mut self) {
        if self.drawn {
            eprintln!();
            self.drawn = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_and_line_show_counts_and_time_left() {
        assert_eq!(clock(65.0), "1:05");
        assert_eq!(clock(3723.0), "1:02:03");
        let mut progress = Progress::new(10, 4, Some(2.0), false);
        assert_eq!(progress.eta_s(), Some(12.0));
        progress.finished("x");
        let line = progress.line("protocol=occ");
        assert!(line.contains("5/10 runs (50 %)"), "{line}");
        assert!(line.contains("left ~"), "{line}");
    }
}
