// What the calling thread runs now (a pass such as "backward", and its pipeline stage), as
// the training code last named it (`stratlab_cpu_memory_set_pass`): both allocators' out-of-
// memory reports name it.
#pragma once

#include <cstddef>
#include <utility>

namespace stratlab {

// The pass's name (not NUL-terminated; empty where none is named) and its length.
std::pair<const char*, std::size_t> pass_now();

// The pipeline stage this thread runs, or -1.
int stage_now();

}  // namespace stratlab
