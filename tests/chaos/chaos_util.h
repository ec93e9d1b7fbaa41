// The fault campaign's plumbing: how big it is (DLAUNCH_CHAOS_LONG=1 for `make chaos`), where
// its measurements go (DLAUNCH_CHAOS_RESULTS, one JSON line per trial, read by
// scripts/chaos_report.py), and the process checks the trials share.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace dlaunch::testing::chaos {

inline bool LongCampaign() {
  const char* v = std::getenv("DLAUNCH_CHAOS_LONG");
  return v && std::string(v) == "1";
}

// `quick` trials in `make test`, `full` in `make chaos`.
inline int Trials(int quick, int full) { return LongCampaign() ? full : quick; }

// One trial's outcome: {"fault": ..., "right": bool, ...figures}.
inline void Record(const nlohmann::json& trial) {
  const char* path = std::getenv("DLAUNCH_CHAOS_RESULTS");
  if (!path || !*path) return;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::ofstream(path, std::ios::app) << trial.dump() << "\n";
}

inline int64_t MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               t0)
      .count();
}

// Alive and not a zombie.
inline bool ProcessAlive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// Waits up to `timeout` for every pid to die; returns how many still live (and kills them, so
// a failed trial leaves nothing behind).
inline int Survivors(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int alive = 0;
  for (;;) {
    alive = 0;
    for (pid_t p : pids) alive += ProcessAlive(p) ? 1 : 0;
    if (alive == 0 || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // /proc has no event to wait on
  }
  for (pid_t p : pids) {
    if (ProcessAlive(p)) ::kill(p, SIGKILL);
  }
  return alive;
}

}  // namespace dlaunch::testing::chaos
