// Backward from a non-scalar tensor with a given gradient (`output.backward(grad)`), which
// tch does not expose: data parallelism runs the backward pass stage by stage, feeding each
// stage the gradient of its output, so finished buckets can be reduced while earlier
// stages still compute. Gradients accumulate into the leaves as with loss.backward().
#include <torch/torch.h>

#include "shim_call.h"

extern "C" {

// 0 on success, 1 on failure (message in stratlab_shim_last_error).
int stratlab_backward_with_grad(at::Tensor* output, at::Tensor* grad) {
  return stratlab::guarded([&] { output->backward(*grad); });
}

}  // extern "C"
