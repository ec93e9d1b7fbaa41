#include "launcher/job/job_event_log.h"

#include <cerrno>
#include <cstring>
#include <iostream>

#include "core/base/clock.h"
#include "core/error.h"

namespace dlaunch::launcher {

JobEventLog::JobEventLog(const std::string& path, std::string run_id)
    : path_(path), run_id_(std::move(run_id)) {
  file_ = std::fopen(path.c_str(), "ae");
  if (!file_) {
    throw UsageError("--events-file " + path +
                     ": cannot open it for appending: " + std::strerror(errno));
  }
}

JobEventLog::~JobEventLog() {
  if (file_) std::fclose(file_);
}

void JobEventLog::SetAttempt(int attempt) {
  std::lock_guard<std::mutex> lock(mu_);
  attempt_ = attempt;
}

void JobEventLog::Emit(rundir::JobEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (event.unix_ms == 0) event.unix_ms = base::UnixMillis();
  if (event.run_id.empty()) event.run_id = run_id_;
  if (event.attempt == 0) event.attempt = attempt_;
  const std::string line = rundir::JobEventToJson(event) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    if (!said_) std::cerr << "dlaunch: --events-file " << path_ << ": write failed" << std::endl;
    said_ = true;
  }
}

}  // namespace dlaunch::launcher
