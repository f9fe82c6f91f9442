//! glibc's malloc, which libtorch's CPU allocator calls for every tensor, tuned once per
//! stratlab process so that a step's tensors reuse memory the previous step freed.
//!
//! By default glibc serves large blocks with fresh `mmap`s below a threshold it keeps
//! raising, and gives the top of its heap back to the kernel once more than twice that is
//! free. A training step frees nearly all it allocated, so the next step faulted its pages
//! in again, and how often depended on what the process had allocated before: the small
//! CNN's training step at 64 samples took 17–22 % longer in a fresh trial worker than in a
//! process that had profiled stages first (MNIST at two threads: 43 ms against 35 ms), so
//! the profile mispredicted the trial by that much. With the threshold fixed and the heap
//! kept, both took 35 ms and the trial steps of that cell got that much faster. (PyTorch
//! users get the same from jemalloc, tcmalloc or these variables: `MALLOC_MMAP_THRESHOLD_`,
//! `MALLOC_TRIM_THRESHOLD_`.)

/// The largest threshold glibc accepts on 64-bit (`DEFAULT_MMAP_THRESHOLD_MAX`): blocks
/// up to it come from the heap and are reused.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD_BYTES: libc::c_int = 32 << 20;
/// Free memory at the top of the heap kept rather than given back.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD_BYTES: libc::c_int = 1 << 30;

/// Tunes this process's malloc as the module says; a no-op where malloc is not glibc's.
/// Call first thing in `main`, before any thread allocates.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets malloc's parameters; it returns 0 for a value it refuses,
    // which leaves glibc's default in place (slower, never wrong).
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES);
    }
}
