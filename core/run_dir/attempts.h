// Attempt folders: when an attempt is followed by another (a restart, or an elastic job going on
// with other nodes), its rank folders and reports move into <run-dir>/attempt<N>/, so the top of
// the run directory always holds the attempt that ran last and no log mixes two attempts. A
// launch into a run directory an earlier run left (a fixed --run-id) puts that run away the same
// way first.
#pragma once

#include <string>
#include <vector>

namespace dlaunch::rundir {

// 1 + the highest attempt<N> in `run_dir`, 0 when there is none.
int NextAttemptNumber(const std::string& run_dir);

// Moves the attempt's entries at the top of `run_dir` (rank<R>/, diagnosis.*, trace.json,
// preflight.json, summary.node<N>.json; with `whole_run` summary.json too) into `folder`
// ("attempt3"), or into the next free attempt<N> when `folder` already holds one of them.
// With `only`, just those of them named there (a node that shares the folder with others). Returns
// the folder used, "" when there was nothing to move. Throws Error(kInternal) when a rename fails.
std::string PutAttemptAway(const std::string& run_dir, const std::string& folder, bool whole_run,
                           const std::vector<std::string>& only = {});

}  // namespace dlaunch::rundir
