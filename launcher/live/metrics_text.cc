#include "launcher/live/metrics_text.h"

#include <cmath>
#include <cstdio>
#include <functional>

namespace dlaunch::launcher {
namespace {

std::string Value(double v) {
  if (std::isnan(v)) return "NaN";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

// One family: HELP and TYPE once, then its samples together.
class Family {
 public:
  Family(std::string* out, const char* name, const char* type, const char* help)
      : out_(out), name_(name) {
    *out_ += std::string("# HELP ") + name + " " + help + "\n";
    *out_ += std::string("# TYPE ") + name + " " + type + "\n";
  }
  void Sample(const std::string& labels, double value) {
    *out_ += name_ + (labels.empty() ? "" : "{" + labels + "}") + " " + Value(value) + "\n";
  }

 private:
  std::string* out_;
  std::string name_;
};

std::string RankLabels(const LiveRank& r) {
  return "rank=\"" + std::to_string(r.rank) + "\",host=\"" + EscapeLabelValue(r.host) + "\"";
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string RenderMetrics(const LiveSnapshot& s) {
  std::string out;
  const LiveJob& j = s.job;
  {
    Family f(&out, "dlaunch_job_state", "gauge",
             "1 for the state the job is in (starting, running, hang, failed), 0 for the others.");
    for (const char* state : {"starting", "running", "hang", "failed"}) {
      f.Sample(std::string("state=\"") + state + "\"", j.state == state ? 1 : 0);
    }
  }
  Family(&out, "dlaunch_job_healthy", "gauge",
         "1 while no hang or failure is judged, else 0 (/healthz answers 503).")
      .Sample("", j.healthy() ? 1 : 0);
  Family(&out, "dlaunch_job_attempt", "gauge", "The attempt that runs, from 0.")
      .Sample("", j.attempt);
  Family(&out, "dlaunch_job_restarts_total", "counter", "Restarts of all ranks so far.")
      .Sample("", j.restarts);
  Family(&out, "dlaunch_job_world_size", "gauge", "Ranks of the attempt.").Sample("", j.world_size);
  Family(&out, "dlaunch_job_nodes", "gauge", "Nodes of the attempt.").Sample("", j.nodes);
  if (j.start_unix_ms > 0) {
    Family(&out, "dlaunch_job_uptime_seconds", "gauge", "Seconds since node 0's launcher started.")
        .Sample("", (j.unix_ms - j.start_unix_ms) / 1000.0);
  }
  int active = 0;
  for (const auto& v : j.stragglers) active += v.end_unix_ms == 0 ? 1 : 0;
  Family(&out, "dlaunch_job_stragglers", "gauge", "Ranks named stragglers now.").Sample("", active);
  Family(&out, "dlaunch_job_straggler_verdicts_total", "counter",
         "Straggler verdicts given so far, active and ended.")
      .Sample("", static_cast<double>(j.stragglers.size()));

  // Per-rank families, each with the ranks whose figure is known.
  struct PerRank {
    const char* name;
    const char* type;
    const char* help;
    std::function<double(const LiveRank&)> value;  // < 0: unknown, left out
  };
  const PerRank families[] = {
      {"dlaunch_rank_up", "gauge", "1 while the rank's process runs, 0 once it exited.",
       [](const LiveRank& r) { return r.state == "exited" ? 0.0 : 1.0; }},
      {"dlaunch_rank_step", "gauge", "The rank's training step.",
       [](const LiveRank& r) { return static_cast<double>(r.step); }},
      {"dlaunch_rank_step_time_seconds", "gauge",
       "The rank's own step time p50 (waits inside collectives left out), over the straggler "
       "window.",
       [](const LiveRank& r) { return r.step_time_p50_s; }},
      {"dlaunch_rank_samples_per_second", "gauge", "Samples per second the rank reports.",
       [](const LiveRank& r) { return r.samples_per_s; }},
      {"dlaunch_rank_rss_bytes", "gauge", "Resident host memory of the rank's process.",
       [](const LiveRank& r) { return static_cast<double>(r.rss_bytes); }},
      {"dlaunch_rank_cuda_allocated_bytes", "gauge", "CUDA memory allocated by the rank.",
       [](const LiveRank& r) { return static_cast<double>(r.cuda_allocated_bytes); }},
      {"dlaunch_rank_cuda_reserved_bytes", "gauge", "CUDA memory reserved by the rank's allocator.",
       [](const LiveRank& r) { return static_cast<double>(r.cuda_reserved_bytes); }},
      {"dlaunch_rank_cuda_peak_bytes", "gauge", "Peak CUDA memory allocated by the rank.",
       [](const LiveRank& r) { return static_cast<double>(r.cuda_peak_bytes); }},
      {"dlaunch_rank_comm_share_ratio", "gauge",
       "Share of the rank's step time spent waiting inside collectives, lately.",
       [](const LiveRank& r) { return r.comm_share; }},
      {"dlaunch_rank_heartbeat_age_seconds", "gauge", "Seconds since the rank's last heartbeat.",
       [](const LiveRank& r) { return r.heartbeat_age_s; }},
      {"dlaunch_rank_collective_seq", "gauge", "Seq of the last collective the rank started.",
       [](const LiveRank& r) {
         return r.collective_seq >= 0 ? static_cast<double>(r.collective_seq)
                                      : static_cast<double>(r.collectives_completed - 1);
       }},
      {"dlaunch_rank_collectives_completed_total", "counter",
       "Collectives the rank completed in this attempt.",
       [](const LiveRank& r) { return static_cast<double>(r.collectives_completed); }},
      {"dlaunch_rank_straggler_score", "gauge",
       "The rank's step time p50 over the median of every rank's (1 = typical).",
       [](const LiveRank& r) { return r.straggler_score; }},
      {"dlaunch_rank_straggler", "gauge", "1 while an active verdict names the rank a straggler.",
       [](const LiveRank& r) { return r.straggler ? 1.0 : 0.0; }},
  };
  for (const PerRank& p : families) {
    bool any = false;
    for (const LiveRank& r : s.ranks) any = any || p.value(r) >= 0;
    if (!any) continue;
    Family f(&out, p.name, p.type, p.help);
    for (const LiveRank& r : s.ranks) {
      const double v = p.value(r);
      if (v >= 0) f.Sample(RankLabels(r), v);
    }
  }
  return out;
}

}  // namespace dlaunch::launcher
