// PyTorch AMP's GradScaler.unscale_: one fused pass over a list of gradients that multiplies
// each by the inverse loss scale and sets `found_inf` to 1 where any element is inf or NaN
// (at::_amp_foreach_non_finite_check_and_unscale_, with kernels for the CPU and CUDA), which
// tch does not expose. Reading `found_inf` back is the caller's one host synchronisation.
#include <torch/torch.h>

#include <string>
#include <vector>

namespace {
thread_local std::string last_error;
}

extern "C" {

const char* stratlab_loss_scale_last_error() { return last_error.c_str(); }

// 0 on success, 1 on failure (message in stratlab_loss_scale_last_error).
int stratlab_unscale_gradients(at::Tensor** grads, int count, at::Tensor* found_inf, at::Tensor* inv_scale) {
  try {
    std::vector<at::Tensor> list;
    list.reserve(count);
    for (int i = 0; i < count; ++i) list.push_back(*grads[i]);
    at::_amp_foreach_non_finite_check_and_unscale_(list, *found_inf, *inv_scale);
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
    return 1;
  } catch (...) {
    last_error = "unknown C++ exception";
    return 1;
  }
}

}  // extern "C"
