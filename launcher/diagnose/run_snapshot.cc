#include "launcher/diagnose/run_snapshot.h"

#include "launcher/diagnose/python_evidence.h"

namespace dlaunch::launcher {
namespace {

// The agent's wrapper around each collective (`File ".../dlaunch/_torch_hooks.py", line N, in
// recorded` and its source line) shows in every traceback raised inside a collective; it is no
// part of the user's program, so the report leaves it out (stderr.log keeps it).
void DropAgentFrames(std::vector<std::string>* lines) {
  std::vector<std::string> kept;
  bool skip_source = false;
  for (std::string& line : *lines) {
    if (line.find("dlaunch/_torch_hooks.py\", line ") != std::string::npos) {
      skip_source = true;
      continue;
    }
    if (skip_source && line.rfind("    ", 0) == 0 && line.find("File \"") == std::string::npos) {
      skip_source = false;
      continue;
    }
    skip_source = false;
    kept.push_back(std::move(line));
  }
  *lines = std::move(kept);
}

}  // namespace

RunSnapshot LoadRunDir(const std::string& run_dir, int world_size_hint) {
  rundir::RunFiles files = rundir::ReadRunDir(run_dir, world_size_hint);
  RunSnapshot run;
  run.run_dir = std::move(files.run_dir);
  run.world_size = files.world_size;
  run.live_diagnosis = std::move(files.live_diagnosis);
  run.problems = std::move(files.problems);
  run.ranks.reserve(files.ranks.size());
  for (rundir::RankFiles& rank : files.ranks) {
    RankRecord record;
    static_cast<rundir::RankFiles&>(record) = std::move(rank);
    const rundir::RankDir dir = rundir::RunDir(run.run_dir).rank(record.rank);
    DropAgentFrames(&record.stderr_tail);
    MergeFlightTail(dir, &record, &run.problems);
    ReadTorchFlight(dir, &record, &run.problems);
    run.ranks.push_back(std::move(record));
  }
  UseTorchFlightWithoutOther(&run);
  if (files.summary) {
    run.run_id = files.summary->run_id;
    run.exit_code = files.summary->exit_code;
    run.error = files.summary->error;
    run.nodes = files.summary->nodes;
    for (rundir::SummaryRank& r : files.summary->ranks) {
      if (r.rank < 0 || r.rank >= run.world_size) continue;
      std::optional<rundir::SummaryRank>& slot = run.ranks[r.rank].summary;
      // This node's own entry (with a local rank) wins over what another node said of the rank.
      if (slot && slot->local_rank && !r.local_rank) continue;
      if (r.local_rank && !(slot && slot->local_rank)) ++run.local_ranks;
      slot = std::move(r);
    }
  }
  return run;
}

}  // namespace dlaunch::launcher
