// Memory formats, which tch cannot set: `Tensor::contiguous` there takes no format. A
// four-dimensional tensor laid out channels-last (NHWC) is what oneDNN's and cuDNN's fast
// convolutions read without reordering; a convolution whose input or weight is channels-last
// writes its output channels-last too, so laying out the weights and the input batch is
// enough for a whole network, as `model.to(memory_format=torch.channels_last)` does.
#include <ATen/ATen.h>

#include <exception>

namespace {

at::MemoryFormat format_of(int format) {
  return format == 1 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
}

}  // namespace

extern "C" {

// A new handle to `tensor` laid out in `format` (0 contiguous, 1 channels-last), a copy only
// where it is not already; null when libtorch refused (a tensor that is not 4-D).
at::Tensor* stratlab_to_memory_format(at::Tensor* tensor, int format) {
  try {
    return new at::Tensor(tensor->contiguous(format_of(format)));
  } catch (const std::exception&) {
    return nullptr;
  } catch (...) {
    return nullptr;
  }
}

// Whether `tensor` is laid out in `format` (0 or 1; -1 when libtorch refused).
int stratlab_is_memory_format(at::Tensor* tensor, int format) {
  try {
    return tensor->is_contiguous(format_of(format)) ? 1 : 0;
  } catch (...) {
    return -1;
  }
}

}  // extern "C"
