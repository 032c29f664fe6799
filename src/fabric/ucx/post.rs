//! Posting a doorbell batch of one-sided verbs through UCP: the fast path
//! of a single verb that completes at once, and the general path of a
//! boxed flight whose operations complete in callbacks.

use super::*;
use crate::fabric::{Doorbell, Posted};

impl UcxEndpoint {
    pub(super) fn note(
        flight: &mut Flight,
        status: ucs_status_ptr_t,
        failure: &PeerFailure,
        node: NodeId,
    ) {
        match classify(status) {
            StatusPtr::Done => flight.remaining -= 1,
            StatusPtr::Request(_) => {}
            StatusPtr::Error(code) => {
                flight.failed = true;
                flight.remaining -= 1;
                failure.set(node, code);
            }
        }
    }

    /// The fast path of a batch of one READ, CAS or FAA: posted with
    /// `UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL` straight into the caller's result
    /// slot, no staging, no completion message. Taken only while nothing
    /// to that node is pending (FIFO holds trivially) and while UCX keeps
    /// completing such operations at once (UCX's shared-memory lanes do,
    /// where they carry verbs). If UCX answers with a
    /// request anyway (a connection still being set up, a transport that
    /// completes later), it is awaited here — the caller's buffer must not
    /// outlive the call — and the fast path rests for that node for the
    /// next `IMMEDIATE_BACKOFF` single verbs.
    pub(super) fn try_immediate(&mut self, verb: &Verb, results: &mut [u64]) -> Immediate {
        let node = verb.node as usize;
        if verb.kind == VerbKind::Write
            || self.links[node].pending
            || (verb.node == self.node && self.local_on_cpu)
        {
            return Immediate::NotTaken;
        }
        if self.immediate[node] > 0 {
            self.immediate[node] -= 1;
            return Immediate::NotTaken;
        }
        let ep = self.eps[node];
        let rkey = self.rkeys[node];
        let remote = self.bases[node] + verb.addr * 8;
        let buf = verb.buf as usize;
        // SAFETY: the result slot is the caller's and outlives this call,
        // which does not return before UCX is done with it.
        let status = unsafe {
            let mut param: ucp_request_param_t = std::mem::zeroed();
            param.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
            match verb.kind {
                VerbKind::Read => {
                    let out = &mut results[buf..buf + verb.len as usize];
                    ucp_get_nbx(
                        ep,
                        out.as_mut_ptr() as *mut c_void,
                        out.len() * 8,
                        remote,
                        rkey,
                        &param,
                    )
                }
                _ => {
                    let operand = if verb.kind == VerbKind::Cas {
                        results[buf] = verb.swap;
                        verb.compare
                    } else {
                        verb.compare
                    };
                    param.op_attr_mask |=
                        UCP_OP_ATTR_FIELD_REPLY_BUFFER | UCP_OP_ATTR_FIELD_DATATYPE;
                    param.reply_buffer = &mut results[buf] as *mut u64 as *mut c_void;
                    param.datatype = DATATYPE_WORD;
                    let opcode = if verb.kind == VerbKind::Cas {
                        UCP_ATOMIC_OP_CSWAP
                    } else {
                        UCP_ATOMIC_OP_ADD
                    };
                    ucp_atomic_op_nbx(
                        ep,
                        opcode,
                        &operand as *const u64 as *const c_void,
                        1,
                        remote,
                        rkey,
                        &param,
                    )
                }
            }
        };
        match classify(status) {
            StatusPtr::Done => {}
            // Cannot complete at once now: take the general path.
            StatusPtr::Error(code) if code == UCS_ERR_NO_RESOURCE => return Immediate::NotTaken,
            // Anything else (e.g. the flag unsupported on this transport):
            // the general path, from now on; it reports real failures.
            StatusPtr::Error(_) => {
                self.immediate[node] = IMMEDIATE_BACKOFF;
                return Immediate::NotTaken;
            }
            StatusPtr::Request(request) => {
                self.immediate[node] = IMMEDIATE_BACKOFF;
                let mut code = UCS_INPROGRESS;
                // SAFETY: polled to completion on this thread, freed once
                // (a request given up on a dead peer is freed in progress:
                // UCX completes it, into a result slot the round no longer
                // reads, since the round fails).
                unsafe {
                    while code == UCS_INPROGRESS
                        && !self.failure.abandoned()
                        && !self.failure.is_dead(verb.node)
                    {
                        ucp_worker_progress(self.worker);
                        code = ucp_request_check_status(request);
                    }
                    ucp_request_free(request);
                }
                if code != UCS_OK {
                    // Never completed (a dead peer, an abandoned run) or
                    // failed: its result slot holds no answer.
                    self.counters.count(verb);
                    return Immediate::Failed;
                }
            }
        }
        self.counters.count(verb);
        self.counters.doorbells += 1;
        Immediate::Done
    }

    /// The general path: the batch's operations go out through UCP into
    /// a boxed flight (its result and staging buffers), and complete in
    /// `on_verb_done`; delivered at once when all completed immediately.
    pub(super) fn post_flight(&mut self, doorbell: Doorbell<'_>, results: &mut [u64]) -> Posted {
        let mut flight = self.flight_for(doorbell);
        // SAFETY: the flight's buffers were sized above and are not touched
        // until it completes; it is boxed, so they do not move.
        unsafe {
            self.issue(&mut flight, doorbell.verbs, doorbell.write_data);
        }
        self.counters.doorbells += 1;
        flight.remaining -= 1; // the guard
        if flight.remaining == 0 && !flight.failed {
            // Everything completed at once: hand the results over now.
            deliver_results(&flight, doorbell.verbs, results);
            self.flights.push(flight);
            return Posted::At(0);
        }
        self.outstanding += 1;
        let raw = Box::into_raw(flight);
        if self.track {
            self.in_flight.push(raw);
        }
        // SAFETY: raw is a live flight; if it already completed (all
        // immediate but failed) deliver it through the done list.
        unsafe {
            if (*raw).remaining == 0 {
                (*self.state).done.push(raw);
            }
        }
        Posted::Deferred
    }

    /// A recycled (or new) flight for `verbs`, its result and staging
    /// buffers sized before any operation points into them.
    fn flight_for(&mut self, doorbell: Doorbell<'_>) -> Box<Flight> {
        let verbs = doorbell.verbs;
        let target = verbs[0].node;
        let mut flight = self.flights.pop().unwrap_or_else(|| {
            Box::new(Flight {
                state: self.state,
                target,
                abandoned: false,
                coroutine: 0,
                tag: 0,
                verbs: 0,
                remaining: 0,
                failed: false,
                results: Vec::new(),
                staging: Vec::new(),
            })
        });
        let mut result_words = 0usize;
        let mut staging_words = 0usize;
        let mut writes = false;
        for verb in verbs {
            debug_assert_eq!(verb.node, target, "a doorbell batch targets one node");
            match verb.kind {
                VerbKind::Read => result_words += verb.len as usize,
                VerbKind::Write => {
                    staging_words += verb.len as usize;
                    writes = true;
                }
                VerbKind::Cas | VerbKind::Faa => {
                    result_words += 1;
                    staging_words += 1;
                }
            }
        }
        flight.target = target;
        flight.abandoned = false;
        flight.coroutine = doorbell.coroutine;
        flight.tag = doorbell.tag;
        flight.verbs = verbs.len() as u16;
        flight.failed = false;
        flight.results.clear();
        flight.results.resize(result_words, 0);
        flight.staging.clear();
        flight.staging.resize(staging_words, 0);
        // One for every operation plus a guard released at the end.
        flight.remaining = verbs.len() as u32 + writes as u32 + 1;
        flight
    }

    /// Posts every verb of the batch into `flight`, then, with writes, the
    /// flush that makes their remote completion known.
    ///
    /// # Safety
    /// `flight` was sized for `verbs` by `flight_for`, and its buffers are
    /// neither moved nor touched until it completes.
    unsafe fn issue(&mut self, flight: &mut Flight, verbs: &[Verb], write_data: &[u64]) {
        let target = flight.target;
        let ep = self.eps[target as usize];
        let flight_ptr: *mut Flight = flight;
        // RMA counts bytes (UCP supports only ucp_dt_make_contig(1)
        // there); atomics count 8-byte elements.
        let mut param: ucp_request_param_t = std::mem::zeroed();
        param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        param.cb = Some(on_verb_done);
        param.user_data = flight_ptr as *mut c_void;
        let mut at = BufferAt::default();
        let mut writes = false;
        for verb in verbs {
            self.counters.count(verb);
            self.order(target, verb.kind != VerbKind::Read);
            let status = self.issue_one(flight_ptr, verb, write_data, &param, &mut at);
            let done = !matches!(classify(status), StatusPtr::Request(_));
            let put = verb.kind == VerbKind::Write;
            writes |= put;
            self.posted(target, verb.kind != VerbKind::Read, done, put);
            Self::note(&mut *flight_ptr, status, &self.failure, target);
        }
        if writes {
            // Remote completion of the PUTs (and, by the flushes, of
            // everything before them on this endpoint).
            let status = ucp_ep_flush_nbx(ep, &param);
            Self::note(&mut *flight_ptr, status, &self.failure, target);
            if !matches!(classify(status), StatusPtr::Request(_)) {
                // Flushed at once: everything before is remotely done.
                self.links[target as usize] = LinkOrder::default();
            }
        }
    }

    /// Posts one verb of a batch: a READ into the flight's results, a
    /// WRITE from its staging, an atomic with its operand staged and its
    /// reply into the results.
    ///
    /// # Safety
    /// As [`UcxEndpoint::issue`]; `at` is where the verb's words go.
    unsafe fn issue_one(
        &mut self,
        flight: *mut Flight,
        verb: &Verb,
        write_data: &[u64],
        param: &ucp_request_param_t,
        at: &mut BufferAt,
    ) -> ucs_status_ptr_t {
        let target = verb.node as usize;
        let (ep, rkey) = (self.eps[target], self.rkeys[target]);
        let remote = self.bases[target] + verb.addr * 8;
        let len = verb.len as usize;
        let results_ptr = (*flight).results.as_mut_ptr();
        let staging_ptr = (*flight).staging.as_mut_ptr();
        match verb.kind {
            VerbKind::Read => {
                let out = results_ptr.add(at.result);
                at.result += len;
                ucp_get_nbx(ep, out as *mut c_void, len * 8, remote, rkey, param)
            }
            VerbKind::Write => {
                let buf = verb.buf as usize;
                let src = staging_ptr.add(at.staging);
                std::ptr::copy_nonoverlapping(write_data[buf..buf + len].as_ptr(), src, len);
                at.staging += len;
                ucp_put_nbx(ep, src as *const c_void, len * 8, remote, rkey, param)
            }
            VerbKind::Cas | VerbKind::Faa => {
                let operand = staging_ptr.add(at.staging);
                let reply = results_ptr.add(at.result);
                at.staging += 1;
                at.result += 1;
                // CSWAP: `buffer` holds the expected value, the reply
                // buffer the new one and then the old value.
                *operand = verb.compare;
                let opcode = if verb.kind == VerbKind::Cas {
                    *reply = verb.swap;
                    UCP_ATOMIC_OP_CSWAP
                } else {
                    UCP_ATOMIC_OP_ADD
                };
                let mut atomic = std::ptr::read(param);
                atomic.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER | UCP_OP_ATTR_FIELD_DATATYPE;
                atomic.datatype = DATATYPE_WORD;
                atomic.reply_buffer = reply as *mut c_void;
                let operand = operand as *const c_void;
                ucp_atomic_op_nbx(ep, opcode, operand, 1, remote, rkey, &atomic)
            }
        }
    }
}

/// Where the next verb's words go in a flight's buffers.
#[derive(Default)]
struct BufferAt {
    result: usize,
    staging: usize,
}

/// Copies a batch that completed at once from its flight into the
/// caller's result words, each verb's at its `buf`.
fn deliver_results(flight: &Flight, verbs: &[Verb], results: &mut [u64]) {
    let mut from = 0;
    for verb in verbs {
        if verb.kind != VerbKind::Write {
            let len = verb.len as usize;
            let at = verb.buf as usize;
            results[at..at + len].copy_from_slice(&flight.results[from..from + len]);
            from += len;
        }
    }
}
