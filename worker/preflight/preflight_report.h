// What rank 0 makes of a finished suite: the verdict with its reasons (what failed, by how much,
// where), preflight.json's document, and the comment lines that follow the tables.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "worker/preflight/bandwidth_sweep.h"
#include "worker/preflight/deadlock_check.h"
#include "worker/preflight/nccl_table.h"
#include "worker/preflight/p2p_matrix.h"
#include "worker/preflight/preflight_options.h"

namespace dlaunch::worker {

struct SuiteResults {
  std::string backend;
  int world_size = 1;
  int ranks_per_node = 0;
  std::vector<DeviceInfo> devices;  // by rank
  std::vector<SweepResult> sweeps;
  std::optional<P2PResult> p2p;
  NodeMatrix nodes;
  HangTestResult hang;
};

// One line per problem; empty = PASS. Pure.
std::vector<std::string> JudgeSuite(const SuiteResults& results, const PreflightOptions& options);

// preflight.json's document.
nlohmann::json SuiteJson(const SuiteResults& results, const PreflightOptions& options,
                         const std::vector<std::string>& reasons, double duration_s);

// "# hang test: ...", "# verdict: PASS|FAIL", "#   <reason>" lines.
std::string FormatVerdict(const SuiteResults& results, const std::vector<std::string>& reasons);

}  // namespace dlaunch::worker
