//! One worker's endpoint on the `ucx` fabric ([`UcxEndpoint`]): its UCP
//! endpoints to every node, the ordering it keeps per target, and the
//! [`Endpoint`] it gives the runtime.

use super::*;
use crate::fabric::verbs::MSG_PASSIVE;
use crate::fabric::{Doorbell, Posted};

/// One worker's endpoint on the `ucx` fabric.
pub struct UcxEndpoint {
    pub(super) worker: ucp_worker_h,
    pub(super) state: *mut CbState,
    pub(super) node: NodeId,
    pub(super) worker_index: u16,
    pub(super) eps: Vec<ucp_ep_h>,
    /// Boxed: UCX holds their addresses.
    #[allow(clippy::vec_box)]
    pub(super) ep_errs: Vec<Box<EpErr>>,
    pub(super) rkeys: Vec<ucp_rkey_h>,
    pub(super) bases: Vec<u64>,
    pub(super) region: Arc<Region>,
    /// This node's own verbs run on its region with CPU operations:
    /// `local_atomics = cpu`, or every node's verbs are CPU operations
    /// (mapped regions, verbena's emulation).
    pub(super) local_on_cpu: bool,
    /// Per node, its region mapped into this process, when every node's is
    /// (one host, shared memory): one-sided verbs then run as CPU loads,
    /// stores and atomics (see the module docs). Empty otherwise.
    pub(super) mapped: Vec<Region>,
    /// One-sided verbs to other nodes travel as active messages that the
    /// target's fabric runs on its region (TCP; see the module docs).
    pub(super) emulate: bool,
    /// Scratch for `serve_verbs` (keeps its capacity).
    pub(super) arrivals: Vec<Message>,
    pub(super) failure: Arc<PeerFailure>,
    pub(super) epoch: Instant,
    pub(super) counters: VerbCounters,
    /// Recycled flights and send records (boxed: UCX holds their
    /// addresses while they are in flight).
    #[allow(clippy::vec_box)]
    pub(super) flights: Vec<Box<Flight>>,
    #[allow(clippy::vec_box)]
    pub(super) sends: Vec<Box<SendFlight>>,
    /// Per node: the frames bound for it this turn, sent as one active
    /// message by `flush_outbox` (see `send_am`), and their number.
    pub(super) outbox: Vec<Vec<u64>>,
    pub(super) outbox_frames: Vec<u64>,
    /// Flights posted and not yet delivered.
    pub(super) outstanding: u32,
    /// Per target node: what a later verb may have to wait for.
    pub(super) links: Vec<LinkOrder>,
    /// Per target node: single verbs to skip before trying the fast path
    /// again (0: try it).
    pub(super) immediate: Vec<u32>,
    /// Fault-tolerant run: flights and awaited requests are tracked so
    /// that a peer declared dead fails them (`fail_dead_peers`).
    pub(super) track: bool,
    /// See [`UcxContext::set_host_worker_threads`].
    pub(super) idle_spin_ns: u64,
    /// Flights posted and not yet delivered (with `track`).
    pub(super) in_flight: Vec<*mut Flight>,
    /// Requests sent and not yet answered (with `track`).
    pub(super) awaiting: Vec<Awaited>,
    /// `PeerFailure::dead_epoch` as last handled.
    pub(super) seen_dead_epoch: u64,
}

/// A request sent to a peer whose reply has not come yet.
#[derive(Clone, Copy, Debug)]
pub(super) struct Awaited {
    pub(super) node: NodeId,
    pub(super) coroutine: u16,
    pub(super) call: u16,
    pub(super) kind: u16,
    /// The flags of the failure message that stands in for the answer.
    pub(super) fail_flags: u8,
    /// A batch of verbs run by the target (`MSG_VERBS`), not an RPC.
    pub(super) verbs: bool,
}

// SAFETY: an endpoint is created on its worker's thread and used there only;
// `Send` lets the engine hand it to that thread's `Worker` before running.
unsafe impl Send for UcxEndpoint {}

impl UcxEndpoint {
    /// The transports UCX chose for the endpoint to `node` (from
    /// `ucp_ep_print_info`), e.g. `["posix/memory", "cma/memory"]`.
    pub fn transports_to(&self, node: NodeId) -> Vec<String> {
        let text = self.ep_info(node);
        let mut names: Vec<String> = Vec::new();
        for line in text.lines().filter(|l| l.contains("lane[")) {
            // "...lane[0]:  2:posix/memory.0 md1 ..." → "posix/memory"
            for token in line.split_whitespace() {
                let token = token.split_once(':').map_or(token, |(_, t)| t);
                if let Some((tl, device)) = token.split_once('/') {
                    if !tl.is_empty() && tl.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                        let device = device.split('.').next().unwrap_or(device);
                        let name = format!("{tl}/{device}");
                        if !names.contains(&name) {
                            names.push(name);
                        }
                        break;
                    }
                }
            }
        }
        if self.maps_regions() {
            // One-sided verbs bypass UCX's RMA lanes for this node.
            names.push(MAPPED_TRANSPORT.to_string());
        } else if self.emulate && node != self.node {
            names.push(AM_VERBS_TRANSPORT.to_string());
        }
        names
    }

    /// Every node's region mapped into this process (`ucp_rkey_ptr`), or
    /// nothing if any node's cannot be (another host, or a transport that
    /// does not map memory): all or none, so that every one-sided verb on a
    /// node's words is a CPU operation, or every one goes through UCX — CPU
    /// atomics and a NIC's are not atomic with each other.
    pub(super) fn map_regions(&self) -> Vec<Region> {
        let words = self.region.len_words() as usize;
        let mut mapped = Vec::with_capacity(self.rkeys.len());
        for (node, &rkey) in self.rkeys.iter().enumerate() {
            let base = self.bases[node];
            let last = base + (words.max(1) as u64 - 1) * 8;
            let (mut first_ptr, mut last_ptr) = (null_mut(), null_mut());
            // SAFETY: the rkey was unpacked on this worker's endpoint and
            // lives until `drop`, after the views are gone.
            let ok = unsafe {
                ucp_rkey_ptr(rkey, base, &mut first_ptr) == UCS_OK
                    && ucp_rkey_ptr(rkey, last, &mut last_ptr) == UCS_OK
            };
            let contiguous = last_ptr as usize == first_ptr as usize + (last - base) as usize;
            if !ok || first_ptr.is_null() || !contiguous || first_ptr as usize % 8 != 0 {
                return Vec::new();
            }
            // SAFETY: UCX mapped the node's whole registered region here
            // (checked at both ends) and keeps it mapped while the rkey
            // lives; the view is dropped before the rkey is destroyed.
            mapped.push(unsafe { Region::mapped(first_ptr as *mut AtomicU64, words) });
        }
        mapped
    }

    /// Whether one-sided verbs to other nodes travel as frames of
    /// coalesced active messages (emulated, without mapped memory): the
    /// messages that carry them are then what the wire counts.
    fn verbs_travel_in_messages(&self) -> bool {
        self.emulate && self.mapped.is_empty()
    }

    /// Whether one-sided verbs run on mapped memory (see the module docs).
    pub fn maps_regions(&self) -> bool {
        !self.mapped.is_empty()
    }

    /// Whether UCX has no RMA or atomic lane to any other node, so that it
    /// would emulate every one-sided verb with active messages (TCP): then
    /// verbena runs them itself (see the module docs). All or none, as for
    /// mapping.
    pub(super) fn rma_is_emulated(&self) -> bool {
        let others: Vec<NodeId> = (0..self.eps.len() as NodeId)
            .filter(|&node| node != self.node)
            .collect();
        !others.is_empty()
            && others.iter().all(|&node| {
                let info = self.ep_info(node);
                !info.contains("amo#") && !info.contains(" rma#") && !info.contains(" rma ")
            })
    }

    pub(super) fn ep_info(&self, node: NodeId) -> String {
        // SAFETY: open_memstream/fclose/free from the C library; the ep is
        // live on this thread.
        unsafe {
            let mut buffer: *mut std::ffi::c_char = null_mut();
            let mut size = 0usize;
            let stream = open_memstream(&mut buffer, &mut size);
            if stream.is_null() {
                return String::new();
            }
            ucp_ep_print_info(self.eps[node as usize], stream);
            fclose(stream);
            if buffer.is_null() {
                return String::new();
            }
            let text =
                String::from_utf8_lossy(std::slice::from_raw_parts(buffer as *const u8, size))
                    .into_owned();
            free(buffer as *mut c_void);
            text
        }
    }

    pub(super) fn state(&mut self) -> &mut CbState {
        // SAFETY: owned by this endpoint, used on its thread; callbacks only
        // run inside `progress`, when no such reference is live.
        unsafe { &mut *self.state }
    }

    pub(super) fn progress(&mut self) -> u32 {
        let mut events = 0;
        for _ in 0..16 {
            // SAFETY: the worker belongs to this thread.
            let n = unsafe { ucp_worker_progress(self.worker) };
            if n == 0 {
                break;
            }
            events += n;
        }
        let state = self.state;
        // SAFETY: see `state`.
        let sends = unsafe { &mut (*state).sends_done };
        for send in sends.drain(..) {
            // SAFETY: a send flight completed by its callback; boxed by us.
            // Its buffer keeps its capacity for a later outbox.
            let mut send = unsafe { Box::from_raw(send) };
            send.payload.clear();
            self.sends.push(send);
        }
        events
    }

    /// Keeps FIFO towards `node` before posting an operation there: if an
    /// earlier operation to `node` may still be incomplete and either one
    /// writes (WRITE, CAS, FAA), the endpoint is flushed and the flush
    /// awaited first (see the module docs). READs after READs never wait.
    pub(super) fn order(&mut self, node: NodeId, writes: bool) {
        if self.track && self.failure.is_dead(node) {
            // Nothing to it will ever complete; nothing to order behind.
            self.links[node as usize] = LinkOrder::default();
            return;
        }
        let link = self.links[node as usize];
        if link.pending && (link.writes || writes) {
            self.flush_and_wait(node);
            self.links[node as usize] = LinkOrder::default();
        }
    }

    /// Notes an operation just posted to `node` (`done`: UCX completed it
    /// at once, which for a PUT still only means locally).
    pub(super) fn posted(&mut self, node: NodeId, writes: bool, done: bool, put: bool) {
        let link = &mut self.links[node as usize];
        if !done || put {
            link.pending = true;
            link.writes |= writes;
        }
    }

    pub(super) fn flush_and_wait(&mut self, node: NodeId) {
        // SAFETY: the ep and worker belong to this thread; the request is
        // polled to completion (or given up when the run is abandoned,
        // after which the process ends) and freed once.
        unsafe {
            let param: ucp_request_param_t = std::mem::zeroed();
            let status = ucp_ep_flush_nbx(self.eps[node as usize], &param);
            match classify(status) {
                StatusPtr::Done => {}
                StatusPtr::Error(code) => self.failure.set(node, code),
                StatusPtr::Request(request) => {
                    while ucp_request_check_status(request) == UCS_INPROGRESS {
                        if self.failure.abandoned() || self.failure.is_dead(node) {
                            break;
                        }
                        ucp_worker_progress(self.worker);
                    }
                    let code = ucp_request_check_status(request);
                    if code != UCS_OK && code != UCS_INPROGRESS {
                        self.failure.set(node, code);
                    }
                    ucp_request_free(request);
                }
            }
        }
    }
}

impl Endpoint for UcxEndpoint {
    fn node(&self) -> NodeId {
        self.node
    }

    fn worker(&self) -> u16 {
        self.worker_index
    }

    #[inline]
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn post_doorbell(&mut self, doorbell: Doorbell<'_>, results: &mut [u64]) -> Posted {
        let verbs = doorbell.verbs;
        let Some(first) = verbs.first() else {
            return Posted::At(0);
        };
        let target = first.node;
        if target == self.node && self.local_on_cpu {
            Self::run_on(
                &self.region,
                &mut self.counters,
                verbs,
                doorbell.write_data,
                results,
            );
            return Posted::At(0);
        }
        if self.track && (self.failure.is_dead(target) || !self.leased()) {
            self.fail_now(doorbell.coroutine, doorbell.tag, verbs.len(), target);
            return Posted::Deferred;
        }
        if target != self.node && !self.verbs_travel_in_messages() {
            // What a NIC sends, whether UCX or this CPU runs the verbs.
            self.counters.count_remote_verbs(verbs);
        }
        if let Some(region) = self.mapped.get(target as usize) {
            Self::run_on(
                region,
                &mut self.counters,
                verbs,
                doorbell.write_data,
                results,
            );
            return Posted::At(0);
        }
        if self.emulate {
            self.post_to_peer(doorbell, target);
            return Posted::Deferred;
        }
        if verbs.len() == 1 {
            match self.try_immediate(&verbs[0], results) {
                Immediate::Done => return Posted::At(0),
                Immediate::Failed => {
                    self.fail_now(doorbell.coroutine, doorbell.tag, 1, target);
                    return Posted::Deferred;
                }
                Immediate::NotTaken => {}
            }
        }
        self.post_flight(doorbell, results)
    }

    fn send(&mut self, msg: Message) {
        self.counters.count_send(&msg);
        if msg.dst_node == self.node && msg.dst_worker == self.worker_index {
            self.state().inbox.push(msg);
            return;
        }
        debug_assert_eq!(
            msg.dst_worker, self.worker_index,
            "RPCs go to the worker of the same index"
        );
        let request = msg.flags & MSG_REPLY == 0;
        if self.track {
            if self.failure.is_dead(msg.dst_node) || !self.leased() {
                if request {
                    // Bounced at once, as a dead peer's would be.
                    let mut msg = msg;
                    std::mem::swap(&mut msg.src_node, &mut msg.dst_node);
                    std::mem::swap(&mut msg.src_worker, &mut msg.dst_worker);
                    msg.flags |= MSG_REPLY | MSG_FAILED;
                    self.state().inbox.push(msg);
                } else {
                    self.state().pool.push(msg.payload);
                }
                return;
            }
            if request {
                self.awaiting.push(Awaited {
                    node: msg.dst_node,
                    coroutine: msg.coroutine,
                    call: msg.call,
                    kind: msg.kind,
                    fail_flags: (msg.flags & (MSG_PASSIVE | MSG_COMPLETION))
                        | MSG_REPLY
                        | MSG_FAILED,
                    verbs: false,
                });
            }
        }
        self.send_am(msg);
    }

    fn receive(&mut self, out: &mut Vec<Message>) {
        // The previous turn's messages leave now, one per destination.
        self.flush_outbox();
        self.progress();
        let state = self.state;
        // SAFETY: see `state`; no callback runs during this block.
        unsafe {
            let first_new = out.len();
            out.append(&mut (*state).inbox);
            if self.track && self.failure.dead_epoch() > 0 {
                self.drop_from_dead_peers(out, first_new);
            }
            if self.emulate {
                self.serve_verbs(out, first_new);
            }
            if self.track {
                for msg in &out[first_new..] {
                    if msg.flags & MSG_REPLY != 0 && msg.src_node != self.node {
                        if let Some(index) = self.awaiting.iter().position(|a| {
                            !a.verbs
                                && a.node == msg.src_node
                                && a.coroutine == msg.coroutine
                                && a.call == msg.call
                        }) {
                            self.awaiting.swap_remove(index);
                        }
                    }
                }
            }
            for raw in (*state).done.drain(..) {
                if self.track {
                    if let Some(index) = self.in_flight.iter().position(|&f| f == raw) {
                        self.in_flight.swap_remove(index);
                    }
                }
                let mut flight = Box::from_raw(raw);
                let mut payload = (*state).pool.pop().unwrap_or_default();
                payload.clear();
                // Fault-tolerant: a failed batch is `MSG_FAILED` from its
                // target, which the runtime holds until the peer is
                // declared dead, then fails the round.
                let failed = flight.failed && self.track;
                if failed {
                    // No results: the runtime fails the round.
                    payload.clear();
                } else if flight.failed {
                    // The run is being abandoned (PeerFailure is set); zeros
                    // keep the worker from waiting forever meanwhile.
                    payload.resize(flight.results.len(), 0);
                } else {
                    payload.extend_from_slice(&flight.results);
                }
                out.push(Message {
                    src_node: if failed { flight.target } else { self.node },
                    src_worker: self.worker_index,
                    dst_node: self.node,
                    dst_worker: self.worker_index,
                    coroutine: flight.coroutine,
                    call: flight.tag,
                    kind: flight.verbs,
                    flags: if failed {
                        MSG_COMPLETION | MSG_FAILED
                    } else {
                        MSG_COMPLETION
                    },
                    deliver_at_ns: 0,
                    payload,
                });
                flight.remaining = 0;
                self.flights.push(flight);
                self.outstanding -= 1;
            }
        }
        if self.track {
            self.fail_dead_peers();
            out.append(&mut self.state().inbox);
        }
        if self.outstanding == 0 {
            // Every operation posted so far has completed (PUTs included:
            // a batch with PUTs completes with its flush).
            for link in self.links.iter_mut() {
                *link = LinkOrder::default();
            }
        }
    }

    fn spend_cpu(&mut self, ns: u64) {
        if ns == 0 {
            return;
        }
        let until = self.now_ns() + ns;
        while self.now_ns() < until {
            std::hint::spin_loop();
        }
    }

    fn idle(&mut self, wake_at_ns: Option<u64>) {
        self.flush_outbox();
        let ready = |endpoint: &mut Self| {
            let events = endpoint.progress();
            let state = endpoint.state();
            events > 0
                || !state.inbox.is_empty()
                || !state.done.is_empty()
                || wake_at_ns.is_some_and(|t| endpoint.now_ns() >= t)
                || (endpoint.track && endpoint.failure.dead_epoch() != endpoint.seen_dead_epoch)
        };
        for _ in 0..SPIN_ROUNDS {
            if ready(self) {
                return;
            }
            std::hint::spin_loop();
        }
        if self.idle_spin_ns > 0 {
            let spin_until = self.now_ns() + self.idle_spin_ns;
            while self.now_ns() < spin_until {
                if ready(self) {
                    return;
                }
                std::hint::spin_loop();
            }
        }
        let yield_until = self.now_ns() + YIELD_BUDGET_NS;
        while self.now_ns() < yield_until {
            std::thread::yield_now();
            if ready(self) {
                return;
            }
        }
        // Return now and then even with nothing to do: the caller may have
        // been told to stop (the end of a run is not a message).
        let give_up_at = self.now_ns() + MAX_IDLE_NS;
        let mut sleep = Duration::from_micros(5);
        while self.now_ns() < give_up_at {
            let sleep_now = match wake_at_ns {
                Some(t) => sleep.min(Duration::from_nanos(t.saturating_sub(self.now_ns()))),
                None => sleep,
            };
            std::thread::sleep(sleep_now);
            if ready(self) || self.failure.get().is_some() || self.failure.abandoned() {
                return;
            }
            sleep = (sleep * 2).min(MAX_SLEEP);
        }
    }

    fn counters(&self) -> &VerbCounters {
        &self.counters
    }

    fn recycle(&mut self, buffer: Vec<u64>) {
        let pool = &mut self.state().pool;
        if pool.len() < SPARE_PAYLOADS {
            pool.push(buffer);
        }
    }
}

impl Drop for UcxEndpoint {
    fn drop(&mut self) {
        // SAFETY: on the owning thread; requests of a forced close need only
        // local progress. Flights still outstanding (a failed run) are
        // leaked rather than freed under UCX.
        unsafe {
            // Whatever the last turn queued, the peers may still wait for.
            self.flush_outbox();
            for _ in 0..16 {
                ucp_worker_progress(self.worker);
            }
            // The mapped views go before the rkeys that keep them mapped.
            self.mapped.clear();
            for &rkey in &self.rkeys {
                ucp_rkey_destroy(rkey);
            }
            for &ep in &self.eps {
                let mut param: ucp_request_param_t = std::mem::zeroed();
                param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
                param.flags = UCP_EP_CLOSE_FLAG_FORCE;
                let status = ucp_ep_close_nbx(ep, &param);
                if let StatusPtr::Request(request) = classify(status) {
                    let deadline = Instant::now() + Duration::from_secs(1);
                    while ucp_request_check_status(request) == UCS_INPROGRESS
                        && Instant::now() < deadline
                    {
                        ucp_worker_progress(self.worker);
                    }
                    ucp_request_free(request);
                }
            }
            if self.outstanding == 0 {
                ucp_worker_destroy(self.worker);
                drop(Box::from_raw(self.state));
            }
        }
        self.ep_errs.clear();
    }
}
