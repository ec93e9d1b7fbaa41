#include "launcher/live/live_snapshot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "core/base/format.h"

namespace dlaunch::launcher {
namespace {

using nlohmann::json;

// -1 (unknown) is null in the document.
json Num(double v) { return v < 0 ? json(nullptr) : json(v); }
json Int(int64_t v) { return v < 0 ? json(nullptr) : json(v); }

double GetNum(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : -1;
}
int64_t GetInt(const json& j, const char* key, int64_t fallback = -1) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return fallback;
  return it->is_number_integer() ? it->get<int64_t>() : static_cast<int64_t>(it->get<double>());
}
std::string GetStr(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}
bool GetBool(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

std::string Seconds(double s) {
  if (s < 0) return "?";
  return base::FormatDurationMs(static_cast<int64_t>(std::llround(s * 1000)));
}

std::string Fixed(double v, const char* format) {
  if (v < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string Percent(double share) { return share < 0 ? "-" : Fixed(100 * share, "%.0f") + "%"; }

std::string Memory(const LiveRank& r) {
  std::string s = r.rss_bytes >= 0 ? base::FormatBytes(r.rss_bytes) : "-";
  if (r.cuda_allocated_bytes >= 0 || r.cuda_reserved_bytes >= 0 || r.cuda_peak_bytes >= 0) {
    s += " cuda " + base::FormatBytes(r.cuda_allocated_bytes) + "/" +
         base::FormatBytes(r.cuda_reserved_bytes) + "/" + base::FormatBytes(r.cuda_peak_bytes);
  }
  return s;
}

std::string Collective(const LiveRank& r) {
  if (r.collective_op.empty()) return "-";
  return r.collective_op + " #" + std::to_string(r.collective_seq) + " " +
         Seconds(r.collective_age_s);
}

std::string Step(const LiveRank& r) {
  if (r.step < 0) return "-";
  return std::to_string(r.step) + " (" + Seconds(r.step_age_s) + ")";
}

// Columns padded to their widest cell.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::vector<std::string> Row(const LiveRank& r) {
  return {std::to_string(r.rank),
          r.host.empty() ? "?" : r.host,
          r.pid > 0 ? std::to_string(r.pid) : "-",
          r.state + (r.straggler ? " STRAGGLER" : ""),
          Step(r),
          r.phase.empty() ? "-" : r.phase,
          Collective(r),
          Seconds(r.heartbeat_age_s),
          Memory(r),
          r.step_time_p50_s < 0 ? "-" : Seconds(r.step_time_p50_s),
          Percent(r.comm_share),
          Fixed(r.straggler_score, "%.2f")};
}

// "120" or "118-121" over a set's values; "" when none is known.
template <typename T>
std::string Range(const std::vector<T>& values, std::string (*format)(T)) {
  std::vector<T> known;
  for (T v : values)
    if (v >= 0) known.push_back(v);
  if (known.empty()) return "";
  const auto [lo, hi] = std::minmax_element(known.begin(), known.end());
  return *lo == *hi ? format(*lo) : format(*lo) + "-" + format(*hi);
}
std::string IntText(int64_t v) { return std::to_string(v); }
std::string SecondsText(double v) { return Seconds(v); }
std::string ScoreText(double v) { return Fixed(v, "%.2f"); }

}  // namespace

json StatusToJson(const LiveSnapshot& s) {
  json ranks = json::array();
  for (const LiveRank& r : s.ranks) {
    json collective = nullptr;
    if (!r.collective_op.empty()) {
      collective = {{"op", r.collective_op},
                    {"seq", Int(r.collective_seq)},
                    {"age_s", Num(r.collective_age_s)}};
    }
    ranks.push_back({{"rank", r.rank},
                     {"host", r.host},
                     {"pid", r.pid},
                     {"remote", r.remote},
                     {"python", r.python},
                     {"state", r.state},
                     {"step", Int(r.step)},
                     {"step_age_s", Num(r.step_age_s)},
                     {"phase", r.phase},
                     {"collective", collective},
                     {"collectives_completed", Int(r.collectives_completed)},
                     {"heartbeat_age_s", Num(r.heartbeat_age_s)},
                     {"rss_bytes", Int(r.rss_bytes)},
                     {"cuda_allocated_bytes", Int(r.cuda_allocated_bytes)},
                     {"cuda_reserved_bytes", Int(r.cuda_reserved_bytes)},
                     {"cuda_peak_bytes", Int(r.cuda_peak_bytes)},
                     {"samples_per_s", Num(r.samples_per_s)},
                     {"step_time_p50_s", Num(r.step_time_p50_s)},
                     {"comm_share", Num(r.comm_share)},
                     {"straggler_score", Num(r.straggler_score)},
                     {"last_share", Num(r.last_share)},
                     {"straggler", r.straggler}});
  }
  const LiveJob& j = s.job;
  const double uptime = j.start_unix_ms > 0 ? (j.unix_ms - j.start_unix_ms) / 1000.0 : -1;
  return {{"schema", kStatusSchema},
          {"unix_ms", j.unix_ms},
          {"job",
           {{"run_id", j.run_id},
            {"run_dir", j.run_dir},
            {"state", j.state},
            {"healthy", j.healthy()},
            {"reason", j.reason},
            {"attempt", j.attempt},
            {"restarts", j.restarts},
            {"world_size", j.world_size},
            {"nodes", j.nodes},
            {"start_unix_ms", j.start_unix_ms},
            {"uptime_s", Num(uptime)},
            {"stragglers", rundir::StragglersToJson(j.stragglers)}}},
          {"ranks", ranks}};
}

bool StatusFromJson(const json& doc, LiveSnapshot* out, std::string* problem) {
  if (!doc.is_object() || GetStr(doc, "schema").rfind("dlaunch.status/", 0) != 0) {
    *problem = "not a dlaunch.status document";
    return false;
  }
  *out = LiveSnapshot{};
  const json job = doc.value("job", json::object());
  if (job.is_object()) {
    LiveJob& j = out->job;
    j.run_id = GetStr(job, "run_id");
    j.run_dir = GetStr(job, "run_dir");
    j.state = GetStr(job, "state");
    j.reason = GetStr(job, "reason");
    j.attempt = static_cast<int>(GetInt(job, "attempt", 0));
    j.restarts = static_cast<int>(GetInt(job, "restarts", 0));
    j.world_size = static_cast<int>(GetInt(job, "world_size", 0));
    j.nodes = static_cast<int>(GetInt(job, "nodes", 1));
    j.start_unix_ms = GetInt(job, "start_unix_ms", 0);
    j.stragglers = rundir::StragglersFromJson(job, "stragglers");
  }
  out->job.unix_ms = GetInt(doc, "unix_ms", 0);
  auto ranks = doc.find("ranks");
  if (ranks == doc.end() || !ranks->is_array()) return true;
  for (const json& r : *ranks) {
    if (!r.is_object()) continue;
    LiveRank x;
    x.rank = static_cast<int>(GetInt(r, "rank", 0));
    x.host = GetStr(r, "host");
    x.pid = static_cast<int>(GetInt(r, "pid", 0));
    x.remote = GetBool(r, "remote");
    x.python = GetBool(r, "python");
    x.state = GetStr(r, "state");
    x.step = GetInt(r, "step");
    x.step_age_s = GetNum(r, "step_age_s");
    x.phase = GetStr(r, "phase");
    if (auto c = r.find("collective"); c != r.end() && c->is_object()) {
      x.collective_op = GetStr(*c, "op");
      x.collective_seq = GetInt(*c, "seq");
      x.collective_age_s = GetNum(*c, "age_s");
    }
    x.collectives_completed = GetInt(r, "collectives_completed");
    x.heartbeat_age_s = GetNum(r, "heartbeat_age_s");
    x.rss_bytes = GetInt(r, "rss_bytes");
    x.cuda_allocated_bytes = GetInt(r, "cuda_allocated_bytes");
    x.cuda_reserved_bytes = GetInt(r, "cuda_reserved_bytes");
    x.cuda_peak_bytes = GetInt(r, "cuda_peak_bytes");
    x.samples_per_s = GetNum(r, "samples_per_s");
    x.step_time_p50_s = GetNum(r, "step_time_p50_s");
    x.comm_share = GetNum(r, "comm_share");
    x.straggler_score = GetNum(r, "straggler_score");
    x.last_share = GetNum(r, "last_share");
    x.straggler = GetBool(r, "straggler");
    out->ranks.push_back(std::move(x));
  }
  return true;
}

std::string RenderStatusText(const LiveSnapshot& s, size_t group_threshold) {
  const LiveJob& j = s.job;
  std::string out = "job " + j.run_id + ": " + j.state;
  if (!j.reason.empty()) out += " (" + j.reason + ")";
  out += ", attempt " + std::to_string(j.attempt) + ", " + std::to_string(j.restarts) +
         (j.restarts == 1 ? " restart" : " restarts") + ", " + std::to_string(j.world_size) +
         (j.world_size == 1 ? " rank" : " ranks") + " on " + std::to_string(j.nodes) +
         (j.nodes == 1 ? " node" : " nodes") + ", up " +
         (j.start_unix_ms > 0 ? base::FormatDurationMs(j.unix_ms - j.start_unix_ms) : "?") + "\n";
  int active = 0;
  for (const auto& v : j.stragglers) active += v.end_unix_ms == 0 ? 1 : 0;
  out += "verdicts: " + std::string(j.state == "hang" ? "suspected hang" : "no hang") + ", " +
         std::to_string(active) + " active straggler" + (active == 1 ? "" : "s") + " (" +
         std::to_string(j.stragglers.size()) + " so far)\n";
  for (const auto& v : j.stragglers) {
    out += "  " + v.text + (v.end_unix_ms == 0 ? " [active]" : " [ended]") + "\n";
  }
  const std::vector<std::string> header = {"RANK",       "HOST",  "PID",        "STATE",
                                           "STEP (AGE)", "PHASE", "COLLECTIVE", "HB",
                                           "MEMORY",     "P50",   "COMM",       "SCORE"};
  std::vector<std::vector<std::string>> rows = {header};
  if (s.ranks.size() <= group_threshold) {
    for (const LiveRank& r : s.ranks) rows.push_back(Row(r));
    return out + Table(rows);
  }
  // Many ranks: outliers one by one, the rest one line per set alike.
  std::map<std::string, std::vector<const LiveRank*>> sets;
  std::vector<std::string> order;
  for (const LiveRank& r : s.ranks) {
    if (r.straggler || (r.state != "running" && r.state != "exited")) {  // failed, starting
      rows.push_back(Row(r));
      continue;
    }
    const std::string key = r.state + " " + (r.phase.empty() ? "-" : r.phase) + " " +
                            (r.collective_op.empty() ? "-" : r.collective_op);
    if (!sets.count(key)) order.push_back(key);
    sets[key].push_back(&r);
  }
  if (rows.size() > 1) out += Table(rows);
  for (const std::string& key : order) {
    const auto& set = sets[key];
    std::vector<int> ranks;
    std::vector<int64_t> steps, seqs;
    std::vector<double> beats, scores;
    for (const LiveRank* r : set) {
      ranks.push_back(r->rank);
      steps.push_back(r->step);
      seqs.push_back(r->collective_seq);
      beats.push_back(r->heartbeat_age_s);
      scores.push_back(r->straggler_score);
    }
    const LiveRank& first = *set.front();
    std::string line = base::NameRanks(ranks) + ": " + first.state;
    if (std::string v = Range(steps, IntText); !v.empty()) line += ", step " + v;
    if (!first.phase.empty()) line += ", " + first.phase;
    if (!first.collective_op.empty())
      line += ", " + first.collective_op + " #" + Range(seqs, IntText);
    if (std::string v = Range(beats, SecondsText); !v.empty()) line += ", heartbeat " + v;
    if (std::string v = Range(scores, ScoreText); !v.empty()) line += ", score " + v;
    out += line + "\n";
  }
  return out;
}

}  // namespace dlaunch::launcher
