// The CUDA caching allocator, as a trial's memory needs it: its statistics (bytes allocated
// now and their peak, the numbers torch.cuda.memory_allocated and max_memory_allocated
// report), a cap on it (setMemoryFraction, so a large GPU stands in for a smaller one), and
// what it was asked for when it ran out (its out-of-memory observer, called on the
// allocating thread before it throws, so the pass that thread runs can be named).
//
// Statistics go through c10's DeviceAllocator interface (libc10), so they compile against
// any libtorch and fail cleanly where no CUDA allocator is registered. The cap and the
// observer are the CUDA allocator's own (libc10_cuda): built only where the CUDA libtorch
// is (STRATLAB_CUDA, set by build.rs when libtorch_cuda.so exists), as comm's NCCL group is.
// Plain C functions; no C++ exception crosses into Rust (shim_call.h).
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/DeviceType.h>

#ifdef STRATLAB_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "pass_name.h"
#include "shim_call.h"

namespace {

c10::DeviceAllocator* cuda_allocator() {
  return c10::getDeviceAllocator(c10::DeviceType::CUDA);
}

// The last allocation the CUDA allocator refused in this process.
struct Refusal {
  int64_t device = -1;
  int64_t asked_bytes = 0;
  int64_t in_use_bytes = 0;
  int64_t allowed_bytes = 0;
  char pass[64] = {0};
  int stage = -1;
};

std::mutex g_refusal_mutex;
Refusal g_refusal;
std::atomic<int> g_refused{0};

#ifdef STRATLAB_CUDA
// Keeps what the CUDA allocator is asked for when it runs out (once per process).
void watch_refusals() {
  static std::once_flag observing;
  std::call_once(observing, [] {
    c10::cuda::CUDACachingAllocator::attachOutOfMemoryObserver(
        // Called on the refused thread with the allocator's lock released; `allowed` is the
        // cap where a fraction is set, the device's total otherwise.
        [](int64_t device, size_t asked, size_t allowed, size_t /*device_free*/) {
          const auto stats = cuda_allocator()->getDeviceStats(static_cast<c10::DeviceIndex>(device));
          const auto aggregate = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);
          std::lock_guard<std::mutex> lock(g_refusal_mutex);
          g_refusal = Refusal{};
          g_refusal.device = device;
          g_refusal.asked_bytes = static_cast<int64_t>(asked);
          g_refusal.in_use_bytes = stats.allocated_bytes[aggregate].current;
          g_refusal.allowed_bytes = static_cast<int64_t>(allowed);
          const auto [pass, len] = stratlab::pass_now();
          std::memcpy(g_refusal.pass, pass, std::min(len, sizeof(g_refusal.pass) - 1));
          g_refusal.stage = stratlab::stage_now();
          g_refused.store(1);
        });
  });
}
#endif

}  // namespace

extern "C" {

// Bytes allocated on CUDA device `device` now and their peak since the last reset (the
// aggregate pool); 0, or 1 with the error kept (no CUDA allocator in this process).
int stratlab_cuda_memory_stats(int device, int64_t* current, int64_t* peak) {
  return stratlab::guarded([&] {
    const auto stats = cuda_allocator()->getDeviceStats(static_cast<c10::DeviceIndex>(device));
    const auto& allocated = stats.allocated_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
    *current = allocated.current;
    *peak = allocated.peak;
  });
}

// Starts a new peak on `device` from the bytes allocated now.
int stratlab_cuda_memory_reset_peak(int device) {
  return stratlab::guarded([&] { cuda_allocator()->resetPeakStats(static_cast<c10::DeviceIndex>(device)); });
}

// The device's free and total memory in bytes (cudaMemGetInfo, through the allocator).
int stratlab_cuda_memory_info(int device, int64_t* free_bytes, int64_t* total_bytes) {
  return stratlab::guarded([&] {
    const auto [free_now, total] = cuda_allocator()->getMemoryInfo(static_cast<c10::DeviceIndex>(device));
    *free_bytes = static_cast<int64_t>(free_now);
    *total_bytes = static_cast<int64_t>(total);
  });
}

// Whether this build has the CUDA allocator's own calls (the cap and the observer).
int stratlab_cuda_allocator_built() {
#ifdef STRATLAB_CUDA
  return 1;
#else
  return 0;
#endif
}

// Keeps what the CUDA allocator is asked for when it runs out, from now on (a no-op in a build
// without the CUDA libtorch, which has no CUDA device to run out).
void stratlab_cuda_watch_refusals() {
#ifdef STRATLAB_CUDA
  stratlab::guarded([] { watch_refusals(); });
#endif
}

// Caps the caching allocator of `device` at `fraction` of the device's memory, and from then
// on keeps what it is asked for when it runs out. 1 with the error kept where this build has
// no CUDA libtorch or the allocator refuses the fraction.
int stratlab_cuda_set_memory_fraction(int device, double fraction) {
  return stratlab::guarded([&] {
#ifdef STRATLAB_CUDA
    watch_refusals();
    c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, static_cast<c10::DeviceIndex>(device));
#else
    (void)device;
    (void)fraction;
    TORCH_CHECK(false, "this stratlab was built against the CPU libtorch, which has no CUDA caching allocator; "
                       "build with STRATLAB_LIBTORCH_VARIANT=cuda");
#endif
  });
}

// The last allocation the CUDA allocator refused: 1 with its device, bytes asked for (as the
// allocator rounds them), allocated then and allowed, and the refused thread's pass
// (NUL-terminated in `pass_capacity` bytes) and stage; 0 where nothing was refused since the
// process started (or the observer was never attached: no cap was set).
int stratlab_cuda_last_refusal(int64_t* device, int64_t* asked, int64_t* in_use, int64_t* allowed, char* pass,
                               std::size_t pass_capacity, int* stage) {
  if (g_refused.load() == 0) {
    return 0;
  }
  std::lock_guard<std::mutex> lock(g_refusal_mutex);
  *device = g_refusal.device;
  *asked = g_refusal.asked_bytes;
  *in_use = g_refusal.in_use_bytes;
  *allowed = g_refusal.allowed_bytes;
  std::strncpy(pass, g_refusal.pass, pass_capacity);
  if (pass_capacity > 0) {
    pass[pass_capacity - 1] = '\0';
  }
  *stage = g_refusal.stage;
  return 1;
}

}  // extern "C"
