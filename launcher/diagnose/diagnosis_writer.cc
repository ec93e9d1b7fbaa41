#include "launcher/diagnose/diagnosis_writer.h"

#include <sstream>

#include "core/telemetry.h"

namespace dlaunch::launcher {

namespace {

nlohmann::json NcclVerdictsJson(const std::vector<nccl_log::Verdict>& verdicts) {
  nlohmann::json out = nlohmann::json::array();
  for (const nccl_log::Verdict& v : verdicts) out.push_back(nccl_log::VerdictToJson(v));
  return out;
}

}  // namespace

std::string FormatDiagnosis(const Diagnosis& d) {
  std::ostringstream out;
  out << d.headline << "\n";
  if (!d.trigger.empty()) out << "  detected: " << d.trigger << "\n";
  for (const RankDiagnosis& r : d.ranks) out << "  " << r.line << "\n";
  for (const std::string& line : d.details) out << "  " << line << "\n";
  for (const std::string& line : nccl_log::FormatVerdicts(d.nccl_verdicts)) {
    out << "  " << line << "\n";
  }
  for (const RankDiagnosis& r : d.ranks) {
    if (r.nccl_warnings.empty()) continue;
    out << "  NCCL warnings of rank " << r.rank << ":\n";
    for (const std::string& w : r.nccl_warnings) out << "    " << w << "\n";
  }
  if (!d.problems.empty()) {
    out << "  missing or unreadable:\n";
    for (const std::string& p : d.problems) out << "    " << p << "\n";
  }
  return out.str();
}

nlohmann::json DiagnosisToJson(const Diagnosis& d) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankDiagnosis& r : d.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"culprit", r.culprit},
                     {"state", r.state},
                     {"last_completed_seq", r.last_completed_seq},
                     {"last_started_seq", r.last_started_seq},
                     {"waiting_ms", r.waiting_ms},
                     {"phase", r.phase},
                     {"phase_for_ms", r.phase_for_ms},
                     {"step", r.step},
                     {"rss_bytes", r.rss_bytes},
                     {"device_allocated_bytes", r.device_allocated_bytes},
                     {"device_reserved_bytes", r.device_reserved_bytes},
                     {"exit_code", r.exit_code},
                     {"signal", r.signal},
                     {"process_state", r.process_state},
                     {"stack_top", r.stack_top},
                     {"nccl_warnings", r.nccl_warnings},
                     {"line", r.line}});
  }
  return {{"kind", DiagnosisKindName(d.kind)},
          {"headline", d.headline},
          {"trigger", d.trigger},
          {"culprit_ranks", d.culprit_ranks},
          {"seq", d.seq},
          {"op", d.op},
          {"dtype", d.dtype},
          {"count", d.count},
          {"bytes", d.bytes},
          {"mismatch_type", d.mismatch_type},
          {"entered_ranks", d.entered_ranks},
          {"missing_ranks", d.missing_ranks},
          {"ranks", ranks},
          {"details", d.details},
          {"problems", d.problems},
          {"nccl_verdicts", NcclVerdictsJson(d.nccl_verdicts)},
          {"incomplete", !d.problems.empty() || d.kind == DiagnosisKind::kIncomplete},
          {"run_dir", d.run_dir},
          {"created_unix_ms", d.created_unix_ms}};
}

void WriteDiagnosisFiles(const Diagnosis& diagnosis, const std::string& run_dir) {
  core::WriteFileAtomically(run_dir + "/diagnosis.txt", FormatDiagnosis(diagnosis));
  core::WriteFileAtomically(run_dir + "/diagnosis.json", DiagnosisToJson(diagnosis).dump(2) + "\n");
}

}  // namespace dlaunch::launcher
