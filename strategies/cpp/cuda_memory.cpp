// The CUDA caching allocator, as a trial's memory needs it: its statistics (bytes allocated
// now and their peak, the numbers torch.cuda.memory_allocated and max_memory_allocated
// report), a cap on it (setMemoryFraction, so a large GPU stands in for a smaller one), and
// what it was asked for when it ran out (its out-of-memory observer, called on the
// allocating thread before it throws, so the pass that thread runs can be named: `refusal.h`).
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

#include <cstdint>
#include <mutex>

#include "refusal.h"
#include "shim_call.h"

namespace {

c10::DeviceAllocator* cuda_allocator() {
  return c10::getDeviceAllocator(c10::DeviceType::CUDA);
}

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
          stratlab::keep_refusal(stratlab::RefusingAllocator::Cuda, device, static_cast<int64_t>(asked),
                                 stats.allocated_bytes[aggregate].current, static_cast<int64_t>(allowed));
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

}  // extern "C"
