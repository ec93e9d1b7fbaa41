// Whether the job of a run directory runs, for the commands that talk to a live job (`dlaunch
// dump`, `dlaunch status`): a run directory of the caller's whose summary.json records no end,
// and whose launcher (on this host) still has ranks alive.
#pragma once

#include <string>

namespace dlaunch::launcher {

struct JobLiveness {
  enum Kind { kRunning, kNoRunDir, kNotOwner, kEnded, kGone };
  Kind kind = kRunning;
  std::string why;  // one line for kinds other than kRunning
};

// `command` names the asking command in the lines ("dump"). Blocks for one small read.
JobLiveness CheckJobLiveness(const std::string& run_dir, const std::string& command);

}  // namespace dlaunch::launcher
