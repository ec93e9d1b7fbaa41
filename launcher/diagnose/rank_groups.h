// Ranks in the same state as one line, for reports a person can read at thousands of ranks: "ranks
// 0-776,778-1023: waiting in #1234 for 4.1-4.3 s; ...", the culprits one by one, as NCCL RAS prints
// only its outlier sets. diagnosis.json keeps every rank's own line.
#pragma once

#include <string>
#include <vector>

#include "launcher/diagnose/diagnosis.h"

namespace dlaunch::launcher {

// Per-rank lines while there are at most `threshold` ranks; above that, the culprits' lines,
// then one line per set of ranks whose lines differ only in their durations and sizes (shown as
// ranges), in the order of each set's first rank. Pure.
std::vector<std::string> GroupRankLines(const std::vector<RankDiagnosis>& ranks,
                                        size_t threshold = 16);

}  // namespace dlaunch::launcher
