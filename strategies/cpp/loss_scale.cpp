// PyTorch AMP's GradScaler.unscale_: one fused pass over a list of gradients that multiplies
// each by the inverse loss scale and sets `found_inf` to 1 where any element is inf or NaN
// (at::_amp_foreach_non_finite_check_and_unscale_, with kernels for the CPU and CUDA), which
// tch does not expose. Reading `found_inf` back is the caller's one host synchronisation.
#include <torch/torch.h>

#include <vector>

#include "shim_call.h"

extern "C" {

// 0 on success, 1 on failure (message in stratlab_shim_last_error).
int stratlab_unscale_gradients(at::Tensor** grads, int count, at::Tensor* found_inf, at::Tensor* inv_scale) {
  return stratlab::guarded([&] {
    std::vector<at::Tensor> list;
    list.reserve(count);
    for (int i = 0; i < count; ++i) list.push_back(*grads[i]);
    at::_amp_foreach_non_finite_check_and_unscale_(list, *found_inf, *inv_scale);
  });
}

}  // extern "C"
