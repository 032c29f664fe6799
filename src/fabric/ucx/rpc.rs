//! Two-sided messages: every frame bound for one node within one turn
//! leaves as one active message (`send_am`, `flush_outbox`), and the
//! receiving callback splits a message back into its frames (`on_rpc`).

use super::*;

/// The two header words of one frame (see [`UcxEndpoint::send_am`]).
pub(super) fn frame_header(msg: &Message) -> [u64; FRAME_HEADER_WORDS] {
    debug_assert!(msg.payload.len() <= u32::MAX as usize);
    [
        ((msg.src_node as u64) << 48)
            | ((msg.src_worker as u64) << 32)
            | ((msg.coroutine as u64) << 16)
            | msg.call as u64,
        ((msg.payload.len() as u64) << 32) | ((msg.kind as u64) << 8) | msg.flags as u64,
    ]
}

pub(super) unsafe extern "C" fn on_rpc(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    param: *const ucp_am_recv_param_t,
) -> ucs_status_t {
    // SAFETY: `arg` is the worker's CbState, used only on its thread (AM
    // callbacks run inside that worker's `ucp_worker_progress`); header and
    // data are valid for the call (read unaligned: UCX does not align them).
    let state = &mut *(arg as *mut CbState);
    if header_length != HEADER_WORDS * 8
        || (*param).recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV != 0
        || length % 8 != 0
    {
        // Not a verbena message (eager is forced on the sending side).
        return UCS_OK;
    }
    let frames = std::ptr::read_unaligned(header as *const u64);
    let words = data as *const u64;
    let total = length / 8;
    let mut at = 0usize;
    for _ in 0..frames {
        if at + FRAME_HEADER_WORDS > total {
            break; // malformed: only a peer built otherwise sends this
        }
        let w0 = std::ptr::read_unaligned(words.add(at));
        let w1 = std::ptr::read_unaligned(words.add(at + 1));
        at += FRAME_HEADER_WORDS;
        let len = (w1 >> 32) as usize;
        if len > total - at {
            break;
        }
        let mut payload = state.pool.pop().unwrap_or_default();
        payload.clear();
        payload.resize(len, 0);
        std::ptr::copy_nonoverlapping(
            words.add(at) as *const u8,
            payload.as_mut_ptr() as *mut u8,
            len * 8,
        );
        at += len;
        state.inbox.push(Message {
            src_node: (w0 >> 48) as NodeId,
            src_worker: (w0 >> 32) as u16,
            dst_node: state.node,
            dst_worker: state.worker,
            coroutine: (w0 >> 16) as u16,
            call: w0 as u16,
            kind: (w1 >> 8) as u16,
            flags: w1 as u8,
            deliver_at_ns: 0,
            payload,
        });
    }
    UCS_OK
}

impl UcxEndpoint {
    /// Queues `msg` for its node (no bookkeeping: see `send`). Everything
    /// bound for one node within one turn of the event loop leaves as one
    /// active message (`flush_outbox`, at the next `receive` or `idle`):
    /// frames of `[frame_header, payload]`, which the receiver splits and
    /// files in order. One AM endpoint carries the frames in the order they
    /// were queued, so the FIFO of RPCs and of emulated verbs holds, and a
    /// failed peer fails every frame of the message alike (each request is
    /// tracked on its own in `awaiting`). The logical counts (RPCs,
    /// doorbells) are kept where the messages are made; `wire_messages`
    /// and `wire_bytes` count what leaves.
    pub(super) fn send_am(&mut self, msg: Message) {
        let node = msg.dst_node as usize;
        let outbox = &mut self.outbox[node];
        outbox.extend_from_slice(&frame_header(&msg));
        outbox.extend_from_slice(&msg.payload);
        self.outbox_frames[node] += 1;
        self.state().pool.push(msg.payload);
        if self.outbox[node].len() >= MAX_COALESCED_WORDS {
            self.flush_node(node as NodeId);
        }
    }

    /// Sends every node's queued frames (see `send_am`).
    pub(super) fn flush_outbox(&mut self) {
        for node in 0..self.outbox.len() {
            if self.outbox_frames[node] > 0 {
                self.flush_node(node as NodeId);
            }
        }
    }

    /// Sends the frames queued for `node` as one active message.
    pub(super) fn flush_node(&mut self, node: NodeId) {
        let mut send = self.sends.pop().unwrap_or_else(|| {
            Box::new(SendFlight {
                state: self.state,
                header: [0; HEADER_WORDS],
                payload: Vec::new(),
            })
        });
        send.header = [std::mem::take(&mut self.outbox_frames[node as usize])];
        debug_assert!(send.payload.is_empty());
        std::mem::swap(&mut send.payload, &mut self.outbox[node as usize]);
        self.counters.wire_messages += 1;
        self.counters.wire_bytes += 8 * (HEADER_WORDS + send.payload.len()) as u64;
        let ep = self.eps[node as usize];
        let raw = Box::into_raw(send);
        // SAFETY: header and payload live in the boxed send flight until the
        // completion callback (or now, if it completed at once).
        let status = unsafe {
            let mut param: ucp_request_param_t = std::mem::zeroed();
            param.op_attr_mask =
                UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
            param.cb = Some(on_send_done);
            param.user_data = raw as *mut c_void;
            param.flags = UCP_AM_SEND_FLAG_EAGER;
            ucp_am_send_nbx(
                ep,
                AM_RPC,
                (*raw).header.as_ptr() as *const c_void,
                HEADER_WORDS * 8,
                (*raw).payload.as_ptr() as *const c_void,
                (*raw).payload.len() * 8,
                &param,
            )
        };
        match classify(status) {
            StatusPtr::Request(_) => {}
            other => {
                if let StatusPtr::Error(code) = other {
                    self.failure.set(node, code);
                }
                // SAFETY: UCX no longer refers to the buffers.
                let mut send = unsafe { Box::from_raw(raw) };
                send.payload.clear();
                self.sends.push(send);
            }
        }
    }
}
