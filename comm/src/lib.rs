//! Collectives for stratlab's multi-worker strategies, on libtorch's c10d: the engine
//! PyTorch's DDP uses (Gloo for CPU tensors, NCCL for CUDA tensors in CUDA builds), reached
//! through a small C++ shim (`cpp/c10d_shim.cpp`) so timings compare with PyTorch's.
//!
//! - [`Launch`]: torchrun's variables (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`,
//!   `MASTER_PORT`), so any launcher can start a worker.
//! - [`Store`] and [`ProcessGroup`]: rendezvous through c10d's TCPStore, then collectives,
//!   each asynchronous ([`Work`]) or blocking.
//! - Failures (a dead peer, a timeout) are [`CommError`]s, never panics.

mod clock;
mod comm_error;
mod ffi;
mod launch;
mod process_group;
mod store;
mod work;

pub use clock::monotonic_ns;
pub use comm_error::CommError;
pub use launch::{free_port, Launch};
pub use process_group::{byte_size, Backend, GroupOptions, ProcessGroup, ReduceOp};
pub use store::Store;
pub use work::{Completed, Work};
