use std::ffi::CString;
use std::net::Ipv4Addr;
use std::time::Duration;

use tch::{Device, Tensor};

use crate::ffi::{self, RawProcessGroup, RawWork};
use crate::{CommError, Launch, Store, Work};

/// Which c10d backend moves the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub enum Backend {
    /// Gloo: CPU tensors, TCP transport.
    Gloo,
    /// NCCL: CUDA tensors (CUDA builds only).
    Nccl,
}

impl Backend {
    /// The name results record.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The backend for tensors on `device`, as PyTorch chooses it.
    pub fn for_device(device: Device) -> Backend {
        match device {
            Device::Cuda(_) => Backend::Nccl,
            _ => Backend::Gloo,
        }
    }

    /// Whether this build can create the backend.
    pub fn is_available(self) -> bool {
        match self {
            Backend::Gloo => true,
            // SAFETY: a constant query.
            Backend::Nccl => (unsafe { ffi::stratlab_comm_has_nccl() }) == 1,
        }
    }
}

/// A reduction. Gloo has no average, so [`ReduceOp::Average`] runs as a sum divided by the
/// group size when the work completes (exactly what PyTorch DDP does over Gloo).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    /// The elementwise sum.
    Sum,
    /// The sum divided by the group size.
    Average,
    /// The elementwise maximum.
    Max,
    /// The elementwise minimum.
    Min,
    /// The elementwise product.
    Product,
}

impl ReduceOp {
    fn code(self, backend: Backend) -> i32 {
        match (self, backend) {
            (ReduceOp::Sum, _) | (ReduceOp::Average, Backend::Gloo) => 0,
            (ReduceOp::Average, Backend::Nccl) => 1,
            (ReduceOp::Max, _) => 2,
            (ReduceOp::Min, _) => 3,
            (ReduceOp::Product, _) => 4,
        }
    }
}

/// How to build a group.
#[derive(Debug, Clone)]
pub struct GroupOptions {
    /// Backend (Gloo for CPU tensors).
    pub backend: Backend,
    /// How long rendezvous and each collective may wait for a peer before failing.
    pub timeout: Duration,
    /// Gloo's own worker threads (which run asynchronous collectives beside the caller).
    pub gloo_threads: usize,
    /// Network interface for Gloo (`GLOO_SOCKET_IFNAME`, as PyTorch reads it).
    pub interface: Option<String>,
    /// Address to bind Gloo to when no interface is named; `None` lets Gloo resolve the
    /// hostname. Loopback groups bind 127.0.0.1.
    pub hostname: Option<String>,
}

impl GroupOptions {
    /// Options for `launch`: Gloo (or NCCL for CUDA), the interface from
    /// `GLOO_SOCKET_IFNAME`, loopback when the whole group is local.
    pub fn for_launch(launch: &Launch, backend: Backend, timeout: Duration) -> GroupOptions {
        let interface = std::env::var("GLOO_SOCKET_IFNAME").ok().filter(|name| !name.is_empty());
        let hostname = launch.is_loopback().then(|| Ipv4Addr::LOCALHOST.to_string());
        // One Gloo thread: on a CPU machine each rank already has only its share of the cores.
        GroupOptions { backend, timeout, gloo_threads: 1, interface, hostname }
    }
}

/// A group of ranks running collectives through c10d. Every operation has an asynchronous
/// form returning a [`Work`] (the collective runs on the backend's threads meanwhile) and a
/// blocking form. All ranks must issue the same collectives in the same order.
pub struct ProcessGroup {
    raw: *mut RawProcessGroup,
    rank: usize,
    world_size: usize,
    backend: Backend,
    timeout: Duration,
    options: GroupOptions,
    // The backend holds its own reference to the store; kept so the store outlives it, and
    // so subgroups can rendezvous through it.
    store: Store,
}

// SAFETY: c10d backends are called from several threads by PyTorch; the handle is freed
// only in Drop.
unsafe impl Send for ProcessGroup {}
unsafe impl Sync for ProcessGroup {}

impl ProcessGroup {
    /// Rendezvous for `launch` (rank 0 serves the store at MASTER_ADDR:MASTER_PORT) and
    /// connects the group.
    pub fn init(launch: &Launch, options: &GroupOptions) -> Result<ProcessGroup, CommError> {
        let store = Store::tcp(
            &launch.master_addr,
            launch.master_port,
            launch.rank == 0,
            launch.rank,
            launch.world_size,
            options.timeout,
        )?;
        ProcessGroup::with_store(store, launch.rank, launch.world_size, options)
    }

    /// Connects the group through an existing store.
    pub fn with_store(
        store: Store,
        rank: usize,
        world_size: usize,
        options: &GroupOptions,
    ) -> Result<ProcessGroup, CommError> {
        let timeout_ms = options.timeout.as_millis() as i64;
        let fail = |message: String| CommError::Operation { operation: "connect", rank, world_size, message };
        let text =
            |value: &Option<String>| CString::new(value.clone().unwrap_or_default()).map_err(|e| fail(e.to_string()));
        let mut raw = std::ptr::null_mut();
        let status = match options.backend {
            Backend::Gloo => {
                let interface = text(&options.interface)?;
                let hostname = text(&options.hostname)?;
                // SAFETY: live store, valid C strings, out-pointer to a local.
                unsafe {
                    ffi::stratlab_pg_gloo(
                        store.raw,
                        rank as i32,
                        world_size as i32,
                        interface.as_ptr(),
                        hostname.as_ptr(),
                        timeout_ms,
                        options.gloo_threads.max(1) as i32,
                        &mut raw,
                    )
                }
            }
            Backend::Nccl => {
                if !Backend::Nccl.is_available() {
                    return Err(CommError::Unavailable(
                        "NCCL needs a CUDA libtorch; this build linked a CPU-only one (`just check-cuda` on a GPU node)"
                            .into(),
                    ));
                }
                // SAFETY: as above.
                unsafe { ffi::stratlab_pg_nccl(store.raw, rank as i32, world_size as i32, timeout_ms, &mut raw) }
            }
        };
        if status != 0 {
            return Err(fail(ffi::last_error()));
        }
        Ok(ProcessGroup {
            raw,
            rank,
            world_size,
            backend: options.backend,
            timeout: options.timeout,
            options: options.clone(),
            store,
        })
    }

    /// A group of some of this group's ranks (c10d's `new_group`): `ranks` in their new
    /// order, so `ranks[i]` becomes rank `i` of the subgroup. Every rank of `ranks` must
    /// call this with the same `name` and `ranks`; `name` keeps the subgroup's rendezvous
    /// keys apart from the world's and from other subgroups'. Ranks not in `ranks` need not
    /// call it.
    pub fn subgroup(&self, name: &str, ranks: &[usize]) -> Result<ProcessGroup, CommError> {
        let misuse = |message: String| CommError::Operation {
            operation: "subgroup",
            rank: self.rank,
            world_size: self.world_size,
            message,
        };
        let position = ranks
            .iter()
            .position(|&rank| rank == self.rank)
            .ok_or_else(|| misuse(format!("rank {} is not one of {ranks:?}", self.rank)))?;
        if let Some(&outside) = ranks.iter().find(|&&rank| rank >= self.world_size) {
            return Err(misuse(format!("rank {outside} is outside the group of {}", self.world_size)));
        }
        let prefix = CString::new(format!("subgroup/{name}/"))
            .map_err(|_| misuse(format!("subgroup name {name:?} has a NUL")))?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: live store, valid C string, out-pointer to a local.
        let status = unsafe { ffi::stratlab_store_prefixed(self.store.raw, prefix.as_ptr(), &mut raw) };
        if status != 0 {
            return Err(misuse(ffi::last_error()));
        }
        ProcessGroup::with_store(Store { raw }, position, ranks.len(), &self.options)
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Ranks in the group.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Where this group's buffers must live for a model on `device`: host memory for Gloo,
    /// the device itself for NCCL.
    pub fn tensor_device(&self, device: Device) -> Device {
        match self.backend {
            Backend::Nccl => device,
            Backend::Gloo => Device::Cpu,
        }
    }

    /// The collective timeout the group was built with.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Starts an all-reduce of `tensor` in place.
    pub fn all_reduce_async(&self, tensor: &mut Tensor, op: ReduceOp) -> Result<Work, CommError> {
        self.check("all_reduce", tensor)?;
        let divide = (op == ReduceOp::Average && self.backend == Backend::Gloo && self.world_size > 1)
            .then(|| (tensor.shallow_clone(), self.world_size as f64));
        let code = op.code(self.backend);
        let bytes = byte_size(tensor);
        self.launch("all_reduce", bytes, |out| unsafe {
            ffi::stratlab_pg_all_reduce(self.raw, tensor.as_mut_ptr(), code, out)
        })
        .map(|work| work.dividing(divide))
    }

    /// All-reduces `tensor` in place and waits.
    pub fn all_reduce(&self, tensor: &mut Tensor, op: ReduceOp) -> Result<(), CommError> {
        self.all_reduce_async(tensor, op)?.wait().map(drop)
    }

    /// Starts a broadcast of `root`'s `tensor` into every rank's `tensor`.
    pub fn broadcast_async(&self, tensor: &mut Tensor, root: usize) -> Result<Work, CommError> {
        self.check("broadcast", tensor)?;
        self.check_rank("broadcast", root)?;
        let bytes = byte_size(tensor);
        self.launch("broadcast", bytes, |out| unsafe {
            ffi::stratlab_pg_broadcast(self.raw, tensor.as_mut_ptr(), root as i32, out)
        })
    }

    /// Broadcasts and waits.
    pub fn broadcast(&self, tensor: &mut Tensor, root: usize) -> Result<(), CommError> {
        self.broadcast_async(tensor, root)?.wait().map(drop)
    }

    /// Starts a reduction of every rank's `tensor` into `root`'s (other ranks' tensors are
    /// left unspecified, as in c10d).
    pub fn reduce_async(&self, tensor: &mut Tensor, root: usize, op: ReduceOp) -> Result<Work, CommError> {
        self.check("reduce", tensor)?;
        self.check_rank("reduce", root)?;
        let divide =
            (op == ReduceOp::Average && self.backend == Backend::Gloo && self.rank == root && self.world_size > 1)
                .then(|| (tensor.shallow_clone(), self.world_size as f64));
        let code = op.code(self.backend);
        let bytes = byte_size(tensor);
        self.launch("reduce", bytes, |out| unsafe {
            ffi::stratlab_pg_reduce(self.raw, tensor.as_mut_ptr(), root as i32, code, out)
        })
        .map(|work| work.dividing(divide))
    }

    /// Reduces into `root` and waits.
    pub fn reduce(&self, tensor: &mut Tensor, root: usize, op: ReduceOp) -> Result<(), CommError> {
        self.reduce_async(tensor, root, op)?.wait().map(drop)
    }

    /// Starts gathering every rank's `input` into `outputs[rank]` on every rank.
    pub fn all_gather_async(&self, outputs: &mut [Tensor], input: &Tensor) -> Result<Work, CommError> {
        self.check("all_gather", input)?;
        if outputs.len() != self.world_size {
            return Err(self.misuse("all_gather", format!("{} outputs for {} ranks", outputs.len(), self.world_size)));
        }
        for output in outputs.iter() {
            self.check("all_gather", output)?;
        }
        let pointers: Vec<*mut torch_sys::C_tensor> = outputs.iter_mut().map(|t| t.as_mut_ptr()).collect();
        let mut input = input.shallow_clone();
        let bytes = byte_size(&input) * self.world_size as u64;
        self.launch("all_gather", bytes, |out| unsafe {
            ffi::stratlab_pg_all_gather(self.raw, pointers.as_ptr(), pointers.len() as i32, input.as_mut_ptr(), out)
        })
    }

    /// Gathers and waits.
    pub fn all_gather(&self, outputs: &mut [Tensor], input: &Tensor) -> Result<(), CommError> {
        self.all_gather_async(outputs, input)?.wait().map(drop)
    }

    /// Starts gathering every rank's `input` into `output`, laid end to end in rank order
    /// (c10d's `_allgather_base`, FSDP's and ZeRO's gather): `output` holds world-size
    /// times `input`'s elements.
    pub fn all_gather_into_async(&self, output: &mut Tensor, input: &Tensor) -> Result<Work, CommError> {
        self.check("all_gather_into", input)?;
        self.check("all_gather_into", output)?;
        self.check_chunks("all_gather_into", output, input)?;
        let mut input = input.shallow_clone();
        let bytes = byte_size(output);
        self.launch("all_gather_into", bytes, |out| unsafe {
            ffi::stratlab_pg_all_gather_into(self.raw, output.as_mut_ptr(), input.as_mut_ptr(), out)
        })
    }

    /// Starts reducing every rank's `input` and leaving this rank's chunk of the result
    /// (the `rank`th of world-size equal chunks) in `output` (c10d's `_reduce_scatter_base`).
    /// On Gloo it is an all-reduce of all of `input`: twice a ring reduce-scatter's traffic.
    pub fn reduce_scatter_async(&self, output: &mut Tensor, input: &Tensor, op: ReduceOp) -> Result<Work, CommError> {
        self.check("reduce_scatter", input)?;
        self.check("reduce_scatter", output)?;
        self.check_chunks("reduce_scatter", input, output)?;
        let divide = (op == ReduceOp::Average && self.backend == Backend::Gloo && self.world_size > 1)
            .then(|| (output.shallow_clone(), self.world_size as f64));
        let code = op.code(self.backend);
        let mut input = input.shallow_clone();
        let bytes = byte_size(&input);
        self.launch("reduce_scatter", bytes, |out| unsafe {
            ffi::stratlab_pg_reduce_scatter(self.raw, output.as_mut_ptr(), input.as_mut_ptr(), code, out)
        })
        .map(|work| work.dividing(divide))
    }

    /// Why `whole` is not world-size chunks of `chunk`'s size and kind, if it is not.
    fn check_chunks(&self, what: &'static str, whole: &Tensor, chunk: &Tensor) -> Result<(), CommError> {
        let (whole_n, chunk_n) = (whole.numel(), chunk.numel());
        if whole_n != chunk_n * self.world_size || whole.kind() != chunk.kind() {
            return Err(self.misuse(
                what,
                format!(
                    "{whole_n} {:?} elements are not {} ranks' chunks of {chunk_n} {:?}",
                    whole.kind(),
                    self.world_size,
                    chunk.kind()
                ),
            ));
        }
        Ok(())
    }

    /// Starts sending `tensor` to `dst`; `tag` matches it with the receiver's `recv`.
    pub fn send_async(&self, tensor: &Tensor, dst: usize, tag: u32) -> Result<Work, CommError> {
        self.check("send", tensor)?;
        self.check_peer("send", dst)?;
        let mut tensor = tensor.shallow_clone();
        let bytes = byte_size(&tensor);
        self.launch("send", bytes, |out| unsafe {
            ffi::stratlab_pg_send(self.raw, tensor.as_mut_ptr(), dst as i32, tag as i32, out)
        })
    }

    /// Sends and waits until the bytes have left.
    pub fn send(&self, tensor: &Tensor, dst: usize, tag: u32) -> Result<(), CommError> {
        self.send_async(tensor, dst, tag)?.wait().map(drop)
    }

    /// Starts receiving into `tensor` (its size and type must match the sender's) from `src`.
    pub fn recv_async(&self, tensor: &mut Tensor, src: usize, tag: u32) -> Result<Work, CommError> {
        self.check("recv", tensor)?;
        self.check_peer("recv", src)?;
        let bytes = byte_size(tensor);
        self.launch("recv", bytes, |out| unsafe {
            ffi::stratlab_pg_recv(self.raw, tensor.as_mut_ptr(), src as i32, tag as i32, out)
        })
    }

    /// Receives and waits.
    pub fn recv(&self, tensor: &mut Tensor, src: usize, tag: u32) -> Result<(), CommError> {
        self.recv_async(tensor, src, tag)?.wait().map(drop)
    }

    /// Starts a barrier.
    pub fn barrier_async(&self) -> Result<Work, CommError> {
        self.launch("barrier", 0, |out| unsafe { ffi::stratlab_pg_barrier(self.raw, out) })
    }

    /// Waits until every rank reaches the barrier.
    pub fn barrier(&self) -> Result<(), CommError> {
        self.barrier_async()?.wait().map(drop)
    }

    fn launch(
        &self,
        operation: &'static str,
        bytes: u64,
        call: impl FnOnce(*mut *mut RawWork) -> i32,
    ) -> Result<Work, CommError> {
        let launched_ns = crate::monotonic_ns();
        let mut raw = std::ptr::null_mut();
        if call(&mut raw) != 0 {
            return Err(self.misuse(operation, ffi::last_error()));
        }
        Ok(Work::new(raw, operation, bytes, launched_ns, self.rank, self.world_size))
    }

    fn misuse(&self, operation: &'static str, message: String) -> CommError {
        CommError::Operation { operation, rank: self.rank, world_size: self.world_size, message }
    }

    /// c10d needs dense tensors on the backend's device kind; checked here so the error
    /// names the operation instead of surfacing as a C++ message.
    fn check(&self, operation: &'static str, tensor: &Tensor) -> Result<(), CommError> {
        if !tensor.is_contiguous() {
            return Err(self.misuse(operation, "the tensor must be contiguous".into()));
        }
        let on_cuda = matches!(tensor.device(), Device::Cuda(_));
        match (self.backend, on_cuda) {
            (Backend::Gloo, true) => Err(self.misuse(operation, "Gloo groups here take CPU tensors".into())),
            (Backend::Nccl, false) => Err(self.misuse(operation, "NCCL takes CUDA tensors".into())),
            _ => Ok(()),
        }
    }

    fn check_rank(&self, operation: &'static str, rank: usize) -> Result<(), CommError> {
        if rank >= self.world_size {
            return Err(self.misuse(operation, format!("rank {rank} is not in 0..{}", self.world_size)));
        }
        Ok(())
    }

    fn check_peer(&self, operation: &'static str, peer: usize) -> Result<(), CommError> {
        self.check_rank(operation, peer)?;
        if peer == self.rank {
            return Err(self.misuse(operation, "a rank cannot send to or receive from itself".into()));
        }
        Ok(())
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        // SAFETY: created by the shim, freed once; pending work keeps its own references.
        unsafe { ffi::stratlab_pg_free(self.raw) }
    }
}

/// Bytes of a tensor's elements.
pub fn byte_size(tensor: &Tensor) -> u64 {
    (tensor.numel() * tensor.kind().elt_size_in_bytes()) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_names_are_the_recorded_ones() {
        assert_eq!([Backend::Gloo, Backend::Nccl].map(Backend::name), ["gloo", "nccl"]);
    }
}
