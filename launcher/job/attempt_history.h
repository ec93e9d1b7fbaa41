// The story of a job attempt by attempt: what summary.json's "attempts" records and what node 0
// prints when there was more than one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/run_dir/summary_file.h"

namespace dlaunch::launcher {

using AttemptRecord = rundir::SummaryAttempt;

// "attempt 0: 2 nodes, 4 ranks, rank 3 failed: ... -> restart (logs in attempt0/)" per line.
std::string FormatAttemptStory(const std::vector<AttemptRecord>& attempts);

}  // namespace dlaunch::launcher
