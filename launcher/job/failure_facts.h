// The facts of an attempt that failed, as the restart policy weighs them, read on node 0 from
// the run directory before the attempt's files are put away: its summary.json (which rank failed
// first, on which node, how it ended), the culprit's error.json (its exception and where it was
// raised) and every rank's heartbeat.json (how far each got, whether a collective completed).
#pragma once

#include <string>

#include "core/run_dir/summary_file.h"
#include "launcher/job/restart_policy.h"

namespace dlaunch::launcher {

// `summary`: the attempt's summary.json as written at its end; `hang`: the attempt was stopped
// for a hang; `root_cause`: the rank the launcher's root cause named (HostedCoordinator::
// RootCause, which the root-cause block and the diagnosis name too), -1 for none: then the rank
// that failed by itself first, by end time. Missing or unreadable files leave their facts
// unknown. Blocks for a few small reads per rank; never throws.
FailureFacts ReadFailureFacts(const std::string& run_dir, const rundir::Summary& summary,
                              int attempt, bool hang, int root_cause = -1);

}  // namespace dlaunch::launcher
