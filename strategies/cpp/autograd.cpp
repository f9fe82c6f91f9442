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

extern "C" {

// Sets `tensor.grad` to `grad`, or to none where `grad` is null (what
// `optimizer.zero_grad(set_to_none=True)` does): sharded data parallelism frees each
// stage's gradients once reduce-scattered, and hands each rank's chunk to its optimizer.
int stratlab_set_grad(at::Tensor* tensor, at::Tensor* grad) {
  return stratlab::guarded([&] {
    if (grad == nullptr) {
      tensor->mutable_grad().reset();
    } else {
      tensor->mutable_grad() = *grad;
    }
  });
}

}  // extern "C"
