#include "launcher/diagnose/job_liveness.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <vector>

#include "core/base/proc.h"
#include "core/run_dir/paths.h"
#include "core/run_dir/summary_file.h"

namespace dlaunch::launcher {

JobLiveness CheckJobLiveness(const std::string& run_dir, const std::string& command) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec))
    return {JobLiveness::kNoRunDir, "no run directory at " + run_dir};
  struct stat st {};
  if (::stat(run_dir.c_str(), &st) != 0) return {JobLiveness::kNoRunDir, "cannot read " + run_dir};
  if (st.st_uid != ::geteuid() && ::geteuid() != 0) {
    return {JobLiveness::kNotOwner, run_dir + " belongs to uid " + std::to_string(st.st_uid) +
                                        ": only the job's owner can " + command + " it"};
  }
  const rundir::RunDir run(run_dir);
  rundir::Summary summary;
  std::vector<std::string> problems;
  switch (rundir::ReadSummary(run.summary(), "summary.json", &summary, &problems)) {
    case rundir::FileState::kAbsent:
      return {JobLiveness::kNoRunDir,
              run_dir + " has no summary.json: not a dlaunch run directory"};
    case rundir::FileState::kInvalid:
      return {JobLiveness::kNoRunDir,
              problems.empty() ? run.summary() + " is unreadable" : problems.front()};
    case rundir::FileState::kOk:
      break;
  }
  if (summary.exit_code && *summary.exit_code >= 0) {
    return {JobLiveness::kEnded, "the job of " + run_dir + " has ended (exit " +
                                     std::to_string(*summary.exit_code) + "): nothing runs to " +
                                     command + " (see dlaunch diagnose " + run_dir + ")"};
  }
  // A launcher that died (SIGKILL) left "running": its ranks on this host tell.
  const std::string host = base::Hostname();
  if (summary.host == host) {
    bool any = false, alive = false;
    for (const rundir::SummaryRank& r : summary.ranks) {
      if (r.pid <= 0 || (!r.host.empty() && r.host != host)) continue;
      any = true;
      alive = alive || ::kill(r.pid, 0) == 0 || errno == EPERM;
    }
    if (any && !alive) {
      return {JobLiveness::kGone,
              "the job of " + run_dir +
                  " is not running: its ranks are gone and its launcher did not record the end"};
    }
  }
  return {};
}

}  // namespace dlaunch::launcher
