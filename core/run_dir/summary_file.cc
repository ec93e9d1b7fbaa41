#include "core/run_dir/summary_file.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/base/files.h"
#include "core/base/format.h"
#include "core/run_dir/json_fields.h"
#include "core/run_dir/paths.h"
#include "core/run_dir/schema.h"
#include "core/run_dir/straggler_verdicts.h"

namespace dlaunch::rundir {

using detail::GetInt;
using detail::GetString;
using nlohmann::json;

namespace {

std::optional<int> OptInt(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return detail::GetInt32(j, key, 0);
}

std::optional<int64_t> OptInt64(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return GetInt(j, key, 0);
}

// "signal" is a number or a name ("SIGABRT", "ABRT"); 0 when absent.
int SignalOf(const json& rank) {
  auto it = rank.find("signal");
  if (it == rank.end()) return 0;
  if (it->is_number()) return detail::GetInt32(rank, "signal", 0, 0, 128);
  if (!it->is_string()) return 0;
  return base::SignalNumber(it->get<std::string>());
}

json DecisionToJson(const SummaryDecision& d) {
  json j = {{"policy", d.policy},
            {"action", d.action},
            {"rule", d.rule},
            {"reason", d.reason},
            {"acted", d.acted}};
  if (d.node >= 0) j["node"] = d.node;
  return j;
}

SummaryDecision DecisionFromJson(const json& j) {
  SummaryDecision d;
  d.policy = GetString(j, "policy");
  d.action = GetString(j, "action");
  d.rule = GetString(j, "rule");
  d.reason = GetString(j, "reason");
  d.node = detail::GetInt32(j, "node", -1);
  auto acted = j.find("acted");
  d.acted = acted != j.end() && acted->is_boolean() && acted->get<bool>();
  return d;
}

}  // namespace

namespace {
constexpr const char* kRankStatusNames[] = {"running", "ok", "failed", "killed", "lost", "unknown"};
}  // namespace

const char* RankStatusName(RankStatus status) { return detail::NameOf(status, kRankStatusNames); }
RankStatus ParseRankStatus(std::string_view name) {
  return detail::ParseName(name, kRankStatusNames, RankStatus::kUnknown);
}

std::string SummaryToJson(const Summary& s) {
  json j = {{"schema", SchemaId(kSummarySchema)},
            {"run_id", s.run_id},
            {"host", s.host},
            {"exit_code", s.exit_code ? json(*s.exit_code) : json(nullptr)},
            {"restarts", s.restarts},
            {"updated_unix_ms", s.updated_unix_ms}};
  if (!s.error.empty()) j["error"] = s.error;
  j["ranks"] = json::array();
  for (const SummaryRank& r : s.ranks) {
    json rank = {
        {"rank", r.rank}, {"host", r.host}, {"pid", r.pid}, {"status", RankStatusName(r.status)}};
    if (r.local_rank) rank["local_rank"] = *r.local_rank;
    if (r.node_rank) rank["node_rank"] = *r.node_rank;
    if (r.start_unix_ms) rank["start_unix_ms"] = *r.start_unix_ms;
    if (r.end_unix_ms) rank["end_unix_ms"] = *r.end_unix_ms;
    if (r.restarts) rank["restarts"] = *r.restarts;
    if (r.exit_code) rank["exit_code"] = *r.exit_code;
    if (r.signal) rank["signal"] = base::SignalName(r.signal);
    if (!r.error.empty()) rank["error"] = r.error;
    if (r.stopped_at_teardown) rank["stopped_at_teardown"] = true;
    j["ranks"].push_back(std::move(rank));
  }
  if (!s.nodes.empty()) j["nodes"] = json::array();
  for (const SummaryNode& n : s.nodes) {
    json node = {
        {"node_rank", n.node_rank}, {"host", n.host}, {"status", RankStatusName(n.status)}};
    if (n.exit_code) node["exit_code"] = *n.exit_code;
    if (!n.error.empty()) node["error"] = n.error;
    j["nodes"].push_back(std::move(node));
  }
  if (!s.truncated_logs.empty()) j["truncated_logs"] = s.truncated_logs;
  if (!s.stragglers.empty()) j["stragglers"] = StragglersToJson(s.stragglers);
  for (const SummaryAttempt& a : s.attempts) {
    json attempt = {{"attempt", a.attempt},
                    {"restart_count", a.restart_count},
                    {"nnodes", a.nnodes},
                    {"world_size", a.world_size},
                    {"start_unix_ms", a.start_unix_ms},
                    {"exit_code", a.exit_code}};
    if (a.end_unix_ms) attempt["end_unix_ms"] = a.end_unix_ms;
    if (!a.error.empty()) attempt["error"] = a.error;
    if (!a.next.empty()) attempt["next"] = a.next;
    if (!a.folder.empty()) attempt["folder"] = a.folder;
    if (a.decision) attempt["decision"] = DecisionToJson(*a.decision);
    j["attempts"].push_back(std::move(attempt));
  }
  return detail::Dump(j, 2) + "\n";
}

void WriteSummary(const std::string& path, const Summary& summary) {
  base::WriteFileAtomically(path, SummaryToJson(summary));
}

FileState ReadSummary(const std::string& path, const std::string& label, Summary* out,
                      std::vector<std::string>* problems) {
  json j;
  if (FileState state =
          detail::ReadJsonObject(path, label, kSummarySchema, kMaxSummaryBytes, &j, problems);
      state != FileState::kOk) {
    return state;
  }
  Summary& s = *out;
  s.run_id = GetString(j, "run_id");
  s.host = GetString(j, "host");
  s.exit_code = OptInt(j, "exit_code");
  s.restarts = detail::GetInt32(j, "restarts", 0);
  s.updated_unix_ms = GetInt(j, "updated_unix_ms", 0);
  s.error = GetString(j, "error");
  s.truncated_logs = detail::GetStrings(j, "truncated_logs");
  s.stragglers = StragglersFromJson(j, "stragglers");
  if (auto attempts = j.find("attempts"); attempts != j.end() && attempts->is_array()) {
    for (const json& a : *attempts) {
      if (!a.is_object() || s.attempts.size() >= static_cast<size_t>(kMaxRanks)) continue;
      SummaryAttempt& sa = s.attempts.emplace_back();
      sa.attempt = detail::GetInt32(a, "attempt", 0);
      sa.restart_count = detail::GetInt32(a, "restart_count", 0);
      sa.nnodes = detail::GetInt32(a, "nnodes", 1);
      sa.world_size = detail::GetInt32(a, "world_size", 0);
      sa.start_unix_ms = GetInt(a, "start_unix_ms", 0);
      sa.end_unix_ms = GetInt(a, "end_unix_ms", 0);
      sa.exit_code = detail::GetInt32(a, "exit_code", -1);
      sa.error = GetString(a, "error");
      sa.next = GetString(a, "next");
      sa.folder = GetString(a, "folder");
      if (auto d = a.find("decision"); d != a.end() && d->is_object()) {
        sa.decision = DecisionFromJson(*d);
      }
    }
  }
  int dropped = 0;
  if (auto ranks = j.find("ranks"); ranks != j.end() && ranks->is_array()) {
    for (const json& r : *ranks) {
      if (!r.is_object()) continue;
      const int64_t rank = GetInt(r, "rank", -1);
      if (rank < 0 || rank >= kMaxRanks) {
        dropped += rank >= kMaxRanks;
        continue;
      }
      SummaryRank sr;
      sr.rank = static_cast<int>(rank);
      sr.local_rank = OptInt(r, "local_rank");
      sr.node_rank = OptInt(r, "node_rank");
      sr.host = GetString(r, "host");
      sr.pid = detail::GetInt32(r, "pid", 0);
      sr.status = ParseRankStatus(GetString(r, "status"));
      sr.start_unix_ms = OptInt64(r, "start_unix_ms");
      sr.end_unix_ms = OptInt64(r, "end_unix_ms");
      sr.restarts = OptInt(r, "restarts");
      sr.exit_code = OptInt(r, "exit_code");
      sr.signal = SignalOf(r);
      sr.error = GetString(r, "error");
      sr.stopped_at_teardown = detail::GetBool(r, "stopped_at_teardown", false);
      s.ranks.push_back(std::move(sr));
    }
  }
  if (dropped > 0) {
    problems->push_back(label + ": " + std::to_string(dropped) + " rank(s) numbered " +
                        std::to_string(kMaxRanks) + " or more ignored");
  }
  if (auto nodes = j.find("nodes"); nodes != j.end() && nodes->is_array()) {
    for (const json& n : *nodes) {
      if (!n.is_object()) continue;
      SummaryNode sn;
      sn.node_rank = detail::GetInt32(n, "node_rank", 0);
      sn.host = GetString(n, "host");
      sn.status = ParseRankStatus(GetString(n, "status"));
      sn.exit_code = OptInt(n, "exit_code");
      sn.error = GetString(n, "error");
      s.nodes.push_back(std::move(sn));
    }
  }
  return FileState::kOk;
}

}  // namespace dlaunch::rundir
