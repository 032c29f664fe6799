//! `verbena fabric-bench`: the raw rate of one verb type through the `ucx`
//! fabric, between two processes, for comparison with `ucx_perftest` on the
//! same transport and size (docs/PERFORMANCE.md).
//!
//! Rank 1 keeps `window` operations in flight against rank 0 through the
//! very `Endpoint` the engine uses (staging buffers, flush-based ordering,
//! completion messages), counting completions over the measured seconds
//! after a warm-up; rank 0 only progresses its worker and, for `rpc`,
//! answers each request from its event loop with the request's own buffer
//! (what an RPC handler costs beyond the protocol's work). Each slot of the
//! window targets words of its own, so no verb waits on another's ordering.

use std::time::{Duration, Instant};

use super::bootstrap::{hostname, Bootstrap, BootstrapOptions, RankInfo};
use super::wire::{Dec, Enc, Kind};
use crate::config::UcxTransport;
use crate::fabric::ucx::{PeerInfo, TransportChoice, UcxContext, UcxEndpoint, UcxWorkerHost};
use crate::fabric::verbs::{MSG_COMPLETION, MSG_REPLY};
use crate::fabric::{Endpoint, Message, Posted, Verb, VerbKind};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchOp {
    Read,
    Write,
    Cas,
    Faa,
    Rpc,
}

impl BenchOp {
    pub fn parse(text: &str) -> Option<BenchOp> {
        Some(match text {
            "read" => BenchOp::Read,
            "write" => BenchOp::Write,
            "cas" => BenchOp::Cas,
            "faa" => BenchOp::Faa,
            "rpc" => BenchOp::Rpc,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            BenchOp::Read => "read",
            BenchOp::Write => "write",
            BenchOp::Cas => "cas",
            BenchOp::Faa => "faa",
            BenchOp::Rpc => "rpc",
        }
    }
}

#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub transport: UcxTransport,
    pub op: BenchOp,
    /// Operations kept in flight.
    pub window: u32,
    /// Payload of READ/WRITE/RPC, bytes (a multiple of 8).
    pub bytes: u32,
    pub seconds: f64,
}

const WARMUP: Duration = Duration::from_millis(300);

fn choice(transport: UcxTransport) -> TransportChoice {
    match transport {
        UcxTransport::Shm => TransportChoice::Shm,
        UcxTransport::Tcp => TransportChoice::Tcp,
        UcxTransport::Rdma => TransportChoice::Rdma,
        UcxTransport::Auto => TransportChoice::Auto,
    }
}

/// Runs rank `rank` (0 serves, 1 measures); rank 0 returns the result line.
pub fn run_rank(
    options: &BenchOptions,
    rank: u32,
    address: &str,
) -> Result<Option<String>, String> {
    let words = (options.bytes / 8).max(1) as u64;
    let region_words = words * options.window as u64 + 8;
    let context = UcxContext::new(choice(options.transport), region_words, 2)?;
    let host = UcxWorkerHost::new(&context, rank as u16, 0)?;
    let digest = super::wire::digest(format!("{options:?}").as_bytes());
    let mine = RankInfo {
        rank,
        host: hostname(),
        pid: std::process::id(),
        region_words,
        base_address: context.base_address(),
        rkey: context.rkey().to_vec(),
        workers: vec![host.address().to_vec()],
    };
    let mut boot = Bootstrap::join(
        &BootstrapOptions {
            rank,
            nodes: 2,
            address: address.to_string(),
            join_timeout: Duration::from_secs(30),
            stall_timeout: Duration::from_secs(10),
            digest,
            // Both ranks are this command's own children on a port it
            // just found free: nothing else to keep out.
            key: None,
            job: String::new(),
        },
        mine,
    )?;
    let peers: Vec<PeerInfo> = boot
        .ranks
        .iter()
        .map(|info| PeerInfo {
            worker_address: info.workers[0].clone(),
            rkey: info.rkey.clone(),
            base_address: info.base_address,
        })
        .collect();
    let mut endpoint = host.connect(&context, &peers, false)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    if rank == 0 {
        boot.gather(Kind::Ready, deadline, "connect")?;
        boot.send(Kind::Go, &[])?;
        serve(&mut endpoint, &mut boot, options)
    } else {
        boot.send(Kind::Ready, &[1])?;
        boot.gather(Kind::Go, deadline, "start")?;
        let (ops, seconds) = measure(&mut endpoint, options, &mut boot)?;
        let mut enc = Enc::default();
        enc.u64(ops).u64(seconds.to_bits());
        enc.str(&endpoint.transports_to(0).join(","));
        boot.send(Kind::Result, &enc.bytes)?;
        boot.linger(Duration::from_secs(10));
        Ok(None)
    }
}

fn serve(
    endpoint: &mut UcxEndpoint,
    boot: &mut Bootstrap,
    options: &BenchOptions,
) -> Result<Option<String>, String> {
    let mut inbox: Vec<Message> = Vec::with_capacity(64);
    let mut turns = 0u64;
    loop {
        endpoint.receive(&mut inbox);
        for mut msg in inbox.drain(..) {
            if msg.flags & (MSG_REPLY | MSG_COMPLETION) == 0 {
                std::mem::swap(&mut msg.src_node, &mut msg.dst_node);
                std::mem::swap(&mut msg.src_worker, &mut msg.dst_worker);
                msg.flags |= MSG_REPLY;
                endpoint.send(msg);
            }
        }
        turns += 1;
        if turns % 1024 == 0 {
            if let Some((_, frame)) = boot.next(Duration::ZERO)? {
                if frame.kind == Kind::Result {
                    boot.mark_finished(1);
                    let mut dec = Dec::new(&frame.body);
                    let ops = dec.u64("ops")?;
                    let seconds = f64::from_bits(dec.u64("seconds")?);
                    let transports = dec.str("transports")?;
                    return Ok(Some(format!(
                        "fabric-bench: {} {} B over {} ({}), window {}: {:.0} ops/s ({} ops in {:.2} s)",
                        options.op.name(),
                        if matches!(options.op, BenchOp::Cas | BenchOp::Faa) {
                            8
                        } else {
                            options.bytes
                        },
                        options.transport.name(),
                        transports,
                        options.window,
                        ops as f64 / seconds,
                        ops,
                        seconds
                    )));
                }
            }
        }
    }
}

fn measure(
    endpoint: &mut UcxEndpoint,
    options: &BenchOptions,
    boot: &mut Bootstrap,
) -> Result<(u64, f64), String> {
    let window = options.window as usize;
    let words = (options.bytes / 8).max(1);
    let write_data = vec![7u64; words as usize];
    let mut results: Vec<Vec<u64>> = (0..window).map(|_| vec![0u64; words as usize]).collect();
    let mut busy = vec![false; window];
    let mut inbox: Vec<Message> = Vec::with_capacity(64);
    let start = Instant::now();
    let measure_from = start + WARMUP;
    let end = measure_from + Duration::from_secs_f64(options.seconds);
    let mut ops = 0u64;
    let mut measuring = false;
    let mut measured_start = measure_from;
    let mut turns = 0u64;
    let verb_of = |slot: usize| {
        let (kind, len) = match options.op {
            BenchOp::Read => (VerbKind::Read, words),
            BenchOp::Write => (VerbKind::Write, words),
            BenchOp::Cas => (VerbKind::Cas, 1),
            BenchOp::Faa => (VerbKind::Faa, 1),
            BenchOp::Rpc => unreachable!("rpc posts no verb"),
        };
        Verb {
            kind,
            node: 0,
            addr: slot as u64 * words as u64,
            len,
            buf: 0,
            compare: 0,
            swap: 0,
        }
    };
    loop {
        // The clock is read every 64 turns: a clock read costs as much as
        // a shared-memory verb, and this loop measures the fabric.
        if turns % 64 == 0 {
            let now = Instant::now();
            if !measuring && now >= measure_from {
                measuring = true;
                measured_start = now;
                ops = 0;
            }
            if now >= end {
                return Ok((ops, now.duration_since(measured_start).as_secs_f64()));
            }
        }
        for slot in 0..window {
            if busy[slot] {
                continue;
            }
            if options.op == BenchOp::Rpc {
                endpoint.send(Message {
                    src_node: 1,
                    src_worker: 0,
                    dst_node: 0,
                    dst_worker: 0,
                    coroutine: slot as u16,
                    call: 0,
                    kind: 1,
                    flags: 0,
                    deliver_at_ns: 0,
                    payload: vec![3u64; words as usize],
                });
                busy[slot] = true;
            } else {
                let verb = verb_of(slot);
                match endpoint.post(slot as u16, 0, &[verb], &write_data, &mut results[slot]) {
                    Posted::At(_) => ops += 1,
                    Posted::Deferred => busy[slot] = true,
                }
            }
        }
        endpoint.receive(&mut inbox);
        for msg in inbox.drain(..) {
            busy[msg.coroutine as usize] = false;
            ops += 1;
        }
        turns += 1;
        if turns % 4096 == 0 {
            boot.poll_faults()?;
        }
    }
}
