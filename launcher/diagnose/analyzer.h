// Cross-rank analysis of a run: one engine for the live hang monitor and `dlaunch diagnose`, in
// four layers (PyTorch's flight-recorder analyzer keeps builder, checks and types apart the same
// way):
//   run_snapshot.h  what the run directory (core/run_dir) and the live launcher say, per rank
//   rank_facts.h    facts per rank merged from every source, plain data, open to enrichers
//   stack_parser.h  what gdb's stacks say the main thread is doing
//   inference.h     mismatch, failure or hang; the culprits; where each rank stood (plain data)
//   render_text.h   the verdict in words: the Diagnosis, and diagnosis.txt
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launcher/diagnose/diagnosis.h"
#include "launcher/diagnose/rank_facts.h"
#include "launcher/diagnose/run_snapshot.h"

namespace dlaunch::launcher {

struct AnalyzeOptions {
  // Wall-clock "now" of a live diagnosis; 0 for offline use, where an exited rank's own latest
  // record (flight dump, summary end, last event, heartbeat.json) stands for "now", and for the
  // others the run's latest record (RecordedEndUnixMs). Offline nothing reads the clock or a
  // file's modification time, so a copied run directory reads the same.
  int64_t now_unix_ms = 0;
  std::string trigger;          // copied into Diagnosis::trigger
  bool hang_suspected = false;  // a live monitor saw a stall: report a hang even without timeouts
  // Extra evidence per rank (Python stacks, NCCL log verdicts), applied after the built-in facts.
  std::vector<FactsEnricher> enrichers;
};

// The facts Analyze infers from, one per rank of `run`: GatherFacts, the evidence Python ranks
// leave (python_evidence.h), `enrichers`, then the ranks of lost nodes (MarkLostNodes) and,
// offline, the run's recorded end for ranks with no recorded exit (ReferToTheRecordedEnd). The
// launcher's root-cause block picks over these same facts, so it names the rank the diagnosis
// names. Never throws.
std::vector<RankFacts> GatherRunFacts(const RunSnapshot& run, const FactsOptions& options,
                                      const std::vector<FactsEnricher>& enrichers = {});

// Pure computation over the snapshot: does not block, does not throw for any snapshot contents.
Diagnosis Analyze(const RunSnapshot& run, const AnalyzeOptions& options = {});
// The same over facts already gathered: GatherRunFacts(run, {options.now_unix_ms},
// options.enrichers), for a caller that picks over them too.
Diagnosis Analyze(const RunSnapshot& run, const std::vector<RankFacts>& facts,
                  const AnalyzeOptions& options = {});

// For the launcher after a failed attempt: LoadRunDir + Analyze, then diagnosis.txt,
// diagnosis.json and trace.json into the run directory. Blocks on file I/O only. Never throws: an
// unreadable directory or a file that cannot be written becomes a line in `problems`.
// `summary_path`: where the launcher wrote summary.json ("" = in the run directory).
Diagnosis AnalyzeRunDir(const std::string& run_dir, int world_size_hint = 0,
                        const std::string& summary_path = "");

// diagnosis.txt, diagnosis.json and trace.json into `run_dir`; a file that cannot be written
// becomes a line in diagnosis->problems. Blocks on file I/O only; never throws.
void WriteReportFiles(const RunSnapshot& run, Diagnosis* diagnosis, const std::string& run_dir);

}  // namespace dlaunch::launcher
