// A synthetic NCCL log of any size in the shapes of NCCL 2.21: 64 nodes x 8 GPUs, lines of all
// ranks interleaved, many communicators (init, channels, rings, trees) and, as in a real large
// log, mostly per-collective COLL lines. Shared by the size test and the parse-rate benchmark.
#pragma once

#include <cstdint>
#include <string>

namespace dlaunch::launcher::nccl_log::testing {

inline constexpr int kLargeLogNodes = 64;
inline constexpr int kLargeLogGpusPerNode = 8;

// Writes about `bytes` bytes (whole communicator blocks) to `path`; returns the bytes written.
// Throws std::runtime_error when the file cannot be written.
int64_t WriteLargeNcclLog(const std::string& path, int64_t bytes);

}  // namespace dlaunch::launcher::nccl_log::testing
