// Whether the Python rank agent loaded in each rank of a Python entry, said once for the job on
// the console when it did not (python -S or -I, a program that rebuilds sys.path, an agent that
// failed to start): that rank's hangs, errors and flight recorder are then seen only from outside.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "launcher/job/attempt_listener.h"
#include "launcher/job/job_plan.h"
#include "launcher/supervision/supervisor.h"

namespace dlaunch::launcher {

class AgentLoadWatch {
 public:
  // A rank's agent writes heartbeat.json as it starts: a rank without one `bound` after its
  // start, or when it exited by itself, has none.
  explicit AgentLoadWatch(std::chrono::milliseconds bound = std::chrono::seconds(15))
      : bound_ms_(bound.count()) {}

  // The console line ("dlaunch: ...\n") for the ranks of `now` (this node's, in `slots`, by local
  // rank) found without an agent at `now_unix_ms`: agent_error.txt's reason when the agent said
  // why. "" when all is well so far, and after the first line. Blocks for a stat per rank.
  std::string Check(const AttemptResult& now, const std::vector<RankSlot>& slots,
                    int64_t now_unix_ms);

 private:
  int64_t bound_ms_;
  bool said_ = false;
  std::set<pid_t> loaded_;  // ranks' processes seen with their heartbeat
};

// The watch as the agent loop's listener, for a job whose program expects the agent
// (RankProgram::ExpectsAgent): checked on every rank change and tick, its line on stderr.
class AgentWatchListener : public AttemptListener {
 public:
  // `plan` outlives the listener; its ranks may change between attempts.
  explicit AgentWatchListener(const JobPlan* plan) : plan_(plan) {}

  void OnAttemptStart(const Membership& m) override { progress_ = {}; }
  void OnRankChange(const AttemptResult& now) override;
  void OnTick() override;

 private:
  const JobPlan* plan_;
  AgentLoadWatch watch_;
  AttemptResult progress_;  // the attempt's ranks as they last stood
};

}  // namespace dlaunch::launcher
