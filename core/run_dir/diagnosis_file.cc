#include "core/run_dir/diagnosis_file.h"

#include <algorithm>

#include "core/base/files.h"
#include "core/run_dir/json_fields.h"
#include "core/run_dir/schema.h"

namespace dlaunch::rundir {

using detail::GetInt;
using detail::GetString;
using nlohmann::json;

namespace {

constexpr const char* kKindNames[] = {"ok", "hang", "failure", "mismatch", "incomplete"};
constexpr const char* kMismatchNames[] = {"", "COLLECTIVE_TYPE_MISMATCH",
                                          "COLLECTIVE_DTYPE_MISMATCH", "SIZE_OR_SYNTAX_MISMATCH"};
constexpr const char* kHangNames[] = {"", "in_collective", "between_collectives", "before_first",
                                      "no_flight_recorder"};
constexpr const char* kStateNames[] = {"unknown",       "running",   "waiting",
                                       "never_entered", "completed", "exited",
                                       "failed",        "stopped",   "unresponsive"};

const int kMaxRanksInt = kMaxRanks;

}  // namespace

const char* DiagnosisKindName(DiagnosisKind kind) { return detail::NameOf(kind, kKindNames); }
DiagnosisKind ParseDiagnosisKind(std::string_view name) {
  return detail::ParseName(name, kKindNames, DiagnosisKind::kIncomplete);
}
const char* MismatchKindName(MismatchKind kind) { return detail::NameOf(kind, kMismatchNames); }
MismatchKind ParseMismatchKind(std::string_view name) {
  return detail::ParseName(name, kMismatchNames, MismatchKind::kNone);
}
const char* HangKindName(HangKind kind) { return detail::NameOf(kind, kHangNames); }
HangKind ParseHangKind(std::string_view name) {
  return detail::ParseName(name, kHangNames, HangKind::kNone);
}
const char* RankStateName(RankState state) { return detail::NameOf(state, kStateNames); }
RankState ParseRankState(std::string_view name) {
  return detail::ParseName(name, kStateNames, RankState::kUnknown);
}

void SkippedList::Add(SkippedEvidence skipped) {
  ++count;
  if (files.size() < kMaxSkippedEvidence) files.push_back(std::move(skipped));
}

std::string SkippedList::Line() const {
  if (count == 0) return "";
  std::string line = std::to_string(count) + (count == 1 ? " file (" : " files (");
  for (size_t i = 0; i < files.size() && i < 3; ++i) {
    line += (i ? "; " : "") + files[i].file + ": " + files[i].reason;
  }
  if (count > 3) line += "; and " + std::to_string(count - 3) + " more";
  return line + ")";
}

std::string RankDiagnosis::StateText() const {
  std::string text = RankStateName(state);
  if (stopped && state != RankState::kStopped) text += ",stopped";
  return text;
}

json DiagnosisToJson(const Diagnosis& d) {
  json ranks = json::array();
  for (const RankDiagnosis& r : d.ranks) {
    json rank = {{"rank", r.rank},
                 {"culprit", r.culprit},
                 {"state", r.StateText()},
                 {"last_completed_seq", r.last_completed_seq},
                 {"last_started_seq", r.last_started_seq},
                 {"progress_from", r.progress_from},
                 {"waiting_ms", r.waiting_ms},
                 {"phase", r.phase},
                 {"phase_for_ms", r.phase_for_ms},
                 {"step", r.step},
                 {"exit_code", r.exit_code},
                 {"signal", r.signal},
                 {"process_state", r.process_state},
                 {"stack_top", r.stack_top},
                 {"nccl_warnings", r.nccl_warnings},
                 {"line", r.line}};
    PutMemoryFigures(r, &rank);
    ranks.push_back(std::move(rank));
  }
  json skipped = json::array();
  for (const SkippedEvidence& s : d.skipped_evidence.files) {
    skipped.push_back({{"file", s.file}, {"reason", s.reason}});
  }
  return {{"schema", SchemaId(kDiagnosisSchema)},
          {"kind", DiagnosisKindName(d.kind)},
          {"hang_kind", HangKindName(d.hang_kind)},
          {"headline", d.headline},
          {"trigger", d.trigger},
          {"culprit_ranks", d.culprit_ranks},
          {"seq", d.seq},
          {"op", d.op},
          {"dtype", d.dtype},
          {"count", d.count},
          {"bytes", d.bytes},
          {"mismatch_type", MismatchKindName(d.mismatch)},
          {"pg", d.pg},
          {"pg_desc", d.pg_desc},
          {"pg_ranks", d.pg_ranks},
          {"pg_seq", d.pg_seq},
          {"entered_ranks", d.entered_ranks},
          {"missing_ranks", d.missing_ranks},
          {"ranks", ranks},
          {"details", d.details},
          {"problems", d.problems},
          {"nccl_verdicts", d.nccl_verdicts},
          {"torch_flight", d.torch_flight},
          {"skipped_evidence", std::move(skipped)},
          {"skipped_evidence_count", d.skipped_evidence.count},
          {"stragglers", StragglersToJson(d.stragglers)},
          {"incomplete", !d.problems.empty() || d.kind == DiagnosisKind::kIncomplete},
          {"run_dir", d.run_dir},
          {"created_unix_ms", d.created_unix_ms}};
}

Diagnosis DiagnosisFromJson(const json& j) {
  Diagnosis d;
  d.kind = ParseDiagnosisKind(GetString(j, "kind"));
  d.hang_kind = ParseHangKind(GetString(j, "hang_kind"));
  d.headline = GetString(j, "headline");
  d.trigger = GetString(j, "trigger");
  d.culprit_ranks = detail::GetInts(j, "culprit_ranks", 0, kMaxRanksInt);
  d.seq = GetInt(j, "seq", -1);
  d.op = GetString(j, "op");
  d.dtype = GetString(j, "dtype");
  d.count = GetInt(j, "count", -1);
  d.bytes = GetInt(j, "bytes", -1);
  d.mismatch = ParseMismatchKind(GetString(j, "mismatch_type"));
  d.pg = GetString(j, "pg");
  d.pg_desc = GetString(j, "pg_desc");
  d.pg_ranks = detail::GetInts(j, "pg_ranks", 0, kMaxRanksInt);
  d.pg_seq = GetInt(j, "pg_seq", -1);
  d.entered_ranks = detail::GetInts(j, "entered_ranks", 0, kMaxRanksInt);
  d.missing_ranks = detail::GetInts(j, "missing_ranks", 0, kMaxRanksInt);
  d.details = detail::GetStrings(j, "details");
  d.problems = detail::GetStrings(j, "problems");
  d.stragglers = StragglersFromJson(j, "stragglers");
  if (j.contains("torch_flight") && j["torch_flight"].is_object()) {
    d.torch_flight = j["torch_flight"];
  }
  if (auto skipped = j.find("skipped_evidence"); skipped != j.end() && skipped->is_array()) {
    for (const json& s : *skipped) {
      if (!s.is_object() || d.skipped_evidence.files.size() >= kMaxSkippedEvidence) continue;
      d.skipped_evidence.files.push_back({GetString(s, "file"), GetString(s, "reason")});
    }
  }
  d.skipped_evidence.count =
      std::max<int64_t>(GetInt(j, "skipped_evidence_count", 0), d.skipped_evidence.files.size());
  if (j.contains("nccl_verdicts") && j["nccl_verdicts"].is_array()) {
    d.nccl_verdicts = j["nccl_verdicts"];
  }
  d.run_dir = GetString(j, "run_dir");
  d.created_unix_ms = GetInt(j, "created_unix_ms", 0);
  auto ranks = j.find("ranks");
  if (ranks == j.end() || !ranks->is_array()) return d;
  for (const json& r : *ranks) {
    if (!r.is_object() || d.ranks.size() >= kMaxRanks) continue;
    RankDiagnosis rd;
    static_cast<MemoryFigures&>(rd) = GetMemoryFigures(r);
    rd.rank = detail::GetInt32(r, "rank", 0, 0, kMaxRanks);
    rd.culprit = detail::GetBool(r, "culprit", false);
    const std::string state = GetString(r, "state");
    const size_t comma = state.find(',');
    rd.state = ParseRankState(std::string_view(state).substr(0, comma));
    rd.stopped = rd.state == RankState::kStopped ||
                 (comma != std::string::npos && state.substr(comma + 1) == "stopped");
    rd.last_completed_seq = GetInt(r, "last_completed_seq", -1);
    rd.last_started_seq = GetInt(r, "last_started_seq", -1);
    rd.progress_from = GetString(r, "progress_from");
    rd.waiting_ms = GetInt(r, "waiting_ms", -1);
    rd.phase = GetString(r, "phase");
    rd.phase_for_ms = GetInt(r, "phase_for_ms", -1);
    rd.step = GetInt(r, "step", -1);
    rd.exit_code = detail::GetInt32(r, "exit_code", -1);
    rd.signal = detail::GetInt32(r, "signal", 0, 0, 128);
    rd.process_state = GetString(r, "process_state");
    rd.stack_top = GetString(r, "stack_top");
    rd.nccl_warnings = detail::GetStrings(r, "nccl_warnings");
    rd.line = GetString(r, "line");
    d.ranks.push_back(std::move(rd));
  }
  return d;
}

void WriteDiagnosis(const RunDir& dir, const Diagnosis& diagnosis, const std::string& text) {
  base::WriteFileAtomically(dir.diagnosis_text(), text);
  base::WriteFileAtomically(dir.diagnosis_json(),
                            detail::Dump(DiagnosisToJson(diagnosis), 2) + "\n");
}

FileState ReadDiagnosis(const std::string& path, const std::string& label, Diagnosis* out,
                        std::vector<std::string>* problems) {
  json j;
  if (FileState state =
          detail::ReadJsonObject(path, label, kDiagnosisSchema, kMaxDiagnosisBytes, &j, problems);
      state != FileState::kOk) {
    return state;
  }
  *out = DiagnosisFromJson(j);
  return FileState::kOk;
}

}  // namespace dlaunch::rundir
