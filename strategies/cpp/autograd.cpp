// Backward from a non-scalar tensor with a given gradient (`output.backward(grad)`), which
// tch does not expose: data parallelism runs the backward pass stage by stage, feeding each
// stage the gradient of its output, so finished buckets can be reduced while earlier
// stages still compute. Gradients accumulate into the leaves as with loss.backward().
#include <torch/torch.h>

#include <string>

namespace {
thread_local std::string last_error;
}

extern "C" {

const char* stratlab_autograd_last_error() { return last_error.c_str(); }

// 0 on success, 1 on failure (message in stratlab_autograd_last_error).
int stratlab_backward_with_grad(at::Tensor* output, at::Tensor* grad) {
  try {
    output->backward(*grad);
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
