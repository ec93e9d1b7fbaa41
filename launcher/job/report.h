// What dlaunch tells people after an attempt: the root-cause block and summary.json.
#pragma once

#include <string>
#include <vector>

#include "launcher/job/attempt_history.h"
#include "launcher/rendezvous/node_roster.h"
#include "launcher/supervision/supervisor.h"

namespace dlaunch::launcher {

// "SIGKILL" for 9; "signal 64" for names it does not know.
std::string SignalName(int sig);

// A rank's or node's state in summary.json.
enum class RunState { kRunning, kOk, kFailed, kKilled, kLost, kUnknown };
// "running", "ok", "failed", "killed" (by the teardown), "lost", "unknown".
const char* RunStateName(RunState state);
// A rank of this node: running until it exited, then ok, failed, or killed by the teardown.
RunState StateOf(const RankOutcome& outcome);

// "exit code 3" or "signal SIGKILL (9)".
std::string DescribeExit(const RankOutcome& outcome);

// The last `n` lines of a file; empty when it cannot be read.
std::vector<std::string> TailLines(const std::string& path, size_t n);

// torchrun's "Root Cause (first observed failure)" block, plus where the logs are.
std::string FormatRootCause(const RankOutcome& failed, const std::string& host,
                            const std::string& rank_dir, const std::string& extra);

struct SummaryInfo {
  std::string run_id;
  std::string host;
  int exit_code = -1;  // -1 while running
  int restarts = 0;
  std::string error;                    // the root cause or stop reason, one line
  std::vector<NodeView> nodes;          // multi-node, on node 0: every node and its ranks' outcomes
  std::vector<AttemptRecord> attempts;  // attempt by attempt, when there was a restart
};

// Writes summary.json atomically.
void WriteSummary(const std::string& path, const SummaryInfo& info,
                  const std::vector<RankOutcome>& ranks);

}  // namespace dlaunch::launcher
