// Straggler verdicts as summary.json and diagnosis.json carry them ("stragglers"): a rank that
// ran slower than the others' median over a rolling window of steps, from when the launcher's
// detector first said so to when it said it was over. docs/run-directory.md, "Stragglers".
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace dlaunch::rundir {

struct StragglerVerdict {
  int rank = -1;
  std::string host;
  double relative = 0;       // the rank's step time p50 / the median of all ranks' p50
  double step_ms_p50 = 0;    // the rank's own step time (collective waits left out), p50
  double median_ms = 0;      // the median of every rank's p50
  int64_t window_steps = 0;  // steps the figures cover
  double last_share = -1;    // share of the window's collectives it entered last; -1 unknown
  int64_t start_unix_ms = 0;
  int64_t end_unix_ms = 0;  // 0 while it lasts
  int64_t start_step = -1;  // the job's step (the furthest rank's) when it was named
  int64_t end_step = -1;
  std::string text;  // "straggler: rank 5 (host b) 1.41x the median step time over ..."
};

// An array of objects; [] for none.
nlohmann::json StragglersToJson(const std::vector<StragglerVerdict>& verdicts);
// Lenient: skips what is not an object; a missing or wrong-typed array gives none. Never throws.
std::vector<StragglerVerdict> StragglersFromJson(const nlohmann::json& doc, const char* key);

}  // namespace dlaunch::rundir
