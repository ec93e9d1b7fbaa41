#include "launcher/job/attempt_listener.h"

namespace dlaunch::launcher {

void AttemptListeners::AttemptStart(const Membership& m) {
  for (AttemptListener* l : listeners_) l->OnAttemptStart(m);
}

void AttemptListeners::RankProcess(ProcessSpec* process) {
  for (AttemptListener* l : listeners_) l->OnRankProcess(process);
}

void AttemptListeners::RankChange(const AttemptResult& now) {
  for (AttemptListener* l : listeners_) l->OnRankChange(now);
}

void AttemptListeners::Tick() {
  for (AttemptListener* l : listeners_) l->OnTick();
}

void AttemptListeners::RanksGone(AttemptResult* result) {
  for (AttemptListener* l : listeners_) l->OnRanksGone(result);
}

void AttemptListeners::Restart(const Membership& next, const std::string& how,
                               const AttemptReport& ended) {
  for (AttemptListener* l : listeners_) l->OnRestart(next, how, ended);
}

void AttemptListeners::JobEnd(const AttemptReport& last) {
  for (AttemptListener* l : listeners_) l->OnJobEnd(last);
}

}  // namespace dlaunch::launcher
