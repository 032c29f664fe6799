//! Hand-written declarations of the part of the UCP API (UCX 1.13,
//! `ucp/api/ucp.h`) the `ucx` fabric uses — no bindgen, so the default build
//! stays light. Struct layouts mirror the C headers field for field; the
//! sizes are asserted in this module's tests against what `gcc` reports for
//! UCX 1.13.1 on x86-64 Linux (the ABI these declarations describe).
//!
//! Only this module and `fabric::ucx` touch raw UCX handles.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_uint, c_void};

pub type ucs_status_t = i8;
pub type ucs_status_ptr_t = *mut c_void;
pub type ucp_context_h = *mut c_void;
pub type ucp_config_t = c_void;
pub type ucp_worker_h = *mut c_void;
pub type ucp_ep_h = *mut c_void;
pub type ucp_mem_h = *mut c_void;
pub type ucp_rkey_h = *mut c_void;
pub type ucp_address_t = c_void;
pub type ucp_datatype_t = u64;

pub const UCS_OK: ucs_status_t = 0;
pub const UCS_INPROGRESS: ucs_status_t = 1;
pub const UCS_ERR_NO_RESOURCE: ucs_status_t = -2;
pub const UCS_ERR_INVALID_PARAM: ucs_status_t = -5;
/// `UCS_ERR_LAST`: pointers at or above `(uintptr_t)UCS_ERR_LAST` are errors.
pub const UCS_ERR_LAST: isize = -100;

pub const UCP_API_MAJOR: c_uint = 1;
pub const UCP_API_MINOR: c_uint = 13;

pub const UCP_PARAM_FIELD_FEATURES: u64 = 1 << 0;
pub const UCP_PARAM_FIELD_MT_WORKERS_SHARED: u64 = 1 << 5;
pub const UCP_PARAM_FIELD_ESTIMATED_NUM_EPS: u64 = 1 << 6;
pub const UCP_FEATURE_RMA: u64 = 1 << 1;
pub const UCP_FEATURE_AMO64: u64 = 1 << 3;
pub const UCP_FEATURE_AM: u64 = 1 << 6;

pub const UCP_WORKER_PARAM_FIELD_THREAD_MODE: u64 = 1 << 0;
pub const UCS_THREAD_MODE_SINGLE: c_int = 0;

pub const UCP_WORKER_ATTR_FIELD_ADDRESS: u64 = 1 << 1;

pub const UCP_EP_PARAM_FIELD_REMOTE_ADDRESS: u64 = 1 << 0;
pub const UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE: u64 = 1 << 1;
pub const UCP_EP_PARAM_FIELD_ERR_HANDLER: u64 = 1 << 2;
pub const UCP_ERR_HANDLING_MODE_PEER: c_int = 1;
pub const UCP_EP_CLOSE_FLAG_FORCE: u32 = 1 << 0;

pub const UCP_MEM_MAP_PARAM_FIELD_ADDRESS: u64 = 1 << 0;
pub const UCP_MEM_MAP_PARAM_FIELD_LENGTH: u64 = 1 << 1;
pub const UCP_MEM_MAP_PARAM_FIELD_FLAGS: u64 = 1 << 2;
pub const UCP_MEM_MAP_ALLOCATE: c_uint = 1 << 1;
pub const UCP_MEM_ATTR_FIELD_ADDRESS: u64 = 1 << 0;
pub const UCP_MEM_ATTR_FIELD_LENGTH: u64 = 1 << 1;

pub const UCP_OP_ATTR_FIELD_CALLBACK: u32 = 1 << 1;
pub const UCP_OP_ATTR_FIELD_USER_DATA: u32 = 1 << 2;
pub const UCP_OP_ATTR_FIELD_DATATYPE: u32 = 1 << 3;
pub const UCP_OP_ATTR_FIELD_FLAGS: u32 = 1 << 4;
pub const UCP_OP_ATTR_FIELD_REPLY_BUFFER: u32 = 1 << 5;
pub const UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL: u32 = 1 << 18;

pub const UCP_ATOMIC_OP_ADD: c_int = 0;
pub const UCP_ATOMIC_OP_CSWAP: c_int = 2;

pub const UCP_AM_HANDLER_PARAM_FIELD_ID: u64 = 1 << 0;
pub const UCP_AM_HANDLER_PARAM_FIELD_FLAGS: u64 = 1 << 1;
pub const UCP_AM_HANDLER_PARAM_FIELD_CB: u64 = 1 << 2;
pub const UCP_AM_HANDLER_PARAM_FIELD_ARG: u64 = 1 << 3;
pub const UCP_AM_FLAG_WHOLE_MSG: u32 = 1 << 0;
pub const UCP_AM_SEND_FLAG_EAGER: u32 = 1 << 1;
pub const UCP_AM_RECV_ATTR_FLAG_RNDV: u64 = 1 << 17;

/// `ucp_dt_make_contig(8)`: 8-byte elements.
pub const DATATYPE_WORD: ucp_datatype_t = 8 << 3;

pub type ucp_send_nbx_callback_t =
    unsafe extern "C" fn(request: *mut c_void, status: ucs_status_t, user_data: *mut c_void);
pub type ucp_am_recv_callback_t = unsafe extern "C" fn(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    param: *const ucp_am_recv_param_t,
) -> ucs_status_t;
pub type ucp_err_handler_cb_t =
    unsafe extern "C" fn(arg: *mut c_void, ep: ucp_ep_h, status: ucs_status_t);

#[repr(C)]
pub struct ucp_params_t {
    pub field_mask: u64,
    pub features: u64,
    pub request_size: usize,
    pub request_init: *const c_void,
    pub request_cleanup: *const c_void,
    pub tag_sender_mask: u64,
    pub mt_workers_shared: c_int,
    pub estimated_num_eps: usize,
    pub estimated_num_ppn: usize,
    pub name: *const c_char,
}

#[repr(C)]
pub struct ucp_worker_params_t {
    pub field_mask: u64,
    pub thread_mode: c_int,
    pub cpu_mask: [u64; 16],
    pub events: c_uint,
    pub user_data: *mut c_void,
    pub event_fd: c_int,
    pub flags: u64,
    pub name: *const c_char,
    pub am_alignment: usize,
    pub client_id: u64,
}

#[repr(C)]
pub struct ucp_worker_attr_t {
    pub field_mask: u64,
    pub thread_mode: c_int,
    pub address_flags: u32,
    pub address: *mut ucp_address_t,
    pub address_length: usize,
    pub max_am_header: usize,
    pub name: [c_char; 32],
    pub max_debug_string: usize,
}

#[repr(C)]
pub struct ucp_err_handler_t {
    pub cb: Option<ucp_err_handler_cb_t>,
    pub arg: *mut c_void,
}

#[repr(C)]
pub struct ucs_sock_addr_t {
    pub addr: *const c_void,
    pub addrlen: u32,
}

#[repr(C)]
pub struct ucp_ep_params_t {
    pub field_mask: u64,
    pub address: *const ucp_address_t,
    pub err_mode: c_int,
    pub err_handler: ucp_err_handler_t,
    pub user_data: *mut c_void,
    pub flags: c_uint,
    pub sockaddr: ucs_sock_addr_t,
    pub conn_request: *mut c_void,
    pub name: *const c_char,
    pub local_sockaddr: ucs_sock_addr_t,
}

#[repr(C)]
pub struct ucp_mem_map_params_t {
    pub field_mask: u64,
    pub address: *mut c_void,
    pub length: usize,
    pub flags: c_uint,
    pub prot: c_uint,
    pub memory_type: c_int,
}

#[repr(C)]
pub struct ucp_mem_attr_t {
    pub field_mask: u64,
    pub address: *mut c_void,
    pub length: usize,
    pub mem_type: c_int,
}

#[repr(C)]
pub struct ucp_request_param_t {
    pub op_attr_mask: u32,
    pub flags: u32,
    pub request: *mut c_void,
    pub cb: Option<ucp_send_nbx_callback_t>,
    pub datatype: ucp_datatype_t,
    pub user_data: *mut c_void,
    pub reply_buffer: *mut c_void,
    pub memory_type: c_int,
    pub recv_info: *mut c_void,
    pub memh: ucp_mem_h,
}

#[repr(C)]
pub struct ucp_am_handler_param_t {
    pub field_mask: u64,
    pub id: c_uint,
    pub flags: u32,
    pub cb: Option<ucp_am_recv_callback_t>,
    pub arg: *mut c_void,
}

#[repr(C)]
pub struct ucp_am_recv_param_t {
    pub recv_attr: u64,
    pub reply_ep: ucp_ep_h,
}

/// `FILE` of the C library (only passed through).
pub type FILE = c_void;

#[link(name = "ucp")]
extern "C" {
    pub fn ucp_get_version_string() -> *const c_char;
    pub fn ucp_config_read(
        env_prefix: *const c_char,
        filename: *const c_char,
        config_p: *mut *mut ucp_config_t,
    ) -> ucs_status_t;
    pub fn ucp_config_modify(
        config: *mut ucp_config_t,
        name: *const c_char,
        value: *const c_char,
    ) -> ucs_status_t;
    pub fn ucp_config_release(config: *mut ucp_config_t);
    pub fn ucp_init_version(
        api_major_version: c_uint,
        api_minor_version: c_uint,
        params: *const ucp_params_t,
        config: *const ucp_config_t,
        context_p: *mut ucp_context_h,
    ) -> ucs_status_t;
    pub fn ucp_cleanup(context: ucp_context_h);
    pub fn ucp_worker_create(
        context: ucp_context_h,
        params: *const ucp_worker_params_t,
        worker_p: *mut ucp_worker_h,
    ) -> ucs_status_t;
    pub fn ucp_worker_destroy(worker: ucp_worker_h);
    pub fn ucp_worker_query(worker: ucp_worker_h, attr: *mut ucp_worker_attr_t) -> ucs_status_t;
    pub fn ucp_worker_release_address(worker: ucp_worker_h, address: *mut ucp_address_t);
    pub fn ucp_worker_progress(worker: ucp_worker_h) -> c_uint;
    pub fn ucp_worker_fence(worker: ucp_worker_h) -> ucs_status_t;
    pub fn ucp_worker_set_am_recv_handler(
        worker: ucp_worker_h,
        param: *const ucp_am_handler_param_t,
    ) -> ucs_status_t;
    pub fn ucp_ep_create(
        worker: ucp_worker_h,
        params: *const ucp_ep_params_t,
        ep_p: *mut ucp_ep_h,
    ) -> ucs_status_t;
    pub fn ucp_ep_close_nbx(ep: ucp_ep_h, param: *const ucp_request_param_t) -> ucs_status_ptr_t;
    pub fn ucp_ep_flush_nbx(ep: ucp_ep_h, param: *const ucp_request_param_t) -> ucs_status_ptr_t;
    pub fn ucp_ep_print_info(ep: ucp_ep_h, stream: *mut FILE);
    pub fn ucp_mem_map(
        context: ucp_context_h,
        params: *const ucp_mem_map_params_t,
        memh_p: *mut ucp_mem_h,
    ) -> ucs_status_t;
    pub fn ucp_mem_unmap(context: ucp_context_h, memh: ucp_mem_h) -> ucs_status_t;
    pub fn ucp_mem_query(memh: ucp_mem_h, attr: *mut ucp_mem_attr_t) -> ucs_status_t;
    pub fn ucp_rkey_pack(
        context: ucp_context_h,
        memh: ucp_mem_h,
        rkey_buffer_p: *mut *mut c_void,
        size_p: *mut usize,
    ) -> ucs_status_t;
    pub fn ucp_rkey_buffer_release(rkey_buffer: *mut c_void);
    pub fn ucp_ep_rkey_unpack(
        ep: ucp_ep_h,
        rkey_buffer: *const c_void,
        rkey_p: *mut ucp_rkey_h,
    ) -> ucs_status_t;
    pub fn ucp_rkey_destroy(rkey: ucp_rkey_h);
    pub fn ucp_rkey_ptr(rkey: ucp_rkey_h, raddr: u64, addr_p: *mut *mut c_void) -> ucs_status_t;
    pub fn ucp_get_nbx(
        ep: ucp_ep_h,
        buffer: *mut c_void,
        count: usize,
        remote_addr: u64,
        rkey: ucp_rkey_h,
        param: *const ucp_request_param_t,
    ) -> ucs_status_ptr_t;
    pub fn ucp_put_nbx(
        ep: ucp_ep_h,
        buffer: *const c_void,
        count: usize,
        remote_addr: u64,
        rkey: ucp_rkey_h,
        param: *const ucp_request_param_t,
    ) -> ucs_status_ptr_t;
    pub fn ucp_atomic_op_nbx(
        ep: ucp_ep_h,
        opcode: c_int,
        buffer: *const c_void,
        count: usize,
        remote_addr: u64,
        rkey: ucp_rkey_h,
        param: *const ucp_request_param_t,
    ) -> ucs_status_ptr_t;
    pub fn ucp_am_send_nbx(
        ep: ucp_ep_h,
        id: c_uint,
        header: *const c_void,
        header_length: usize,
        buffer: *const c_void,
        count: usize,
        param: *const ucp_request_param_t,
    ) -> ucs_status_ptr_t;
    pub fn ucp_request_check_status(request: *mut c_void) -> ucs_status_t;
    pub fn ucp_request_free(request: *mut c_void);
}

#[link(name = "ucs")]
extern "C" {
    pub fn ucs_status_string(status: ucs_status_t) -> *const c_char;
}

// The C library (always linked by std): a memory stream to capture
// `ucp_ep_print_info`'s text.
extern "C" {
    pub fn open_memstream(ptr: *mut *mut c_char, size: *mut usize) -> *mut FILE;
    pub fn fclose(stream: *mut FILE) -> c_int;
    pub fn free(ptr: *mut c_void);
}

/// What `ucs_status_ptr_t` holds: done now, an error, or a request.
pub enum StatusPtr {
    Done,
    Error(ucs_status_t),
    Request(*mut c_void),
}

#[inline]
pub fn classify(ptr: ucs_status_ptr_t) -> StatusPtr {
    let raw = ptr as isize;
    if ptr.is_null() {
        StatusPtr::Done
    } else if (raw as usize) >= (UCS_ERR_LAST as usize) {
        StatusPtr::Error(raw as ucs_status_t)
    } else {
        StatusPtr::Request(ptr)
    }
}

/// UCX's text for `status`.
pub fn status_text(status: ucs_status_t) -> String {
    // SAFETY: ucs_status_string returns a static NUL-terminated string.
    unsafe {
        let text = ucs_status_string(status);
        if text.is_null() {
            format!("UCX status {status}")
        } else {
            std::ffi::CStr::from_ptr(text)
                .to_string_lossy()
                .into_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    /// Sizes `gcc` reports for UCX 1.13.1's headers on x86-64: a mismatch
    /// means these declarations no longer describe the library.
    #[test]
    fn struct_layouts_match_ucx_1_13() {
        assert_eq!(size_of::<ucp_params_t>(), 80);
        assert_eq!(size_of::<ucp_worker_params_t>(), 200);
        assert_eq!(size_of::<ucp_worker_attr_t>(), 80);
        assert_eq!(size_of::<ucp_ep_params_t>(), 104);
        assert_eq!(size_of::<ucp_mem_map_params_t>(), 40);
        assert_eq!(size_of::<ucp_request_param_t>(), 72);
        assert_eq!(size_of::<ucp_am_handler_param_t>(), 32);
        assert_eq!(size_of::<ucp_am_recv_param_t>(), 16);
        assert_eq!(size_of::<ucp_mem_attr_t>(), 32);
        assert_eq!(std::mem::offset_of!(ucp_ep_params_t, name), 80);
        assert_eq!(std::mem::offset_of!(ucp_worker_params_t, client_id), 192);
        assert_eq!(std::mem::offset_of!(ucp_request_param_t, memh), 64);
    }
}
