#include "launcher/job/file_timer_listener.h"

#include <cstdlib>
#include <string>

namespace dlaunch::launcher {

FileTimerListener::FileTimerListener(const Supervisor* supervisor)
    : server_(RunningRanksOf(supervisor)) {}

void FileTimerListener::OnRankProcess(ProcessSpec* process) {
  SetEnvEntry(&process->env, kFileTimerFileVar, server_.path());
}

void FileTimerListener::OnRanksGone(AttemptResult* result) {
  AttachTimerKills(server_.TakeKills(), &result->ranks);
}

bool FileTimerWanted() {
  const char* on = std::getenv(kFileTimerEnableVar);
  return on && std::string(on) == "1";
}

}  // namespace dlaunch::launcher
