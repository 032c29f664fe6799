//! `verbena fabric-bench --link socket`: the RPC rate of a transport of
//! our own over TCP, to compare with UCX's TCP transport under the same
//! load (`fabric-bench --transport tcp --op rpc`, docs/PERFORMANCE.md).
//!
//! The transport is the least a TCP transport for verbena's RPCs needs,
//! written for speed: one non-blocking socket per peer (`TCP_NODELAY`),
//! and everything queued for the peer within one turn of the event loop
//! sent with one `write` at the start of the next turn — the coalescing
//! the `ucx` fabric does into one active message. A frame is
//! `[words: u32, slot: u32]` and `words` payload words, as the `ucx`
//! fabric's frames are a header and the payload. Receiving is one `read`
//! per turn into a buffer, split into whole frames. Nothing blocks: an idle
//! turn costs one `read` that finds nothing (UCX's idle progress costs an
//! `epoll_wait`).
//!
//! What it does not do — and what the `ucx` fabric does — is why the
//! comparison is of RPCs alone: no one-sided verbs (over TCP the `ucx`
//! fabric runs them as its own messages anyway), no shared memory or RDMA,
//! no peer-failure reports, no bootstrap. Rank 1 keeps `window` RPCs of
//! `bytes` in flight to rank 0, which answers each from its loop with the
//! request's payload, as `fabric_bench` does through the `Endpoint`.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Frame header: payload words, then the slot (the RPC's id).
const HEADER_BYTES: usize = 8;
/// The slot of rank 1's last frame: `[ops, seconds as f64 bits]`.
const RESULT_SLOT: u32 = u32::MAX;
const WARMUP: Duration = Duration::from_millis(300);

/// One peer's socket with its send and receive buffers.
struct SocketLink {
    stream: TcpStream,
    /// Frames queued this turn, sent together at the next flush.
    outbox: Vec<u8>,
    /// Bytes of `outbox` already written (a short write keeps the rest).
    sent: usize,
    inbox: Vec<u8>,
    /// Bytes of `inbox` already parsed into frames.
    parsed: usize,
    /// What one `read` takes in, before it joins `inbox`.
    read_buffer: Box<[u8]>,
}

impl SocketLink {
    fn new(stream: TcpStream) -> Result<SocketLink, String> {
        stream
            .set_nodelay(true)
            .and_then(|_| stream.set_nonblocking(true))
            .map_err(|e| format!("configuring the socket: {e}"))?;
        Ok(SocketLink {
            stream,
            outbox: Vec::with_capacity(1 << 16),
            sent: 0,
            inbox: Vec::with_capacity(1 << 16),
            parsed: 0,
            read_buffer: vec![0; 1 << 16].into_boxed_slice(),
        })
    }

    fn queue(&mut self, slot: u32, payload: &[u64]) {
        self.outbox
            .extend_from_slice(&(payload.len() as u32).to_le_bytes());
        self.outbox.extend_from_slice(&slot.to_le_bytes());
        for word in payload {
            self.outbox.extend_from_slice(&word.to_le_bytes());
        }
    }

    /// Writes what is queued: one `write` unless the kernel takes less.
    fn flush(&mut self) -> Result<(), String> {
        while self.sent < self.outbox.len() {
            match self.stream.write(&self.outbox[self.sent..]) {
                Ok(0) => return Err("the peer closed the connection".into()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("writing to the peer: {e}")),
            }
        }
        self.outbox.clear();
        self.sent = 0;
        Ok(())
    }

    /// Flushes, then reads what arrived and calls `on_frame` for each
    /// whole frame, in order.
    fn turn(&mut self, mut on_frame: impl FnMut(u32, &[u64])) -> Result<(), String> {
        self.flush()?;
        let read = match self.stream.read(&mut self.read_buffer) {
            Ok(0) => return Err("the peer closed the connection".into()),
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => 0,
            Err(e) => return Err(format!("reading from the peer: {e}")),
        };
        self.inbox.extend_from_slice(&self.read_buffer[..read]);
        let mut payload = Vec::new();
        while self.inbox.len() - self.parsed >= HEADER_BYTES {
            let at = self.parsed;
            let words = u32::from_le_bytes(self.inbox[at..at + 4].try_into().expect("4")) as usize;
            let slot = u32::from_le_bytes(self.inbox[at + 4..at + 8].try_into().expect("4"));
            let end = at + HEADER_BYTES + words * 8;
            if self.inbox.len() < end {
                break;
            }
            payload.clear();
            payload.extend(
                self.inbox[at + HEADER_BYTES..end]
                    .chunks_exact(8)
                    .map(|b| u64::from_le_bytes(b.try_into().expect("8"))),
            );
            self.parsed = end;
            on_frame(slot, &payload);
        }
        if self.parsed == self.inbox.len() {
            self.inbox.clear();
            self.parsed = 0;
        } else if self.parsed > 1 << 20 {
            self.inbox.drain(..self.parsed);
            self.parsed = 0;
        }
        Ok(())
    }
}

/// Runs rank `rank` of the socket bench on `address` (rank 0 listens
/// there); rank 0 returns the result line.
pub fn run_rank(
    rank: u32,
    address: &str,
    window: u32,
    bytes: u32,
    seconds: f64,
) -> Result<Option<String>, String> {
    let words = (bytes / 8).max(1) as usize;
    if rank == 0 {
        let listener =
            TcpListener::bind(address).map_err(|e| format!("listening on {address}: {e}"))?;
        let (stream, _) = listener
            .accept()
            .map_err(|e| format!("accepting rank 1: {e}"))?;
        let mut link = SocketLink::new(stream)?;
        let mut answers: Vec<(u32, Vec<u64>)> = Vec::new();
        let mut result = None;
        while result.is_none() {
            link.turn(|slot, payload| {
                if slot == RESULT_SLOT {
                    result = Some((payload[0], f64::from_bits(payload[1])));
                } else {
                    answers.push((slot, payload.to_vec()));
                }
            })?;
            for (slot, payload) in answers.drain(..) {
                link.queue(slot, &payload);
            }
        }
        let (ops, measured_s) = result.expect("the loop ends with it");
        return Ok(Some(format!(
            "fabric-bench: rpc {bytes} B over socket (own TCP transport), window {window}: {:.0} ops/s ({ops} ops in {measured_s:.2} s)",
            ops as f64 / measured_s
        )));
    }
    let connect_by = Instant::now() + Duration::from_secs(10);
    let stream = loop {
        match TcpStream::connect(address) {
            Ok(stream) => break stream,
            Err(e) if Instant::now() >= connect_by => {
                return Err(format!("connecting to rank 0 at {address}: {e}"))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    let mut link = SocketLink::new(stream)?;
    let request = vec![3u64; words];
    let mut busy = vec![false; window as usize];
    let start = Instant::now();
    let measure_from = start + WARMUP;
    let end = measure_from + Duration::from_secs_f64(seconds);
    let (mut ops, mut measuring, mut measured_start, mut turns) = (0u64, false, measure_from, 0u64);
    loop {
        // As in `fabric_bench`: the clock every 64 turns.
        if turns % 64 == 0 {
            let now = Instant::now();
            if !measuring && now >= measure_from {
                (measuring, measured_start, ops) = (true, now, 0);
            }
            if now >= end {
                let measured_s = now.duration_since(measured_start).as_secs_f64();
                link.queue(RESULT_SLOT, &[ops, measured_s.to_bits()]);
                while !link.outbox.is_empty() {
                    link.flush()?;
                }
                // Rank 0 closes once it has the result.
                let _ = link.stream.set_nonblocking(false);
                let _ = link.stream.read(&mut [0u8; 8]);
                return Ok(None);
            }
        }
        for (slot, busy) in busy.iter_mut().enumerate() {
            if !*busy {
                link.queue(slot as u32, &request);
                *busy = true;
            }
        }
        link.turn(|slot, _| {
            busy[slot as usize] = false;
            ops += 1;
        })?;
        turns += 1;
    }
}
