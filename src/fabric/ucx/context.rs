//! The process's UCX context ([`UcxContext`]): the `ucp_context`, this
//! node's region registered with UCX and its packed rkey, and what a peer
//! needs of it ([`PeerInfo`]).

use super::*;

/// The `ucp_context`, cleaned up when the last user (the context, or the
/// registered memory a region still lives in) goes.
pub(super) struct ContextHandle(pub(super) ucp_context_h);

// SAFETY: created with `mt_workers_shared`; only init/cleanup touch it
// directly, mem_map/unmap are thread-safe in UCP's MT build.
unsafe impl Send for ContextHandle {}
unsafe impl Sync for ContextHandle {}

impl Drop for ContextHandle {
    fn drop(&mut self) {
        // SAFETY: the last reference: no worker or mapping uses it.
        unsafe { ucp_cleanup(self.0) }
    }
}

/// Memory UCX allocated and registered; unmapped when the region that
/// lives in it is dropped.
pub(super) struct Mapping {
    pub(super) context: Arc<ContextHandle>,
    pub(super) memh: ucp_mem_h,
}

// SAFETY: the handle is only used to unmap, once, on drop.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the region using the memory is being dropped.
        unsafe {
            ucp_mem_unmap(self.context.0, self.memh);
        }
    }
}

/// One process's UCP context and its node's registered region.
pub struct UcxContext {
    pub(super) context: Arc<ContextHandle>,
    pub(super) rkey: Vec<u8>,
    pub(super) region: Arc<Region>,
    pub failure: Arc<PeerFailure>,
    pub epoch: Instant,
    pub(super) peer_errors: bool,
    /// Whether one-sided verbs may run on peers' regions mapped into this
    /// process (`--transport shm` or `auto`; see the module docs).
    pub(super) map_peers: bool,
    /// How long this node's idle workers spin before yielding, ns (module
    /// docs, "Idle"); read by each endpoint when it connects.
    pub(super) idle_spin_ns: AtomicU64,
}

// SAFETY: see `ContextHandle`; the rest is plain data.
unsafe impl Send for UcxContext {}
unsafe impl Sync for UcxContext {}

impl UcxContext {
    /// Initializes UCP for `endpoints` endpoints in all and allocates this
    /// node's region of `region_words` words through `ucp_mem_map`
    /// (`UCP_MEM_MAP_ALLOCATE`): UCX places it where its transports reach
    /// it best — a System V or POSIX shared segment first, so peers on
    /// the same host map it and access it with loads, stores and CPU
    /// atomics, with no CPU of this node involved (true one-sided).
    pub fn new(
        transport: TransportChoice,
        region_words: u64,
        endpoints: usize,
    ) -> Result<UcxContext, String> {
        // SAFETY: plain FFI calls with valid, zero-initialized parameter
        // structs whose layouts `ffi` asserts.
        unsafe {
            let mut config = null_mut();
            check(
                ucp_config_read(null(), null(), &mut config),
                "reading the UCX configuration (ucp_config_read)",
            )?;
            if let Some(tls) = transport.tls() {
                let name = CString::new("TLS").expect("no NUL");
                let value = CString::new(tls).expect("no NUL");
                let status = ucp_config_modify(config, name.as_ptr(), value.as_ptr());
                if status != UCS_OK {
                    ucp_config_release(config);
                    return Err(format!(
                        "setting UCX_TLS={tls} failed: {}",
                        status_text(status)
                    ));
                }
            }
            let mut params: ucp_params_t = std::mem::zeroed();
            params.field_mask = UCP_PARAM_FIELD_FEATURES
                | UCP_PARAM_FIELD_MT_WORKERS_SHARED
                | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
            params.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO64 | UCP_FEATURE_AM;
            params.mt_workers_shared = 1;
            params.estimated_num_eps = endpoints;
            let mut raw = null_mut();
            let status = ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &mut raw);
            ucp_config_release(config);
            check(status, "initializing UCX (ucp_init)").map_err(|e| {
                format!(
                    "{e}; transports asked for: {}",
                    transport.tls().unwrap_or("UCX's default")
                )
            })?;
            let context = Arc::new(ContextHandle(raw));
            let bytes = (region_words as usize * 8).max(8);
            let mut map: ucp_mem_map_params_t = std::mem::zeroed();
            map.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
            map.length = bytes;
            map.flags = UCP_MEM_MAP_ALLOCATE;
            let mut memh = null_mut();
            check(
                ucp_mem_map(context.0, &map, &mut memh),
                &format!("allocating {bytes} bytes of registered memory (ucp_mem_map)"),
            )?;
            let mapping = Mapping {
                context: context.clone(),
                memh,
            };
            let mut attr: ucp_mem_attr_t = std::mem::zeroed();
            attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
            check(
                ucp_mem_query(memh, &mut attr),
                "querying the registered memory (ucp_mem_query)",
            )?;
            if attr.address.is_null() || attr.length < bytes || attr.address as usize % 8 != 0 {
                return Err(format!(
                    "UCX allocated {} bytes at {:p}; needed {bytes}, 8-byte aligned",
                    attr.length, attr.address
                ));
            }
            let region = Arc::new(Region::external(
                attr.address as *mut std::sync::atomic::AtomicU64,
                region_words as usize,
                Box::new(mapping),
            ));
            let mut buffer = null_mut();
            let mut size = 0usize;
            check(
                ucp_rkey_pack(context.0, memh, &mut buffer, &mut size),
                "packing the rkey (ucp_rkey_pack)",
            )?;
            let rkey = std::slice::from_raw_parts(buffer as *const u8, size).to_vec();
            ucp_rkey_buffer_release(buffer);
            Ok(UcxContext {
                context,
                rkey,
                region,
                failure: Arc::new(PeerFailure::default()),
                epoch: Instant::now(),
                peer_errors: transport.peer_errors(),
                map_peers: matches!(transport, TransportChoice::Shm | TransportChoice::Auto),
                idle_spin_ns: AtomicU64::new(0),
            })
        }
    }

    /// This node's region (in UCX-registered memory).
    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }

    /// The packed rkey of this node's region (sent to every peer).
    pub fn rkey(&self) -> &[u8] {
        &self.rkey
    }

    /// The worker threads of every rank on this host, this one's included,
    /// which sets how long the endpoints connected from now on spin when
    /// idle before they yield (module docs, "Idle"): `IDLE_SPIN_NS` (1 ms) where
    /// each has a core, a brief spin only where they outnumber the cores.
    /// Called by the node before its workers connect.
    pub fn set_host_worker_threads(&self, threads: usize) {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let spin_ns = if threads <= cores { IDLE_SPIN_NS } else { 0 };
        self.idle_spin_ns.store(spin_ns, Ordering::Relaxed);
    }

    /// The virtual address of word 0 of this node's region.
    pub fn base_address(&self) -> u64 {
        self.region.base_ptr() as u64
    }
}

/// What the bootstrap tells each worker about one node.
#[derive(Clone, Debug)]
pub struct PeerInfo {
    /// Address of the worker with this worker's index on that node.
    pub worker_address: Vec<u8>,
    pub rkey: Vec<u8>,
    pub base_address: u64,
}
