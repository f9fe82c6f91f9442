#include "refusal.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <mutex>

#include "pass_name.h"

namespace {

struct Refusal {
  bool kept = false;
  int64_t device = -1;
  int64_t asked = 0;
  int64_t in_use = 0;
  int64_t allowed = 0;
  char pass[64] = {0};
  int stage = -1;
};

std::mutex g_mutex;
// One record per allocator (`RefusingAllocator`'s values).
Refusal g_refusals[2];

}  // namespace

namespace stratlab {

void keep_refusal(RefusingAllocator allocator, int64_t device, int64_t asked, int64_t in_use, int64_t allowed) {
  Refusal refusal{true, device, asked, in_use, allowed, {0}, stage_now()};
  const auto [pass, len] = pass_now();
  std::memcpy(refusal.pass, pass, std::min(len, sizeof(refusal.pass) - 1));
  std::lock_guard<std::mutex> lock(g_mutex);
  g_refusals[static_cast<int>(allocator)] = refusal;
}

}  // namespace stratlab

extern "C" {

// The last allocation `allocator` (0: the counting CPU allocator, 1: CUDA's) refused: 1 with
// its device, bytes asked for, allocated then and allowed, and the refused thread's pass
// (NUL-terminated in `pass_capacity` bytes) and stage; 0 where it refused nothing since the
// process started.
int stratlab_last_refusal(int allocator, int64_t* device, int64_t* asked, int64_t* in_use, int64_t* allowed,
                          char* pass, std::size_t pass_capacity, int* stage) {
  if (allocator < 0 || allocator > 1) {
    return 0;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  const Refusal& refusal = g_refusals[allocator];
  if (!refusal.kept) {
    return 0;
  }
  *device = refusal.device;
  *asked = refusal.asked;
  *in_use = refusal.in_use;
  *allowed = refusal.allowed;
  if (pass_capacity > 0) {
    std::strncpy(pass, refusal.pass, pass_capacity - 1);
    pass[pass_capacity - 1] = '\0';
  }
  *stage = refusal.stage;
  return 1;
}

}  // extern "C"
