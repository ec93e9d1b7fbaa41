// summary.json: the launcher's account of a run, one entry per rank (host, pid, how it ended)
// and, for a multi-node job on node 0, per node. A joining node writes the same format for its
// own ranks to summary.node<N>.json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/run_dir/flight_file.h"
#include "core/run_dir/straggler_verdicts.h"

namespace dlaunch::rundir {

inline constexpr char kSummarySchema[] = "summary";
inline constexpr size_t kMaxSummaryBytes = 64 << 20;

// How a rank (or node) stands. kKilled: torn down by the launcher after another rank failed.
enum class RankStatus { kRunning, kOk, kFailed, kKilled, kLost, kUnknown };
const char* RankStatusName(RankStatus status);  // running | ok | failed | killed | lost | unknown
RankStatus ParseRankStatus(std::string_view name);  // kUnknown for anything else

struct SummaryRank {
  int rank = -1;
  std::optional<int> local_rank;  // ranks of this node
  std::optional<int> node_rank;   // ranks of other nodes (multi-node, on node 0)
  std::string host;
  int pid = 0;
  RankStatus status = RankStatus::kUnknown;
  std::optional<int64_t> start_unix_ms;
  std::optional<int64_t> end_unix_ms;  // once exited
  std::optional<int> restarts;
  // Once exited: the exit code, or -signal when a signal ended it (torchrun's convention).
  std::optional<int> exit_code;
  int signal = 0;     // written as its name ("SIGKILL"); 0 = none
  std::string error;  // one line, when the launcher knows why
  // Found stopped (process state T) when the launcher's teardown began; written only when true.
  bool stopped_at_teardown = false;
};

struct SummaryNode {
  int node_rank = 0;
  std::string host;
  RankStatus status = RankStatus::kUnknown;  // ok | failed | lost | unknown
  std::optional<int> exit_code;
  std::string error;
};

// What the restart policy decided after a failed attempt (--restart-policy), with what it rests
// on: written whether or not it was acted on.
struct SummaryDecision {
  std::string policy;  // auto | always | observe
  std::string action;  // restart | stop | exclude
  std::string rule;    // startup | deterministic | no-progress | node | transient
  int node = -1;       // exclude: the node
  std::string reason;  // one line
  bool acted = false;  // the job did what `action` says
};

// One attempt of the launch (summary.json's "attempts"), when there was more than one.
struct SummaryAttempt {
  int attempt = 0;
  int restart_count = 0;
  int nnodes = 1;
  int world_size = 0;
  int64_t start_unix_ms = 0;
  int64_t end_unix_ms = 0;  // 0 while it runs
  int exit_code = -1;       // -1 while it runs
  std::string error;        // one line: the root cause or the reason it stopped
  std::string next;         // "restart", "rejoin" (lost nodes, MIN kept) or "" (the last)
  std::string folder;       // where its rank folders went ("attempt3"); "" for the last
  std::optional<SummaryDecision> decision;  // after a failure --max-restarts would restart
};

struct Summary {
  std::string run_id;
  std::string host;
  std::optional<int> exit_code;  // the launcher's; -1 while it runs
  int restarts = 0;
  int64_t updated_unix_ms = 0;
  std::string error;  // the root cause or stop reason, one line
  std::vector<SummaryRank> ranks;
  std::vector<SummaryNode> nodes;  // multi-node, on node 0
  // Logs a full disk cut short ("rank1/stdout.log"), relative to the run directory.
  std::vector<std::string> truncated_logs;
  std::vector<SummaryAttempt> attempts;  // attempt by attempt, when there was a restart
  // Straggler verdicts of the job so far, active and ended; written only when there were some.
  std::vector<StragglerVerdict> stragglers;
};

std::string SummaryToJson(const Summary& summary);  // indented, with a trailing newline
// Atomically. Blocks for the write; throws Error(kInternal).
void WriteSummary(const std::string& path, const Summary& summary);
// Never throws. Ranks outside [0, kMaxRanks) are dropped with a problem line.
FileState ReadSummary(const std::string& path, const std::string& label, Summary* out,
                      std::vector<std::string>* problems);

}  // namespace dlaunch::rundir
