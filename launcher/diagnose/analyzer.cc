#include "launcher/diagnose/analyzer.h"

#include "core/error.h"
#include "core/run_dir/paths.h"
#include "launcher/diagnose/diagnosis_writer.h"
#include "launcher/diagnose/inference.h"
#include "launcher/diagnose/nccl_findings.h"
#include "launcher/diagnose/python_evidence.h"
#include "launcher/diagnose/render_text.h"
#include "launcher/diagnose/trace_writer.h"

namespace dlaunch::launcher {

std::vector<RankFacts> GatherRunFacts(const RunSnapshot& run, const FactsOptions& options,
                                      const std::vector<FactsEnricher>& enrichers) {
  std::vector<RankFacts> facts;
  facts.reserve(run.ranks.size());
  for (const RankRecord& rec : run.ranks) {
    facts.push_back(GatherFacts(rec, options));
    AddPythonEvidence(rec, facts.back());
    for (const FactsEnricher& enrich : enrichers) enrich(rec, facts.back());
  }
  MarkLostNodes(run, facts);
  if (options.now_unix_ms == 0) ReferToTheRecordedEnd(run, facts);
  return facts;
}

Diagnosis Analyze(const RunSnapshot& run, const AnalyzeOptions& options) {
  return Analyze(run, GatherRunFacts(run, FactsOptions{options.now_unix_ms}, options.enrichers),
                 options);
}

Diagnosis Analyze(const RunSnapshot& run, const std::vector<RankFacts>& facts,
                  const AnalyzeOptions& options) {
  InferenceInput input;
  input.launcher_exit_code = run.exit_code;
  input.now_unix_ms = options.now_unix_ms;
  input.hang_suspected = options.hang_suspected;
  const Verdict verdict = Infer(facts, input);
  RenderContext context;
  context.run = &run;
  context.trigger = options.trigger;
  context.now_unix_ms = options.now_unix_ms;
  Diagnosis d = Render(facts, verdict, context);
  d.stragglers = run.stragglers;
  return d;
}

Diagnosis AnalyzeRunDir(const std::string& run_dir, int world_size_hint,
                        const std::string& summary_path) {
  RunSnapshot run;
  try {
    run = LoadRunDirForLauncher(run_dir, world_size_hint, summary_path);
  } catch (const Error& e) {
    Diagnosis d;
    d.run_dir = run_dir;
    d.headline = std::string("INCOMPLETE: ") + e.what();
    d.problems.push_back(e.what());
    return d;
  }
  Diagnosis d = Analyze(run);
  AttachNcclVerdicts(run_dir, &d);
  ReadCulpritTorchFlight(d, &run);
  AttachTorchFlight(run, &d);
  NoteSkippedTorchFlight(run, &d);
  WriteReportFiles(run, &d, run_dir);
  return d;
}

void WriteReportFiles(const RunSnapshot& run, Diagnosis* diagnosis, const std::string& run_dir) {
  try {
    WriteDiagnosisFiles(*diagnosis, run_dir);
    WriteTrace(run, diagnosis, rundir::RunDir(run_dir).trace());
  } catch (const Error& e) {
    diagnosis->problems.push_back(e.what());
  }
}

}  // namespace dlaunch::launcher
