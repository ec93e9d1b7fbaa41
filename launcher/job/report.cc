#include "launcher/job/report.h"

#include <signal.h>

#include <cstring>
#include <ctime>
#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/telemetry.h"
#include "launcher/python/python_launch.h"

namespace dlaunch::launcher {

std::string SignalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

const char* RunStateName(RunState state) {
  switch (state) {
    case RunState::kRunning:
      return "running";
    case RunState::kOk:
      return "ok";
    case RunState::kFailed:
      return "failed";
    case RunState::kKilled:
      return "killed";
    case RunState::kLost:
      return "lost";
    case RunState::kUnknown:
      break;
  }
  return "unknown";
}

RunState StateOf(const RankOutcome& r) {
  if (!r.exited) return RunState::kRunning;
  if (r.ok()) return RunState::kOk;
  return r.torn_down ? RunState::kKilled : RunState::kFailed;
}

namespace {

// A node in node 0's summary: node 0 by the job's verdict, the others by what they said.
RunState StateOf(const NodeView& n, int job_exit_code) {
  if (n.node_rank == 0) return job_exit_code == 0 ? RunState::kOk : RunState::kFailed;
  if (n.status && n.status->done()) {
    return n.status->exit_code() == 0 ? RunState::kOk : RunState::kFailed;
  }
  return n.lost ? RunState::kLost : RunState::kUnknown;
}

// Another node's rank, as its node last reported it.
RunState StateOf(const v1::RankExit& r, bool node_lost) {
  if (!r.exited()) return node_lost ? RunState::kLost : RunState::kRunning;
  return r.signal() == 0 && r.exit_code() == 0 ? RunState::kOk : RunState::kFailed;
}

}  // namespace

std::string DescribeExit(const RankOutcome& o) {
  if (!o.exited) return "still running";
  if (o.signal) return "signal " + SignalName(o.signal) + " (" + std::to_string(o.signal) + ")";
  return "exit code " + std::to_string(o.exit_code);
}

std::vector<std::string> TailLines(const std::string& path, size_t n) {
  std::ifstream in(path);
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(in, line)) {
    tail.push_back(line);
    if (tail.size() > n) tail.pop_front();
  }
  return {tail.begin(), tail.end()};
}

static std::string FormatTime(int64_t unix_ms) {
  std::time_t t = unix_ms / 1000;
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string FormatRootCause(const RankOutcome& f, const std::string& host,
                            const std::string& rank_dir, const std::string& extra) {
  std::string headline = "rank " + std::to_string(f.rank) + " failed";
  const std::string recorded = python::RecordedErrorLines(f.rank, rank_dir, &headline);
  std::ostringstream out;
  out << "dlaunch: " << headline << "\n"
      << "Root Cause (first observed failure):\n"
      << "  time      : " << FormatTime(f.end_unix_ms) << "\n"
      << "  host      : " << host << "\n"
      << "  rank      : " << f.rank << " (local_rank: " << f.local_rank << ")\n"
      << "  exit      : " << DescribeExit(f) << " (pid: " << f.pid << ")\n";
  if (f.signal == SIGKILL) {
    out << "  hint      : SIGKILL with no traceback is often the kernel's OOM killer "
           "(check dmesg)\n";
  }
  if (!extra.empty()) out << "  error     : " << extra << "\n";
  out << recorded;
  out << "  logs      : " << rank_dir << "/\n";
  auto tail = TailLines(rank_dir + "/stderr.log", 10);
  if (!tail.empty()) {
    out << "  last stderr lines:\n";
    for (const auto& l : tail) out << "    " << l << "\n";
  }
  return out.str();
}

void WriteSummary(const std::string& path, const SummaryInfo& info,
                  const std::vector<RankOutcome>& ranks) {
  nlohmann::json j = {{"run_id", info.run_id},
                      {"host", info.host},
                      {"exit_code", info.exit_code},
                      {"restarts", info.restarts},
                      {"updated_unix_ms", core::UnixMillis()}};
  if (!info.error.empty()) j["error"] = info.error;
  j["ranks"] = nlohmann::json::array();
  for (const auto& r : ranks) {
    const char* status = RunStateName(StateOf(r));
    nlohmann::json rank = {{"rank", r.rank},           {"local_rank", r.local_rank},
                           {"host", info.host},        {"pid", r.pid},
                           {"status", status},         {"start_unix_ms", r.start_unix_ms},
                           {"restarts", info.restarts}};
    if (r.exited) {
      rank["end_unix_ms"] = r.end_unix_ms;
      if (r.signal) {
        rank["signal"] = SignalName(r.signal);
        rank["exit_code"] = -r.signal;  // torchrun's convention for "killed by signal"
      } else {
        rank["exit_code"] = r.exit_code;
      }
    }
    j["ranks"].push_back(rank);
  }
  if (!info.nodes.empty()) j["nodes"] = nlohmann::json::array();
  for (const auto& n : info.nodes) {
    const bool done = n.status && n.status->done();
    nlohmann::json node = {{"node_rank", n.node_rank},
                           {"host", n.host},
                           {"status", RunStateName(StateOf(n, info.exit_code))}};
    if (done) node["exit_code"] = n.status->exit_code();
    if (done && !n.status->message().empty()) node["error"] = n.status->message();
    j["nodes"].push_back(node);
    if (n.node_rank == 0 || !n.status) continue;
    for (const auto& r : n.status->ranks()) {
      nlohmann::json rank = {{"rank", r.rank()},
                             {"host", n.host},
                             {"node_rank", n.node_rank},
                             {"pid", r.pid()},
                             {"status", RunStateName(StateOf(r, n.lost))}};
      if (r.exited()) {
        rank["exit_code"] = r.signal() ? -r.signal() : r.exit_code();
        if (r.signal()) rank["signal"] = SignalName(r.signal());
      }
      j["ranks"].push_back(rank);
    }
  }
  if (!info.attempts.empty()) j["attempts"] = AttemptsJson(info.attempts);
  core::WriteFileAtomically(path, j.dump(2) + "\n");
}

}  // namespace dlaunch::launcher
