#include "launcher/diagnose/nccl_findings.h"

#include "launcher/nccl_log/parser.h"
#include "launcher/nccl_log/report.h"

namespace dlaunch::launcher {

void AttachNcclVerdicts(const std::string& run_dir, Diagnosis* diagnosis) {
  const std::vector<nccl_log::Verdict> verdicts =
      nccl_log::FindVerdicts(nccl_log::ParseRankDirs(run_dir), nccl_log::AnalyzeOptions{});
  for (const std::string& line : nccl_log::FormatVerdicts(verdicts)) {
    diagnosis->details.push_back(line);
  }
  for (const nccl_log::Verdict& v : verdicts) {
    diagnosis->nccl_verdicts.push_back(nccl_log::VerdictToJson(v));
  }
}

}  // namespace dlaunch::launcher
