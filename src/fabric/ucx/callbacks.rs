//! What UCX's callbacks reach: the per-worker state they deliver into
//! ([`CbState`]), the records of a doorbell batch and of an active message
//! in flight, and the completion and error callbacks themselves.

use super::*;

/// Where callbacks deliver (boxed: its address is handed to UCX).
pub(super) struct CbState {
    pub(super) node: NodeId,
    pub(super) worker: u16,
    pub(super) inbox: Vec<Message>,
    pub(super) done: Vec<*mut Flight>,
    pub(super) pool: Vec<Vec<u64>>,
    pub(super) sends_done: Vec<*mut SendFlight>,
}

/// What is in flight from one worker to one node, for FIFO (see `order`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct LinkOrder {
    /// An operation that may not have taken effect at the target yet.
    pub(super) pending: bool,
    /// One of those writes (WRITE, CAS, FAA).
    pub(super) writes: bool,
}

/// One doorbell batch in flight.
pub(super) struct Flight {
    pub(super) state: *mut CbState,
    /// The node its verbs go to.
    pub(super) target: NodeId,
    /// Failed by `fail_dead_peers` while UCX still held it: leaked, never
    /// delivered again.
    pub(super) abandoned: bool,
    pub(super) coroutine: u16,
    pub(super) tag: u16,
    pub(super) verbs: u16,
    pub(super) remaining: u32,
    pub(super) failed: bool,
    /// Result words of the READ/CAS/FAA verbs in verb order.
    pub(super) results: Vec<u64>,
    /// WRITE payloads and atomic operands.
    pub(super) staging: Vec<u64>,
}

/// What the fast path of a single verb did.
pub(super) enum Immediate {
    Done,
    /// Not taken: the general path posts the verb.
    NotTaken,
    /// Its peer failed (fault-tolerant run): the batch completes as failed.
    Failed,
}

/// One AM send whose buffers UCX still uses.
pub(super) struct SendFlight {
    pub(super) state: *mut CbState,
    pub(super) header: [u64; HEADER_WORDS],
    pub(super) payload: Vec<u64>,
}

/// Error-handler argument of one endpoint.
pub(super) struct EpErr {
    pub(super) node: NodeId,
    pub(super) failure: Arc<PeerFailure>,
}

pub(super) unsafe extern "C" fn on_ep_error(arg: *mut c_void, _ep: ucp_ep_h, status: ucs_status_t) {
    // SAFETY: `arg` is the endpoint's boxed `EpErr`, alive while the ep is.
    let err = &*(arg as *const EpErr);
    err.failure.set(err.node, status);
}

pub(super) unsafe extern "C" fn on_verb_done(
    request: *mut c_void,
    status: ucs_status_t,
    user: *mut c_void,
) {
    // SAFETY: `user` is the flight the operation belongs to; it is not
    // recycled before `remaining` reaches 0, which only happens here or in
    // `post` after the last immediate completion.
    let flight = &mut *(user as *mut Flight);
    if status != UCS_OK {
        flight.failed = true;
    }
    flight.remaining -= 1;
    if flight.remaining == 0 && !flight.abandoned {
        (*flight.state).done.push(flight);
    }
    ucp_request_free(request);
}

pub(super) unsafe extern "C" fn on_send_done(
    request: *mut c_void,
    _status: ucs_status_t,
    user: *mut c_void,
) {
    // SAFETY: `user` is the boxed send flight of this request.
    let send = user as *mut SendFlight;
    (*(*send).state).sends_done.push(send);
    ucp_request_free(request);
}
