#include "launcher/diagnose/diagnosis_writer.h"

#include <algorithm>
#include <sstream>

#include "core/run_dir/diagnosis_file.h"
#include "core/run_dir/paths.h"
#include "launcher/diagnose/rank_groups.h"

namespace dlaunch::launcher {

std::string StragglerLine(const rundir::StragglerVerdict& v) {
  std::string line = v.text;
  if (v.start_step < 0) return line + (v.end_unix_ms > 0 ? " (ended)" : " (still on)");
  line += " (from step " + std::to_string(v.start_step);
  if (v.end_unix_ms > 0) {
    line += v.end_step >= 0 ? " to step " + std::to_string(v.end_step) : ", ended";
  } else {
    line += ", still on";
  }
  return line + ")";
}

std::string FormatDiagnosis(const Diagnosis& d) {
  std::ostringstream out;
  out << d.headline << "\n";
  if (!d.trigger.empty()) out << "  detected: " << d.trigger << "\n";
  for (const std::string& line : GroupRankLines(d.ranks)) out << "  " << line << "\n";
  for (const std::string& line : d.details) out << "  " << line << "\n";
  if (!d.stragglers.empty()) {
    out << "  stragglers of the job:\n";
    for (const rundir::StragglerVerdict& v : d.stragglers)
      out << "    " << StragglerLine(v) << "\n";
  }
  for (const RankDiagnosis& r : d.ranks) {
    if (r.nccl_warnings.empty()) continue;
    out << "  NCCL warnings of rank " << r.rank << ":\n";
    for (const std::string& w : r.nccl_warnings) out << "    " << w << "\n";
  }
  if (d.skipped_evidence.count > 0) {
    out << "  not read or left out: " << d.skipped_evidence.Line()
        << " (diagnosis.json's skipped_evidence)\n";
  }
  if (!d.problems.empty()) {
    out << "  missing or unreadable:\n";
    for (const std::string& p : d.problems) out << "    " << p << "\n";
  }
  return out.str();
}

std::string FormatDiagnosisAfterRootCause(Diagnosis d) {
  auto& lines = d.details;
  auto block = std::find(lines.begin(), lines.end(), kRootCauseHeading);
  if (block != lines.end()) {
    auto end = std::find_if(block + 1, lines.end(),
                            [](const std::string& l) { return l.rfind("  ", 0) != 0; });
    lines.erase(block, end);
  }
  return FormatDiagnosis(d);
}

void WriteDiagnosisFiles(const Diagnosis& diagnosis, const std::string& run_dir) {
  rundir::WriteDiagnosis(rundir::RunDir(run_dir), diagnosis, FormatDiagnosis(diagnosis));
}

}  // namespace dlaunch::launcher
