#include "launcher/diagnose/run_snapshot.h"

#include <algorithm>

#include "core/base/parallel.h"
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

namespace {

// torch's dumps of the ranks in `which` (indexes into run->ranks), on a few threads, within
// run->torch_budget; the files skipped joined in rank order.
void ReadTorchFlightOf(const std::vector<size_t>& which, RunSnapshot* run) {
  if (!run->torch_budget) run->torch_budget = std::make_shared<python::TorchReadBudget>();
  std::vector<std::vector<rundir::SkippedEvidence>> skipped(which.size());
  base::ParallelFor(which.size(), std::min(base::ReadThreads(), python::kTorchReadThreads),
                    [&](size_t i) {
                      RankRecord& record = run->ranks[which[i]];
                      ReadTorchFlight(rundir::RunDir(run->run_dir).rank(record.rank),
                                      run->torch_budget.get(), &record, &skipped[i]);
                    });
  for (std::vector<rundir::SkippedEvidence>& files : skipped) {
    for (rundir::SkippedEvidence& s : files) run->skipped_evidence.Add(std::move(s));
  }
}

// The latest time the run-level files hold: summary.json's last update and the ranks' and
// attempts' ends, and the creation of a diagnosis.json written while the job ran (a hang found).
int64_t RunFilesEndUnixMs(const rundir::RunFiles& files) {
  int64_t end = files.live_diagnosis ? files.live_diagnosis->created_unix_ms : 0;
  if (!files.summary) return end;
  end = std::max(end, files.summary->updated_unix_ms);
  for (const rundir::SummaryRank& r : files.summary->ranks) {
    end = std::max(end, r.end_unix_ms.value_or(0));
  }
  for (const rundir::SummaryAttempt& a : files.summary->attempts) {
    end = std::max(end, a.end_unix_ms);
  }
  return end;
}

}  // namespace

RunSnapshot LoadRunDirForLauncher(const std::string& run_dir, int world_size_hint,
                                  const std::string& summary_path) {
  return LoadRunDir(run_dir, world_size_hint, python::kLauncherTorchRead, summary_path);
}

RunSnapshot LoadRunDir(const std::string& run_dir, int world_size_hint,
                       const python::TorchReadLimits& torch, const std::string& summary_path) {
  rundir::RunFiles files =
      rundir::ReadRunDir(run_dir, world_size_hint, rundir::kFlightEntryBudget, summary_path);
  RunSnapshot run;
  run.run_dir = std::move(files.run_dir);
  run.world_size = files.world_size;
  run.live_diagnosis = std::move(files.live_diagnosis);
  run.problems = std::move(files.problems);
  run.ranks.resize(files.ranks.size());
  std::vector<std::vector<std::string>> tail_problems(files.ranks.size());
  base::ParallelFor(files.ranks.size(), base::ReadThreads(), [&](size_t r) {
    RankRecord& record = run.ranks[r];
    static_cast<rundir::RankFiles&>(record) = std::move(files.ranks[r]);
    DropAgentFrames(&record.stderr_tail);
    MergeFlightTail(rundir::RunDir(run.run_dir).rank(record.rank), &record, &tail_problems[r]);
  });
  for (std::vector<std::string>& lines : tail_problems) {
    for (std::string& line : lines) run.problems.push_back(std::move(line));
  }
  // torch's pickles cost ~0.2 s each: past kTorchDumpsOfEveryRank ranks, only the ranks with no
  // flight recorder of dlaunch's are read (ReadCulpritTorchFlight adds the culprits' later).
  const bool any_flight = std::any_of(run.ranks.begin(), run.ranks.end(), [](const RankRecord& r) {
    return r.flight_state == rundir::FileState::kOk;
  });
  const bool every_rank = run.world_size <= kTorchDumpsOfEveryRank || !any_flight;
  std::vector<size_t> torch_ranks;
  std::vector<char> skipped(run.ranks.size(), 0);
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    if (every_rank || run.ranks[r].flight_state != rundir::FileState::kOk) {
      torch_ranks.push_back(r);
    }
  }
  run.torch_budget = std::make_shared<python::TorchReadBudget>(torch);
  ReadTorchFlightOf(torch_ranks, &run);
  if (!every_rank) {
    base::ParallelFor(run.ranks.size(), base::ReadThreads(), [&](size_t r) {
      const RankRecord& record = run.ranks[r];
      if (record.flight_state != rundir::FileState::kOk) return;
      skipped[r] =
          !python::FindTorchFlightDumps(rundir::RunDir(run.run_dir).rank(record.rank).path())
               .empty();
    });
    run.torch_dumps_skipped = static_cast<int>(std::count(skipped.begin(), skipped.end(), 1));
    run.torch_skipped_ranks = std::move(skipped);
  }
  UseTorchFlightWithoutOther(&run);
  if (files.summary) run.stragglers = files.summary->stragglers;
  if (run.stragglers.empty() && run.live_diagnosis) run.stragglers = run.live_diagnosis->stragglers;
  run.ended_unix_ms = RunFilesEndUnixMs(files);
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

void ReadCulpritTorchFlight(const Diagnosis& diagnosis, RunSnapshot* run) {
  std::vector<size_t> which;
  for (int rank : diagnosis.culprit_ranks) {
    const size_t r = static_cast<size_t>(rank);
    if (rank < 0 || r >= run->torch_skipped_ranks.size() || !run->torch_skipped_ranks[r]) continue;
    if (which.size() >= kCulpritTorchDumps) break;
    which.push_back(r);
    run->torch_skipped_ranks[r] = 0;
    --run->torch_dumps_skipped;
  }
  ReadTorchFlightOf(which, run);
}

void NoteSkippedTorchFlight(const RunSnapshot& run, Diagnosis* diagnosis) {
  if (run.torch_dumps_skipped <= 0) return;
  diagnosis->details.push_back(
      "PyTorch flight recorder: the dumps of " + std::to_string(run.torch_dumps_skipped) +
      " ranks not read (a world of " + std::to_string(run.world_size) +
      " ranks; dlaunch's own flight recorders cover them; a culprit's dump is read)");
}

}  // namespace dlaunch::launcher
