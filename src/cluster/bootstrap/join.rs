//! Joining a multi-process run (see `cluster::bootstrap`): rank 0 listens
//! and admits each connection that proves it is a rank of this job
//! ([`Leader`]); every other rank connects, answers the challenge and
//! receives the table of every rank.

use std::collections::VecDeque;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::{Duration, Instant};

use super::{hostname, spawn_reader, Bootstrap, BootstrapOptions, RankEvent, RankInfo};
use crate::cluster::auth::{self, ClusterKey};
use crate::cluster::wire::{read_frame, read_frame_limited, write_frame, Dec, Enc, Frame, Kind};

/// The longest join message rank 0 reads from a connection it has not
/// admitted yet (a join carries a few UCX addresses: kilobytes).
const MAX_HELLO_BYTES: u64 = 16 << 20;

/// How long a new connection has to answer rank 0's challenge, in all: a
/// rank answers at once (a hash and a few kilobytes), so a connection
/// still silent, or still short of a whole message, after this is a
/// stranger holding it open, logged and closed.
const HELLO_TIMEOUT: Duration = Duration::from_secs(1);

/// How many connections may be proving themselves at once; past that rank
/// 0 closes new ones at once (a flood of idle connections costs a thread
/// each for `HELLO_TIMEOUT`).
const MAX_PENDING_JOINS: usize = 64;

/// What rank 0 admits a joiner by.
#[derive(Clone)]
struct Gate {
    key: Option<ClusterKey>,
    job: String,
    digest: u64,
}

/// A new connection's peer and either its stream and join message or the
/// reason it was refused.
type Admission = (SocketAddr, Result<(TcpStream, RankInfo), String>);

/// The abort frame's marker: rank 0 refused this connection (the run
/// itself goes on).
const REFUSED: u64 = 1;

/// The abort frame's marker: rank 0 refused this connection as a rank of
/// another job (another job id, or another cluster key). The rank 0 this
/// rank wants may not listen yet — the other job's holds the address —
/// so the joiner tries again until its join timeout.
const REFUSED_OTHER_JOB: u64 = 2;

/// A stream whose reads, all together, end at `deadline`: a peer that
/// trickles a message byte by byte cannot stretch the limit a read
/// timeout alone would reset on every byte.
struct Deadlined<'a> {
    stream: &'a mut TcpStream,
    deadline: Instant,
}

impl std::io::Read for Deadlined<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

fn describe_job(job: &str) -> String {
    if job.is_empty() {
        "no job id".into()
    } else {
        format!("job `{job}`")
    }
}

/// Challenges a new connection and reads its join message; `Err` is why
/// it is refused (the peer is told when it is a verbena rank).
fn admit(mut stream: TcpStream, gate: &Gate) -> Result<(TcpStream, RankInfo), String> {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(HELLO_TIMEOUT));
    let _ = stream.set_write_timeout(Some(HELLO_TIMEOUT));
    let nonce = auth::nonce()?;
    let mut challenge = Enc::default();
    challenge.bytes(&nonce);
    write_frame(&mut stream, Kind::Challenge, &challenge.bytes)
        .map_err(|e| format!("sending it the challenge failed: {e}"))?;
    let started = Instant::now();
    let mut deadlined = Deadlined {
        stream: &mut stream,
        deadline: started + HELLO_TIMEOUT,
    };
    let hello = match read_frame_limited(&mut deadlined, MAX_HELLO_BYTES) {
        Ok(Some(frame)) if frame.kind == Kind::Hello => frame,
        Ok(Some(frame)) => {
            return Err(format!(
                "it sent a {:?} message instead of a join message (not a joining verbena rank)",
                frame.kind
            ))
        }
        Ok(None) => return Err("it closed the connection without a join message".into()),
        Err(_) if started.elapsed() >= HELLO_TIMEOUT => {
            return Err(format!(
                "it sent no whole join message within {:.1} s",
                HELLO_TIMEOUT.as_secs_f64()
            ))
        }
        Err(e) => return Err(format!("not a verbena join message: {e}")),
    };
    let mut dec = Dec::new(&hello.body);
    let decoded = (|| {
        let digest = dec.u64("configuration digest")?;
        let job = dec.str("job id")?;
        let proof = dec.bytes("key proof")?;
        let info = RankInfo::decode(&mut dec)?;
        Ok::<_, String>((digest, job, proof, info))
    })();
    let (digest, job, proof, info) =
        decoded.map_err(|e| format!("not a verbena join message: {e}"))?;
    let who = format!(
        "rank {} (host {}, pid {})",
        info.rank,
        if info.host.is_empty() {
            "unnamed"
        } else {
            &info.host
        },
        info.pid
    );
    // The key first: until the proof holds, nothing else it says is
    // trusted (a wrong key could come with any job id or digest).
    let problem = match (&gate.key, proof.is_empty()) {
        (Some(_), true) => Some((format!(
            "a peer calling itself {who} holds no cluster key and this job has one (give every rank the same VERBENA_CLUSTER_KEY or --cluster-key)"
        ), REFUSED)),
        (Some(key), false) if !auth::verify(key, &nonce, info.rank, digest, &job, &proof) => {
            Some((format!(
                "a peer calling itself {who} does not hold this job's cluster key (a rank of another job, or one given another key)"
            ), REFUSED_OTHER_JOB))
        }
        (None, false) => Some((format!(
            "a peer calling itself {who} holds a cluster key and this job has none (give every rank the same VERBENA_CLUSTER_KEY or --cluster-key)"
        ), REFUSED)),
        _ if job != gate.job => Some((format!(
            "{who} belongs to another job ({}; this one has {})",
            describe_job(&job),
            describe_job(&gate.job)
        ), REFUSED_OTHER_JOB)),
        _ if digest != gate.digest => Some((format!(
            "{who} was started with a different configuration than rank 0; every rank needs the same flags and config file"
        ), REFUSED)),
        _ => None,
    };
    if let Some((reason, marker)) = problem {
        let mut enc = Enc::default();
        enc.str(&reason).u64(marker);
        let _ = write_frame(&mut stream, Kind::Abort, &enc.bytes);
        return Err(reason);
    }
    Ok((stream, info))
}

/// The error a joining rank reports for rank 0's `Abort`.
pub(super) fn abort_message(frame: &Frame, address: &str) -> String {
    let mut dec = Dec::new(&frame.body);
    let message = dec.str("message").unwrap_or_default();
    match dec.u64("marker") {
        Ok(REFUSED | REFUSED_OTHER_JOB) => {
            format!("rank 0 at {address} refused this rank: {message}")
        }
        _ => format!("rank 0 stopped the run: {message}"),
    }
}

/// What rank 0 answered a member's join message.
enum Introduced {
    /// Admitted: the stream and the table frame.
    Table(TcpStream, Frame),
    /// Refused as a rank of another job: why.
    OtherJob(String),
}

/// Whether rank 0's `Abort` refused this rank as one of another job.
fn refused_as_other_job(frame: &Frame) -> bool {
    let mut dec = Dec::new(&frame.body);
    frame.kind == Kind::Abort
        && dec.str("message").is_ok()
        && dec.u64("marker") == Ok(REFUSED_OTHER_JOB)
}

impl Bootstrap {
    /// Joins the run: rank 0 waits for every other rank, the others
    /// connect to it. Returns once every rank knows every `RankInfo`.
    pub fn join(options: &BootstrapOptions, mine: RankInfo) -> Result<Bootstrap, String> {
        if options.rank == 0 {
            Self::join_as_leader(options, mine)
        } else {
            Self::join_as_member(options, mine)
        }
    }

    fn join_as_leader(options: &BootstrapOptions, mine: RankInfo) -> Result<Bootstrap, String> {
        let mut leader = Leader::listen(options, mine)?;
        let deadline = Instant::now() + options.join_timeout;
        while leader.ranks.iter().any(Option::is_none) {
            if Instant::now() >= deadline {
                let message = leader.never_joined(options);
                return Err(leader.fail(message));
            }
            leader.accept()?;
            let Ok((peer, outcome)) = leader.admitted.recv_timeout(Duration::from_millis(10))
            else {
                continue;
            };
            leader.pending -= 1;
            match outcome {
                Ok((stream, info)) => leader.seat(peer, stream, info)?,
                Err(reason) => leader.refuse(peer, reason),
            }
        }
        leader.send_table(options)
    }

    fn join_as_member(options: &BootstrapOptions, mine: RankInfo) -> Result<Bootstrap, String> {
        let deadline = Instant::now() + options.join_timeout;
        let mut told = false;
        loop {
            let stream = Self::reach_rank0(options, &mine, deadline)?;
            match Self::introduce(options, &mine, stream) {
                Ok(Introduced::Table(stream, frame)) => {
                    return Self::seat_member(options, stream, frame)
                }
                // Once refused as another job, the address was held by a
                // rank 0 that is not ours: a connection it drops or an
                // abort it sends while giving up says nothing of our own
                // rank 0, which may bind the address next.
                Err(_) if told && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(error) => return Err(error),
                Ok(Introduced::OtherJob(refusal)) if Instant::now() >= deadline => {
                    return Err(format!(
                        "{refusal} (tried again for {:.0} s, the join timeout)",
                        options.join_timeout.as_secs_f64()
                    ))
                }
                Ok(Introduced::OtherJob(refusal)) => {
                    if !told {
                        told = true;
                        eprintln!(
                            "verbena: rank {}: {refusal}; trying again until the join timeout",
                            options.rank
                        );
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    }

    /// Connects to rank 0, trying again until `deadline`.
    fn reach_rank0(
        options: &BootstrapOptions,
        mine: &RankInfo,
        deadline: Instant,
    ) -> Result<TcpStream, String> {
        loop {
            let attempt = options
                .address
                .to_socket_addrs()
                .map_err(|e| e.to_string())
                .and_then(|mut addresses| {
                    addresses
                        .next()
                        .ok_or_else(|| "the name resolves to no address".to_string())
                })
                .and_then(|address| {
                    TcpStream::connect_timeout(&address, Duration::from_secs(1))
                        .map_err(|e| e.to_string())
                });
            match attempt {
                Ok(stream) => return Ok(stream),
                Err(e) if Instant::now() >= deadline => {
                    return Err(format!(
                        "rank {} (host {}) could not reach rank 0 at {} within {:.0} s: {e} (is rank 0 running, and is --bootstrap its address?)",
                        options.rank,
                        mine.host,
                        options.address,
                        options.join_timeout.as_secs_f64()
                    ))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// Answers rank 0's challenge with this rank's join message and reads
    /// its answer: the table of every rank, or a refusal as a rank of
    /// another job (any other refusal is an error).
    fn introduce(
        options: &BootstrapOptions,
        mine: &RankInfo,
        mut stream: TcpStream,
    ) -> Result<Introduced, String> {
        let rank = options.rank;
        let _ = stream.set_nodelay(true);
        // Rank 0 speaks first: the nonce this rank's join must answer.
        let _ = stream.set_read_timeout(Some(options.join_timeout + Duration::from_secs(5)));
        let address = &options.address;
        // Rank 0's next frame; the errors say when the joiner expected it.
        let from_rank0 =
            |read: Result<Option<Frame>, String>, closed: &str, missing: &str| match read {
                Ok(Some(frame)) => Ok(frame),
                Ok(None) => Err(format!(
                    "rank 0 at {address} closed the connection {closed}"
                )),
                Err(e) => Err(format!("rank {rank}: no {missing}: {e}")),
            };
        let frame = from_rank0(
            read_frame_limited(&mut stream, MAX_HELLO_BYTES),
            &format!("before rank {rank} could join"),
            &format!("challenge from rank 0 at {address} (is it a verbena rank 0?)"),
        )?;
        let nonce = match frame.kind {
            Kind::Challenge => Dec::new(&frame.body)
                .bytes("nonce")
                .ok()
                .filter(|nonce| nonce.len() == auth::NONCE_BYTES)
                .ok_or_else(|| {
                    format!(
                        "rank {rank}: the peer at {} sent a malformed challenge (a different verbena version?)",
                        options.address
                    )
                })?,
            Kind::Abort => return Err(abort_message(&frame, &options.address)),
            other => {
                return Err(format!(
                    "rank {rank}: the peer at {} sent a {other:?} message before any challenge: it is not rank 0 of this verbena version",
                    options.address
                ))
            }
        };
        let proof = options
            .key
            .as_ref()
            .map(|key| auth::prove(key, &nonce, rank, options.digest, &options.job))
            .unwrap_or_default();
        let mut hello = Enc::default();
        hello.u64(options.digest).str(&options.job).bytes(&proof);
        mine.encode(&mut hello);
        write_frame(&mut stream, Kind::Hello, &hello.bytes)
            .map_err(|e| format!("rank {rank}: sending the join message to rank 0: {e}"))?;
        // Rank 0 answers once every rank joined (within its join timeout).
        let _ = stream.set_read_timeout(Some(options.join_timeout * 2 + Duration::from_secs(5)));
        let frame = from_rank0(
            read_frame(&mut stream),
            &format!("while rank {rank} was joining"),
            &format!("answer from rank 0 at {address} while joining"),
        )?;
        match frame.kind {
            Kind::Table => Ok(Introduced::Table(stream, frame)),
            Kind::Abort if refused_as_other_job(&frame) => Ok(Introduced::OtherJob(abort_message(
                &frame,
                &options.address,
            ))),
            Kind::Abort => Err(abort_message(&frame, &options.address)),
            other => Err(format!("rank 0 sent {other:?} instead of the table")),
        }
    }

    /// A member admitted: reads the table of every rank from `frame` and
    /// listens to rank 0 on `stream`.
    fn seat_member(
        options: &BootstrapOptions,
        stream: TcpStream,
        frame: Frame,
    ) -> Result<Bootstrap, String> {
        let mut dec = Dec::new(&frame.body);
        let count = dec.u64("rank count")?;
        if count != options.nodes as u64 {
            return Err(format!(
                "rank 0 runs {count} nodes but rank {} was started with --nodes {}",
                options.rank, options.nodes
            ));
        }
        let ranks = (0..count)
            .map(|_| RankInfo::decode(&mut dec))
            .collect::<Result<Vec<_>, _>>()?;
        let _ = stream.set_read_timeout(None);
        let (sender, events) = channel();
        spawn_reader(0, &stream, &sender)?;
        let mut writers: Vec<Option<TcpStream>> = (0..count).map(|_| None).collect();
        writers[0] = Some(stream);
        Ok(Self::assemble(options, ranks, writers, (sender, events)))
    }

    pub(super) fn assemble(
        options: &BootstrapOptions,
        ranks: Vec<RankInfo>,
        writers: Vec<Option<TcpStream>>,
        (sender, events): (Sender<RankEvent>, Receiver<RankEvent>),
    ) -> Bootstrap {
        let now = Instant::now();
        Bootstrap {
            _sender: sender,
            rank: options.rank,
            nodes: options.nodes,
            stall_timeout: options.stall_timeout,
            last_heard: vec![now; ranks.len()],
            finished: vec![false; ranks.len()],
            tolerate_loss: false,
            lost: vec![false; ranks.len()],
            ranks,
            writers,
            events,
            backlog: VecDeque::new(),
            last_beat_sent: now,
            lease_epoch: None,
            lease_granted: Vec::new(),
            lease_beat_ns: 0,
            lease: Duration::ZERO,
            unsent: None,
        }
    }
}

/// Rank 0 while the ranks join: its listening socket, who has joined,
/// and the connections still proving themselves.
struct Leader {
    listener: TcpListener,
    nodes: usize,
    ranks: Vec<Option<RankInfo>>,
    writers: Vec<Option<TcpStream>>,
    gate: Gate,
    admitted_tx: Sender<Admission>,
    admitted: Receiver<Admission>,
    /// Connections still proving themselves.
    pending: usize,
    refusals: Vec<String>,
    /// The reasons already logged: a rank of another job tries again
    /// until its join timeout, and its refusal is logged once, not at
    /// every attempt.
    logged_reasons: std::collections::HashSet<String>,
}

impl Leader {
    /// Listens on the run's address (or, where this machine cannot bind
    /// it, on every interface at its port), with rank 0 itself joined.
    fn listen(options: &BootstrapOptions, mine: RankInfo) -> Result<Leader, String> {
        let nodes = options.nodes as usize;
        let listener = TcpListener::bind(&options.address)
            .or_else(|first| {
                // HOST may name this machine by an address it cannot bind
                // (e.g. behind NAT): listen on every interface instead.
                let port = options
                    .address
                    .rsplit_once(':')
                    .and_then(|(_, p)| p.parse::<u16>().ok())
                    .ok_or(first)?;
                TcpListener::bind(("0.0.0.0", port))
            })
            .map_err(|e| format!("rank 0 cannot listen on {}: {e}", options.address))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("rank 0: listening socket: {e}"))?;
        let mut ranks: Vec<Option<RankInfo>> = vec![None; nodes];
        ranks[0] = Some(mine);
        let (admitted_tx, admitted) = channel::<Admission>();
        Ok(Leader {
            listener,
            nodes,
            ranks,
            writers: (0..nodes).map(|_| None).collect(),
            gate: Gate {
                key: options.key.clone(),
                job: options.job.clone(),
                digest: options.digest,
            },
            admitted_tx,
            admitted,
            pending: 0,
            refusals: Vec::new(),
            logged_reasons: std::collections::HashSet::new(),
        })
    }

    /// Logs a connection turned away, once per reason (the peer's
    /// address aside); the join goes on.
    fn refuse(&mut self, peer: SocketAddr, reason: String) {
        if self.logged_reasons.insert(reason.clone()) {
            eprintln!(
                "verbena: rank 0 refused a connection from {peer}: {reason}; the run goes on"
            );
            self.refusals.push(format!("from {peer}: {reason}"));
        }
    }

    /// Tells every rank joined so far that the run stops with `message`.
    fn fail(&mut self, message: String) -> String {
        let mut enc = Enc::default();
        enc.str(&message);
        for stream in self.writers.iter_mut().flatten() {
            let _ = write_frame(stream, Kind::Abort, &enc.bytes);
        }
        message
    }

    /// The join deadline passed: which ranks never came, and the
    /// connections refused meanwhile.
    fn never_joined(&self, options: &BootstrapOptions) -> String {
        let missing: Vec<String> = self
            .ranks
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_none())
            .map(|(rank, _)| rank.to_string())
            .collect();
        let mut message = format!(
            "rank(s) {} never joined {} within {:.0} s (not started, crashed before joining, or cannot reach rank 0 on host {}); their hosts are unknown because they never connected",
            missing.join(", "),
            options.address,
            options.join_timeout.as_secs_f64(),
            hostname()
        );
        if !self.refusals.is_empty() {
            message.push_str(&format!(
                "; connections refused meanwhile: {}",
                self.refusals.join("; ")
            ));
        }
        message
    }

    /// Takes a new connection, if one waits: each proves itself on a
    /// thread of its own, so a stranger that connects and says nothing
    /// delays no rank's join.
    fn accept(&mut self) -> Result<(), String> {
        match self.listener.accept() {
            Ok((stream, peer)) if self.pending >= MAX_PENDING_JOINS => {
                drop(stream);
                let reason = format!(
                    "{MAX_PENDING_JOINS} other connections are still to send their join message"
                );
                self.refuse(peer, reason);
            }
            Ok((stream, peer)) => {
                let (gate, admitted_tx) = (self.gate.clone(), self.admitted_tx.clone());
                std::thread::Builder::new()
                    .name("verbena-boot-admit".into())
                    .spawn(move || {
                        let _ = admitted_tx.send((peer, admit(stream, &gate)));
                    })
                    .map_err(|e| format!("rank 0: starting a bootstrap thread: {e}"))?;
                self.pending += 1;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(self.fail(format!("rank 0: accept failed: {e}"))),
        }
        Ok(())
    }

    /// Seats an admitted rank: a rank of this job (proven with a key,
    /// claimed without one) with this configuration. A rank number that
    /// clashes is the launch's mistake, and fatal.
    fn seat(
        &mut self,
        peer: SocketAddr,
        stream: TcpStream,
        mut info: RankInfo,
    ) -> Result<(), String> {
        if info.host.is_empty() {
            info.host = peer.ip().to_string();
        }
        let nodes = self.nodes;
        let who = format!("rank {} (host {}, pid {})", info.rank, info.host, info.pid);
        let problem = if info.rank as usize >= nodes || info.rank == 0 {
            Some(format!(
                "{who} joined, but ranks of this run are 1..={} besides rank 0 (--nodes {} on rank 0)",
                nodes - 1,
                nodes
            ))
        } else if self.ranks[info.rank as usize].is_some() {
            Some(format!(
                "{who} joined twice: two processes were given rank {}",
                info.rank
            ))
        } else {
            None
        };
        if let Some(message) = problem {
            self.writers[0] = Some(stream);
            return Err(self.fail(message));
        }
        let _ = stream.set_read_timeout(None);
        let _ = stream.set_write_timeout(None);
        let slot = info.rank as usize;
        self.writers[slot] = Some(stream);
        self.ranks[slot] = Some(info);
        Ok(())
    }

    /// Every rank joined: each gets the table of all, and a reader thread.
    fn send_table(self, options: &BootstrapOptions) -> Result<Bootstrap, String> {
        let Leader {
            ranks, mut writers, ..
        } = self;
        let ranks: Vec<RankInfo> = ranks.into_iter().map(|r| r.expect("all joined")).collect();
        let (sender, events) = channel();
        let mut table = Enc::default();
        table.u64(ranks.len() as u64);
        for info in &ranks {
            info.encode(&mut table);
        }
        for (rank, stream) in writers.iter_mut().enumerate() {
            if let Some(stream) = stream {
                spawn_reader(rank as u32, stream, &sender)?;
                write_frame(stream, Kind::Table, &table.bytes).map_err(|e| {
                    format!(
                        "sending the table to rank {rank} (host {}): {e}",
                        ranks[rank].host
                    )
                })?;
            }
        }
        Ok(Bootstrap::assemble(
            options,
            ranks,
            writers,
            (sender, events),
        ))
    }
}
