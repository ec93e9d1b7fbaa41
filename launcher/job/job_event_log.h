// The --events-file sink: job events appended as JSON lines (core/run_dir/job_events.h), each
// line written whole and flushed as it happens, so a reader tailing the file sees it at once.
#pragma once

#include <cstdio>
#include <mutex>
#include <string>

#include "core/run_dir/job_events.h"

namespace dlaunch::launcher {

class JobEventLog {
 public:
  // Opens `path` for appending; throws UsageError naming it when it cannot (before any rank
  // starts).
  JobEventLog(const std::string& path, std::string run_id);
  ~JobEventLog();
  JobEventLog(const JobEventLog&) = delete;
  JobEventLog& operator=(const JobEventLog&) = delete;

  // Stamps run id, attempt (the last SetAttempt) and the time when unset, and appends the line.
  // Thread-safe; blocks for one write. A write that fails (a full disk) is said once on stderr
  // and the job goes on.
  void Emit(rundir::JobEvent event);
  void SetAttempt(int attempt);

 private:
  std::mutex mu_;
  std::FILE* file_ = nullptr;
  std::string path_;
  std::string run_id_;
  int attempt_ = 0;
  bool said_ = false;
};

}  // namespace dlaunch::launcher
