// The collective engine PyTorch's DDP uses, libtorch's c10d, behind plain C functions:
// a TCPStore for rendezvous, Gloo process groups for CPU tensors (NCCL for CUDA tensors in
// CUDA builds, STRATLAB_NCCL), and every collective as an asynchronous work handle.
//
// Rules that keep Rust safe: no C++ exception crosses the boundary (each entry point
// catches and stores the message in a thread-local for stratlab_comm_last_error), tensors
// arrive as `at::Tensor*` (tch's C_tensor) and are copied into c10d's vectors (a copy of an
// at::Tensor shares storage, so collectives write into the caller's tensor), and every
// handle is a heap object the Rust side frees exactly once.
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef STRATLAB_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

namespace {

thread_local std::string last_error;

int fail(const std::exception& e) {
  last_error = e.what();
  return 1;
}

int fail_unknown() {
  last_error = "unknown C++ exception";
  return 1;
}

// CLOCK_MONOTONIC, the clock Rust's Instant reads on Linux: one time line for the
// training loop and for the completion callbacks on c10d's threads, shared by every process
// on the machine.
int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

c10d::ReduceOp reduce_op(int op) {
  switch (op) {
    case 0: return c10d::ReduceOp::SUM;
    case 1: return c10d::ReduceOp::AVG;
    case 2: return c10d::ReduceOp::MAX;
    case 3: return c10d::ReduceOp::MIN;
    case 4: return c10d::ReduceOp::PRODUCT;
  }
  throw std::invalid_argument("unknown reduce op " + std::to_string(op));
}

}  // namespace

struct stratlab_store {
  c10::intrusive_ptr<c10d::Store> store;
};

struct stratlab_pg {
  c10::intrusive_ptr<c10d::Backend> backend;
};

struct stratlab_work {
  c10::intrusive_ptr<c10d::Work> work;
  // Set on c10d's thread when the work's future completes; -1 until then, or when the
  // backend offers no future for this kind of work (then the waiter's clock is used).
  std::shared_ptr<std::atomic<int64_t>> completed_ns;
};

namespace {

stratlab_work* wrap(c10::intrusive_ptr<c10d::Work> work) {
  auto done = std::make_shared<std::atomic<int64_t>>(-1);
  try {
    auto future = work->getFuture();
    future->addCallback([done](c10::ivalue::Future&) { done->store(monotonic_ns()); });
  } catch (...) {
    // Gloo's send/recv work has no future; the completion time comes from wait().
  }
  return new stratlab_work{std::move(work), std::move(done)};
}

}  // namespace

extern "C" {

const char* stratlab_comm_last_error() { return last_error.c_str(); }

int64_t stratlab_comm_monotonic_ns() { return monotonic_ns(); }

int stratlab_store_tcp(const char* host, uint16_t port, int is_server, int world_size, int64_t timeout_ms,
                       stratlab_store** out) {
  try {
    c10d::TCPStoreOptions options;
    options.port = port;
    options.isServer = is_server != 0;
    options.numWorkers = static_cast<std::size_t>(world_size);
    options.waitWorkers = true;
    options.timeout = std::chrono::milliseconds(timeout_ms);
    auto store = c10::make_intrusive<c10d::TCPStore>(std::string(host), options);
    *out = new stratlab_store{store};
    return 0;
  } catch (const std::exception& e) {
    return fail(e);
  } catch (...) {
    return fail_unknown();
  }
}

void stratlab_store_free(stratlab_store* store) { delete store; }

// A view of `store` whose keys are all under `prefix`: what c10d's new_group uses so the
// subgroups' rendezvous keys do not collide with the world group's.
int stratlab_store_prefixed(stratlab_store* store, const char* prefix, stratlab_store** out) {
  try {
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(std::string(prefix), store->store);
    *out = new stratlab_store{prefixed};
    return 0;
  } catch (const std::exception& e) {
    return fail(e);
  } catch (...) {
    return fail_unknown();
  }
}

int stratlab_store_set(stratlab_store* store, const char* key, const uint8_t* value, size_t len) {
  try {
    store->store->set(std::string(key), std::vector<uint8_t>(value, value + len));
    return 0;
  } catch (const std::exception& e) {
    return fail(e);
  } catch (...) {
    return fail_unknown();
  }
}

// Blocks until `key` is set (or the store's timeout); the value is copied into a buffer
// the caller frees with stratlab_comm_free_bytes.
int stratlab_store_get(stratlab_store* store, const char* key, uint8_t** value, size_t* len) {
  try {
    auto bytes = store->store->get(std::string(key));
    *len = bytes.size();
    *value = static_cast<uint8_t*>(std::malloc(bytes.size() > 0 ? bytes.size() : 1));
    std::memcpy(*value, bytes.data(), bytes.size());
    return 0;
  } catch (const std::exception& e) {
    return fail(e);
  } catch (...) {
    return fail_unknown();
  }
}

void stratlab_comm_free_bytes(uint8_t* bytes) { std::free(bytes); }

// `interface` (e.g. from GLOO_SOCKET_IFNAME) wins over `hostname`; with neither, Gloo
// resolves this machine's hostname and falls back to loopback.
int stratlab_pg_gloo(stratlab_store* store, int rank, int size, const char* interface, const char* hostname,
                     int64_t timeout_ms, int threads, stratlab_pg** out) {
  try {
    auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::milliseconds(timeout_ms));
    if (interface != nullptr && interface[0] != '\0') {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
    } else if (hostname != nullptr && hostname[0] != '\0') {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(hostname));
    } else {
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    options->threads = threads;
    auto backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store->store, rank, size, options);
    *out = new stratlab_pg{backend};
    return 0;
  } catch (const std::exception& e) {
    return fail(e);
  } catch (...) {
    return fail_unknown();
  }
}

// 1 when this build carries NCCL (a CUDA libtorch), 0 otherwise.
int stratlab_comm_has_nccl() {
#ifdef STRATLAB_NCCL
  return 1;
#else
  return 0;
#endif
}

int stratlab_pg_nccl(stratlab_store* store, int rank, int size, int64_t timeout_ms, stratlab_pg** out) {
#ifdef STRATLAB_NCCL
  try {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = std::chrono::milliseconds(timeout_ms);
    auto backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(store->store, rank, size, options);
    *out = new stratlab_pg{backend};
    return 0;
  } catch (const std::exception& e) {
    return fail(e);
  } catch (...) {
    return fail_unknown();
  }
#else
  (void)store; (void)rank; (void)size; (void)timeout_ms; (void)out;
  last_error = "this build has no NCCL: it was linked against a CPU-only libtorch";
  return 1;
#endif
}

void stratlab_pg_free(stratlab_pg* pg) { delete pg; }

#define STRATLAB_WORK_CALL(expr)       \
  try {                                \
    *out = wrap(expr);                 \
    return 0;                          \
  } catch (const std::exception& e) {  \
    return fail(e);                    \
  } catch (...) {                      \
    return fail_unknown();             \
  }

int stratlab_pg_all_reduce(stratlab_pg* pg, at::Tensor* tensor, int op, stratlab_work** out) {
  std::vector<at::Tensor> tensors{*tensor};
  c10d::AllreduceOptions options;
  STRATLAB_WORK_CALL((options.reduceOp = reduce_op(op), pg->backend->allreduce(tensors, options)))
}

int stratlab_pg_broadcast(stratlab_pg* pg, at::Tensor* tensor, int root, stratlab_work** out) {
  std::vector<at::Tensor> tensors{*tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  STRATLAB_WORK_CALL(pg->backend->broadcast(tensors, options))
}

int stratlab_pg_reduce(stratlab_pg* pg, at::Tensor* tensor, int root, int op, stratlab_work** out) {
  std::vector<at::Tensor> tensors{*tensor};
  c10d::ReduceOptions options;
  options.rootRank = root;
  STRATLAB_WORK_CALL((options.reduceOp = reduce_op(op), pg->backend->reduce(tensors, options)))
}

int stratlab_pg_all_gather(stratlab_pg* pg, at::Tensor** outputs, int count, at::Tensor* input,
                           stratlab_work** out) {
  std::vector<std::vector<at::Tensor>> output_lists(1);
  for (int i = 0; i < count; ++i) output_lists[0].push_back(*outputs[i]);
  std::vector<at::Tensor> inputs{*input};
  STRATLAB_WORK_CALL(pg->backend->allgather(output_lists, inputs, c10d::AllgatherOptions()))
}

// c10d's flat collectives, which FSDP and ZeRO use: every rank's `input` laid end to end
// in rank order into each rank's `output` (world_size times its size).
int stratlab_pg_all_gather_into(stratlab_pg* pg, at::Tensor* output, at::Tensor* input, stratlab_work** out) {
  STRATLAB_WORK_CALL(pg->backend->_allgather_base(*output, *input, c10d::AllgatherOptions()))
}

// The reduction of every rank's `input` (world_size times `output`'s size), each rank
// keeping its own chunk in `output`. Gloo runs it as an all-reduce of the whole input.
int stratlab_pg_reduce_scatter(stratlab_pg* pg, at::Tensor* output, at::Tensor* input, int op, stratlab_work** out) {
  c10d::ReduceScatterOptions options;
  STRATLAB_WORK_CALL((options.reduceOp = reduce_op(op), pg->backend->_reduce_scatter_base(*output, *input, options)))
}

int stratlab_pg_send(stratlab_pg* pg, at::Tensor* tensor, int dst, int tag, stratlab_work** out) {
  std::vector<at::Tensor> tensors{*tensor};
  STRATLAB_WORK_CALL(pg->backend->send(tensors, dst, tag))
}

int stratlab_pg_recv(stratlab_pg* pg, at::Tensor* tensor, int src, int tag, stratlab_work** out) {
  std::vector<at::Tensor> tensors{*tensor};
  STRATLAB_WORK_CALL(pg->backend->recv(tensors, src, tag))
}

int stratlab_pg_barrier(stratlab_pg* pg, stratlab_work** out) {
  STRATLAB_WORK_CALL(pg->backend->barrier(c10d::BarrierOptions()))
}

// Blocks until the work completes; 0 on success, 1 on failure (a peer gone, a timeout).
// `timeout_ms` <= 0 waits up to the process group's own timeout.
int stratlab_work_wait(stratlab_work* work, int64_t timeout_ms) {
  try {
    bool ok = timeout_ms > 0 ? work->work->wait(std::chrono::milliseconds(timeout_ms)) : work->work->wait();
    int64_t expected = -1;
    work->completed_ns->compare_exchange_strong(expected, monotonic_ns());
    if (!ok) {
      last_error = "the collective was aborted";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    return fail(e);
  } catch (...) {
    return fail_unknown();
  }
}

int stratlab_work_is_completed(stratlab_work* work) {
  try {
    return work->work->isCompleted() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

int64_t stratlab_work_completed_ns(stratlab_work* work) { return work->completed_ns->load(); }

void stratlab_work_free(stratlab_work* work) { delete work; }

}  // extern "C"
