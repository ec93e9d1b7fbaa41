#include "launcher/report/report_data.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "core/run_dir/report_files.h"
#include "launcher/diagnose/analyzer.h"
#include "launcher/diagnose/run_snapshot.h"

namespace dlaunch::launcher::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kMiB = 1048576.0;

double Mib(int64_t bytes) { return bytes < 0 ? -1 : bytes / kMiB; }

double Median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return x < 0 || !std::isfinite(x); }),
          v.end());
  if (v.empty()) return -1;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

double Number(const json& obj, const char* key, double fallback = -1) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_number() ? it->get<double>() : fallback;
}
int64_t Integer(const json& obj, const char* key, int64_t fallback = -1) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_number() ? it->get<int64_t>() : fallback;
}
std::string Text(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The run's time origin: the earliest start the launcher wrote, else the earliest sample.
int64_t StartOf(const RunSnapshot& run, const std::optional<rundir::Summary>& summary) {
  int64_t start = 0;
  auto take = [&start](int64_t t) {
    if (t > 0 && (start == 0 || t < start)) start = t;
  };
  if (summary) {
    for (const auto& a : summary->attempts) take(a.start_unix_ms);
    for (const auto& r : summary->ranks) take(r.start_unix_ms.value_or(0));
  }
  if (start == 0) {
    for (const auto& r : run.ranks) {
      if (!r.events.telemetry.empty()) take(r.events.telemetry.front().unix_ms);
      if (!r.events.events.empty()) take(r.events.events.front().unix_ms);
    }
  }
  return start;
}

RankSeries SeriesOf(const RankRecord& r, int64_t t0) {
  RankSeries s;
  s.rank = r.rank;
  std::vector<RankPoint> points;
  points.reserve(r.events.telemetry.size());
  std::vector<double> steps, shares;
  for (const TelemetrySample& t : r.events.telemetry) {
    RankPoint p;
    p.t_s = (t.unix_ms - t0) / 1000.0;
    p.step = t.step;
    p.rss_mib = Mib(t.rss_bytes);
    p.allocated_mib = Mib(t.device_allocated_bytes);
    p.reserved_mib = Mib(t.device_reserved_bytes);
    p.peak_mib = Mib(t.device_peak_bytes);
    p.step_ms = t.step_ms > 0 && std::isfinite(t.step_ms) ? t.step_ms : -1;
    if (p.step_ms > 0 && t.comm_wait_ms >= 0) {
      p.comm_share = std::min(1.0, t.comm_wait_ms / p.step_ms);
    }
    p.loss = std::isfinite(t.loss) ? t.loss : -1;
    p.phase = t.phase;
    steps.push_back(p.step_ms);
    shares.push_back(p.comm_share);
    s.peak_rss_mib = std::max(s.peak_rss_mib, std::max(p.rss_mib, Mib(t.peak_rss_bytes)));
    s.peak_device_mib = std::max(s.peak_device_mib, std::max(p.allocated_mib, p.peak_mib));
    points.push_back(std::move(p));
  }
  s.median_step_ms = Median(steps);
  double sum = 0;
  int n = 0;
  for (double x : shares) {
    if (x >= 0) sum += x, ++n;
  }
  s.mean_comm_share = n ? sum / n : -1;
  s.points = Downsample(points, kMaxPointsPerRank);
  return s;
}

// Phase spans of the lowest rank with telemetry, merged while the phase stays the same.
std::vector<PhaseSpan> PhasesOf(const RankRecord& r, int64_t t0) {
  std::vector<PhaseSpan> spans;
  for (const TelemetrySample& t : r.events.telemetry) {
    const double at = (t.unix_ms - t0) / 1000.0;
    if (!spans.empty()) spans.back().end_s = at;
    if (t.phase.empty()) continue;
    if (spans.empty() || spans.back().phase != t.phase) spans.push_back({at, at, t.phase});
  }
  // Many short spans (a phase per telemetry window) are as good as none on a plot: keep the
  // longest few hundred.
  constexpr size_t kMaxSpans = 400;
  if (spans.size() > kMaxSpans) {
    std::vector<PhaseSpan> kept = spans;
    std::nth_element(kept.begin(), kept.begin() + kMaxSpans, kept.end(),
                     [](const PhaseSpan& a, const PhaseSpan& b) {
                       return a.end_s - a.start_s > b.end_s - b.start_s;
                     });
    kept.resize(kMaxSpans);
    std::sort(kept.begin(), kept.end(),
              [](const PhaseSpan& a, const PhaseSpan& b) { return a.start_s < b.start_s; });
    spans = std::move(kept);
  }
  return spans;
}

void ReadEvents(const RankRecord& r, int64_t t0, bool first, ReportSnapshot* out) {
  constexpr size_t kMaxMarkers = 400;
  for (const rundir::Event& e : r.events.events) {
    const double at = (e.unix_ms - t0) / 1000.0;
    if (e.kind == "eval" && first) {
      out->evals.push_back({Integer(e.body, "epoch"), Integer(e.body, "step"),
                            Number(e.body, "test_accuracy"), Number(e.body, "test_loss")});
      out->markers.push_back({at, r.rank, "eval", "evaluation"});
    } else if (e.kind == "memory" && first) {
      auto phases = e.body.find("phases");
      if (phases == e.body.end() || !phases->is_object()) continue;
      const double step = Number(e.body, "step");
      for (auto it = phases->begin(); it != phases->end(); ++it) {
        if (!it.value().is_object()) continue;
        double mib = Mib(Integer(it.value(), "device_allocated_bytes"));
        if (mib < 0) mib = Mib(Integer(it.value(), "rss_bytes"));
        if (mib < 0) continue;
        auto slot = std::find_if(out->phase_memory.begin(), out->phase_memory.end(),
                                 [&](const auto& p) { return p.first == it.key(); });
        if (slot == out->phase_memory.end()) {
          out->phase_memory.push_back({it.key(), {}});
          slot = out->phase_memory.end() - 1;
        }
        slot->second.push_back({step, mib});
      }
    } else if (e.kind == "oom" || e.kind == "error" || e.kind == "timeout" || e.kind == "nan" ||
               (e.kind == "checkpoint" && first) || (e.kind == "resumed" && first)) {
      if (out->markers.size() >= kMaxMarkers && e.kind != "oom") continue;
      std::string text = Text(e.body, "message");
      if (text.empty()) text = e.kind;
      out->markers.push_back({at, r.rank, e.kind, text.substr(0, 300)});
    }
  }
}

// A matrix in GB/s, rows by source, cut into blocks of ranks when it is too wide to draw; a block
// shows its slowest link, since a slow link is what the plot is for.
Heatmap HeatmapOf(const json& obj, const std::string& title, std::vector<std::string>* problems) {
  Heatmap h;
  h.title = title;
  h.median_gbps = Number(obj, "median_gbps");
  auto matrix = obj.find("matrix_gbps");
  if (matrix == obj.end() || !matrix->is_array()) {
    problems->push_back("preflight.json: " + title + " has no matrix_gbps");
    return h;
  }
  const int n = static_cast<int>(std::min<size_t>(matrix->size(), rundir::kMaxRanks));
  h.size = n;
  h.block = std::max(1, (n + kMaxHeatmapCells - 1) / kMaxHeatmapCells);
  const int cells = (n + h.block - 1) / h.block;
  h.cells.assign(cells, std::vector<double>(cells, -1));
  for (int i = 0; i < n; ++i) {
    const json& row = (*matrix)[i];
    if (!row.is_array()) continue;
    const int m = static_cast<int>(std::min<size_t>(row.size(), n));
    for (int j = 0; j < m; ++j) {
      if (i == j || !row[j].is_number()) continue;
      double& cell = h.cells[i / h.block][j / h.block];
      const double v = row[j].get<double>();
      if (v >= 0 && (cell < 0 || v < cell)) cell = v;
    }
  }
  auto links = obj.find("slow_links");
  if (links != obj.end() && links->is_array()) {
    for (const json& l : *links) {
      if (!l.is_object()) continue;
      const int src = static_cast<int>(Integer(l, "src")),
                dst = static_cast<int>(Integer(l, "dst"));
      if (src < 0 || dst < 0 || src >= n || dst >= n) continue;
      h.slow.push_back({src, dst});
      char line[160];
      std::snprintf(line, sizeof(line), "link %d -> %d: %.2f GB/s (median %.2f)", src, dst,
                    Number(l, "gbps"), h.median_gbps);
      h.slow_text.push_back(line);
    }
  }
  for (const char* key : {"slow_ranks", "slow_nodes"}) {
    auto ranks = obj.find(key);
    if (ranks == obj.end() || !ranks->is_array()) continue;
    for (const json& r : *ranks) {
      if (r.is_number_integer()) {
        h.slow_text.push_back(std::string(key[5] == 'r' ? "slow rank " : "slow node ") +
                              std::to_string(r.get<int64_t>()));
      }
    }
  }
  return h;
}

void ReadPreflightInto(const std::string& run_dir, ReportSnapshot* out) {
  const std::string path = rundir::RunDir(run_dir).preflight();
  if (!Exists(path)) return;
  rundir::PreflightReport pre;
  if (rundir::ReadPreflight(path, "preflight.json", &pre, &out->problems) !=
      rundir::FileState::kOk) {
    return;
  }
  out->preflight_verdict = pre.verdict;
  out->preflight_reasons = pre.reasons;
  const json& doc = pre.document;
  auto bandwidth = doc.find("bandwidth");
  if (bandwidth != doc.end() && bandwidth->is_array()) {
    for (const json& op : *bandwidth) {
      if (!op.is_object()) continue;
      BusbwCurve oop{Text(op, "op"), false, {}}, ip{Text(op, "op"), true, {}};
      auto rows = op.find("rows");
      if (rows == op.end() || !rows->is_array()) continue;
      for (const json& row : *rows) {
        if (!row.is_object()) continue;
        const double size = Number(row, "size");
        if (size <= 0) continue;
        const double bw = Number(row, "busbw_gbps");
        if (bw >= 0) oop.points.push_back({size, bw});
        auto in = row.find("in_place");
        if (in != row.end() && in->is_object() && Number(*in, "busbw_gbps") >= 0) {
          ip.points.push_back({size, Number(*in, "busbw_gbps")});
        }
      }
      if (!oop.points.empty()) out->busbw.push_back(std::move(oop));
      if (!ip.points.empty()) out->busbw.push_back(std::move(ip));
    }
  }
  auto p2p = doc.find("p2p");
  if (p2p != doc.end() && p2p->is_object()) {
    out->p2p = HeatmapOf(*p2p, "p2p links", &out->problems);
  }
  auto nodes = doc.find("node_matrix");
  if (nodes != doc.end() && nodes->is_object()) {
    out->node_matrix = HeatmapOf(*nodes, "node matrix", &out->problems);
  }
}

std::string VerdictOf(const Diagnosis& d, bool live, std::optional<int> exit_code) {
  switch (d.kind) {
    case rundir::DiagnosisKind::kHang:
      return "HANG";
    case rundir::DiagnosisKind::kFailure:
      return "FAILED";
    case rundir::DiagnosisKind::kMismatch:
      return "MISMATCH";
    case rundir::DiagnosisKind::kOk:
      return live ? "RUNNING" : (exit_code && *exit_code != 0 ? "FAILED" : "OK");
    case rundir::DiagnosisKind::kIncomplete:
      break;
  }
  if (live) return "RUNNING";
  if (exit_code) return *exit_code == 0 ? "OK" : "FAILED";
  return "INCOMPLETE";
}

}  // namespace

std::vector<RankPoint> Downsample(const std::vector<RankPoint>& points, size_t max_points) {
  if (points.size() <= max_points || max_points == 0) return points;
  std::vector<RankPoint> out;
  out.reserve(max_points);
  const size_t n = points.size();
  for (size_t b = 0; b < max_points; ++b) {
    const size_t lo = b * n / max_points, hi = (b + 1) * n / max_points;
    RankPoint p = points[hi - 1];  // time, step, loss, phase of the last
    double step_sum = 0, share_sum = 0;
    int steps = 0, shares = 0;
    for (size_t i = lo; i < hi; ++i) {
      const RankPoint& q = points[i];
      p.rss_mib = std::max(p.rss_mib, q.rss_mib);
      p.allocated_mib = std::max(p.allocated_mib, q.allocated_mib);
      p.reserved_mib = std::max(p.reserved_mib, q.reserved_mib);
      p.peak_mib = std::max(p.peak_mib, q.peak_mib);
      if (q.step_ms >= 0) step_sum += q.step_ms, ++steps;
      if (q.comm_share >= 0) share_sum += q.comm_share, ++shares;
    }
    p.step_ms = steps ? step_sum / steps : -1;
    p.comm_share = shares ? share_sum / shares : -1;
    out.push_back(std::move(p));
  }
  return out;
}

bool IsRunDir(const std::string& path) {
  const rundir::RunDir dir(path);
  if (Exists(dir.summary()) || Exists(dir.preflight()) || Exists(dir.diagnosis_json())) return true;
  std::error_code ec;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (rundir::RunDir::ParseRankDirName(it->path().filename().string())) return true;
  }
  return false;
}

ReportSnapshot LoadReportSnapshot(const std::string& run_dir, const std::string& page_path) {
  RunSnapshot run = LoadRunDir(run_dir);
  ReportSnapshot out;
  out.run_dir = run_dir;
  out.run_id =
      run.run_id.empty() ? fs::path(run_dir).lexically_normal().filename().string() : run.run_id;
  if (out.run_id.empty()) out.run_id = fs::path(run_dir).parent_path().filename().string();
  out.world_size = run.world_size;
  out.exit_code = run.exit_code;
  out.problems = run.problems;

  std::optional<rundir::Summary> summary;
  {
    rundir::Summary s;
    std::vector<std::string> ignored;  // LoadRunDir has named a bad summary already
    if (rundir::ReadSummary(rundir::RunDir(run_dir).summary(), "summary.json", &s, &ignored) ==
        rundir::FileState::kOk) {
      summary = std::move(s);
    }
  }
  out.live = !summary || !summary->exit_code || *summary->exit_code < 0;
  if (!summary) out.live = false;  // no launcher account at all: not known to be running
  if (summary && summary->exit_code && *summary->exit_code < 0) out.exit_code.reset();

  out.start_unix_ms = StartOf(run, summary);
  const int64_t t0 = out.start_unix_ms;

  // Facts.
  std::map<std::string, int> hosts, statuses;
  for (const RankRecord& r : run.ranks) {
    if (r.summary) {
      if (!r.summary->host.empty()) hosts[r.summary->host]++;
      statuses[rundir::RankStatusName(r.summary->status)]++;
      out.end_unix_ms = std::max(out.end_unix_ms, r.summary->end_unix_ms.value_or(0));
      const bool failed = r.summary->status == rundir::RankStatus::kFailed;
      if (failed && out.failed_tails.size() < 8)
        out.failed_tails.push_back({r.rank, r.stderr_tail});
      if (r.summary->end_unix_ms && r.summary->status != rundir::RankStatus::kOk &&
          r.summary->status != rundir::RankStatus::kRunning) {
        std::string text = std::string(rundir::RankStatusName(r.summary->status)) +
                           (r.summary->exit_code ? ", exit " + std::to_string(*r.summary->exit_code)
                                                 : std::string());
        if (!r.summary->error.empty()) text += ": " + r.summary->error;
        out.markers.push_back({(*r.summary->end_unix_ms - t0) / 1000.0, r.rank,
                               rundir::RankStatusName(r.summary->status), text.substr(0, 300)});
      }
    }
  }
  for (const auto& [name, n] : statuses) out.status_counts.push_back({name, n});
  out.nodes = !run.nodes.empty() ? static_cast<int>(run.nodes.size())
                                 : static_cast<int>(std::max<size_t>(hosts.size(), 1));
  if (summary) {
    out.end_unix_ms = std::max(out.end_unix_ms, summary->updated_unix_ms);
    for (const auto& a : summary->attempts) {
      out.attempts.push_back({a.attempt, (a.start_unix_ms - t0) / 1000.0,
                              a.end_unix_ms > 0 ? (a.end_unix_ms - t0) / 1000.0 : -1, a.exit_code,
                              a.error, a.next});
    }
    for (const auto& n : summary->nodes) {
      if (n.status == rundir::RankStatus::kLost) {
        out.markers.push_back({(summary->updated_unix_ms - t0) / 1000.0, -1, "node lost",
                               "node " + std::to_string(n.node_rank) + " (" + n.host + ") lost"});
      }
    }
  }

  // Series.
  bool first = true;
  for (const RankRecord& r : run.ranks) {
    if (r.events.telemetry.empty() && r.events.events.empty()) continue;
    if (!r.events.telemetry.empty()) {
      out.end_unix_ms = std::max(out.end_unix_ms, r.events.telemetry.back().unix_ms);
      if (out.phases.empty()) out.phases = PhasesOf(r, t0);
      out.ranks.push_back(SeriesOf(r, t0));
    }
    if (!r.events.events.empty()) {
      out.end_unix_ms = std::max(out.end_unix_ms, r.events.events.back().unix_ms);
    }
    ReadEvents(r, t0, first, &out);
    first = false;
  }
  if (out.ranks.empty() && !run.ranks.empty()) {
    out.problems.push_back(
        "no rank wrote telemetry to rank<R>/events.jsonl: no memory, step "
        "time or loss to plot");
  }

  // Verdict.
  Diagnosis d = Analyze(run);
  out.verdict = VerdictOf(d, out.live, out.exit_code);
  out.headline = d.headline;
  if (out.headline.empty() && summary) out.headline = summary->error;
  out.details = d.details;
  for (const std::string& p : d.problems) {
    if (std::find(out.problems.begin(), out.problems.end(), p) == out.problems.end()) {
      out.problems.push_back(p);
    }
  }

  ReadPreflightInto(run_dir, &out);

  const std::string trace = rundir::RunDir(run_dir).trace();
  out.has_trace = Exists(trace);
  if (out.has_trace) {
    std::error_code ec;
    fs::path base = page_path.empty() ? fs::path(run_dir) : fs::path(page_path).parent_path();
    fs::path rel = fs::relative(fs::absolute(trace, ec), fs::absolute(base, ec), ec);
    out.trace_href = ec || rel.empty() ? fs::absolute(trace, ec).string() : rel.string();
  }
  return out;
}

}  // namespace dlaunch::launcher::report
