//! What the test suites share: running a command with a bound on its
//! time, so that a hang fails the suite instead of stalling it (the
//! multi-process suites), and an RPC request built by hand (the fabrics'
//! message counting).
#![allow(dead_code)]

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use verbena::fabric::Message;

/// Runs `command` to its end, at most `limit`: past it, the command and
/// every process it started (its process group) are killed and the test
/// fails — a hang must fail the suite, not stall it.
pub fn output_within(mut command: Command, limit: Duration) -> Output {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let mut child = command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{command:?} does not start: {e}"));
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-9", "--", &group]).status();
            let _ = child.wait();
            let stderr = String::from_utf8_lossy(&stderr.join().unwrap()).to_string();
            panic!("{command:?} did not end within {limit:?}: it hangs; stderr: {stderr}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// A request from worker 0 of `from` to worker 0 of `to`, `words` long.
pub fn request(from: u16, to: u16, call: u16, words: usize) -> Message {
    Message {
        src_node: from,
        src_worker: 0,
        dst_node: to,
        dst_worker: 0,
        coroutine: 0,
        call,
        kind: 1,
        flags: 0,
        deliver_at_ns: 0,
        payload: vec![call as u64; words],
    }
}
