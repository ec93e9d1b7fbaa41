// The NCCL log analysis (launcher/nccl_log) as part of a diagnosis: its verdicts become lines of
// the report and the "nccl_verdicts" of diagnosis.json.
#pragma once

#include <string>

#include "launcher/diagnose/diagnosis.h"

namespace dlaunch::launcher {

// Reads every rank's NCCL log of `run_dir` (the job is over: an unfinished init is stuck) and
// adds the verdicts to `diagnosis`. Blocks on file I/O; never throws.
void AttachNcclVerdicts(const std::string& run_dir, Diagnosis* diagnosis);

}  // namespace dlaunch::launcher
