#include "launcher/python/agent_files.h"

#include <filesystem>
#include <vector>

#include "core/base/clock.h"
#include "core/run_dir/heartbeat_file.h"
#include "core/run_dir/paths.h"

namespace dlaunch::launcher::python {

namespace fs = std::filesystem;

core::Phase PhaseFromName(const std::string& name) {
  for (int p = 0; p <= static_cast<int>(core::Phase::kDone); ++p) {
    const auto phase = static_cast<core::Phase>(p);
    if (name == core::PhaseName(phase)) return phase;
  }
  return core::Phase::kUnknown;
}

namespace {

AgentHeartbeat FromFile(rundir::Heartbeat& beat) {
  AgentHeartbeat h;
  h.pid = beat.pid;
  h.unix_ms = beat.unix_ms;
  h.progress_unix_ms = beat.progress_unix_ms;
  h.phase_since_unix_ms = beat.phase_since_unix_ms;
  core::RankStatus& s = h.status;
  s.step = beat.step;
  s.phase = PhaseFromName(beat.phase);
  s.last_started_seq = beat.last_started_seq;
  s.last_completed_seq = beat.last_completed_seq;
  s.current_op = beat.current_op;
  s.rss_bytes = beat.rss_bytes;
  s.peak_rss_bytes = beat.peak_rss_bytes;
  s.device_allocated_bytes = beat.device_allocated_bytes;
  s.device_reserved_bytes = beat.device_reserved_bytes;
  s.device_peak_bytes = beat.device_peak_bytes;
  s.steps_timed = beat.steps_timed;
  s.step_busy_ms_total = beat.step_busy_ms_total;
  s.arrivals_first_seq = beat.arrivals_first_seq;
  s.arrival_unix_us = std::move(beat.arrival_unix_us);
  h.section = beat.section;
  h.section_since_unix_ms = beat.section_since_unix_ms;
  h.section_timeout_s = beat.section_timeout_s;
  h.write_error = beat.write_error;
  return h;
}

}  // namespace

std::optional<AgentHeartbeat> ReadAgentHeartbeat(const std::string& rank_dir) {
  rundir::Heartbeat beat;
  std::vector<std::string> problems;  // an unreadable heartbeat is no heartbeat
  const std::string path = rundir::RankDir(rank_dir).heartbeat();
  if (rundir::ReadHeartbeat(path, path, &beat, &problems) != rundir::FileState::kOk) {
    return std::nullopt;
  }
  return FromFile(beat);
}

std::optional<AgentHeartbeat> ParseAgentHeartbeat(const std::string& line) {
  if (line.empty()) return std::nullopt;
  rundir::Heartbeat beat;
  std::vector<std::string> problems;
  if (rundir::ParseHeartbeat(line, "heartbeat", &beat, &problems) != rundir::FileState::kOk) {
    return std::nullopt;
  }
  return FromFile(beat);
}

void RequestAgentDump(const std::string& rank_dir, const std::string& reason) {
  std::error_code ec;
  if (!fs::is_directory(rank_dir, ec)) return;
  try {
    rundir::WriteDumpRequest(rundir::RankDir(rank_dir).dump_request(), reason, base::UnixMillis());
  } catch (const std::exception&) {
    // The rank directory went away, or the disk is full: that rank gets no request.
  }
}

void ClearAgentFiles(const std::string& rank_dir) {
  const rundir::RankDir dir(rank_dir);
  std::error_code ec;
  fs::remove(dir.heartbeat(), ec);
  fs::remove(dir.py_stacks(), ec);
  fs::remove(dir.flight_tail(), ec);
  fs::remove(dir.agent_error(), ec);
}

}  // namespace dlaunch::launcher::python
