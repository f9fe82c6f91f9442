// Autocast regions, which tch cannot open: its `autocast` only flips the CUDA switch, and the
// state is per thread and per device type. A region enables autocast for one device type at
// one lower-precision type on the calling thread and counts its nesting; closing the
// outermost region clears the cast cache, or the lower-precision copies of the weights made
// in the forward would outlive the optimizer step that changes the weights.
#include <ATen/autocast_mode.h>

#include <exception>

namespace {

c10::DeviceType device_type(int device) { return device == 1 ? c10::DeviceType::CUDA : c10::DeviceType::CPU; }

}  // namespace

extern "C" {

// Opens a region: autocast on for `device` (0 CPU, 1 CUDA) in `dtype` (0 bfloat16, 1 float16)
// on this thread. Returns whether it was on before (0 or 1), to give back on close; -1 when
// libtorch refused.
int stratlab_autocast_enter(int device, int dtype) {
  try {
    auto type = device_type(device);
    bool was_enabled = at::autocast::is_autocast_enabled(type);
    at::autocast::set_autocast_dtype(type, dtype == 1 ? at::kHalf : at::kBFloat16);
    at::autocast::set_autocast_enabled(type, true);
    at::autocast::increment_nesting();
    return was_enabled ? 1 : 0;
  } catch (const std::exception&) {
    return -1;
  } catch (...) {
    return -1;
  }
}

// Closes the region `stratlab_autocast_enter` opened: autocast back to `was_enabled`, the cast
// cache cleared when this was the outermost region. 0 on success, -1 when libtorch refused.
int stratlab_autocast_exit(int device, int was_enabled) {
  try {
    if (at::autocast::decrement_nesting() == 0) {
      at::autocast::clear_cache();
    }
    at::autocast::set_autocast_enabled(device_type(device), was_enabled != 0);
    return 0;
  } catch (const std::exception&) {
    return -1;
  } catch (...) {
    return -1;
  }
}

// Whether autocast is on for `device` on this thread (0 or 1; -1 when libtorch refused).
int stratlab_autocast_enabled(int device) {
  try {
    return at::autocast::is_autocast_enabled(device_type(device)) ? 1 : 0;
  } catch (...) {
    return -1;
  }
}

}  // extern "C"
