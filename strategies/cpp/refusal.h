// The last allocation each allocator refused, with the pass and pipeline stage of the thread
// it refused (`pass_name.h`): the counting CPU allocator keeps it when its limit refuses, the
// CUDA allocator's out-of-memory observer when the device runs out. Read through
// `stratlab_last_refusal` for a trial's one-line out-of-memory reason.
#pragma once

#include <cstdint>

namespace stratlab {

// Which allocator refused; the values are `stratlab_last_refusal`'s `allocator` argument.
enum class RefusingAllocator : int { CountingCpu = 0, Cuda = 1 };

// Keeps a refusal by `allocator` of `asked` bytes on `device`, with `in_use` bytes allocated
// and `allowed` allowed, and the calling thread's pass and stage.
void keep_refusal(RefusingAllocator allocator, int64_t device, int64_t asked, int64_t in_use, int64_t allowed);

}  // namespace stratlab
