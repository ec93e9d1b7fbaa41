// The story of a job attempt by attempt: what summary.json's "attempts" records and what node 0
// prints when there was more than one.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace dlaunch::launcher {

struct AttemptRecord {
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
};

// summary.json's "attempts": one object per attempt, in order.
nlohmann::json AttemptsJson(const std::vector<AttemptRecord>& attempts);

// "attempt 0: 2 nodes, 4 ranks, rank 3 failed: ... -> restart (logs in attempt0/)" per line.
std::string FormatAttemptStory(const std::vector<AttemptRecord>& attempts);

}  // namespace dlaunch::launcher
