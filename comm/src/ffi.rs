//! The shim's C functions (`cpp/c10d_shim.cpp`). Every call returns 0 on success; on
//! failure the message is in [`stratlab_comm_last_error`] on the same thread.

use std::os::raw::{c_char, c_int};

use torch_sys::C_tensor;

#[repr(C)]
pub struct RawStore {
    _private: [u8; 0],
}
#[repr(C)]
pub struct RawProcessGroup {
    _private: [u8; 0],
}
#[repr(C)]
pub struct RawWork {
    _private: [u8; 0],
}

extern "C" {
    pub fn stratlab_comm_last_error() -> *const c_char;
    pub fn stratlab_comm_monotonic_ns() -> i64;
    pub fn stratlab_comm_has_nccl() -> c_int;
    pub fn stratlab_comm_free_bytes(bytes: *mut u8);

    pub fn stratlab_store_tcp(
        host: *const c_char,
        port: u16,
        is_server: c_int,
        world_size: c_int,
        timeout_ms: i64,
        out: *mut *mut RawStore,
    ) -> c_int;
    pub fn stratlab_store_free(store: *mut RawStore);
    pub fn stratlab_store_prefixed(store: *mut RawStore, prefix: *const c_char, out: *mut *mut RawStore) -> c_int;
    pub fn stratlab_store_set(store: *mut RawStore, key: *const c_char, value: *const u8, len: usize) -> c_int;
    pub fn stratlab_store_get(store: *mut RawStore, key: *const c_char, value: *mut *mut u8, len: *mut usize) -> c_int;

    pub fn stratlab_pg_gloo(
        store: *mut RawStore,
        rank: c_int,
        size: c_int,
        interface: *const c_char,
        hostname: *const c_char,
        timeout_ms: i64,
        threads: c_int,
        out: *mut *mut RawProcessGroup,
    ) -> c_int;
    pub fn stratlab_pg_nccl(
        store: *mut RawStore,
        rank: c_int,
        size: c_int,
        timeout_ms: i64,
        out: *mut *mut RawProcessGroup,
    ) -> c_int;
    pub fn stratlab_pg_free(pg: *mut RawProcessGroup);

    pub fn stratlab_pg_all_reduce(
        pg: *mut RawProcessGroup,
        t: *mut C_tensor,
        op: c_int,
        out: *mut *mut RawWork,
    ) -> c_int;
    pub fn stratlab_pg_broadcast(
        pg: *mut RawProcessGroup,
        t: *mut C_tensor,
        root: c_int,
        out: *mut *mut RawWork,
    ) -> c_int;
    pub fn stratlab_pg_reduce(
        pg: *mut RawProcessGroup,
        t: *mut C_tensor,
        root: c_int,
        op: c_int,
        out: *mut *mut RawWork,
    ) -> c_int;
    pub fn stratlab_pg_all_gather(
        pg: *mut RawProcessGroup,
        outputs: *const *mut C_tensor,
        count: c_int,
        input: *mut C_tensor,
        out: *mut *mut RawWork,
    ) -> c_int;
    pub fn stratlab_pg_all_gather_into(
        pg: *mut RawProcessGroup,
        output: *mut C_tensor,
        input: *mut C_tensor,
        out: *mut *mut RawWork,
    ) -> c_int;
    pub fn stratlab_pg_reduce_scatter(
        pg: *mut RawProcessGroup,
        output: *mut C_tensor,
        input: *mut C_tensor,
        op: c_int,
        out: *mut *mut RawWork,
    ) -> c_int;
    pub fn stratlab_pg_send(
        pg: *mut RawProcessGroup,
        t: *mut C_tensor,
        dst: c_int,
        tag: c_int,
        out: *mut *mut RawWork,
    ) -> c_int;
    pub fn stratlab_pg_recv(
        pg: *mut RawProcessGroup,
        t: *mut C_tensor,
        src: c_int,
        tag: c_int,
        out: *mut *mut RawWork,
    ) -> c_int;
    pub fn stratlab_pg_barrier(pg: *mut RawProcessGroup, out: *mut *mut RawWork) -> c_int;

    pub fn stratlab_work_wait(work: *mut RawWork, timeout_ms: i64) -> c_int;
    pub fn stratlab_work_is_completed(work: *mut RawWork) -> c_int;
    pub fn stratlab_work_completed_ns(work: *mut RawWork) -> i64;
    pub fn stratlab_work_free(work: *mut RawWork);
}

/// The message of the last failed shim call on this thread.
pub fn last_error() -> String {
    // SAFETY: the shim returns a pointer to a thread-local, NUL-terminated std::string
    // buffer that stays valid until the next failing call on this thread.
    unsafe { std::ffi::CStr::from_ptr(stratlab_comm_last_error()) }.to_string_lossy().into_owned()
}
