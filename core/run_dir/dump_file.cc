#include "core/run_dir/dump_file.h"

#include <cstdio>
#include <ctime>

#include "core/base/files.h"
#include "core/run_dir/json_fields.h"
#include "core/run_dir/paths.h"

namespace dlaunch::rundir {
namespace {

std::string Join(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

}  // namespace

std::string DumpDir::request() const { return Join(path_, "request.json"); }
std::string DumpDir::manifest() const { return Join(path_, "dump.json"); }
std::string DumpDir::diagnosis_text() const { return Join(path_, "diagnosis.txt"); }
std::string DumpDir::diagnosis_json() const { return Join(path_, "diagnosis.json"); }
std::string DumpDir::rank(int rank) const { return Join(path_, RunDir::RankDirName(rank)); }

std::string DumpDir::NameAt(int64_t unix_ms, const std::string& suffix) {
  const std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%S", &tm);
  char ms[8];
  std::snprintf(ms, sizeof(ms), ".%03dZ", static_cast<int>(unix_ms % 1000));
  return std::string(buf) + ms + suffix;
}

void WriteDumpRequest(const std::string& path, const DumpRequest& r) {
  nlohmann::json doc = {{"schema", SchemaId(kDumpFolderRequestSchema)},
                        {"unix_ms", r.unix_ms},
                        {"pid", r.pid},
                        {"trigger", r.trigger},
                        {"ranks", r.ranks}};
  base::WriteFileAtomically(path, detail::Dump(doc, 2) + "\n");
}

FileState ReadDumpRequest(const std::string& path, const std::string& label, DumpRequest* out,
                          std::vector<std::string>* problems) {
  nlohmann::json j;
  if (FileState state = detail::ReadJsonObject(path, label, kDumpFolderRequestSchema, kMaxDumpBytes,
                                               &j, problems);
      state != FileState::kOk) {
    return state;
  }
  out->unix_ms = detail::GetInt(j, "unix_ms", 0);
  out->pid = detail::GetInt32(j, "pid", 0, 0);
  out->trigger = detail::GetString(j, "trigger");
  out->ranks = detail::GetInts(j, "ranks", 0, kMaxRanks);
  return FileState::kOk;
}

void WriteDumpManifest(const std::string& path, const DumpManifest& m) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const DumpRank& r : m.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"pid", r.pid},
                     {"answered", r.answered},
                     {"exited", r.exited},
                     {"process_state", r.process_state},
                     {"where", r.where},
                     {"files", r.files}});
  }
  nlohmann::json doc = {{"schema", SchemaId(kDumpSchema)},
                        {"requested_unix_ms", m.requested_unix_ms},
                        {"done_unix_ms", m.done_unix_ms},
                        {"trigger", m.trigger},
                        {"world_size", m.world_size},
                        {"attempt", m.attempt},
                        {"summary", m.summary},
                        {"headline", m.headline},
                        {"ranks", ranks},
                        {"problems", m.problems}};
  base::WriteFileAtomically(path, detail::Dump(doc, 2) + "\n");
}

FileState ReadDumpManifest(const std::string& path, const std::string& label, DumpManifest* out,
                           std::vector<std::string>* problems) {
  nlohmann::json j;
  if (FileState state =
          detail::ReadJsonObject(path, label, kDumpSchema, kMaxDumpBytes, &j, problems);
      state != FileState::kOk) {
    return state;
  }
  out->requested_unix_ms = detail::GetInt(j, "requested_unix_ms", 0);
  out->done_unix_ms = detail::GetInt(j, "done_unix_ms", 0);
  out->trigger = detail::GetString(j, "trigger");
  out->world_size = detail::GetInt32(j, "world_size", 0, 0, kMaxRanks);
  out->attempt = detail::GetInt32(j, "attempt", 0, 0);
  out->summary = detail::GetStrings(j, "summary");
  out->headline = detail::GetString(j, "headline");
  out->problems = detail::GetStrings(j, "problems");
  out->ranks.clear();
  if (auto it = j.find("ranks"); it != j.end() && it->is_array()) {
    for (const auto& r : *it) {
      if (!r.is_object()) continue;
      DumpRank d;
      d.rank = detail::GetInt32(r, "rank", -1, -1, kMaxRanks - 1);
      if (d.rank < 0) continue;
      d.pid = detail::GetInt32(r, "pid", 0, 0);
      d.answered = detail::GetBool(r, "answered", false);
      d.exited = detail::GetBool(r, "exited", false);
      d.process_state = detail::GetString(r, "process_state");
      d.where = detail::GetString(r, "where");
      d.files = detail::GetStrings(r, "files");
      out->ranks.push_back(std::move(d));
    }
  }
  return FileState::kOk;
}

}  // namespace dlaunch::rundir
