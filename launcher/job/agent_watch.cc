#include "launcher/job/agent_watch.h"

#include <filesystem>
#include <iostream>

#include "core/base/clock.h"
#include "core/base/files.h"
#include "core/base/format.h"
#include "core/run_dir/paths.h"

namespace dlaunch::launcher {

std::string AgentLoadWatch::Check(const AttemptResult& now, const std::vector<RankSlot>& slots,
                                  int64_t now_unix_ms) {
  if (said_) return "";
  std::vector<int> missing;
  std::string why;
  for (const RankOutcome& r : now.ranks) {
    if (r.pid <= 0 || loaded_.count(r.pid) || r.local_rank < 0 ||
        r.local_rank >= static_cast<int>(slots.size())) {
      continue;
    }
    const rundir::RankDir dir(slots[r.local_rank].dir);
    std::error_code ec;
    // The flight tail comes first and needs no room on a full disk.
    if (std::filesystem::exists(dir.heartbeat(), ec) ||
        std::filesystem::exists(dir.flight_tail(), ec)) {
      loaded_.insert(r.pid);
      continue;
    }
    std::string reason;
    const bool failed =
        base::ReadFileBounded(dir.agent_error(), 512, &reason) != base::ReadStatus::kMissing;
    // A signal (a kill at its start, the teardown) may come before Python ran at all.
    const bool ended_by_itself = r.exited && !r.torn_down && r.signal == 0;
    const int64_t ran_ms =
        (r.exited && r.end_unix_ms > 0 ? r.end_unix_ms : now_unix_ms) - r.start_unix_ms;
    if (!failed && !ended_by_itself && ran_ms < bound_ms_) continue;
    missing.push_back(r.rank);
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == '\r')) reason.pop_back();
    if (why.empty()) why = reason;
  }
  if (missing.empty()) return "";
  said_ = true;
  const std::string ranks = base::NameRanks(missing);
  const std::string how =
      why.empty() ? "did not load in " + ranks + " (no heartbeat.json; python -S or -I?)"
                  : "did not start in " + ranks + " (" + why + ")";
  return "dlaunch: the Python rank agent " + how +
         ": its hangs, errors and flight recorder are seen only from outside\n";
}

void AgentWatchListener::OnRankChange(const AttemptResult& now) {
  progress_ = now;
  OnTick();
}

void AgentWatchListener::OnTick() {
  if (progress_.ranks.empty()) return;
  std::cerr << watch_.Check(progress_, plan_->ranks(), base::UnixMillis()) << std::flush;
}

}  // namespace dlaunch::launcher
