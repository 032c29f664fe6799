//! A verbena worker's `ucp_worker` before the bootstrap connects it
//! ([`UcxWorkerHost`]), and its connection into an endpoint.

use super::*;

/// A verbena worker's `ucp_worker`, before the bootstrap connects it.
pub struct UcxWorkerHost {
    pub(super) worker: ucp_worker_h,
    pub(super) state: *mut CbState,
    pub(super) address: Vec<u8>,
}

impl UcxWorkerHost {
    /// Creates the worker of `(node, worker)` on the calling thread.
    pub fn new(context: &UcxContext, node: NodeId, worker: u16) -> Result<UcxWorkerHost, String> {
        // SAFETY: valid parameter structs; the CbState outlives the worker
        // (freed in `UcxEndpoint::drop` after the worker is destroyed).
        unsafe {
            let mut params: ucp_worker_params_t = std::mem::zeroed();
            params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
            params.thread_mode = UCS_THREAD_MODE_SINGLE;
            let mut handle = null_mut();
            check(
                ucp_worker_create(context.context.0, &params, &mut handle),
                "creating a UCX worker (ucp_worker_create)",
            )?;
            let state = Box::into_raw(Box::new(CbState {
                node,
                worker,
                inbox: Vec::with_capacity(64),
                done: Vec::with_capacity(64),
                pool: Vec::new(),
                sends_done: Vec::new(),
            }));
            let address = match serve_and_address(handle, state) {
                Ok(address) => address,
                Err(error) => {
                    ucp_worker_destroy(handle);
                    drop(Box::from_raw(state));
                    return Err(error);
                }
            };
            Ok(UcxWorkerHost {
                worker: handle,
                state,
                address,
            })
        }
    }

    /// This worker's UCP address (sent to every peer).
    pub fn address(&self) -> &[u8] {
        &self.address
    }

    /// Connects to the worker of the same index on every node (`peers`,
    /// by node; this node's own entry gives the loopback endpoint).
    pub fn connect(
        self,
        context: &UcxContext,
        peers: &[PeerInfo],
        local_atomics_cpu: bool,
    ) -> Result<UcxEndpoint, String> {
        let (node, worker) = unsafe { ((*self.state).node, (*self.state).worker) };
        let mut endpoint = UcxEndpoint {
            worker: self.worker,
            state: self.state,
            node,
            worker_index: worker,
            eps: Vec::with_capacity(peers.len()),
            ep_errs: Vec::with_capacity(peers.len()),
            rkeys: Vec::with_capacity(peers.len()),
            bases: peers.iter().map(|p| p.base_address).collect(),
            region: context.region.clone(),
            local_on_cpu: local_atomics_cpu,
            mapped: Vec::new(),
            emulate: false,
            arrivals: Vec::new(),
            failure: context.failure.clone(),
            epoch: context.epoch,
            counters: VerbCounters::default(),
            flights: Vec::new(),
            sends: Vec::new(),
            outbox: vec![Vec::new(); peers.len()],
            outbox_frames: vec![0; peers.len()],
            outstanding: 0,
            links: vec![LinkOrder::default(); peers.len()],
            immediate: vec![0; peers.len()],
            track: context.failure.tolerant(),
            idle_spin_ns: context.idle_spin_ns.load(Ordering::Relaxed),
            in_flight: Vec::new(),
            awaiting: Vec::new(),
            seen_dead_epoch: 0,
        };
        std::mem::forget(self);
        for (peer, info) in peers.iter().enumerate() {
            let err = Box::new(EpErr {
                node: peer as NodeId,
                failure: context.failure.clone(),
            });
            // SAFETY: the address bytes are a UCP worker address from the
            // bootstrap; the error argument is boxed and kept in `ep_errs`.
            unsafe {
                let mut params: ucp_ep_params_t = std::mem::zeroed();
                params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
                params.address = info.worker_address.as_ptr() as *const c_void;
                if context.peer_errors {
                    params.field_mask |=
                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
                    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
                    params.err_handler = ucp_err_handler_t {
                        cb: Some(on_ep_error),
                        arg: &*err as *const EpErr as *mut c_void,
                    };
                }
                let mut ep = null_mut();
                check(
                    ucp_ep_create(endpoint.worker, &params, &mut ep),
                    &format!("connecting worker {worker} to node {peer} (ucp_ep_create)"),
                )?;
                endpoint.eps.push(ep);
                endpoint.ep_errs.push(err);
                let mut rkey = null_mut();
                check(
                    ucp_ep_rkey_unpack(ep, info.rkey.as_ptr() as *const c_void, &mut rkey),
                    &format!("unpacking node {peer}'s rkey"),
                )?;
                endpoint.rkeys.push(rkey);
            }
        }
        if context.map_peers {
            endpoint.mapped = endpoint.map_regions();
        }
        endpoint.emulate = !endpoint.maps_regions() && endpoint.rma_is_emulated();
        // Coherent with every peer's verbs, which are CPU operations too.
        endpoint.local_on_cpu |= endpoint.maps_regions() || endpoint.emulate;
        Ok(endpoint)
    }
}

impl Drop for UcxWorkerHost {
    fn drop(&mut self) {
        // SAFETY: never connected (connect forgets self), so nothing else
        // refers to the worker or its state.
        unsafe {
            ucp_worker_destroy(self.worker);
            drop(Box::from_raw(self.state));
        }
    }
}

/// Registers the RPC handler of a new worker `handle` (its callbacks get
/// `state`) and returns the worker's UCP address; on an error the caller
/// destroys both.
///
/// # Safety
/// `handle` is a live worker of this thread and `state` its live CbState.
unsafe fn serve_and_address(handle: ucp_worker_h, state: *mut CbState) -> Result<Vec<u8>, String> {
    let mut am: ucp_am_handler_param_t = std::mem::zeroed();
    am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID
        | UCP_AM_HANDLER_PARAM_FIELD_FLAGS
        | UCP_AM_HANDLER_PARAM_FIELD_CB
        | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    am.id = AM_RPC;
    am.flags = UCP_AM_FLAG_WHOLE_MSG;
    am.cb = Some(on_rpc);
    am.arg = state as *mut c_void;
    check(
        ucp_worker_set_am_recv_handler(handle, &am),
        "registering the RPC handler",
    )?;
    let mut attr: ucp_worker_attr_t = std::mem::zeroed();
    attr.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS;
    check(
        ucp_worker_query(handle, &mut attr),
        "querying the worker address",
    )?;
    let address =
        std::slice::from_raw_parts(attr.address as *const u8, attr.address_length).to_vec();
    ucp_worker_release_address(handle, attr.address);
    Ok(address)
}
