// The rendering layer: words a verdict for people — the headline, the root-cause block, the
// memory trend, the mismatch table and one line per rank — into the Diagnosis (diagnosis.json's
// struct); FormatDiagnosis lays it out as diagnosis.txt. Does not block, never throws.
#pragma once

#include <string>
#include <vector>

#include "launcher/diagnose/inference.h"
#include "launcher/diagnose/rank_facts.h"
#include "launcher/diagnose/run_snapshot.h"

namespace dlaunch::launcher {

using rundir::Diagnosis;
using rundir::RankDiagnosis;

struct RenderContext {
  const RunSnapshot* run = nullptr;
  std::string trigger;
  int64_t now_unix_ms = 0;  // 0 offline
};

Diagnosis Render(const std::vector<RankFacts>& facts, const Verdict& verdict,
                 const RenderContext& context);

// The memory trend of a rank before it ran out of memory, as one sentence; "" without samples.
std::string MemoryTrend(int rank, const std::vector<TelemetrySample>& telemetry);

}  // namespace dlaunch::launcher
