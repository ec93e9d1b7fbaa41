// What the ranks' PyTorch flight-recorder dumps say across ranks, found by the same engine that
// judges dlaunch's own records (mismatch_finder.h) over the dumps as records (torch_records.h),
// per process group: the lowest mismatch, and per group the first collective that not every
// member completed. Pure computation; never throws.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launcher/diagnose/run_snapshot.h"

namespace dlaunch::launcher::torch_flight {

inline constexpr size_t kMaxFindings = 16;

// Appends to `findings` ({kind, pg, collective_seq_id, culprit_ranks | entered_ranks and
// missing_ranks, line}) and to `lines` (the same lines, for diagnosis.txt). The kinds of a
// mismatch are MismatchKindName's; "missing_ranks" and "not_completed" for the others.
void FindAcrossRanks(const RunSnapshot& run, nlohmann::json* findings,
                     std::vector<std::string>* lines);

// "Float[1024]" or "Float[4,256],Float[16]": tensors as torch recorded them.
std::string DescribeTensors(const std::vector<std::vector<int64_t>>& sizes,
                            const std::vector<std::string>& dtypes);

}  // namespace dlaunch::launcher::torch_flight
