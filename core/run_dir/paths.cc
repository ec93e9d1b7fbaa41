#include "core/run_dir/paths.h"

#include <algorithm>

namespace dlaunch::rundir {
namespace {

constexpr char kRankPrefix[] = "rank";
constexpr char kAttemptPrefix[] = "attempt";

// The number after `prefix` in `name`: at most nine digits, below `limit`.
std::optional<int> NumberAfter(const std::string& name, const char* prefix, size_t prefix_len,
                               long limit) {
  if (name.size() <= prefix_len || name.size() > prefix_len + 9 ||
      name.compare(0, prefix_len, prefix))
    return std::nullopt;
  if (!std::all_of(name.begin() + prefix_len, name.end(),
                   [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  const long n = std::stol(name.substr(prefix_len));
  if (n >= limit) return std::nullopt;
  return static_cast<int>(n);
}

std::string Join(const std::string& dir, const char* name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string RankDir::stdout_log() const { return Join(path_, "stdout.log"); }
std::string RankDir::stderr_log() const { return Join(path_, "stderr.log"); }
std::string RankDir::filtered_stdout_log() const { return Join(path_, "filtered_stdout.log"); }
std::string RankDir::filtered_stderr_log() const { return Join(path_, "filtered_stderr.log"); }
std::string RankDir::events() const { return Join(path_, "events.jsonl"); }
std::string RankDir::flight() const { return Join(path_, "flight.json"); }
std::string RankDir::hang_test_flight() const { return Join(path_, "flight-hang-test.json"); }
std::string RankDir::op_table(const std::string& perf_name) const {
  return Join(path_, (perf_name + ".txt").c_str());
}
std::string RankDir::error() const { return Join(path_, "error.json"); }
std::string RankDir::stacks() const { return Join(path_, "stacks.txt"); }
std::string RankDir::nccl_log() const { return Join(path_, "nccl.log"); }
std::string RankDir::torch_error() const { return Join(path_, "torch_error.json"); }
std::string RankDir::heartbeat() const { return Join(path_, "heartbeat.json"); }
std::string RankDir::dump_request() const { return Join(path_, "dump_request"); }
std::string RankDir::py_stacks() const { return Join(path_, "py_stacks.txt"); }
std::string RankDir::agent_error() const { return Join(path_, "agent_error.txt"); }
std::string RankDir::flight_tail() const { return Join(path_, "flight_tail.jsonl"); }
std::string RankDir::torch_trace_prefix() const { return Join(path_, "torch_trace_"); }

bool RankDir::IsNcclLog(const std::string& file_name) {
  return file_name.rfind("nccl", 0) == 0 && file_name.find(".log") != std::string::npos;
}

std::string RunDir::summary() const { return Join(path_, "summary.json"); }
std::string RunDir::node_summary(int node_rank) const {
  return Join(path_, ("summary.node" + std::to_string(node_rank) + ".json").c_str());
}
std::string RunDir::dumps() const { return Join(path_, "dumps"); }
std::string RunDir::live() const { return Join(path_, "live.json"); }
std::string RunDir::preflight() const { return Join(path_, "preflight.json"); }
std::string RunDir::diagnosis_text() const { return Join(path_, "diagnosis.txt"); }
std::string RunDir::diagnosis_json() const { return Join(path_, "diagnosis.json"); }
std::string RunDir::trace() const { return Join(path_, "trace.json"); }
std::string RunDir::report() const { return Join(path_, "report.html"); }
std::string RunDir::reserve() const { return Join(path_, ".reserve"); }
RankDir RunDir::rank(int rank) const { return RankDir(Join(path_, RankDirName(rank).c_str())); }

std::string RunDir::RankDirName(int rank) { return kRankPrefix + std::to_string(rank); }

std::optional<int> RunDir::ParseRankDirName(const std::string& name) {
  return NumberAfter(name, kRankPrefix, sizeof(kRankPrefix) - 1, kMaxRanks);
}

std::string RunDir::attempt(const std::string& folder) const { return Join(path_, folder.c_str()); }

std::string RunDir::AttemptDirName(int number) { return kAttemptPrefix + std::to_string(number); }

std::optional<int> RunDir::ParseAttemptDirName(const std::string& name) {
  return NumberAfter(name, kAttemptPrefix, sizeof(kAttemptPrefix) - 1, 1000000000L);
}

std::string RankFileLabel(int rank, const std::string& path) {
  return RunDir::RankDirName(rank) + "/" + BaseName(path);
}

std::string FileName(const std::string& path) { return BaseName(path); }

}  // namespace dlaunch::rundir
