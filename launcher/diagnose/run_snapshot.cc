#include "launcher/diagnose/run_snapshot.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/error.h"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kMaxNcclWarnings = 20;
constexpr size_t kMaxStackBytes = 256 * 1024;

constexpr size_t kStderrTailLines = 8;

// The last `n` lines of a file, reading at most its last 64 KiB.
std::vector<std::string> TailLines(const fs::path& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - 64 * 1024);
  in.seekg(start);
  std::vector<std::string> lines;
  std::string line;
  if (start > 0) std::getline(in, line);  // a partial first line
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    lines.push_back(line);
    if (lines.size() > n) lines.erase(lines.begin());
  }
  return lines;
}

bool ReadFile(const fs::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  return true;
}

int64_t MtimeUnixMs(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
}

// Field readers that tolerate absent keys and wrong types: a half-broken file still yields what
// it can.
int64_t GetInt(const json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (it->is_number_integer() || it->is_number_unsigned()) return it->get<int64_t>();
  if (it->is_number_float()) return static_cast<int64_t>(it->get<double>());
  return fallback;
}

std::string GetString(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

void LoadFlight(const fs::path& path, int rank, RankRecord& record,
                std::vector<std::string>& problems) {
  std::string text;
  if (!ReadFile(path, &text)) return;
  record.flight.present = true;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    problems.push_back("rank" + std::to_string(rank) + "/flight.json is not valid JSON (" +
                       std::to_string(text.size()) + " bytes; truncated?)");
    return;
  }
  FlightDump& flight = record.flight;
  flight.world_size = static_cast<int>(GetInt(j, "world_size", 0));
  flight.backend = GetString(j, "backend");
  flight.reason = GetString(j, "reason");
  flight.dumped_unix_ms = GetInt(j, "dumped_unix_ms", 0);
  auto entries = j.find("entries");
  if (entries == j.end() || !entries->is_array()) {
    problems.push_back("rank" + std::to_string(rank) + "/flight.json has no entries array");
    return;
  }
  for (const json& e : *entries) {
    if (!e.is_object()) continue;
    FlightEntry entry;
    entry.seq = GetInt(e, "seq", -1);
    if (entry.seq < 0) continue;
    entry.collective_seq = GetInt(e, "collective_seq", -1);
    entry.op = GetString(e, "op");
    entry.dtype = GetString(e, "dtype");
    entry.count = GetInt(e, "count", -1);
    entry.bytes = GetInt(e, "bytes", -1);
    entry.peer = static_cast<int>(GetInt(e, "peer", -1));
    entry.root = static_cast<int>(GetInt(e, "root", -1));
    entry.state = GetString(e, "state");
    entry.scheduled_unix_ns = GetInt(e, "scheduled_unix_ns", 0);
    entry.started_unix_ns = GetInt(e, "started_unix_ns", 0);
    entry.completed_unix_ns = GetInt(e, "completed_unix_ns", 0);
    entry.duration_us = GetInt(e, "duration_us", 0);
    entry.error = GetString(e, "error");
    flight.entries.push_back(std::move(entry));
  }
  std::sort(flight.entries.begin(), flight.entries.end(),
            [](const FlightEntry& a, const FlightEntry& b) { return a.seq < b.seq; });
  flight.valid = true;
}

void LoadEvents(const fs::path& path, int rank, RankRecord& record,
                std::vector<std::string>& problems) {
  std::ifstream in(path);
  if (!in) return;
  std::string line;
  int bad = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      ++bad;
      continue;
    }
    std::string kind = GetString(j, "kind");
    int64_t unix_ms = GetInt(j, "unix_ms", 0);
    if (kind == "telemetry") {
      TelemetrySample s;
      s.unix_ms = unix_ms;
      s.step = GetInt(j, "step", -1);
      s.phase = GetString(j, "phase");
      s.rss_bytes = GetInt(j, "rss_bytes", -1);
      s.peak_rss_bytes = GetInt(j, "peak_rss_bytes", -1);
      s.device_allocated_bytes = GetInt(j, "device_allocated_bytes", -1);
      s.device_reserved_bytes = GetInt(j, "device_reserved_bytes", -1);
      s.device_peak_bytes = GetInt(j, "device_peak_bytes", -1);
      s.device_free_bytes = GetInt(j, "device_free_bytes", -1);
      s.device_total_bytes = GetInt(j, "device_total_bytes", -1);
      record.telemetry.push_back(std::move(s));
    } else {
      record.events.push_back(RankEvent{unix_ms, kind, std::move(j)});
    }
  }
  if (bad > 0) {
    problems.push_back("rank" + std::to_string(rank) + "/events.jsonl: " + std::to_string(bad) +
                       " unreadable line(s) skipped (truncated write?)");
  }
}

void LoadError(const fs::path& path, int rank, RankRecord& record,
               std::vector<std::string>& problems) {
  std::string text;
  if (!ReadFile(path, &text)) return;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    problems.push_back("rank" + std::to_string(rank) + "/error.json is not valid JSON");
    return;
  }
  record.error = std::move(j);
}

void LoadNcclWarnings(const fs::path& rank_dir, RankRecord& record) {
  std::error_code ec;
  std::vector<fs::path> logs;
  for (const auto& entry : fs::directory_iterator(rank_dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("nccl", 0) == 0 && name.find(".log") != std::string::npos) {
      logs.push_back(entry.path());
    }
  }
  std::sort(logs.begin(), logs.end());
  for (const fs::path& log : logs) {
    std::ifstream in(log);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find("NCCL WARN") == std::string::npos && line.find(" WARN ") == std::string::npos) {
        continue;
      }
      if (record.nccl_warnings.size() == kMaxNcclWarnings) {
        record.nccl_warnings.push_back("... (more WARN lines in " + log.filename().string() + ")");
        return;
      }
      record.nccl_warnings.push_back(line);
    }
  }
}

// "signal" is a number or a name ("SIGABRT", "ABRT"); 0 when absent.
int SignalNumber(const json& rank) {
  auto it = rank.find("signal");
  if (it == rank.end()) return 0;
  if (it->is_number()) return static_cast<int>(GetInt(rank, "signal", 0));
  if (!it->is_string()) return 0;
  std::string name = it->get<std::string>();
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  for (int sig = 1; sig < 65; ++sig) {
    const char* abbrev = sigabbrev_np(sig);
    if (abbrev && name == abbrev) return sig;
  }
  return 0;
}

void LoadSummary(const fs::path& path, RunSnapshot& run,
                 std::vector<std::pair<int, RankSummary>>& summaries) {
  std::string text;
  if (!ReadFile(path, &text)) {
    run.problems.push_back("summary.json missing (launcher killed before it wrote one?)");
    return;
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    run.problems.push_back("summary.json is not valid JSON (" + std::to_string(text.size()) +
                           " bytes)");
    return;
  }
  run.run_id = GetString(j, "run_id");
  if (j.contains("exit_code") && j["exit_code"].is_number()) {
    run.exit_code = static_cast<int>(GetInt(j, "exit_code", 0));
  }
  auto ranks = j.find("ranks");
  if (ranks == j.end() || !ranks->is_array()) return;
  for (const json& r : *ranks) {
    if (!r.is_object()) continue;
    int rank = static_cast<int>(GetInt(r, "rank", -1));
    if (rank < 0) continue;
    RankSummary s;
    s.host = GetString(r, "host");
    s.pid = static_cast<int>(GetInt(r, "pid", 0));
    s.status = GetString(r, "status");
    s.exit_code = static_cast<int>(GetInt(r, "exit_code", 0));
    s.signal = SignalNumber(r);
    if (s.signal == 0 && s.exit_code < 0 && s.status != "running") s.signal = -s.exit_code;
    s.start_unix_ms = GetInt(r, "start_unix_ms", 0);
    s.end_unix_ms = GetInt(r, "end_unix_ms", 0);
    s.restarts = static_cast<int>(GetInt(r, "restarts", 0));
    s.error = GetString(r, "error");
    summaries.emplace_back(rank, std::move(s));
  }
}

}  // namespace

const FlightEntry* FlightDump::Find(int64_t seq) const {
  auto it = std::lower_bound(entries.begin(), entries.end(), seq,
                             [](const FlightEntry& e, int64_t s) { return e.seq < s; });
  if (it == entries.end() || it->seq != seq) return nullptr;
  return &*it;
}

int64_t FlightDump::LastCompletedSeq() const {
  // Collectives complete in order on one communicator, but a ring buffer may hold a failed entry;
  // "completed" means every earlier one completed too.
  int64_t last = -1;
  for (const FlightEntry& e : entries) {
    if (e.state != "completed") break;
    last = e.seq;
  }
  if (last == -1 && !entries.empty() && entries.front().seq > 0) {
    last = entries.front().seq - 1;  // older entries fell out of the ring: they completed
  }
  return last;
}

int64_t FlightDump::LastStartedSeq() const {
  int64_t last = -1;
  for (const FlightEntry& e : entries) {
    if (e.state != "scheduled") last = std::max(last, e.seq);
  }
  return last;
}

RunSnapshot LoadRunDir(const std::string& run_dir, int world_size_hint) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) {
    throw Error(ErrorKind::kInvalidArgument, "run directory " + run_dir + " does not exist");
  }
  fs::directory_iterator probe(run_dir, ec);
  if (ec) {
    throw Error(ErrorKind::kInvalidArgument,
                "run directory " + run_dir + " is not readable: " + ec.message());
  }
  RunSnapshot run;
  run.run_dir = run_dir;
  const fs::path root(run_dir);

  std::vector<std::pair<int, RankSummary>> summaries;
  LoadSummary(root / "summary.json", run, summaries);

  std::string live_text;
  if (ReadFile(root / "diagnosis.json", &live_text)) {
    json j = json::parse(live_text, nullptr, false);
    if (!j.is_discarded() && j.is_object()) run.live_diagnosis = std::move(j);
  }

  // World size: the largest of what the summary, the rank folders and the flight dumps claim.
  int world = world_size_hint;
  for (const auto& [rank, s] : summaries) world = std::max(world, rank + 1);
  const std::regex rank_dir_re("rank([0-9]+)");
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    std::smatch m;
    std::string name = entry.path().filename().string();
    if (entry.is_directory(ec) && std::regex_match(name, m, rank_dir_re)) {
      world = std::max(world, std::stoi(m[1].str()) + 1);
    }
  }

  run.ranks.resize(world);
  for (int r = 0; r < world; ++r) run.ranks[r].rank = r;
  for (auto& [rank, s] : summaries) run.ranks[rank].summary = std::move(s);

  for (int r = 0; r < world; ++r) {
    RankRecord& record = run.ranks[r];
    const fs::path dir = root / ("rank" + std::to_string(r));
    record.dir_present = fs::is_directory(dir, ec);
    if (!record.dir_present) continue;
    LoadFlight(dir / "flight.json", r, record, run.problems);
    LoadEvents(dir / "events.jsonl", r, record, run.problems);
    LoadError(dir / "error.json", r, record, run.problems);
    std::string stacks;
    if (ReadFile(dir / "stacks.txt", &stacks)) {
      if (stacks.size() > kMaxStackBytes) stacks.resize(kMaxStackBytes);
      record.stacks = std::move(stacks);
    }
    LoadNcclWarnings(dir, record);
    record.stderr_tail = TailLines(dir / "stderr.log", kStderrTailLines);
    record.last_output_unix_ms =
        std::max(MtimeUnixMs(dir / "stdout.log"), MtimeUnixMs(dir / "stderr.log"));
  }
  // Flight dumps may know a larger world than the folders do (folders lost with a node).
  for (const RankRecord& record : run.ranks) world = std::max(world, record.flight.world_size);
  while (static_cast<int>(run.ranks.size()) < world) {
    RankRecord record;
    record.rank = static_cast<int>(run.ranks.size());
    run.ranks.push_back(std::move(record));
  }
  run.world_size = world;
  for (const RankRecord& record : run.ranks) {
    if (!record.dir_present) {
      run.problems.push_back("rank" + std::to_string(record.rank) + "/ missing");
    }
  }
  if (world == 0) run.problems.push_back("no rank folders and no summary.json: nothing to analyse");
  return run;
}

}  // namespace dlaunch::launcher
