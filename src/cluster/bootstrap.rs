//! The TCP rendezvous of a multi-process run: rank 0 listens on
//! `HOST:PORT`; every other rank connects, is challenged (`Challenge`: a
//! fresh nonce), says who it is (`Hello`: configuration digest, job id,
//! its answer to the nonce under the job key, then rank, host, pid, its
//! region's address and rkey, its workers' UCX addresses), and receives
//! everyone's (`Table`). The same connections then carry the barriers
//! (`Ready`/`Go`, `Done`/`AllDone`), heartbeats, the results rank 0
//! gathers, and `Abort`.
//!
//! Admission (`cluster::auth`): the port is open to anything that reaches
//! it, so rank 0 admits a connection only once its `Hello` proves the job
//! key (when the job has one), names the same job id and carries the same
//! configuration digest. Anything else — garbage, a wrong or missing key,
//! a rank of another job, a different configuration — is refused: logged
//! once on stderr with the peer's address and the reason, told the reason
//! if it is a verbena rank, and the join goes on (a rank that never
//! comes is named when the join deadline passes, with the refusals seen
//! meanwhile). Each new connection proves itself on a thread of its own,
//! within `HELLO_TIMEOUT`, and may send at most `MAX_HELLO_BYTES` before
//! it is admitted. A rank that is admitted but clashes with the run (a
//! rank number out of range or taken twice) is the launch's mistake and
//! stops the run.
//!
//! Faults are bounded in time: a rank that never joins is named when the
//! join deadline passes; one that dies closes its connection (named at
//! once); one that hangs stops its heartbeats (named after
//! `stall_timeout`); whichever rank sees a fault first stops, and rank 0
//! forwards the error to every other rank, so all stop with a message that
//! names the rank and host at fault.
//!
//! A fault-tolerant run ([`Bootstrap::tolerate_loss`], rank 0) instead
//! reports a rank whose connection closed, or that went silent, as a
//! [`Kind::Lost`] frame and carries on without it: it is left out of
//! every later broadcast and gather, and whatever it still sends is
//! ignored (`cluster::failover` fails it over).
//!
//! Invariants: every wait has a deadline; frames that arrive ahead of the
//! phase that consumes them are kept in order (`backlog`); a rank's closed
//! connection is an error unless it already sent its result.

use std::collections::VecDeque;
use std::io::Write;
use std::net::TcpStream;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use super::auth::ClusterKey;
use super::wire::{read_frame, write_frame, Dec, Enc, Frame, Kind};

mod join;

/// How often a rank tells the others it is alive.
pub const HEARTBEAT: Duration = Duration::from_millis(250);

/// What one rank tells the others when it joins.
#[derive(Clone, Debug, Default)]
pub struct RankInfo {
    pub rank: u32,
    pub host: String,
    pub pid: u32,
    pub region_words: u64,
    pub base_address: u64,
    pub rkey: Vec<u8>,
    /// UCX address of each worker.
    pub workers: Vec<Vec<u8>>,
}

impl RankInfo {
    fn encode(&self, enc: &mut Enc) {
        enc.u64(self.rank as u64)
            .str(&self.host)
            .u64(self.pid as u64)
            .u64(self.region_words)
            .u64(self.base_address)
            .bytes(&self.rkey)
            .u64(self.workers.len() as u64);
        for address in &self.workers {
            enc.bytes(address);
        }
    }

    fn decode(dec: &mut Dec) -> Result<RankInfo, String> {
        let rank = dec.u64("rank")? as u32;
        let host = dec.str("host")?;
        let pid = dec.u64("pid")? as u32;
        let region_words = dec.u64("region size")?;
        let base_address = dec.u64("region address")?;
        let rkey = dec.bytes("rkey")?;
        let count = dec.u64("worker count")?;
        if count > 4096 {
            return Err(format!("malformed message: {count} workers"));
        }
        let workers = (0..count)
            .map(|_| dec.bytes("worker address"))
            .collect::<Result<_, _>>()?;
        Ok(RankInfo {
            rank,
            host,
            pid,
            region_words,
            base_address,
            rkey,
            workers,
        })
    }
}

/// How to reach the others.
#[derive(Clone, Debug)]
pub struct BootstrapOptions {
    pub rank: u32,
    pub nodes: u32,
    /// `HOST:PORT` of rank 0.
    pub address: String,
    pub join_timeout: Duration,
    pub stall_timeout: Duration,
    /// Digest of the run's configuration: every rank must run the same.
    pub digest: u64,
    /// The job's key (`cluster::auth`): rank 0 admits only a joiner that
    /// proves it holds the same (or, without one, a joiner without one).
    pub key: Option<ClusterKey>,
    /// What the launcher calls this job (`auth::job_id_from_env`; empty
    /// when none): rank 0 refuses a rank of another job.
    pub job: String,
}

enum Event {
    Frame(Frame),
    Closed(String),
}

/// What a reader thread reports: the rank and its event.
type RankEvent = (u32, Event);

/// This rank's connections after the join.
pub struct Bootstrap {
    pub rank: u32,
    pub nodes: u32,
    /// Every rank's `Hello`, by rank.
    pub ranks: Vec<RankInfo>,
    stall_timeout: Duration,
    /// Rank 0: a stream to every other rank; others: to rank 0 (index 0).
    writers: Vec<Option<TcpStream>>,
    events: Receiver<(u32, Event)>,
    /// Kept so a run of one rank (no reader threads) is not "disconnected".
    _sender: Sender<(u32, Event)>,
    backlog: VecDeque<(u32, Frame)>,
    last_heard: Vec<Instant>,
    last_beat_sent: Instant,
    /// Ranks whose connection may close without it being a fault.
    finished: Vec<bool>,
    /// Rank 0 of a fault-tolerant run: a lost rank is reported, not fatal.
    tolerate_loss: bool,
    /// Ranks reported lost (never heard from again).
    lost: Vec<bool>,
    /// A fault-tolerant run's leases (`enable_leases`): the clock they
    /// are counted on, and on rank 0 when each rank's lease was last
    /// renewed, on the others the latest beat rank 0 echoed (ns).
    lease_epoch: Option<Instant>,
    lease_granted: Vec<Instant>,
    lease_beat_ns: u64,
    /// How long a lease lasts from the beat that renewed it; a rank
    /// holding one beats every half of it, so one late echo does not run
    /// it out.
    lease: Duration,
    /// A rank other than 0: the first write to rank 0 that failed, and
    /// when. It is reported only once what rank 0 sent before it closed
    /// has been read (or after [`UNSENT_GRACE`]): a rank woken from a
    /// freeze must learn from rank 0's last frames that it was declared
    /// failed, even when its first write after waking already finds
    /// rank 0 gone.
    unsent: Option<(String, Instant)>,
}

/// How long a rank other than 0 keeps reading after a write to rank 0
/// failed, for the frames rank 0 sent before it closed.
const UNSENT_GRACE: Duration = Duration::from_secs(1);

/// This host's name (for messages naming a rank).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown-host".into())
}

fn spawn_reader(
    rank: u32,
    stream: &TcpStream,
    events: &Sender<(u32, Event)>,
) -> Result<(), String> {
    let mut stream = stream
        .try_clone()
        .map_err(|e| format!("cloning the connection to rank {rank}: {e}"))?;
    let events = events.clone();
    std::thread::Builder::new()
        .name(format!("verbena-boot-r{rank}"))
        .spawn(move || loop {
            match read_frame(&mut stream) {
                Ok(Some(frame)) => {
                    if events.send((rank, Event::Frame(frame))).is_err() {
                        return;
                    }
                }
                Ok(None) => {
                    let _ = events.send((rank, Event::Closed("it closed the connection".into())));
                    return;
                }
                Err(e) => {
                    let _ = events.send((rank, Event::Closed(e)));
                    return;
                }
            }
        })
        .map_err(|e| format!("starting a bootstrap thread: {e}"))?;
    Ok(())
}

impl Bootstrap {
    /// "rank R (host H, pid P)".
    pub fn describe(&self, rank: u32) -> String {
        match self.ranks.get(rank as usize) {
            Some(info) => format!("rank {rank} (host {}, pid {})", info.host, info.pid),
            None => format!("rank {rank}"),
        }
    }

    /// The ranks this one talks to: all others on rank 0, rank 0 elsewhere
    /// (less the ranks lost).
    fn peers(&self) -> Vec<u32> {
        if self.rank == 0 {
            (1..self.nodes)
                .filter(|&r| !self.lost[r as usize])
                .collect()
        } else {
            vec![0]
        }
    }

    /// Rank 0 of a fault-tolerant run: a rank that dies or goes silent
    /// becomes a [`Kind::Lost`] frame instead of an error.
    pub fn tolerate_loss(&mut self) {
        self.tolerate_loss = self.rank == 0;
    }

    /// Fault-tolerant runs: every rank but 0 holds a lease that only
    /// rank 0 renews, and its endpoints post nothing once it has run out
    /// (`recovery::RankVerdicts::set_lease_until`); rank 0 declares a rank failed
    /// only once the lease it last renewed has surely run out
    /// (`lease_expired`). So a process that was frozen (or cut off) long
    /// enough to be failed over finds its lease gone when it runs again,
    /// and cannot write into the survivors' memory before it learns it
    /// was declared failed. A lease runs `lease` (`config::faults::lease_of`)
    /// from the moment its holder *sent* the beat that rank 0 echoed:
    /// however late the echo arrives, it never outlasts rank 0's view of
    /// it. `epoch` is the clock the endpoints use.
    pub fn enable_leases(&mut self, epoch: Instant, lease: Duration) {
        self.lease_epoch = Some(epoch);
        self.lease = lease;
        let now = Instant::now();
        self.lease_granted = vec![now; self.nodes as usize];
        self.lease_beat_ns = epoch.elapsed().as_nanos() as u64;
    }

    /// Leases are off again (the run's end: no failover any more).
    pub fn disable_leases(&mut self) {
        self.lease_epoch = None;
    }

    /// A rank other than 0 with leases on: until when (ns on the epoch
    /// given to `enable_leases`) it may post.
    pub fn lease_until_ns(&self) -> Option<u64> {
        (self.rank != 0 && self.lease_epoch.is_some())
            .then(|| self.lease_beat_ns + self.lease.as_nanos() as u64)
    }

    /// Rank 0: whether the lease `rank` last got has run out (with a
    /// margin for the two clocks' rates), or leases are off.
    pub fn lease_expired(&self, rank: u32) -> bool {
        self.lease_epoch.is_none()
            || self.lease_granted[rank as usize].elapsed() >= self.lease + self.lease / 8
    }

    /// How long since anything was heard from `rank` (rank 0: any rank;
    /// others: rank 0).
    pub fn silent_for(&self, rank: u32) -> Duration {
        self.last_heard[rank as usize].elapsed()
    }

    /// Whether `rank` was lost.
    pub fn is_lost(&self, rank: u32) -> bool {
        self.lost[rank as usize]
    }

    /// Sends to one rank (rank 0 only; a lost rank is skipped).
    pub fn send_to(&mut self, rank: u32, kind: Kind, body: &[u8]) -> Result<(), String> {
        if self.lost[rank as usize] {
            return Ok(());
        }
        let who = self.describe(rank);
        match self.writers[rank as usize].as_mut() {
            Some(stream) => write_frame(stream, kind, body)
                .map_err(|e| format!("{who} is unreachable: {e} (the process died or was killed)")),
            None => Err(format!("no connection to {who}")),
        }
    }

    /// Rank 0: stops talking to `rank` (declared failed while it may still
    /// be alive): it is left out from now on, as a lost rank is.
    pub fn expel(&mut self, rank: u32) {
        self.lost[rank as usize] = true;
    }

    /// Marks `rank` lost and queues the [`Kind::Lost`] frame that says so.
    fn lose(&mut self, rank: u32) {
        if !self.lost[rank as usize] {
            self.lost[rank as usize] = true;
            self.backlog.push_back((
                rank,
                Frame {
                    kind: Kind::Lost,
                    body: Vec::new(),
                },
            ));
        }
    }

    /// Sends to rank 0 (from another rank) or to every rank (from rank 0).
    /// A rank other than 0 does not fail here when rank 0 is gone: the
    /// failure is kept (`unsent`) and reported by the next read, after
    /// the frames rank 0 sent before it closed.
    pub fn send(&mut self, kind: Kind, body: &[u8]) -> Result<(), String> {
        if self.unsent.is_some() {
            return Ok(());
        }
        for rank in self.peers() {
            if let Some(stream) = self.writers[rank as usize].as_mut() {
                if let Err(e) = write_frame(stream, kind, body) {
                    let message = format!(
                        "{} is unreachable: {e} (the process died or was killed)",
                        self.describe(rank)
                    );
                    if self.rank == 0 {
                        return Err(message);
                    }
                    self.unsent = Some((message, Instant::now()));
                }
            }
        }
        Ok(())
    }

    /// Tells the others the run is off (best effort) and returns `message`.
    pub fn abort(&mut self, message: String) -> String {
        let mut enc = Enc::default();
        enc.str(&message);
        for stream in self.writers.iter_mut().flatten() {
            let _ = write_frame(stream, Kind::Abort, &enc.bytes);
            let _ = stream.flush();
        }
        message
    }

    /// Marks `rank` as done talking: its connection may close.
    pub fn mark_finished(&mut self, rank: u32) {
        self.finished[rank as usize] = true;
    }

    /// Waits (at most `timeout`) until rank 0 closes the connection, so
    /// what this rank sent last is read before the socket goes away.
    pub fn linger(&mut self, timeout: Duration) {
        for rank in self.peers() {
            self.finished[rank as usize] = true;
        }
        let until = Instant::now() + timeout;
        while Instant::now() < until {
            let _ = self.beat();
            match self.events.recv_timeout(Duration::from_millis(20)) {
                Ok((_, Event::Closed(_))) | Err(RecvTimeoutError::Disconnected) => return,
                _ => {}
            }
        }
    }

    /// How often this rank beats: every half lease while it holds one,
    /// every [`HEARTBEAT`] otherwise.
    pub fn beat_interval(&self) -> Duration {
        match self.lease_epoch {
            Some(_) => (self.lease / 2).min(HEARTBEAT),
            None => HEARTBEAT,
        }
    }

    /// Sends a heartbeat if one is due.
    pub fn beat(&mut self) -> Result<(), String> {
        if self.last_beat_sent.elapsed() >= self.beat_interval() {
            self.last_beat_sent = Instant::now();
            match self.lease_epoch {
                Some(epoch) if self.rank != 0 => {
                    let sent_ns = epoch.elapsed().as_nanos() as u64;
                    self.send(Kind::LeaseBeat, &sent_ns.to_le_bytes())?;
                }
                _ => self.send(Kind::Ready, &[])?,
            }
        }
        Ok(())
    }

    /// The next frame (heartbeats absorbed), waiting at most `timeout`.
    /// A closed connection, an `Abort`, or a peer silent for longer than
    /// the stall timeout is an error naming the rank.
    pub fn next(&mut self, timeout: Duration) -> Result<Option<(u32, Frame)>, String> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(frame) = self.backlog.pop_front() {
                return Ok(Some(frame));
            }
            let now = Instant::now();
            // A zero timeout only polls (no wait at all).
            let wait = until
                .saturating_duration_since(now)
                .min(self.beat_interval() / 2);
            self.take_event(wait)?;
            if self.backlog.is_empty() && Instant::now() >= until {
                return Ok(None);
            }
        }
    }

    /// Keeps the connections alive and looks for faults without taking any
    /// frame: what arrives waits for [`Bootstrap::next`] or `gather`.
    pub fn poll_faults(&mut self) -> Result<(), String> {
        while self.take_event(Duration::ZERO)? {}
        Ok(())
    }

    /// Sends a heartbeat if due, checks every peer's silence, and handles
    /// at most one event (waiting at most `wait`); true if there was one.
    fn take_event(&mut self, wait: Duration) -> Result<bool, String> {
        self.beat()?;
        if let Some((_, since)) = &self.unsent {
            if since.elapsed() >= UNSENT_GRACE {
                return Err(self.unsent.take().expect("checked").0);
            }
        }
        let now = Instant::now();
        for rank in self.peers() {
            let silent = now.duration_since(self.last_heard[rank as usize]);
            if !self.finished[rank as usize] && silent > self.stall_timeout {
                if self.tolerate_loss {
                    self.lose(rank);
                    continue;
                }
                return Err(format!(
                    "{} stopped responding: nothing heard from it for {:.1} s (hung, stopped, or its network is down)",
                    self.describe(rank),
                    silent.as_secs_f64()
                ));
            }
        }
        let event = if wait.is_zero() {
            match self.events.try_recv() {
                Ok(event) => Ok(event),
                Err(std::sync::mpsc::TryRecvError::Empty) => Err(RecvTimeoutError::Timeout),
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    Err(RecvTimeoutError::Disconnected)
                }
            }
        } else {
            self.events.recv_timeout(wait)
        };
        match event {
            Ok((rank, Event::Frame(_))) if self.lost[rank as usize] => Ok(true),
            Ok((rank, Event::Frame(frame))) => {
                self.last_heard[rank as usize] = Instant::now();
                match frame.kind {
                    // A heartbeat (Ready is reused: it carries nothing).
                    Kind::Ready if frame.body.is_empty() => {}
                    Kind::LeaseBeat if self.rank == 0 => {
                        if self.lease_epoch.is_some() && frame.body.len() == 8 {
                            self.send_to(rank, Kind::LeaseGrant, &frame.body)?;
                            self.lease_granted[rank as usize] = Instant::now();
                        }
                    }
                    Kind::LeaseGrant if self.rank != 0 => {
                        if let Ok(bytes) = <[u8; 8]>::try_from(frame.body.as_slice()) {
                            let sent_ns = u64::from_le_bytes(bytes);
                            self.lease_beat_ns = self.lease_beat_ns.max(sent_ns);
                        }
                    }
                    Kind::Abort => {
                        let message = Dec::new(&frame.body).str("message").unwrap_or_default();
                        return Err(if self.rank == 0 {
                            format!("{} failed: {message}", self.describe(rank))
                        } else {
                            message
                        });
                    }
                    _ => self.backlog.push_back((rank, frame)),
                }
                Ok(true)
            }
            Ok((rank, Event::Closed(_))) if self.tolerate_loss && rank != 0 => {
                if !self.finished[rank as usize] {
                    self.lose(rank);
                }
                Ok(true)
            }
            Ok((_, Event::Closed(_))) if self.unsent.is_some() => {
                Err(self.unsent.take().expect("checked").0)
            }
            Ok((rank, Event::Closed(why))) => {
                if !self.finished[rank as usize] {
                    return Err(format!(
                        "lost {}: {why} (the process died or was killed)",
                        self.describe(rank)
                    ));
                }
                Ok(true)
            }
            Err(RecvTimeoutError::Timeout) => Ok(false),
            Err(RecvTimeoutError::Disconnected) => Err("every bootstrap connection is gone".into()),
        }
    }

    /// Waits for a `kind` frame from every peer, until `deadline`; frames
    /// of other kinds are kept for later. Returns them by rank.
    pub fn gather(
        &mut self,
        kind: Kind,
        deadline: Instant,
        what: &str,
    ) -> Result<Vec<(u32, Frame)>, String> {
        let mut got: Vec<(u32, Frame)> = Vec::new();
        let mut deferred = Vec::new();
        loop {
            // Recomputed: a rank lost meanwhile is no longer waited for.
            let peers = self.peers();
            got.retain(|(rank, _)| peers.contains(rank));
            if got.len() >= peers.len() {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                let missing: Vec<String> = peers
                    .iter()
                    .filter(|r| !got.iter().any(|(g, _)| g == *r))
                    .map(|&r| self.describe(r))
                    .collect();
                self.backlog.extend(deferred);
                return Err(format!("{} did not {what} in time", missing.join(", ")));
            }
            match self.next(deadline - now)? {
                Some((rank, frame))
                    if frame.kind == kind && !got.iter().any(|(g, _)| *g == rank) =>
                {
                    got.push((rank, frame));
                }
                Some((_, frame)) if frame.kind == kind => {}
                Some(other) => deferred.push(other),
                None => {}
            }
        }
        self.backlog.extend(deferred);
        got.sort_by_key(|(rank, _)| *rank);
        Ok(got)
    }
}

impl Drop for Bootstrap {
    fn drop(&mut self) {
        // Closes the connections now (the reader threads hold clones), so
        // peers see the end at once; data already written is delivered.
        for stream in self.writers.iter().flatten() {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn options(rank: u32, nodes: u32, port: u16, digest: u64) -> BootstrapOptions {
        BootstrapOptions {
            rank,
            nodes,
            address: format!("127.0.0.1:{port}"),
            join_timeout: Duration::from_secs(3),
            stall_timeout: Duration::from_secs(3),
            digest,
            key: None,
            job: String::new(),
        }
    }

    fn keyed(rank: u32, nodes: u32, port: u16, key: &str, job: &str) -> BootstrapOptions {
        BootstrapOptions {
            key: Some(ClusterKey::parse(key, "test").unwrap()),
            job: job.into(),
            ..options(rank, nodes, port, 7)
        }
    }

    fn info(rank: u32) -> RankInfo {
        RankInfo {
            rank,
            host: format!("h{rank}"),
            pid: 100 + rank,
            region_words: 8,
            base_address: 4096 * rank as u64,
            rkey: vec![rank as u8; 3],
            workers: vec![vec![1, 2, rank as u8]],
        }
    }

    fn free_port() -> u16 {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    #[test]
    fn three_ranks_exchange_tables_and_barrier() {
        let port = free_port();
        let members: Vec<_> = (1..3)
            .map(|rank| {
                std::thread::spawn(move || {
                    let mut boot = Bootstrap::join(&options(rank, 3, port, 7), info(rank)).unwrap();
                    assert_eq!(boot.ranks.len(), 3);
                    assert_eq!(boot.ranks[2].rkey, vec![2, 2, 2]);
                    boot.send(Kind::Done, &[rank as u8]).unwrap();
                    let deadline = Instant::now() + Duration::from_secs(5);
                    let go = boot.gather(Kind::Go, deadline, "start").unwrap();
                    assert_eq!(go.len(), 1);
                })
            })
            .collect();
        let mut leader = Bootstrap::join(&options(0, 3, port, 7), info(0)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let done = leader.gather(Kind::Done, deadline, "finish").unwrap();
        assert_eq!(
            done.iter()
                .map(|(r, f)| (*r, f.body[0]))
                .collect::<Vec<_>>(),
            [(1, 1), (2, 2)]
        );
        leader.send(Kind::Go, &[]).unwrap();
        for member in members {
            member.join().unwrap();
        }
    }

    #[test]
    fn a_rank_that_never_joins_is_named() {
        let port = free_port();
        let mut short = options(0, 3, port, 1);
        short.join_timeout = Duration::from_millis(300);
        let member = std::thread::spawn(move || Bootstrap::join(&options(1, 3, port, 1), info(1)));
        let error = Bootstrap::join(&short, info(0))
            .err()
            .expect("rank 2 never joins");
        assert!(error.contains("rank(s) 2 never joined"), "{error}");
        let member_error = member.join().unwrap().err().expect("rank 1 is told");
        assert!(
            member_error.contains("rank(s) 2 never joined"),
            "{member_error}"
        );
    }

    #[test]
    fn a_different_configuration_or_a_dead_peer_is_named() {
        let port = free_port();
        let member = std::thread::spawn(move || Bootstrap::join(&options(1, 2, port, 99), info(1)));
        let error = Bootstrap::join(&options(0, 2, port, 1), info(0))
            .err()
            .unwrap();
        assert!(
            error.contains("rank 1 (host h1, pid 101)")
                && error.contains("different configuration"),
            "{error}"
        );
        assert!(member.join().unwrap().is_err());

        let port = free_port();
        let member = std::thread::spawn(move || {
            let boot = Bootstrap::join(&options(1, 2, port, 5), info(1)).unwrap();
            drop(boot); // the process "dies": its connection closes
        });
        let mut leader = Bootstrap::join(&options(0, 2, port, 5), info(0)).unwrap();
        member.join().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let error = leader.gather(Kind::Done, deadline, "finish").err().unwrap();
        assert!(error.contains("lost rank 1 (host h1, pid 101)"), "{error}");
    }

    #[test]
    fn strangers_are_refused_and_the_job_still_joins() {
        let port = free_port();
        let key = "the job's own secret key";
        let leader = std::thread::spawn(move || {
            let mut short = keyed(0, 3, port, key, "job-a");
            short.join_timeout = Duration::from_secs(20);
            Bootstrap::join(&short, info(0))
        });
        // Garbage: a stranger that answers the challenge with noise.
        let mut garbage = loop {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(stream) => break stream,
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        garbage.write_all(&[0xde; 64]).unwrap();
        // A huge length must not be allocated: refused from the header.
        let mut huge = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut head = [0u8; 16];
        head[..4].copy_from_slice(&(Kind::Hello as u32).to_le_bytes());
        head[8..].copy_from_slice(&(1u64 << 40).to_le_bytes());
        huge.write_all(&head).unwrap();
        // A rank refused as one of another job tries again until its join
        // timeout: a short one here.
        let refused = |mut options: BootstrapOptions, rank: u32| {
            options.join_timeout = Duration::from_millis(400);
            let error = Bootstrap::join(&options, info(rank))
                .err()
                .expect("refused");
            assert!(error.contains("refused this rank"), "{error}");
            error
        };
        let error = refused(keyed(1, 3, port, "not the job's secret key", "job-a"), 1);
        assert!(
            error.contains("does not hold this job's cluster key"),
            "{error}"
        );
        let error = refused(options(1, 3, port, 7), 1);
        assert!(error.contains("holds no cluster key"), "{error}");
        let error = refused(keyed(2, 3, port, key, "job-b"), 2);
        assert!(
            error.contains("another job (job `job-b`; this one has job `job-a`)"),
            "{error}"
        );
        let mut other_config = keyed(2, 3, port, key, "job-a");
        other_config.digest = 8;
        let error = refused(other_config, 2);
        assert!(error.contains("different configuration"), "{error}");
        // The job's own ranks still join, and the run goes on.
        let members: Vec<_> = (1..3)
            .map(|rank| {
                std::thread::spawn(move || {
                    let mut boot =
                        Bootstrap::join(&keyed(rank, 3, port, key, "job-a"), info(rank)).unwrap();
                    boot.send(Kind::Done, &[rank as u8]).unwrap();
                    boot.linger(Duration::from_secs(5));
                })
            })
            .collect();
        let mut leader = leader.join().unwrap().expect("the job's ranks join");
        assert_eq!(leader.ranks[2].pid, 102);
        let deadline = Instant::now() + Duration::from_secs(5);
        assert_eq!(
            leader.gather(Kind::Done, deadline, "finish").unwrap().len(),
            2
        );
        drop(leader);
        for member in members {
            member.join().unwrap();
        }
    }

    #[test]
    fn without_keys_a_rank_of_another_job_is_refused() {
        let port = free_port();
        let job = move |rank: u32, job: &str| BootstrapOptions {
            job: job.into(),
            ..options(rank, 2, port, 7)
        };
        let leader_options = job(0, "4242");
        let leader = std::thread::spawn(move || Bootstrap::join(&leader_options, info(0)));
        let stranger = BootstrapOptions {
            join_timeout: Duration::from_millis(400),
            ..job(1, "4343")
        };
        let error = loop {
            match Bootstrap::join(&stranger, info(1)) {
                Err(e) if e.contains("could not reach rank 0") => continue,
                Err(e) => break e,
                Ok(_) => panic!("a rank of another job joined"),
            }
        };
        assert!(
            error.contains("another job (job `4343`; this one has job `4242`)")
                && error.contains("tried again"),
            "{error}"
        );
        let member =
            std::thread::spawn(move || Bootstrap::join(&job(1, "4242"), info(1)).map(|_| ()));
        assert!(leader.join().unwrap().is_ok());
        member.join().unwrap().unwrap();
    }

    /// A rank refused as one of another job (the address held by the
    /// other job's rank 0) tries again, and joins its own rank 0 once that
    /// one listens there, within its join timeout.
    #[test]
    fn a_rank_refused_as_another_job_tries_again_until_its_own_rank_0_listens() {
        let port = free_port();
        let job = move |rank: u32, job: &str, timeout: Duration| BootstrapOptions {
            job: job.into(),
            join_timeout: timeout,
            ..options(rank, 2, port, 7)
        };
        // The other job's rank 0 holds the address for a second, then
        // gives up (its own rank 1 never comes).
        let other = std::thread::spawn(move || {
            Bootstrap::join(&job(0, "other", Duration::from_secs(1)), info(0)).map(|_| ())
        });
        std::thread::sleep(Duration::from_millis(200));
        let member = std::thread::spawn(move || {
            Bootstrap::join(&job(1, "mine", Duration::from_secs(20)), info(1)).map(|_| ())
        });
        let other_error = other
            .join()
            .unwrap()
            .expect_err("the other job never completes");
        assert!(other_error.contains("another job"), "{other_error}");
        let leader = Bootstrap::join(&job(0, "mine", Duration::from_secs(20)), info(0));
        assert!(leader.is_ok(), "{:?}", leader.err());
        member
            .join()
            .unwrap()
            .expect("the refused rank joined its own job");
    }

    /// A stranger that sends part of a message and holds the connection
    /// open (even one byte at a time) is refused within the handshake
    /// limit, about a second, not after the join timeout.
    #[test]
    fn a_stranger_holding_an_incomplete_message_is_refused_within_a_second() {
        let port = free_port();
        let mut short = options(0, 2, port, 1);
        short.join_timeout = Duration::from_millis(2500);
        let leader = std::thread::spawn(move || Bootstrap::join(&short, info(0)));
        let mut stranger = loop {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(stream) => break stream,
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        // A header's first bytes, then a byte every 200 ms: each read
        // alone is quick, the message never whole.
        stranger
            .write_all(&(Kind::Hello as u32).to_le_bytes())
            .unwrap();
        let trickle = std::thread::spawn(move || {
            for _ in 0..12 {
                std::thread::sleep(Duration::from_millis(200));
                if stranger.write_all(&[0]).is_err() {
                    break;
                }
            }
        });
        let error = leader.join().unwrap().err().expect("rank 1 never joins");
        assert!(
            error.contains("no whole join message within 1.0 s"),
            "{error}"
        );
        trickle.join().unwrap();
    }
}
