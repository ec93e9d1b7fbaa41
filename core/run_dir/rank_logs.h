// The text files of a rank folder: stdout.log and stderr.log (the launcher captures them),
// stacks.txt (native stacks the launcher took from a silent rank) and NCCL's debug logs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/run_dir/paths.h"

namespace dlaunch::rundir {

inline constexpr size_t kMaxStacksBytes = 256 * 1024;
inline constexpr size_t kMaxNcclWarnings = 20;
// Of each NCCL log only this much is scanned for WARN lines (INFO logs grow large).
inline constexpr size_t kMaxNcclScanBytes = 16 << 20;

// Atomically. Blocks for the write; throws Error(kInternal).
void WriteStacks(const std::string& path, const std::string& text);
// At most kMaxStacksBytes; "" when absent or not a regular file. Never throws.
std::string ReadStacks(const std::string& path);

// The last `n` non-empty lines of a log (its last 64 KiB at most). Never throws.
// The logs' modification times are deliberately not read: `cp -r` or an archive resets them, and a
// diagnosis must read the same from a copy, so durations come from the records' own timestamps.
std::vector<std::string> ReadLogTail(const std::string& path, size_t n);

// WARN lines of the rank's NCCL logs, at most kMaxNcclWarnings (then a "... more" line). Never
// throws; skips anything that is not a regular file.
std::vector<std::string> ReadNcclWarnings(const RankDir& dir);

}  // namespace dlaunch::rundir
