#include "launcher/python/agent_files.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/telemetry.h"

namespace dlaunch::launcher::python {
namespace {

namespace fs = std::filesystem;
constexpr size_t kMaxHeartbeatBytes = 64 * 1024;

int64_t Int(const nlohmann::json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return fallback;
  return it->is_number_float() ? static_cast<int64_t>(it->get<double>()) : it->get<int64_t>();
}

std::string Str(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

core::Phase PhaseFromName(const std::string& name) {
  using core::Phase;
  static const std::pair<const char*, Phase> kNames[] = {{"init", Phase::kInit},
                                                         {"data", Phase::kData},
                                                         {"forward", Phase::kForward},
                                                         {"backward", Phase::kBackward},
                                                         {"communication", Phase::kCommunication},
                                                         {"optimizer", Phase::kOptimizer},
                                                         {"checkpoint", Phase::kCheckpoint},
                                                         {"done", Phase::kDone}};
  for (const auto& [n, p] : kNames) {
    if (name == n) return p;
  }
  return Phase::kUnknown;
}

std::optional<AgentHeartbeat> ReadAgentHeartbeat(const std::string& rank_dir) {
  std::ifstream in(fs::path(rank_dir) / kHeartbeatFile, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(kMaxHeartbeatBytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  AgentHeartbeat h;
  h.pid = static_cast<int>(Int(j, "pid", 0));
  h.unix_ms = Int(j, "unix_ms", 0);
  h.progress_unix_ms = Int(j, "progress_unix_ms", 0);
  h.phase_since_unix_ms = Int(j, "phase_since_unix_ms", 0);
  core::RankStatus& s = h.status;
  s.step = Int(j, "step", 0);
  s.phase = PhaseFromName(Str(j, "phase"));
  s.last_started_seq = Int(j, "last_started_seq", -1);
  s.last_completed_seq = Int(j, "last_completed_seq", -1);
  s.current_op = Str(j, "current_op");
  s.rss_bytes = Int(j, "rss_bytes", -1);
  s.peak_rss_bytes = Int(j, "peak_rss_bytes", -1);
  s.device_allocated_bytes = Int(j, "device_allocated_bytes", -1);
  s.device_reserved_bytes = Int(j, "device_reserved_bytes", -1);
  s.device_peak_bytes = Int(j, "device_peak_bytes", -1);
  auto section = j.find("section");
  if (section != j.end() && section->is_object()) {
    h.section = Str(*section, "name");
    h.section_since_unix_ms = Int(*section, "since_unix_ms", 0);
    auto t = section->find("timeout_s");
    if (t != section->end() && t->is_number()) h.section_timeout_s = t->get<double>();
  }
  return h;
}

void RequestAgentDump(const std::string& rank_dir, const std::string& reason) {
  std::error_code ec;
  if (!fs::is_directory(rank_dir, ec)) return;
  try {
    nlohmann::json j = {{"reason", reason}, {"unix_ms", core::UnixMillis()}};
    core::WriteFileAtomically((fs::path(rank_dir) / kDumpRequestFile).string(), j.dump() + "\n");
  } catch (const std::exception&) {
  }
}

void ClearAgentFiles(const std::string& rank_dir) {
  std::error_code ec;
  fs::remove(fs::path(rank_dir) / kHeartbeatFile, ec);
}

}  // namespace dlaunch::launcher::python
