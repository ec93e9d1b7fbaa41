#include "launcher/report/plots.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "launcher/report/svg_chart.h"

namespace dlaunch::launcher::report {
namespace {

using Getter = std::function<double(const RankPoint&)>;

struct Metric {
  const char* name;
  Getter get;
  const char* dash;
};

struct BandSeries {
  Points lo, med, hi;
};

std::string Section(const std::string& id, const std::string& title, const std::string& body,
                    const std::string& caption) {
  return "<section class=\"part\" id=\"" + Escape(id) + "\"><h2>" + Escape(title) + "</h2>\n" +
         body + (caption.empty() ? "" : "<p class=\"caption\">" + Escape(caption) + "</p>") +
         "</section>\n";
}

std::string Missing(const std::string& id, const std::string& title, const std::string& why) {
  return "<section class=\"part missing\" id=\"" + Escape(id) + "\"><h2>" + Escape(title) +
         "</h2><p class=\"missing-note\">" + Escape(why) + "</p></section>\n";
}

const char* PhaseColor(const std::string& phase) {
  static const std::map<std::string, const char*> kColors = {
      {"forward", "#1f77b4"},       {"backward", "#ff7f0e"}, {"optimizer", "#2ca02c"},
      {"communication", "#9467bd"}, {"data", "#8c564b"},     {"eval", "#17becf"},
      {"checkpoint", "#e377c2"},    {"init", "#bcbd22"},     {"preflight", "#7f7f7f"}};
  auto it = kColors.find(phase);
  return it == kColors.end() ? "#cccccc" : it->second;
}

double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// Per bucket of x, each rank's largest value, then the min, median and max over ranks.
BandSeries BandOf(const std::vector<RankSeries>& ranks, double x_lo, double x_hi,
                  const Getter& x_of, const Getter& y_of, size_t buckets = 200) {
  std::vector<std::vector<double>> per(buckets);
  const double width = x_hi > x_lo ? x_hi - x_lo : 1;
  std::vector<double> mine(buckets);
  for (const RankSeries& r : ranks) {
    std::fill(mine.begin(), mine.end(), -1.0);
    for (const RankPoint& p : r.points) {
      const double y = y_of(p);
      if (!(y >= 0)) continue;
      size_t b =
          static_cast<size_t>(std::clamp((x_of(p) - x_lo) / width, 0.0, 1.0) * (buckets - 1));
      mine[b] = std::max(mine[b], y);
    }
    for (size_t b = 0; b < buckets; ++b) {
      if (mine[b] >= 0) per[b].push_back(mine[b]);
    }
  }
  BandSeries band;
  for (size_t b = 0; b < buckets; ++b) {
    if (per[b].empty()) continue;
    const double x = x_lo + width * b / (buckets - 1);
    auto [lo, hi] = std::minmax_element(per[b].begin(), per[b].end());
    band.lo.push_back({x, *lo});
    band.hi.push_back({x, *hi});
    band.med.push_back({x, Median(per[b])});
  }
  return band;
}

// The ranks whose score is far from the median score (beyond 3 MADs and 5 %), farthest first.
std::vector<const RankSeries*> Outliers(const std::vector<RankSeries>& ranks,
                                        const std::function<double(const RankSeries&)>& score) {
  std::vector<double> scores;
  for (const RankSeries& r : ranks) {
    if (score(r) >= 0) scores.push_back(score(r));
  }
  if (scores.size() < 3) return {};
  const double med = Median(scores);
  std::vector<double> dev;
  for (double s : scores) dev.push_back(std::fabs(s - med));
  const double limit = std::max(3 * Median(dev), 0.05 * std::fabs(med));
  std::vector<std::pair<double, const RankSeries*>> far;
  for (const RankSeries& r : ranks) {
    const double s = score(r);
    if (s >= 0 && std::fabs(s - med) > limit) far.push_back({std::fabs(s - med), &r});
  }
  std::sort(far.begin(), far.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<const RankSeries*> out;
  for (size_t i = 0; i < far.size() && i < kMaxOutliers; ++i) out.push_back(far[i].second);
  return out;
}

Points PointsOf(const RankSeries& r, const Getter& x_of, const Getter& y_of) {
  Points out;
  out.reserve(r.points.size());
  for (const RankPoint& p : r.points) out.push_back({x_of(p), y_of(p)});
  return out;
}

double MaxOf(const std::vector<RankSeries>& ranks, const Getter& get) {
  double m = -1;
  for (const RankSeries& r : ranks) {
    for (const RankPoint& p : r.points) {
      const double v = get(p);
      if (std::isfinite(v)) m = std::max(m, v);
    }
  }
  return m;
}

std::string RankName(int rank) { return "rank " + std::to_string(rank); }

std::string SampleCaption(const ReportSnapshot& run) {
  for (const RankSeries& r : run.ranks) {
    if (r.points.size() >= kMaxPointsPerRank) {
      return " Each rank's series is cut to " + std::to_string(kMaxPointsPerRank) +
             " points; a point shows the largest memory and the mean step time of the samples "
             "it stands for.";
    }
  }
  return "";
}

}  // namespace

std::string MemoryPlot(const ReportSnapshot& run) {
  const std::string title = "Memory over time";
  const std::vector<Metric> all = {
      {"host RSS", [](const RankPoint& p) { return p.rss_mib; }, ""},
      {"CUDA allocated", [](const RankPoint& p) { return p.allocated_mib; }, "6 3"},
      {"CUDA reserved", [](const RankPoint& p) { return p.reserved_mib; }, "2 2"},
      {"CUDA peak", [](const RankPoint& p) { return p.peak_mib; }, "8 3 2 3"}};
  std::vector<Metric> metrics;
  for (const Metric& m : all) {
    if (MaxOf(run.ranks, m.get) > 0) metrics.push_back(m);
  }
  if (metrics.empty()) {
    return Missing("memory", title,
                   "No memory figures: no rank's events.jsonl has telemetry with rss_bytes or "
                   "device_*_bytes.");
  }
  const Getter t_of = [](const RankPoint& p) { return p.t_s; };
  double t_max = MaxOf(run.ranks, t_of);
  for (const Marker& m : run.markers) {
    if (m.kind == "oom") t_max = std::max(t_max, m.t_s);
  }
  double y_max = 0;
  for (const Metric& m : metrics) y_max = std::max(y_max, MaxOf(run.ranks, m.get));
  Chart chart("memory", {0, std::max(t_max, 1.0), false, "seconds since start"},
              {0, y_max, false, "MiB"});
  std::map<std::string, bool> shown_phase;
  for (const PhaseSpan& s : run.phases) {
    chart.Span(s.start_s, s.end_s, PhaseColor(s.phase), "phase " + s.phase);
    shown_phase[s.phase] = true;
  }
  const bool band = static_cast<int>(run.ranks.size()) > kMaxRankLines;
  std::string caption;
  for (size_t mi = 0; mi < metrics.size(); ++mi) {
    const Metric& m = metrics[mi];
    if (!band) {
      for (size_t i = 0; i < run.ranks.size(); ++i) {
        const RankSeries& r = run.ranks[i];
        chart.Line(PointsOf(r, t_of, m.get), PaletteColor(i), RankName(r.rank) + " " + m.name,
                   m.dash);
      }
      chart.LegendEntry(m.name, "#333", m.dash);
    } else {
      const char* color = PaletteColor(mi);
      BandSeries b = BandOf(run.ranks, 0, t_max, t_of, m.get);
      chart.Band(b.lo, b.hi, color, m.name + std::string(": min to max over ranks"));
      chart.Line(b.med, color, m.name + std::string(": median over ranks"), m.dash);
      chart.LegendEntry(m.name + std::string(" median"), color, m.dash);
      auto peak = [&m](const RankSeries& r) {
        double v = -1;
        for (const RankPoint& p : r.points) v = std::max(v, m.get(p));
        return v;
      };
      std::vector<const RankSeries*> out = Outliers(run.ranks, peak);
      for (const RankSeries* r : out) {
        chart.Line(PointsOf(*r, t_of, m.get), "#d62728",
                   RankName(r->rank) + " " + m.name + " (outlier)", m.dash, 1.2);
        if (!r->points.empty()) {
          chart.Label(r->points.back().t_s, std::max(0.0, m.get(r->points.back())),
                      std::to_string(r->rank), "#d62728");
        }
      }
      if (!out.empty()) {
        caption += " " + std::string(m.name) + " outliers (red):";
        for (const RankSeries* r : out) caption += " " + std::to_string(r->rank);
        caption += ".";
      }
    }
  }
  if (!band) {
    for (size_t i = 0; i < run.ranks.size(); ++i) {
      chart.LegendEntry(RankName(run.ranks[i].rank), PaletteColor(i));
    }
  } else {
    chart.LegendEntry("band: min-max", "#777", "band");
    chart.LegendEntry("outlier rank", "#d62728");
  }
  for (const auto& [phase, shown] : shown_phase)
    chart.LegendEntry(phase, PhaseColor(phase), "band");
  for (const Marker& m : run.markers) {
    if (m.kind == "oom") {
      chart.Marker(m.t_s, "#d62728", "OOM r" + std::to_string(m.rank),
                   RankName(m.rank) + ": " + m.text);
    } else if (m.kind == "checkpoint" || m.kind == "eval") {
      chart.Marker(m.t_s, m.kind == "eval" ? "#17becf" : "#e377c2", "", m.kind);
    }
  }
  return Section("memory", title, chart.Svg(),
                 (band ? std::to_string(run.ranks.size()) +
                             " ranks: the band spans the smallest to the largest rank at each "
                             "time, the line is the median."
                       : std::string("One line per rank and figure.")) +
                     " Shaded: the phase rank " +
                     std::to_string(run.ranks.empty() ? 0 : run.ranks.front().rank) +
                     " reported; red dashed lines: OOM." + caption + SampleCaption(run));
}

std::string PhaseMemoryPlot(const ReportSnapshot& run) {
  const std::string title = "Memory by step phase";
  if (run.phase_memory.empty()) {
    return Missing("phase-memory", title,
                   "No per-phase memory: events.jsonl has no \"memory\" events (the built-in "
                   "trainer writes them with --memory-every).");
  }
  double x_max = 0, y_max = 0;
  for (const auto& [phase, points] : run.phase_memory) {
    for (const auto& [x, y] : points) x_max = std::max(x_max, x), y_max = std::max(y_max, y);
  }
  Chart chart("phase-memory", {0, std::max(x_max, 1.0), false, "step"}, {0, y_max, false, "MiB"});
  for (const auto& [phase, points] : run.phase_memory) {
    chart.Line(points, PhaseColor(phase), "after " + phase);
    chart.Dots(points, PhaseColor(phase), "after " + phase);
    chart.LegendEntry("after " + phase, PhaseColor(phase));
  }
  return Section("phase-memory", title, chart.Svg(),
                 "Memory (CUDA allocated, else host RSS) after each phase of a sampled step, "
                 "first rank with events.");
}

std::vector<int> SlowRanks(const ReportSnapshot& run) {
  std::vector<double> medians;
  for (const RankSeries& r : run.ranks) {
    if (r.median_step_ms > 0) medians.push_back(r.median_step_ms);
  }
  if (medians.size() < 2) return {};
  const double med = Median(medians);
  std::vector<int> slow;
  for (const RankSeries& r : run.ranks) {
    if (r.median_step_ms > 0 && r.median_step_ms >= kSlowFactor * med) slow.push_back(r.rank);
  }
  return slow;
}

std::string StepTimePlot(const ReportSnapshot& run) {
  const std::string title = "Step time per rank";
  const Getter step_of = [](const RankPoint& p) { return static_cast<double>(p.step); };
  const Getter ms_of = [](const RankPoint& p) { return p.step >= 0 ? p.step_ms : -1; };
  const double y_max = MaxOf(run.ranks, ms_of);
  if (y_max <= 0) {
    return Missing("step-time", title, "No step times: no telemetry line has step and step_ms.");
  }
  const double x_max = MaxOf(run.ranks, step_of);
  Chart chart("step-time", {0, std::max(x_max, 1.0), false, "step"},
              {0, y_max, false, "ms per step"});
  const std::vector<int> slow = SlowRanks(run);
  auto is_slow = [&slow](int rank) {
    return std::find(slow.begin(), slow.end(), rank) != slow.end();
  };
  const bool band = static_cast<int>(run.ranks.size()) > kMaxRankLines;
  if (!band) {
    for (size_t i = 0; i < run.ranks.size(); ++i) {
      const RankSeries& r = run.ranks[i];
      const bool s = is_slow(r.rank);
      chart.Line(PointsOf(r, step_of, ms_of), s ? "#d62728" : PaletteColor(i),
                 RankName(r.rank) + (s ? " (slow)" : ""), "", s ? 2.5 : 1.5);
      chart.LegendEntry(RankName(r.rank) + (s ? " slow" : ""), s ? "#d62728" : PaletteColor(i));
    }
  } else {
    BandSeries b = BandOf(run.ranks, 0, x_max, step_of, ms_of);
    chart.Band(b.lo, b.hi, "#1f77b4", "step time: min to max over ranks");
    chart.Line(b.med, "#1f77b4", "step time: median over ranks");
    chart.LegendEntry("median", "#1f77b4");
    chart.LegendEntry("band: min-max", "#1f77b4", "band");
    size_t drawn = 0;
    for (const RankSeries& r : run.ranks) {
      if (!is_slow(r.rank) || drawn++ >= kMaxOutliers) continue;
      chart.Line(PointsOf(r, step_of, ms_of), "#d62728", RankName(r.rank) + " (slow)", "", 1.2);
    }
    chart.LegendEntry("slow rank", "#d62728");
  }
  std::string caption = "Slow: a rank whose median step time is at least " +
                        FormatNumber(kSlowFactor) + "x the median rank's.";
  if (slow.empty()) {
    caption += " No rank is slow.";
  } else {
    caption += " Slow ranks:";
    for (size_t i = 0; i < slow.size() && i < 32; ++i) caption += " " + std::to_string(slow[i]);
    if (slow.size() > 32) caption += " and " + std::to_string(slow.size() - 32) + " more";
    caption += ".";
  }
  return Section("step-time", title, chart.Svg(), caption + SampleCaption(run));
}

std::string CommSharePlot(const ReportSnapshot& run) {
  const std::string title = "Communication share per rank";
  double any = -1;
  int max_rank = 0;
  for (const RankSeries& r : run.ranks) {
    any = std::max(any, r.mean_comm_share);
    max_rank = std::max(max_rank, r.rank);
  }
  if (any < 0) {
    return Missing("comm-share", title,
                   "No communication share: no telemetry line has both step_ms and comm_wait_ms.");
  }
  Chart chart("comm-share", {-0.5, max_rank + 0.5, false, "rank", FormatNumber, false},
              {0, std::max(any * 100, 1.0), false, "% of step waiting for collectives"});
  for (const RankSeries& r : run.ranks) {
    if (r.mean_comm_share < 0) continue;
    chart.Rect(r.rank - 0.4, 0, r.rank + 0.4, r.mean_comm_share * 100, "#9467bd",
               RankName(r.rank) + ": " + FormatNumber(r.mean_comm_share * 100) + " %");
  }
  return Section("comm-share", title, chart.Svg(),
                 "Mean over the rank's telemetry of comm_wait_ms / step_ms.");
}

std::string BusbwPlot(const ReportSnapshot& run) {
  const std::string title = "Pre-flight: bus bandwidth against message size";
  if (run.busbw.empty()) {
    return Missing("busbw", title,
                   run.preflight_verdict ? "preflight.json has no bandwidth rows."
                                         : "No preflight.json: run `dlaunch preflight` for the "
                                           "bandwidth sweep.");
  }
  double x_lo = -1, x_hi = 0, y_max = 0;
  for (const BusbwCurve& c : run.busbw) {
    for (const auto& [x, y] : c.points) {
      x_lo = x_lo < 0 ? x : std::min(x_lo, x);
      x_hi = std::max(x_hi, x);
      y_max = std::max(y_max, y);
    }
  }
  Axis x{x_lo, x_hi, true, "message size (bytes, log scale)", FormatBytes};
  Chart chart("busbw", x, {0, std::max(y_max, 1e-3), false, "busbw (GB/s)"});
  std::map<std::string, size_t> colors;
  for (const BusbwCurve& c : run.busbw) {
    const size_t color = colors.emplace(c.op, colors.size()).first->second;
    const std::string name = c.op + (c.in_place ? " in-place" : " out-of-place");
    chart.Line(c.points, PaletteColor(color), name, c.in_place ? "5 3" : "");
    chart.Dots(c.points, PaletteColor(color), name);
    chart.LegendEntry(name, PaletteColor(color), c.in_place ? "5 3" : "");
  }
  return Section("busbw", title, chart.Svg(),
                 "Verdict " + run.preflight_verdict.value_or("?") +
                     ". Solid: out-of-place; dashed: in-place, as nccl-tests prints them.");
}

std::string HeatmapPlot(const Heatmap& map, const std::string& id) {
  const std::string title = "Pre-flight: " + map.title;
  if (map.cells.empty()) return Missing(id, title, "The matrix is empty.");
  const int cells = static_cast<int>(map.cells.size());
  double hi = map.median_gbps;
  for (const auto& row : map.cells) {
    for (double v : row) hi = std::max(hi, v);
  }
  if (hi <= 0) hi = 1;
  auto ranks = [&map](double v) { return FormatNumber(std::round(v * map.block)); };
  Chart chart(id, {0, static_cast<double>(cells), false, "destination rank", ranks, false},
              {0, static_cast<double>(cells), false, "source rank", ranks, false});
  for (int i = 0; i < cells; ++i) {
    for (int j = 0; j < cells; ++j) {
      const double v = map.cells[i][j];
      std::string color = "#f0f0f0";
      if (v >= 0) {
        // Red at 0, through yellow, to green at the best link.
        const double f = std::clamp(v / hi, 0.0, 1.0);
        const int red = static_cast<int>(f < 0.5 ? 220 : 220 - (f - 0.5) * 2 * 180);
        const int green = static_cast<int>(f < 0.5 ? 40 + f * 2 * 160 : 200);
        char buf[16];
        std::snprintf(buf, sizeof(buf), "#%02x%02x40", red, green);
        color = buf;
      }
      std::string who = map.block == 1 ? std::to_string(i) + " -> " + std::to_string(j)
                                       : "ranks " + std::to_string(i * map.block) + "+ -> " +
                                             std::to_string(j * map.block) + "+ (slowest)";
      chart.Rect(j, cells - i, j + 1, cells - i - 1, color,
                 v >= 0 ? who + ": " + FormatNumber(v) + " GB/s" : "");
    }
  }
  for (const auto& [src, dst] : map.slow) {
    const int i = src / map.block, j = dst / map.block;
    chart.Rect(j, cells - i, j + 1, cells - i - 1, "none",
               "slow link " + std::to_string(src) + " -> " + std::to_string(dst), "#000");
  }
  chart.LegendEntry(FormatNumber(hi) + " GB/s", "#28c840", "band");
  chart.LegendEntry(FormatNumber(hi / 2) + " GB/s", "#dcc840", "band");
  chart.LegendEntry("0 GB/s", "#dc2840", "band");
  chart.LegendEntry("flagged slow", "#000");
  std::string caption =
      "Rows: source, columns: destination; median " + FormatNumber(map.median_gbps) + " GB/s.";
  if (map.block > 1) {
    caption += " " + std::to_string(map.size) + " ranks in blocks of " + std::to_string(map.block) +
               "; a cell shows its slowest link.";
  }
  if (map.slow_text.empty()) {
    caption += " Nothing flagged.";
  } else {
    caption += " Flagged:";
    for (size_t i = 0; i < map.slow_text.size() && i < 16; ++i)
      caption += " " + map.slow_text[i] + ";";
    if (map.slow_text.size() > 16)
      caption += " and " + std::to_string(map.slow_text.size() - 16) + " more.";
  }
  return Section(id, title, chart.Svg(), caption);
}

std::string TimelinePlot(const ReportSnapshot& run) {
  const std::string title = "Timeline";
  double t_max = (run.end_unix_ms - run.start_unix_ms) / 1000.0;
  for (const AttemptSpan& a : run.attempts) t_max = std::max(t_max, std::max(a.start_s, a.end_s));
  for (const Marker& m : run.markers) t_max = std::max(t_max, m.t_s);
  if (run.start_unix_ms == 0 || t_max <= 0) {
    return Missing("timeline", title,
                   "No times: summary.json and events.jsonl give no start or end to draw.");
  }
  Chart chart("timeline", {0, t_max, false, "seconds since start"},
              {0, 3, false, "", FormatNumber, false});
  chart.SetYCategories({{2.5, "attempts"}, {1.5, "ranks ended"}, {0.5, "events"}});
  std::vector<AttemptSpan> attempts = run.attempts;
  if (attempts.empty()) {
    attempts.push_back({0, 0, run.live ? -1 : t_max, run.exit_code.value_or(-1), "", ""});
  }
  for (const AttemptSpan& a : attempts) {
    const double end = a.end_s < 0 ? t_max : a.end_s;
    const std::string color = a.end_s < 0 ? "#1f77b4" : a.exit_code == 0 ? "#2ca02c" : "#d62728";
    std::string tip = "attempt " + std::to_string(a.attempt) +
                      (a.end_s < 0 ? ": running" : ": exit " + std::to_string(a.exit_code));
    if (!a.error.empty()) tip += ": " + a.error;
    if (!a.next.empty()) tip += " (then " + a.next + ")";
    chart.Rect(a.start_s, 2.15, end, 2.85, color, tip);
    chart.Label(
        a.start_s, 2.9,
        "attempt " + std::to_string(a.attempt) + (a.next == "restart" ? ", restarted" : ""));
  }
  std::map<std::string, const char*> colors = {
      {"failed", "#d62728"},    {"killed", "#ff7f0e"}, {"lost", "#9467bd"},
      {"node lost", "#9467bd"}, {"oom", "#d62728"},    {"error", "#d62728"},
      {"timeout", "#ff7f0e"},   {"nan", "#8c564b"},    {"checkpoint", "#e377c2"},
      {"eval", "#17becf"},      {"resumed", "#2ca02c"}};
  std::map<std::string, bool> kinds;
  for (const Marker& m : run.markers) {
    const bool rank_end = m.kind == "failed" || m.kind == "killed" || m.kind == "lost" ||
                          m.kind == "unknown" || m.kind == "node lost";
    const double lane = rank_end ? 1.5 : 0.5;
    auto it = colors.find(m.kind);
    const char* color = it == colors.end() ? "#7f7f7f" : it->second;
    chart.Rect(m.t_s - t_max * 0.002, lane - 0.3, m.t_s + t_max * 0.002, lane + 0.3, color,
               (m.rank >= 0 ? RankName(m.rank) + " " : std::string()) + m.kind + ": " + m.text);
    kinds[m.kind] = true;
  }
  for (const auto& [kind, shown] : kinds) {
    auto it = colors.find(kind);
    chart.LegendEntry(kind, it == colors.end() ? "#7f7f7f" : it->second, "band");
  }
  std::string body = chart.Svg();
  if (run.has_trace) {
    body += "<p><a class=\"trace-link\" href=\"" + Escape(run.trace_href) +
            "\">trace.json</a>: every rank's phases and collectives; open it in "
            "https://ui.perfetto.dev (Open trace file).</p>";
  } else {
    body +=
        "<p class=\"missing-note\">No trace.json: `dlaunch diagnose --trace RUN_DIR` writes "
        "one for Perfetto.</p>";
  }
  return Section("timeline", title, body, "Hover a mark for what happened.");
}

std::string LossPlot(const ReportSnapshot& run) {
  const std::string title = "Training loss";
  const Getter step_of = [](const RankPoint& p) { return static_cast<double>(p.step); };
  const Getter loss_of = [](const RankPoint& p) { return p.step >= 0 ? p.loss : -1; };
  const RankSeries* first = nullptr;
  for (const RankSeries& r : run.ranks) {
    if (MaxOf({r}, loss_of) >= 0) {
      first = &r;
      break;
    }
  }
  Points test;
  for (const EvalPoint& e : run.evals) {
    if (e.step >= 0 && e.test_loss >= 0) test.push_back({static_cast<double>(e.step), e.test_loss});
  }
  if (!first && test.empty())
    return Missing("loss", title, "No loss: no telemetry line has a loss.");
  double x_max = 1, y_max = 0;
  if (first) x_max = std::max(x_max, MaxOf({*first}, step_of)), y_max = MaxOf({*first}, loss_of);
  for (const auto& [x, y] : test) x_max = std::max(x_max, x), y_max = std::max(y_max, y);
  Chart chart("loss", {0, x_max, false, "step"}, {0, y_max, false, "loss"});
  if (first) {
    chart.Line(PointsOf(*first, step_of, loss_of), "#1f77b4",
               "training loss, " + RankName(first->rank));
    chart.LegendEntry("train, " + RankName(first->rank), "#1f77b4");
  }
  if (!test.empty()) {
    chart.Line(test, "#ff7f0e", "test loss", "5 3");
    chart.Dots(test, "#ff7f0e", "test loss");
    chart.LegendEntry("test", "#ff7f0e", "5 3");
  }
  return Section("loss", title, chart.Svg(), "");
}

std::string AccuracyPlot(const ReportSnapshot& run) {
  const std::string title = "Test accuracy per epoch";
  Points points;
  for (const EvalPoint& e : run.evals) {
    if (e.epoch >= 0 && e.test_accuracy >= 0) {
      points.push_back({static_cast<double>(e.epoch), e.test_accuracy * 100});
    }
  }
  if (points.empty()) {
    return Missing("accuracy", title, "No evaluations: events.jsonl has no \"eval\" events.");
  }
  double x_max = 1;
  for (const auto& [x, y] : points) x_max = std::max(x_max, x);
  Chart chart("accuracy", {0, x_max, false, "epoch"}, {0, 100, false, "test accuracy (%)"});
  chart.Line(points, "#2ca02c", "test accuracy");
  chart.Dots(points, "#2ca02c", "test accuracy");
  for (const auto& [x, y] : points) chart.Label(x, y, FormatNumber(y) + "%");
  return Section("accuracy", title, chart.Svg(), "");
}

}  // namespace dlaunch::launcher::report
