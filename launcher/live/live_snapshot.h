// One live view, three faces: the job as node 0 sees it now (every rank's heartbeat, step, phase,
// memory, collective in flight, straggler score; the job's attempt and verdicts), which
// `dlaunch status` prints (text or the "dlaunch.status/1" JSON of docs/status.md) and /metrics
// exposes. Plain data and pure functions; LiveStatus (live_status.h) fills it on node 0.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/run_dir/straggler_verdicts.h"

namespace dlaunch::launcher {

inline constexpr char kStatusSchema[] = "dlaunch.status/1";

// One rank. Numbers are -1 (null in the JSON) while unknown.
struct LiveRank {
  int rank = 0;
  std::string host;
  int pid = 0;          // 0 when not known (a rank of another node before its node said)
  bool remote = false;  // on another node
  bool python = false;  // reports through the Python rank agent
  // "running", "starting" (no heartbeat yet), "exited", "failed" (exited with a non-zero code or
  // by a signal), "unknown" (another node's rank that has no heartbeats: a program without
  // libdlaunch)
  std::string state;
  int64_t step = -1;
  double step_age_s = -1;  // since the step last changed (as node 0 saw it)
  std::string phase;       // "forward", "communication", ...; "" unknown
  // The collective in flight (started, not completed): its op and seq, and how long since it was
  // started (as node 0 saw it); op "" when none.
  std::string collective_op;
  int64_t collective_seq = -1;
  double collective_age_s = -1;
  int64_t collectives_completed = -1;  // last completed seq + 1
  double heartbeat_age_s = -1;
  int64_t rss_bytes = -1;
  int64_t cuda_allocated_bytes = -1;
  int64_t cuda_reserved_bytes = -1;
  int64_t cuda_peak_bytes = -1;
  double samples_per_s = -1;
  // The rank's own step time p50 (its waits inside collectives left out), over the straggler
  // window; -1 with --straggler-threshold 0 or before enough steps.
  double step_time_p50_s = -1;
  double comm_share = -1;       // share of the step spent waiting in collectives, lately
  double straggler_score = -1;  // step_time_p50 / the median of every rank's; 1 = typical
  double last_share = -1;       // share of lately judged collectives it entered last
  bool straggler = false;       // named by an active straggler verdict
};

struct LiveJob {
  std::string run_id;
  std::string run_dir;
  // "starting" (no rank heartbeat yet), "running", "hang" (node 0 diagnosed one), "failed" (a
  // rank or node failed and the attempt is ending)
  std::string state = "starting";
  std::string reason;  // with hang or failed: the one-line headline
  int attempt = 0;
  int restarts = 0;
  int world_size = 0;
  int nodes = 1;
  int64_t start_unix_ms = 0;                         // when node 0's launcher started the job
  int64_t unix_ms = 0;                               // when this view was taken
  std::vector<rundir::StragglerVerdict> stragglers;  // every verdict so far; end 0 = active

  bool healthy() const { return state != "hang" && state != "failed"; }
};

struct LiveSnapshot {
  LiveJob job;
  std::vector<LiveRank> ranks;  // index == rank
};

// The "dlaunch.status/1" document. Pure.
nlohmann::json StatusToJson(const LiveSnapshot& snapshot);
// Back from the document (what `dlaunch status` got); false and `problem` set when `doc` is not a
// dlaunch.status/1 document. Lenient with fields. Never throws.
bool StatusFromJson(const nlohmann::json& doc, LiveSnapshot* out, std::string* problem);

// The text `dlaunch status` prints: the job lines, then one line per rank, or above
// `group_threshold` ranks one line per set of ranks alike (state, phase, step, collective), with
// stragglers and stopped ranks one by one. Pure.
std::string RenderStatusText(const LiveSnapshot& snapshot, size_t group_threshold = 16);

}  // namespace dlaunch::launcher
