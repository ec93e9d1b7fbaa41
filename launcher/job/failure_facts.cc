#include "launcher/job/failure_facts.h"

#include <algorithm>
#include <vector>

#include "core/run_dir/error_file.h"
#include "core/run_dir/heartbeat_file.h"
#include "core/run_dir/paths.h"

namespace dlaunch::launcher {
namespace {

// Rank `root_cause` when the summary has it, else the rank that failed by itself first (a rank
// the teardown killed is not a culprit).
const rundir::SummaryRank* Culprit(const rundir::Summary& summary, int root_cause) {
  for (const rundir::SummaryRank& r : summary.ranks) {
    if (root_cause >= 0 && r.rank == root_cause) return &r;
  }
  const rundir::SummaryRank* first = nullptr;
  for (const rundir::SummaryRank& r : summary.ranks) {
    if (r.status != rundir::RankStatus::kFailed) continue;
    if (!first || r.end_unix_ms.value_or(INT64_MAX) < first->end_unix_ms.value_or(INT64_MAX)) {
      first = &r;
    }
  }
  return first;
}

void ReadCulprit(const rundir::RunDir& dir, const rundir::SummaryRank& r, FailureFacts* f) {
  f->culprit_rank = r.rank;
  f->culprit_node = r.node_rank.value_or(r.local_rank ? 0 : -1);
  f->rank_signal = r.signal;
  f->rank_exit_code = r.signal == 0 ? r.exit_code.value_or(-1) : -1;
  rundir::ErrorReport error;
  std::vector<std::string> problems;
  if (rundir::ReadError(dir.rank(r.rank).error(), "error.json", &error, &problems) ==
      rundir::FileState::kOk) {
    f->oom = rundir::IsOutOfMemory(error);
    f->exception = error.fields.value("exception", "");
    f->call_site = error.fields.value("call_site", "");
  }
}

}  // namespace

FailureFacts ReadFailureFacts(const std::string& run_dir, const rundir::Summary& summary,
                              int attempt, bool hang, int root_cause) {
  const rundir::RunDir dir(run_dir);
  FailureFacts f;
  f.attempt = attempt;
  f.exit_code = summary.exit_code.value_or(1);
  f.hang = hang;
  if (const rundir::SummaryRank* culprit = Culprit(summary, root_cause)) {
    ReadCulprit(dir, *culprit, &f);
  }
  for (const rundir::SummaryRank& r : summary.ranks) {
    rundir::Heartbeat beat;
    std::vector<std::string> problems;
    if (rundir::ReadHeartbeat(dir.rank(r.rank).heartbeat(), "heartbeat.json", &beat, &problems) !=
        rundir::FileState::kOk) {
      continue;
    }
    f.heartbeat_seen = true;
    f.best_step = std::max(f.best_step, beat.step);
    if (r.rank == f.culprit_rank) f.step = beat.step;
    if (beat.last_completed_seq >= 0) f.collective_completed = true;
  }
  for (const rundir::SummaryNode& n : summary.nodes) {
    if (n.status == rundir::RankStatus::kLost) f.lost_nodes.push_back(n.node_rank);
  }
  return f;
}

}  // namespace dlaunch::launcher
