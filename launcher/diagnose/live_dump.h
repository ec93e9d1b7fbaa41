// An on-demand dump of a running job (`dlaunch dump`, SIGUSR1 to a Python rank): every rank's
// flight recorder, native and Python stacks and heartbeat, copied into dumps/<name>/ while the
// job goes on, and where the ranks stand now in words. Unlike the hang monitor it judges nothing:
// the job is not stopped and no file of the run directory's top is written.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/run_dir/dump_file.h"
#include "launcher/diagnose/diagnosis.h"
#include "launcher/diagnose/job_view.h"

namespace dlaunch::launcher {

struct LiveDumpOptions {
  // How long to wait for the ranks to rewrite their flight recorders.
  std::chrono::milliseconds dump_wait{std::chrono::seconds(2)};
  // Bound on one stack tool run; ranks are captured in parallel.
  std::chrono::milliseconds stack_timeout{std::chrono::seconds(10)};
  std::string stack_tool;  // "" = DefaultStackTool()
  int attempt = 0;
};

// Takes the dump `request` asks for into `folder` (dumps/<name>/, which exists): asks `job` for
// dumps (only when every rank is wanted; a SIGUSR1'd Python rank has dumped already), takes the
// native stacks of every living wanted rank here and on the other nodes, copies each rank's files
// and writes diagnosis.txt, diagnosis.json and, last, dump.json. Blocks for at most dump_wait +
// stack_timeout + a few seconds for other nodes; never throws (what fails is a problem line).
rundir::DumpManifest TakeLiveDump(JobView& job, const std::string& folder,
                                  const rundir::DumpRequest& request,
                                  const LiveDumpOptions& options);

// Where the ranks stand, grouped, worst first: "rank 3 has been in allreduce #88 for 41 s while
// the others are at #90", "ranks 0-15 running: collectives #88-#90, step 450". `all_moving`
// (optional) says whether no rank is stuck, stopped or gone. Pure.
std::vector<std::string> DescribeLiveRanks(const std::vector<RankLiveState>& ranks,
                                           const std::vector<std::string>& process_states,
                                           int64_t now_unix_ms, bool* all_moving = nullptr);

}  // namespace dlaunch::launcher
