// A counting CPU allocator: libtorch's CPU allocations made through c10's allocator, with
// the bytes in use and their peak kept exactly (the glibc statistics the lab read before
// count every malloc of the process, and a sampled peak misses what is freed between
// samples). Installed with c10::SetCPUAllocator; memory comes from c10::alloc_cpu, as the
// default allocator's does, behind a 64-byte header that keeps the size (and the 64-byte
// alignment), so the data pointer is its own context and raw_allocate works.
// A limit on the bytes in use makes an allocation that would pass it fail as out of
// memory, at the same size every time (an address-space limit counts reserved address
// space, which varies from run to run).
// Plain C functions, so Rust needs no C++ ABI; no C++ exception crosses into Rust.
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "pass_name.h"
#include "refusal.h"

namespace {

constexpr std::size_t kHeader = 64;

std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int> g_installed{0};
// Bytes of tensor storage allowed in use at once; 0 for no limit.
std::atomic<int64_t> g_limit{0};
// What this thread is running (a static name such as "backward", set by the training
// code), and its pipeline stage (-1: none), for the out-of-memory message.
thread_local const char* t_pass = nullptr;
thread_local std::size_t t_pass_len = 0;
thread_local int t_stage = -1;

std::string where_now() {
  if (t_pass == nullptr) {
    return "";
  }
  std::string where = " in the " + std::string(t_pass, t_pass_len);
  if (t_stage >= 0) {
    where += " of pipeline stage " + std::to_string(t_stage);
  }
  return where;
}

void raise_peak(int64_t now) {
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void counting_delete(void* data) {
  if (data == nullptr) {
    return;
  }
  char* base = static_cast<char*>(data) - kHeader;
  const auto bytes = *reinterpret_cast<std::size_t*>(base);
  g_current.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  c10::free_cpu(base);
}

struct CountingCpuAllocator final : c10::Allocator {
  c10::DataPtr allocate(std::size_t n) override {
    const auto bytes = static_cast<int64_t>(n);
    // Counted before the memory is taken, so two threads cannot both pass the limit.
    const int64_t now = g_current.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    const int64_t limit = g_limit.load(std::memory_order_relaxed);
    if (limit > 0 && now > limit) {
      g_current.fetch_sub(bytes, std::memory_order_relaxed);
      stratlab::keep_refusal(stratlab::RefusingAllocator::CountingCpu, 0, bytes, now - bytes, limit);
      const auto mib = [](int64_t b) { return (b + (1 << 19)) >> 20; };
      TORCH_CHECK_WITH(OutOfMemoryError, false, "out of memory: stratlab memory limit: ", bytes, " bytes (",
                       mib(bytes), " MiB) asked for", where_now(), " with ", now - bytes, " bytes (", mib(now - bytes),
                       " MiB) of tensor storage in use, over the worker's limit of ", limit, " bytes (",
                       mib(limit), " MiB, memory_limit_mib)");
    }
    char* base = nullptr;
    try {
      base = static_cast<char*>(c10::alloc_cpu(n + kHeader));
    } catch (...) {
      g_current.fetch_sub(bytes, std::memory_order_relaxed);
      throw;
    }
    *reinterpret_cast<std::size_t*>(base) = n;
    void* data = base + kHeader;
    raise_peak(now);
    return {data, data, &counting_delete, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &counting_delete;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

CountingCpuAllocator g_allocator;

}  // namespace

namespace stratlab {

std::pair<const char*, std::size_t> pass_now() {
  return {t_pass == nullptr ? "" : t_pass, t_pass == nullptr ? 0 : t_pass_len};
}

int stage_now() {
  return t_stage;
}

}  // namespace stratlab

extern "C" {

// Makes the counting allocator libtorch's CPU allocator; idempotent. Tensors allocated
// before keep their own deleters and are not counted. Returns 0 on success, 1 on failure.
int stratlab_cpu_memory_install() {
  try {
    if (g_installed.exchange(1) == 0) {
      // Priority above the default allocator's registration, so it stays in place.
      c10::SetCPUAllocator(&g_allocator, /*priority=*/1);
    }
    return c10::GetCPUAllocator() == &g_allocator ? 0 : 1;
  } catch (...) {
    return 1;
  }
}

// Bytes of CPU tensor storage in use now, through the counting allocator.
int64_t stratlab_cpu_memory_current() {
  return g_current.load(std::memory_order_relaxed);
}

// The most bytes in use at once since the last reset.
int64_t stratlab_cpu_memory_peak() {
  return g_peak.load(std::memory_order_relaxed);
}

// Allows at most `bytes` of tensor storage in use at once (0: no limit). An allocation that
// would pass it throws c10::OutOfMemoryError, which libtorch reports as out of memory.
void stratlab_cpu_memory_set_limit(int64_t bytes) {
  g_limit.store(bytes > 0 ? bytes : 0, std::memory_order_relaxed);
}

// Names what this thread runs from now on for the out-of-memory message: `pass` (a name
// of `len` bytes that outlives the thread, or null for nothing) and the pipeline stage
// (-1: none).
void stratlab_cpu_memory_set_pass(const char* pass, std::size_t len, int stage) {
  t_pass = pass;
  t_pass_len = len;
  t_stage = stage;
}

// Starts a new peak from the bytes in use now.
void stratlab_cpu_memory_reset_peak() {
  g_peak.store(g_current.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

}  // extern "C"
