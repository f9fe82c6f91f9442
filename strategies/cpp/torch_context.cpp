// Settings of libtorch's global context that tch does not expose: float32 matmul precision
// (TF32 on cuBLAS), TF32 in cuDNN convolutions, and the build configuration string the
// linked library reports about itself. Plain C functions, so Rust needs no C++ ABI.
// Every function catches C++ exceptions: one must never cross into Rust.
#include <ATen/Context.h>
#include <ATen/Version.h>

#include <cstring>
#include <string>

extern "C" {

// Returns 0 on success, 1 when libtorch rejected the value.
int stratlab_set_float32_matmul_precision(const char* precision) {
  try {
    at::globalContext().setFloat32MatmulPrecision(std::string(precision));
    return 0;
  } catch (...) {
    return 1;
  }
}

// 0 = highest, 1 = high, 2 = medium; -1 if it could not be read.
int stratlab_float32_matmul_precision() {
  try {
    switch (at::globalContext().float32MatmulPrecision()) {
      case at::Float32MatmulPrecision::HIGHEST: return 0;
      case at::Float32MatmulPrecision::HIGH: return 1;
      case at::Float32MatmulPrecision::MEDIUM: return 2;
    }
  } catch (...) {
  }
  return -1;
}

int stratlab_set_allow_tf32_cudnn(int allow) {
  try {
    at::globalContext().setAllowTF32CuDNN(allow != 0);
    return 0;
  } catch (...) {
    return 1;
  }
}

// 1 or 0; -1 if it could not be read.
int stratlab_allow_tf32_cudnn() {
  try {
    return at::globalContext().allowTF32CuDNN() ? 1 : 0;
  } catch (...) {
    return -1;
  }
}

// 1 or 0; -1 if it could not be read.
int stratlab_benchmark_cudnn() {
  try {
    return at::globalContext().benchmarkCuDNN() ? 1 : 0;
  } catch (...) {
    return -1;
  }
}

// Copies at::show_config() (NUL-terminated, truncated to `capacity`) into `buffer` and
// returns the full length, so a caller can retry with a larger buffer.
size_t stratlab_show_config(char* buffer, size_t capacity) {
  try {
    const std::string config = at::show_config();
    if (capacity > 0) {
      const size_t n = config.size() < capacity - 1 ? config.size() : capacity - 1;
      std::memcpy(buffer, config.data(), n);
      buffer[n] = '\0';
    }
    return config.size();
  } catch (...) {
    return 0;
  }
}

}  // extern "C"
