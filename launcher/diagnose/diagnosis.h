// The answer to "which rank is stuck, in which collective, doing what?" (or "why did it die?"),
// shared by the live hang monitor and `dlaunch diagnose`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launcher/nccl_log/report.h"

namespace dlaunch::launcher {

enum class DiagnosisKind { kOk, kHang, kFailure, kMismatch, kIncomplete };
const char* DiagnosisKindName(DiagnosisKind kind);  // ok, hang, failure, mismatch, incomplete

struct RankDiagnosis {
  int rank = 0;
  bool culprit = false;
  // One word: waiting, never_entered, completed, exited, failed, stopped, running, unknown.
  std::string state;
  int64_t last_completed_seq = -1;
  int64_t last_started_seq = -1;
  int64_t waiting_ms = -1;  // time inside the collective at `Diagnosis::seq`, -1 when not in it
  std::string phase;
  int64_t phase_for_ms = -1;
  int64_t step = -1;
  int64_t rss_bytes = -1;
  int64_t device_allocated_bytes = -1;
  int64_t device_reserved_bytes = -1;
  int exit_code = -1;  // -1 while running or unknown
  int signal = 0;
  std::string process_state;
  std::string stack_top;  // innermost interesting frames of the main thread, when captured
  std::vector<std::string> nccl_warnings;
  std::string line;  // human-readable summary of the above
};

struct Diagnosis {
  DiagnosisKind kind = DiagnosisKind::kIncomplete;
  std::string headline;
  std::string trigger;  // why a live diagnosis ran, e.g. "no progress for 300 s on rank 2"
  std::vector<int> culprit_ranks;
  int64_t seq = -1;  // the lowest collective not completed everywhere (or the mismatched one)
  std::string op;
  std::string dtype;
  int64_t count = -1;
  int64_t bytes = -1;
  std::string mismatch_type;  // COLLECTIVE_TYPE_MISMATCH, SIZE_OR_SYNTAX_MISMATCH, ...
  std::vector<int> entered_ranks;
  std::vector<int> missing_ranks;  // never entered `seq`
  std::vector<RankDiagnosis> ranks;
  std::vector<std::string> details;   // root-cause block, memory trend, mismatch table, ...
  std::vector<std::string> problems;  // inputs that were missing or unreadable
  std::vector<nccl_log::Verdict> nccl_verdicts;  // from the ranks' NCCL logs (nccl.log)
  std::string run_dir;
  int64_t created_unix_ms = 0;
};

}  // namespace dlaunch::launcher
