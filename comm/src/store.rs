use std::ffi::CString;
use std::time::Duration;

use crate::ffi::{self, RawStore};
use crate::CommError;

/// c10d's `TCPStore`: the key-value store ranks rendezvous through. Rank 0 serves it; the
/// others connect, retrying until the timeout.
pub struct Store {
    pub(crate) raw: *mut RawStore,
}

// SAFETY: c10d's TCPStore is used from several threads by libtorch itself; the handle is
// only freed in Drop.
unsafe impl Send for Store {}
unsafe impl Sync for Store {}

impl Store {
    /// Serves (`is_server`) or joins the store at `host:port`, waiting up to `timeout` for
    /// all `world_size` ranks to connect.
    pub fn tcp(
        host: &str,
        port: u16,
        is_server: bool,
        rank: usize,
        world_size: usize,
        timeout: Duration,
    ) -> Result<Store, CommError> {
        let rendezvous_error = |message: String| CommError::Rendezvous {
            address: format!("{host}:{port}"),
            rank,
            world_size,
            timeout,
            message,
        };
        let c_host = CString::new(host).map_err(|_| rendezvous_error("the host contains a NUL byte".into()))?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid C string, out-pointer to a local; the shim catches every exception.
        let status = unsafe {
            ffi::stratlab_store_tcp(
                c_host.as_ptr(),
                port,
                is_server as i32,
                world_size as i32,
                timeout.as_millis() as i64,
                &mut raw,
            )
        };
        if status != 0 {
            return Err(rendezvous_error(ffi::last_error()));
        }
        Ok(Store { raw })
    }

    /// Sets `key` to `value` for every rank to read.
    pub fn set(&self, key: &str, value: &[u8]) -> Result<(), CommError> {
        let c_key = CString::new(key).map_err(|_| CommError::Unavailable(format!("store key {key:?} has a NUL")))?;
        // SAFETY: live handle, valid key and slice.
        let status = unsafe { ffi::stratlab_store_set(self.raw, c_key.as_ptr(), value.as_ptr(), value.len()) };
        if status != 0 {
            return Err(store_error("set", ffi::last_error()));
        }
        Ok(())
    }

    /// Reads `key`, waiting until some rank sets it or the store's timeout passes.
    pub fn get(&self, key: &str) -> Result<Vec<u8>, CommError> {
        let c_key = CString::new(key).map_err(|_| CommError::Unavailable(format!("store key {key:?} has a NUL")))?;
        let mut bytes = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: live handle, out-pointers to locals.
        let status = unsafe { ffi::stratlab_store_get(self.raw, c_key.as_ptr(), &mut bytes, &mut len) };
        if status != 0 {
            return Err(store_error("get", ffi::last_error()));
        }
        // SAFETY: the shim malloc'ed `len` bytes (at least 1) at `bytes`; freed right after.
        let value = unsafe { std::slice::from_raw_parts(bytes, len) }.to_vec();
        unsafe { ffi::stratlab_comm_free_bytes(bytes) };
        Ok(value)
    }
}

fn store_error(operation: &'static str, message: String) -> CommError {
    CommError::Operation { operation, rank: 0, world_size: 0, message: format!("store: {message}") }
}

impl Drop for Store {
    fn drop(&mut self) {
        // SAFETY: created by the shim, freed once.
        unsafe { ffi::stratlab_store_free(self.raw) }
    }
}
