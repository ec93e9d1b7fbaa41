// What killed ranks leave behind, swept once an attempt's ranks are gone and before it is judged:
// the run directory's half-written temporaries (a rank killed between writing a file and renaming
// it into place) and the program's own (train's checkpoint temporaries).
#pragma once

#include "launcher/job/attempt_listener.h"
#include "launcher/job/job_plan.h"

namespace dlaunch::launcher {

class LeftoversListener : public AttemptListener {
 public:
  // `plan` outlives the listener; its ranks may change between attempts.
  explicit LeftoversListener(const JobPlan* plan) : plan_(plan) {}

  // Each rank folder's temporaries go, except an error.json's, which is kept for the verdict
  // (rundir::SweepLeftoverTemps); then RankProgram::AfterAttempt. Blocks for directory scans;
  // never throws.
  void OnRanksGone(AttemptResult* result) override;

 private:
  const JobPlan* plan_;
};

}  // namespace dlaunch::launcher
