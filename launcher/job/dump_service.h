// Node 0's answer to dump requests (`dlaunch dump`, SIGUSR1 to a Python rank): a request is a
// folder dumps/<name>/ holding request.json, made by the run directory's owner. Polled on the
// supervisor's tick; each dump is taken on a thread of its own, so that supervision and the hang
// monitor go on meanwhile.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "launcher/diagnose/job_view.h"
#include "launcher/diagnose/live_dump.h"

namespace dlaunch::launcher {

class DumpService {
 public:
  DumpService(std::shared_ptr<JobView> job, LiveDumpOptions options);
  // Joins the dump in progress: blocks for at most one dump (LiveDumpOptions' bounds).
  ~DumpService();

  // One stat(2) of dumps/, and a scan of it when it changed; starts the next dump when none
  // runs. Does not block for long.
  void Poll();

 private:
  void Run(const std::string& folder);

  std::shared_ptr<JobView> job_;
  LiveDumpOptions options_;
  std::string dumps_dir_;
  int64_t seen_mtime_ns_ = -1;
  std::set<std::string> seen_;      // folders taken or refused
  std::deque<std::string> queued_;  // folders waiting for the dump in progress
  std::atomic<bool> busy_{false};
  std::thread worker_;
};

}  // namespace dlaunch::launcher
