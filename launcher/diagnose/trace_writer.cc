#include "launcher/diagnose/trace_writer.h"

#include <algorithm>
#include <set>

#include "core/run_dir/report_files.h"

namespace dlaunch::launcher {
namespace {

using nlohmann::json;

constexpr int kPhaseTid = 1;
constexpr int kCollectiveTid = 2;

// The latest moment this rank is known to have existed, in microseconds: where open slices end.
int64_t RankEndUs(const RankRecord& rec, int64_t diagnosis_ms) {
  int64_t end_ms = std::max(rec.flight.dumped_unix_ms, diagnosis_ms);
  if (rec.summary) end_ms = std::max(end_ms, rec.summary->end_unix_ms.value_or(0));
  if (!rec.events.telemetry.empty()) end_ms = std::max(end_ms, rec.events.telemetry.back().unix_ms);
  for (const Event& e : rec.events.events) end_ms = std::max(end_ms, e.unix_ms);
  int64_t end_us = end_ms * 1000;
  for (const FlightEntry& e : rec.flight.entries) {
    end_us = std::max({end_us, e.completed_unix_ns / 1000, e.started_unix_ns / 1000});
  }
  return end_us;
}

}  // namespace

json BuildTrace(const RunSnapshot& run, const Diagnosis* diagnosis) {
  json events = json::array();
  std::set<int> culprits;
  if (diagnosis) culprits.insert(diagnosis->culprit_ranks.begin(), diagnosis->culprit_ranks.end());
  const int64_t diagnosis_ms = diagnosis ? diagnosis->created_unix_ms : 0;
  int64_t global_end_us = 0;

  for (const RankRecord& rec : run.ranks) {
    const int pid = rec.rank;
    std::string name = "rank " + std::to_string(rec.rank);
    if (culprits.count(rec.rank)) name += " (culprit)";
    events.push_back(
        {{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", {{"name", name}}}});
    events.push_back({{"ph", "M"},
                      {"name", "process_sort_index"},
                      {"pid", pid},
                      {"args", {{"sort_index", pid}}}});
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", pid},
                      {"tid", kPhaseTid},
                      {"args", {{"name", "phases"}}}});
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", pid},
                      {"tid", kCollectiveTid},
                      {"args", {{"name", "collectives"}}}});
    const int64_t end_us = RankEndUs(rec, diagnosis_ms);
    global_end_us = std::max(global_end_us, end_us);

    for (const FlightEntry& e : rec.flight.entries) {
      int64_t begin_ns = e.started_unix_ns > 0 ? e.started_unix_ns : e.scheduled_unix_ns;
      if (begin_ns <= 0) continue;
      int64_t ts = begin_ns / 1000;
      int64_t dur = e.completed_unix_ns > 0 ? (e.completed_unix_ns - begin_ns) / 1000
                                            : (e.duration_us > 0 ? e.duration_us : end_us - ts);
      json args = {{"seq", e.seq},     {"op", e.op},       {"dtype", e.dtype},
                   {"count", e.count}, {"bytes", e.bytes}, {"state", rundir::OpStateName(e.state)}};
      if (e.peer >= 0) args["peer"] = e.peer;
      if (e.root >= 0) args["root"] = e.root;
      if (!e.error.empty()) args["error"] = e.error;
      std::string slice = e.op + " #" + std::to_string(e.seq);
      if (e.state != rundir::OpState::kCompleted) {
        slice += std::string(" (") + rundir::OpStateName(e.state) + ")";
      }
      events.push_back({{"ph", "X"},
                        {"name", slice},
                        {"cat", "collective"},
                        {"pid", pid},
                        {"tid", kCollectiveTid},
                        {"ts", ts},
                        {"dur", std::max<int64_t>(dur, 1)},
                        {"args", args}});
    }

    // One slice per run of telemetry samples with the same phase.
    const auto& t = rec.events.telemetry;
    for (size_t i = 0; i < t.size();) {
      size_t j = i;
      while (j + 1 < t.size() && t[j + 1].phase == t[i].phase) ++j;
      int64_t ts = t[i].unix_ms * 1000;
      int64_t stop = j + 1 < t.size() ? t[j + 1].unix_ms * 1000 : std::max(end_us, ts + 1);
      if (!t[i].phase.empty()) {
        events.push_back({{"ph", "X"},
                          {"name", t[i].phase},
                          {"cat", "phase"},
                          {"pid", pid},
                          {"tid", kPhaseTid},
                          {"ts", ts},
                          {"dur", std::max<int64_t>(stop - ts, 1)},
                          {"args", {{"step", t[i].step}}}});
      }
      i = j + 1;
    }
    for (const Event& e : rec.events.events) {
      // Counter tracks (the trainer's memory and throughput): {"counters": {track: {series: v}}}.
      if (e.body.contains("counters") && e.body["counters"].is_object()) {
        for (const auto& [track, series] : e.body["counters"].items()) {
          events.push_back({{"ph", "C"},
                            {"name", track},
                            {"pid", pid},
                            {"ts", e.unix_ms * 1000},
                            {"args", series}});
        }
      }
      if (e.type() == rundir::EventKind::kOther || e.type() == rundir::EventKind::kTelemetry) {
        continue;
      }
      events.push_back({{"ph", "i"},
                        {"name", e.kind},
                        {"cat", "event"},
                        {"s", "p"},
                        {"pid", pid},
                        {"tid", kPhaseTid},
                        {"ts", e.unix_ms * 1000},
                        {"args", e.body}});
    }
    if (rec.summary && rec.summary->end_unix_ms.value_or(0) > 0 &&
        rec.summary->status != rundir::RankStatus::kRunning) {
      const rundir::SummaryRank& s = *rec.summary;
      events.push_back({{"ph", "i"},
                        {"name", "exit " + std::to_string(s.exit_code.value_or(0))},
                        {"cat", "event"},
                        {"s", "p"},
                        {"pid", pid},
                        {"tid", kPhaseTid},
                        {"ts", *s.end_unix_ms * 1000},
                        {"args",
                         {{"status", rundir::RankStatusName(s.status)},
                          {"signal", s.signal != 0 || s.exit_code.value_or(0) >= 0
                                         ? s.signal
                                         : -s.exit_code.value_or(0)}}}});
    }
  }
  if (diagnosis && diagnosis->kind != DiagnosisKind::kOk) {
    int64_t ts = diagnosis_ms > 0 ? diagnosis_ms * 1000 : global_end_us;
    events.push_back({{"ph", "i"},
                      {"name", diagnosis->headline},
                      {"cat", "diagnosis"},
                      {"s", "g"},
                      {"pid", 0},
                      {"tid", kPhaseTid},
                      {"ts", ts},
                      {"args", {{"kind", DiagnosisKindName(diagnosis->kind)}}}});
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

void WriteTrace(const RunSnapshot& run, const Diagnosis* diagnosis, const std::string& path) {
  rundir::WriteTrace(path, BuildTrace(run, diagnosis));
}

}  // namespace dlaunch::launcher
