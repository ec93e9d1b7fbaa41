#include "launcher/job/leftovers_listener.h"

#include "core/run_dir/leftovers.h"

namespace dlaunch::launcher {

void LeftoversListener::OnRanksGone(AttemptResult*) {
  for (const auto& slot : plan_->ranks()) rundir::SweepLeftoverTemps(slot.dir);
  plan_->program().AfterAttempt();
}

}  // namespace dlaunch::launcher
