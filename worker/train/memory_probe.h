// Memory readings of a training rank: resident memory (cheap enough to read at every phase of a
// step) and, on CUDA, the caching allocator's allocated / reserved / peak bytes; plus what an
// out-of-memory message says. Torch-free apart from CUDA's allocator statistics.
#pragma once

#include <cstdint>
#include <string>

#include "core/run_dir/memory_figures.h"

namespace dlaunch::worker {

// Reads /proc/self/statm (one read(2), a few microseconds) and getrusage's peak and, with
// `cuda_device` >= 0, the allocator's counters of that device (the device figures stay -1
// otherwise). Does not block.
rundir::MemoryFigures ReadMemory(int cuda_device);

// The byte count in "tried to allocate 1234 bytes" (CPU) or "Tried to allocate 2.00 GiB" (CUDA);
// -1 when the message names none.
int64_t TriedToAllocate(const std::string& message);
bool LooksLikeAllocationFailure(const std::string& message);

// MemTotal of /proc/meminfo, -1 when unreadable. Does not block.
int64_t MemTotalBytes();

}  // namespace dlaunch::worker
