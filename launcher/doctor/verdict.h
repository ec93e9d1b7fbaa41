// The Verdict step of `dlaunch doctor`: pure judging of DoctorFacts, so every rule is testable
// with fixtures. Each check ends ✓ (pass), ! (warn), ✗ (fail) or – (skipped: nothing to judge,
// e.g. no GPU), and every warn or fail carries a concrete fix.
#pragma once

#include <string>
#include <vector>

#include "launcher/doctor/doctor_facts.h"

namespace dlaunch::launcher {

enum class CheckStatus { kPass, kWarn, kFail, kSkip };

const char* CheckStatusName(CheckStatus status);    // "pass", "warn", "fail", "skip"
const char* CheckStatusSymbol(CheckStatus status);  // "✓", "!", "✗", "–"

struct CheckResult {
  std::string id;  // stable: "driver_cuda_runtime", "nccl_socket_ifname", ...
  std::string title;
  CheckStatus status = CheckStatus::kSkip;
  std::string detail;
  std::string fix;
  // A failure that stops `train` and `preflight` (unless --skip-doctor): it will break the job.
  bool fatal = false;
};

class Verdict {
 public:
  // Pure: does not block, reads nothing but `facts`.
  static std::vector<CheckResult> Judge(const DoctorFacts& facts);

  // Pure helpers over judged checks.
  static bool AnyFailed(const std::vector<CheckResult>& checks);
  static const CheckResult* Find(const std::vector<CheckResult>& checks, const std::string& id);
  // Minimum /dev/shm: NVIDIA's container guidance for NCCL is --shm-size=1g.
  static constexpr uint64_t kMinShmBytes = 1ULL << 30;
  // Below this memlock a warning even without RDMA devices.
  static constexpr uint64_t kMinMemlockBytes = 64ULL << 20;
  static constexpr uint64_t kMinOpenFiles = 4096;
};

}  // namespace dlaunch::launcher
