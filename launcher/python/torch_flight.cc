#include "launcher/python/torch_flight.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>

#include "core/base/files.h"
#include "core/base/format.h"
#include "launcher/python/pickle_reader.h"

namespace dlaunch::launcher::python {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr char kDumpPrefix[] = "torch_trace_";

// At most kMaxTorchText bytes, cut before a UTF-8 continuation byte (the pickle reader's strings
// are valid UTF-8, and so stay valid).
std::string Text(const std::string& s) {
  if (s.size() <= kMaxTorchText) return s;
  size_t n = kMaxTorchText;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;
  return s.substr(0, n);
}

int64_t Int(const json& o, const char* key, int64_t fallback) {
  auto it = o.find(key);
  return it != o.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}
std::string Str(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? Text(it->get_ref<const std::string&>()) : "";
}
bool Bool(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_boolean() && it->get<bool>();
}

std::vector<std::vector<int64_t>> Sizes(const json& o, const char* key) {
  std::vector<std::vector<int64_t>> out;
  auto it = o.find(key);
  if (it == o.end() || !it->is_array()) return out;
  for (const json& arg : *it) {
    if (out.size() >= kMaxTorchTensors) break;
    std::vector<int64_t> dims;
    if (arg.is_array()) {
      for (const json& d : arg) {
        if (dims.size() >= kMaxTorchDims) break;
        if (d.is_number_integer()) dims.push_back(d.get<int64_t>());
      }
    }
    out.push_back(std::move(dims));
  }
  return out;
}

std::vector<std::string> Strings(const json& o, const char* key) {
  std::vector<std::string> out;
  auto it = o.find(key);
  if (it == o.end() || !it->is_array()) return out;
  for (const json& s : *it) {
    if (out.size() >= kMaxTorchTensors) break;
    out.push_back(s.is_string() ? Text(s.get_ref<const std::string&>()) : "");
  }
  return out;
}

// pg_config's ranks are text: "[0, 1, 2]"; at most `max` of them.
std::vector<int> ParseRanks(const std::string& text, size_t max) {
  std::vector<int> ranks;
  int64_t v = -1;
  for (char c : text) {
    if (ranks.size() >= max) return ranks;
    if (std::isdigit(static_cast<unsigned char>(c))) {
      v = std::min<int64_t>((v < 0 ? 0 : v) * 10 + (c - '0'), 1 << 30);
    } else if (v >= 0) {
      ranks.push_back(static_cast<int>(v));
      v = -1;
    }
  }
  if (v >= 0 && ranks.size() < max) ranks.push_back(static_cast<int>(v));
  return ranks;
}

TorchFlightEntry EntryFromJson(const json& e) {
  TorchFlightEntry t;
  t.record_id = Int(e, "record_id", -1);
  t.pg_id = Int(e, "pg_id", -1);
  auto pg = e.find("process_group");
  if (pg != e.end() && pg->is_array()) {
    if (pg->size() > 0 && (*pg)[0].is_string()) t.pg_name = Text((*pg)[0].get<std::string>());
    if (pg->size() > 1 && (*pg)[1].is_string()) t.pg_desc = Text((*pg)[1].get<std::string>());
  }
  t.collective_seq_id = Int(e, "collective_seq_id", Int(e, "seq_id", -1));
  t.p2p_seq_id = Int(e, "p2p_seq_id", -1);
  t.op_id = Int(e, "op_id", -1);
  t.profiling_name = Str(e, "profiling_name");
  t.is_p2p = Bool(e, "is_p2p");
  t.input_sizes = Sizes(e, "input_sizes");
  t.output_sizes = Sizes(e, "output_sizes");
  t.input_dtypes = Strings(e, "input_dtypes");
  t.output_dtypes = Strings(e, "output_dtypes");
  t.state = Str(e, "state");
  t.time_created_ns = Int(e, "time_created_ns", 0);
  t.time_discovered_started_ns = Int(e, "time_discovered_started_ns", 0);
  t.time_discovered_completed_ns = Int(e, "time_discovered_completed_ns", 0);
  auto d = e.find("duration_ms");
  if (d != e.end() && d->is_number()) t.duration_ms = d->get<double>();
  t.timeout_ms = Int(e, "timeout_ms", -1);
  t.retired = Bool(e, "retired");
  auto frames = e.find("frames");
  if (frames != e.end() && frames->is_array()) {
    for (const json& f : *frames) {
      if (t.frames.size() >= kMaxTorchFrames) break;
      if (!f.is_object()) continue;
      t.frames.push_back({Str(f, "name"), Str(f, "filename"), Int(f, "line", -1)});
    }
  }
  return t;
}

bool InsideTorch(const std::string& filename) {
  return filename.find("/torch/") != std::string::npos || filename.rfind("torch/", 0) == 0 ||
         filename.find("/dlaunch/_") != std::string::npos;
}

}  // namespace

std::string TorchFlightEntry::op() const {
  const size_t colon = profiling_name.find(':');
  return colon == std::string::npos ? profiling_name : profiling_name.substr(colon + 1);
}

std::string TorchFlightEntry::call_site() const {
  for (const TorchFrame& f : frames) {
    if (InsideTorch(f.filename)) continue;
    return f.filename + ":" + std::to_string(f.line) + " " + f.name;
  }
  return "";
}

int64_t TorchFlightEntry::elements() const {
  if (input_sizes.empty()) return -1;
  int64_t total = 0;
  for (const auto& dims : input_sizes) {
    int64_t n = 1;
    for (int64_t d : dims) n = d < 0 || (d > 0 && n > INT64_MAX / d) ? -1 : n * d;
    if (n < 0) return -1;
    total += n;
  }
  return total;
}

std::optional<TorchFlightDump> TorchFlightFromJson(const json& doc, std::string* error) {
  if (!doc.is_object()) {
    *error = "not a dict";
    return std::nullopt;
  }
  auto entries = doc.find("entries");
  if (!doc.contains("version") && (entries == doc.end() || !entries->is_array())) {
    *error = "neither \"version\" nor \"entries\": not a PyTorch flight-recorder dump";
    return std::nullopt;
  }
  TorchFlightDump d;
  d.version = Str(doc, "version");
  d.comm_lib_version = Str(doc, "comm_lib_version");
  auto config = doc.find("pg_config");
  if (config != doc.end() && config->is_object()) {
    size_t ranks_left = kMaxTorchGroupRanks;
    for (const auto& [name, g] : config->items()) {
      if (d.process_groups.size() >= kMaxTorchGroups) break;
      if (!g.is_object()) continue;
      TorchProcessGroup& pg = d.process_groups[Text(name)];
      pg.name = Str(g, "name");
      pg.desc = Str(g, "desc");
      auto ranks = g.find("ranks");
      if (ranks != g.end() && ranks->is_string()) {
        pg.ranks = ParseRanks(ranks->get_ref<const std::string&>(), ranks_left);
        ranks_left -= pg.ranks.size();
      }
    }
  }
  auto status = doc.find("pg_status");
  if (status != doc.end() && status->is_object()) {
    for (const auto& [id, s] : status->items()) {
      if (d.pg_status.size() >= kMaxTorchGroups) break;
      if (!s.is_object()) continue;
      TorchProcessGroup& pg = d.pg_status[Text(id)];
      pg.last_enqueued = Int(s, "last_enqueued_collective", -1);
      pg.last_started = Int(s, "last_started_collective", -1);
      pg.last_completed = Int(s, "last_completed_collective", -1);
    }
  }
  if (entries != doc.end() && entries->is_array()) {
    const size_t first =
        entries->size() > kMaxTorchEntries ? entries->size() - kMaxTorchEntries : 0;
    for (size_t i = first; i < entries->size(); ++i) {
      const json& e = (*entries)[i];
      if (e.is_object()) d.entries.push_back(EntryFromJson(e));
    }
  }
  return d;
}

TorchReadBudget::TorchReadBudget(const TorchReadLimits& limits)
    : limits_(limits), deadline_(std::chrono::steady_clock::now() + limits.time) {}

std::string TorchReadBudget::Take(size_t bytes) {
  if (std::chrono::steady_clock::now() >= deadline_) {
    return "not read: the " + base::FormatDurationMs(limits_.time.count()) +
           " for reading torch dumps are spent";
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (kept_bytes_ >= limits_.kept_bytes) {
    return "not read: the dumps already read take " +
           base::FormatBytes(static_cast<int64_t>(limits_.kept_bytes)) + ", all they may";
  }
  if (file_bytes_ + bytes > limits_.file_bytes) {
    return "not read: it would pass the " +
           base::FormatBytes(static_cast<int64_t>(limits_.file_bytes)) +
           " of torch dumps one diagnosis reads (" +
           base::FormatBytes(static_cast<int64_t>(file_bytes_)) + " read)";
  }
  file_bytes_ += bytes;
  return "";
}

void TorchReadBudget::Keep(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  kept_bytes_ += bytes;
}

size_t KeptBytes(const TorchFlightDump& d) {
  size_t n = sizeof d + d.file.size() + d.version.size() + d.comm_lib_version.size();
  for (const auto* groups : {&d.process_groups, &d.pg_status}) {
    for (const auto& [name, g] : *groups) {
      n += 96 + name.size() + g.name.size() + g.desc.size() + g.ranks.size() * sizeof(int);
    }
  }
  for (const TorchFlightEntry& e : d.entries) {
    n += sizeof e + e.pg_name.size() + e.pg_desc.size() + e.profiling_name.size() + e.state.size();
    for (const auto* sizes : {&e.input_sizes, &e.output_sizes}) {
      for (const auto& dims : *sizes) n += sizeof dims + dims.size() * sizeof(int64_t);
    }
    for (const auto* dtypes : {&e.input_dtypes, &e.output_dtypes}) {
      for (const std::string& t : *dtypes) n += sizeof t + t.size();
    }
    for (const TorchFrame& f : e.frames) n += sizeof f + f.name.size() + f.filename.size();
  }
  return n;
}

namespace {

std::optional<TorchFlightDump> ReadDump(const std::string& path, std::string* error,
                                        TorchReadBudget* budget) {
  // The budget is taken before the file is read (and again for what it grew by meanwhile).
  PickleLimits limits;
  std::error_code ec;
  const uintmax_t size = fs::is_regular_file(path, ec) ? fs::file_size(path, ec) : 0;
  base::ReadStatus status =
      !ec && size > kMaxTorchDumpBytes ? base::ReadStatus::kTooLarge : base::ReadStatus::kOk;
  if (budget != nullptr && status == base::ReadStatus::kOk) {
    *error = budget->Take(size);
    if (!error->empty()) return std::nullopt;
    limits.deadline = budget->deadline();
  }
  std::string bytes;
  if (status == base::ReadStatus::kOk) {
    status = base::ReadFileBounded(path, kMaxTorchDumpBytes, &bytes);
  }
  if (status != base::ReadStatus::kOk) {
    *error = base::DescribeReadStatus(status, kMaxTorchDumpBytes);
    return std::nullopt;
  }
  if (budget != nullptr && bytes.size() > size) {
    *error = budget->Take(bytes.size() - size);
    if (!error->empty()) return std::nullopt;
  }
  std::optional<TorchFlightDump> dump;
  {
    std::optional<json> doc = ReadPickle(bytes, error, limits);
    if (!doc) {
      *error = "not a readable pickle: " + *error;
      return std::nullopt;
    }
    std::string().swap(bytes);
    dump = TorchFlightFromJson(*doc, error);
  }
  if (!dump) return std::nullopt;
  if (budget != nullptr) budget->Keep(KeptBytes(*dump));
  dump->file = path;
  ec.clear();
  const auto mtime = fs::last_write_time(path, ec);
  if (!ec) {
    // file_time_type's clock is the system clock on Linux (libstdc++), offset to the Unix epoch.
    const auto since = std::chrono::duration_cast<std::chrono::milliseconds>(
        mtime.time_since_epoch() - fs::file_time_type::clock::now().time_since_epoch());
    dump->written_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count() +
                            since.count();
  }
  const std::string name = fs::path(path).filename().string();
  const std::string digits = name.substr(std::min(name.size(), sizeof(kDumpPrefix) - 1));
  if (!digits.empty() && digits.size() < 8 &&
      std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(c); })) {
    dump->rank = std::stoi(digits);
  }
  return dump;
}

}  // namespace

std::optional<TorchFlightDump> ReadTorchFlightDump(const std::string& path, std::string* error,
                                                   TorchReadBudget* budget) {
  try {
    return ReadDump(path, error, budget);
  } catch (const std::bad_alloc&) {
    *error = "out of memory while reading it";
  } catch (const std::exception& e) {
    *error = std::string("not read: ") + e.what();
  }
  return std::nullopt;
}

std::vector<std::string> FindTorchFlightDumps(const std::string& rank_dir) {
  std::vector<std::string> found;
  std::error_code ec;
  fs::directory_iterator it(rank_dir, ec), end;
  // A hostile folder may hold millions of files: look at a bounded number of names.
  for (size_t seen = 0; !ec && it != end && seen < 4096; it.increment(ec), ++seen) {
    const std::string name = it->path().filename().string();
    if (name.rfind(kDumpPrefix, 0) != 0) continue;
    const std::string digits = name.substr(sizeof(kDumpPrefix) - 1);
    if (digits.empty() || digits.size() > 7 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(c); })) {
      continue;
    }
    found.push_back(it->path().string());
  }
  std::sort(found.begin(), found.end());
  if (found.size() > kMaxTorchDumpsPerRank) found.resize(kMaxTorchDumpsPerRank);
  return found;
}

json TorchFlightToJson(const TorchFlightDump& d) {
  json entries = json::array();
  for (const TorchFlightEntry& e : d.entries) {
    json j = {{"record_id", e.record_id},
              {"pg_id", e.pg_id},
              {"process_group", e.pg_name},
              {"collective_seq_id", e.collective_seq_id},
              {"p2p_seq_id", e.p2p_seq_id},
              {"profiling_name", e.profiling_name},
              {"is_p2p", e.is_p2p},
              {"input_sizes", e.input_sizes},
              {"input_dtypes", e.input_dtypes},
              {"output_sizes", e.output_sizes},
              {"output_dtypes", e.output_dtypes},
              {"state", e.state},
              {"time_created_ns", e.time_created_ns},
              {"time_discovered_started_ns", e.time_discovered_started_ns},
              {"time_discovered_completed_ns", e.time_discovered_completed_ns},
              {"timeout_ms", e.timeout_ms},
              {"retired", e.retired},
              {"call_site", e.call_site()}};
    if (e.duration_ms >= 0) j["duration_ms"] = e.duration_ms;
    entries.push_back(std::move(j));
  }
  json groups = json::object();
  for (const auto& [name, g] : d.process_groups) {
    groups[name] = {{"name", g.name}, {"desc", g.desc}, {"ranks", g.ranks}};
  }
  json status = json::object();
  for (const auto& [id, g] : d.pg_status) {
    status[id] = {{"last_enqueued_collective", g.last_enqueued},
                  {"last_started_collective", g.last_started},
                  {"last_completed_collective", g.last_completed}};
  }
  return {{"rank", d.rank},
          {"file", d.file},
          {"written_unix_ms", d.written_unix_ms},
          {"version", d.version},
          {"comm_lib_version", d.comm_lib_version},
          {"pg_config", std::move(groups)},
          {"pg_status", std::move(status)},
          {"entries", std::move(entries)}};
}

}  // namespace dlaunch::launcher::python
