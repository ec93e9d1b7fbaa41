// What dlaunch tells people about an attempt: the root-cause block and summary.json.
#pragma once

#include <string>
#include <vector>

#include "core/base/format.h"
#include "core/run_dir/summary_file.h"
#include "launcher/job/attempt_history.h"
#include "launcher/rendezvous/node_roster.h"
#include "launcher/supervision/supervisor.h"

namespace dlaunch::launcher {

using base::SignalName;  // "SIGKILL" for 9; "signal 64" for names it does not know

// A rank's or node's state in summary.json: running, ok, failed, killed (by the teardown), lost,
// unknown.
using RunState = rundir::RankStatus;
inline const char* RunStateName(RunState state) { return rundir::RankStatusName(state); }
// A rank of this node: running until it exited, then ok, failed, or killed by the teardown.
RunState StateOf(const RankOutcome& outcome);

// "exit code 3" or "signal SIGKILL (9)".
std::string DescribeExit(const RankOutcome& outcome);
// How a failed rank ended, for its root-cause report: DescribeExit, or, for a rank the teardown
// ended after it had written its own error.json (it failed by itself, another rank only exited
// first), that error, then "(its process then ended by the teardown: signal SIGTERM (15))".
// Blocks for one bounded file read.
std::string DescribeFailure(const RankOutcome& outcome, const std::string& rank_dir);

// torchrun's "Root Cause (first observed failure)" block, plus where the logs are.
std::string FormatRootCause(const RankOutcome& failed, const std::string& host,
                            const std::string& rank_dir, const std::string& extra);

// This node's rank as its supervisor saw it (summary.json's entry without host and restarts),
// for summary.json and node 0's root cause.
rundir::SummaryRank SummaryOfLocalRank(const RankOutcome& rank);
// Another node's rank as its node last reported it, for node 0's summary.json and root cause.
rundir::SummaryRank SummaryOfRemoteRank(const NodeView& node, const v1::RankExit& rank);

struct SummaryInfo {
  std::string run_id;
  std::string host;
  int exit_code = -1;  // -1 while running
  int restarts = 0;
  std::string error;            // the root cause or stop reason, one line
  std::vector<NodeView> nodes;  // multi-node, on node 0: every node and its ranks' outcomes
  std::vector<std::string> truncated_logs;           // logs cut short by a full disk
  std::vector<AttemptRecord> attempts;               // attempt by attempt, when there was a restart
  std::vector<rundir::StragglerVerdict> stragglers;  // node 0: the job's straggler verdicts
};

// summary.json as the launcher keeps it from the moment the ranks start: rewritten atomically on
// every change. A full disk must not lose it: the constructor reserves a little room beside it,
// given back when a write fails for lack of space; when even that does not help, the summary
// goes to a second place ($TMPDIR/dlaunch-summary-<run-id>/), said once on stderr.
class SummaryWriter {
 public:
  static constexpr size_t kReserveBytes = 1 << 20;

  explicit SummaryWriter(std::string path);
  // Removes the reserve (the summary itself stays).
  ~SummaryWriter();
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  // At the end of an attempt. Blocks for the write and its fsync; never throws (a failure is
  // said once on stderr).
  void Write(const SummaryInfo& info, const std::vector<RankOutcome>& ranks);
  // While an attempt runs: the ranks as they stand, exit code -1 and, once the teardown began,
  // its reason.
  void WriteProgress(const SummaryInfo& info, int attempt, const AttemptResult& progress);
  // Where the last write went: the path given, or the fallback.
  const std::string& written_path() const { return written_; }

 private:
  // final: the attempt's end, which may take the reserved room.
  void WriteText(const std::string& text, bool final);

  std::string path_;
  std::string reserve_;
  std::string written_;
  bool said_ = false;
  bool wrote_ = false;  // a summary exists somewhere
};

// The summary.json document of this node's ranks (and, on node 0 of several, every node's).
rundir::Summary MakeSummary(const SummaryInfo& info, const std::vector<RankOutcome>& ranks);

}  // namespace dlaunch::launcher
