#include "core/run_dir/run_reader.h"

#include <algorithm>
#include <filesystem>

#include "core/base/format.h"
#include "core/base/parallel.h"
#include "core/error.h"
#include "core/run_dir/heartbeat_file.h"
#include "core/run_dir/rank_logs.h"

namespace dlaunch::rundir {

namespace fs = std::filesystem;

namespace {

// A rank list in a problem line stays short even for a hostile world size.
constexpr size_t kMaxMissingListed = 16;

// What the bound on kept entries cost, when it could matter: when one rank's newest entry is
// older than another's oldest kept one, the two ranks' records no longer overlap, so a rank far
// behind can't be compared with the rest at the collective it is stuck in.
std::optional<std::string> DescribeDroppedEntries(const std::vector<RankFiles>& ranks,
                                                  size_t kept) {
  int trimmed = 0;
  int64_t lowest_newest = INT64_MAX, highest_oldest = INT64_MIN;
  for (const RankFiles& r : ranks) {
    if (r.flight_state != FileState::kOk || r.flight.entries.empty()) continue;
    lowest_newest = std::min(lowest_newest, r.flight.entries.back().seq);
    if (r.flight.dropped_entries == 0) continue;
    ++trimmed;
    highest_oldest = std::max(highest_oldest, r.flight.entries.front().seq);
  }
  if (trimmed == 0 || lowest_newest >= highest_oldest) return std::nullopt;
  return "flight records: only the newest " + std::to_string(kept) + " entries of each of " +
         std::to_string(ranks.size()) + " ranks kept (" + std::to_string(trimmed) +
         " held more), and some rank's newest entry (#" + std::to_string(lowest_newest) +
         ") is older than what others kept";
}

}  // namespace

size_t FlightEntriesKept(int64_t world, int64_t budget) {
  if (world <= 0) return kMaxFlightEntries;
  return static_cast<size_t>(std::clamp<int64_t>(budget / world, kMinFlightEntriesKept,
                                                 static_cast<int64_t>(kMaxFlightEntries)));
}

RankFiles ReadRankFiles(const RankDir& dir, int rank, std::vector<std::string>* problems,
                        size_t max_flight_entries) {
  RankFiles files;
  files.rank = rank;
  std::error_code ec;
  files.dir_present = fs::is_directory(dir.path(), ec);
  if (!files.dir_present) return files;
  files.flight_state = ReadFlight(dir.flight(), RankFileLabel(rank, dir.flight()), &files.flight,
                                  problems, max_flight_entries);
  ReadEvents(dir.events(), RankFileLabel(rank, dir.events()), &files.events, problems);
  ErrorReport error;
  if (ReadError(dir.error(), RankFileLabel(rank, dir.error()), &error, problems) ==
      FileState::kOk) {
    files.error = std::move(error);
  }
  files.stacks = ReadStacks(dir.stacks());
  files.py_stacks = ReadStacks(dir.py_stacks());
  files.nccl_warnings = ReadNcclWarnings(dir);
  files.stderr_tail = ReadLogTail(dir.stderr_log(), kStderrTailLines);
  Heartbeat beat;
  std::vector<std::string> ignored;  // the agent's channel: a damaged one is no missing evidence
  if (ReadHeartbeat(dir.heartbeat(), RankFileLabel(rank, dir.heartbeat()), &beat, &ignored) ==
      FileState::kOk) {
    files.heartbeat_unix_ms = beat.unix_ms;
    files.heartbeat_last_completed_seq = beat.last_completed_seq;
    files.heartbeat_last_started_seq = beat.last_started_seq;
  }
  return files;
}

RunFiles ReadRunDir(const std::string& run_dir, int world_size_hint, int64_t flight_entry_budget,
                    const std::string& summary_path) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) {
    throw Error(ErrorKind::kInvalidArgument, "run directory " + run_dir + " does not exist");
  }
  fs::directory_iterator probe(run_dir, ec);
  if (ec) {
    throw Error(ErrorKind::kInvalidArgument,
                "run directory " + run_dir + " is not readable: " + ec.message());
  }
  RunFiles run;
  run.run_dir = run_dir;
  const RunDir root(run_dir);

  Summary summary;
  switch (ReadSummary(summary_path.empty() ? root.summary() : summary_path, "summary.json",
                      &summary, &run.problems)) {
    case FileState::kAbsent:
      run.problems.push_back("summary.json missing (launcher killed before it wrote one?)");
      break;
    case FileState::kInvalid:
      break;
    case FileState::kOk:
      run.summary = std::move(summary);
      break;
  }
  Diagnosis live;
  std::vector<std::string> ignored;  // an old diagnosis is context, not an input
  if (ReadDiagnosis(root.diagnosis_json(), "diagnosis.json", &live, &ignored) == FileState::kOk) {
    run.live_diagnosis = std::move(live);
  }

  // World size: the largest of what the hint, the summary, the rank folders and the flight dumps
  // claim, each bounded by kMaxRanks.
  int64_t world = std::clamp(world_size_hint, 0, kMaxRanks);
  if (run.summary) {
    for (const SummaryRank& r : run.summary->ranks) world = std::max<int64_t>(world, r.rank + 1);
  }
  int too_high = 0;
  for (fs::directory_iterator it(run_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("rank", 0) != 0 || !it->is_directory(ec)) continue;
    if (std::optional<int> rank = RunDir::ParseRankDirName(name)) {
      world = std::max<int64_t>(world, *rank + 1);
    } else if (name.size() > 4 && std::all_of(name.begin() + 4, name.end(),
                                              [](char c) { return c >= '0' && c <= '9'; })) {
      ++too_high;
    }
  }
  if (too_high > 0) {
    run.problems.push_back(std::to_string(too_high) + " rank folder(s) numbered " +
                           std::to_string(kMaxRanks) + " or more ignored");
  }

  // The folders are read on a few threads; each rank's problems are kept apart and joined in rank
  // order, so the report does not depend on the threads.
  run.ranks.resize(static_cast<size_t>(world));
  const size_t kept = FlightEntriesKept(world, flight_entry_budget);
  std::vector<std::vector<std::string>> rank_problems(run.ranks.size());
  base::ParallelFor(run.ranks.size(), base::ReadThreads(), [&](size_t r) {
    const int rank = static_cast<int>(r);
    run.ranks[r] = ReadRankFiles(root.rank(rank), rank, &rank_problems[r], kept);
  });
  for (std::vector<std::string>& lines : rank_problems) {
    for (std::string& line : lines) run.problems.push_back(std::move(line));
  }
  if (std::optional<std::string> line = DescribeDroppedEntries(run.ranks, kept)) {
    run.problems.push_back(std::move(*line));
  }
  // Flight dumps may know a larger world than the folders do (folders lost with a node).
  int64_t claimed = world;
  for (const RankFiles& files : run.ranks) {
    if (files.flight_state == FileState::kOk) {
      claimed = std::max<int64_t>(claimed, files.flight.world_size);
    }
  }
  if (claimed > kMaxRanks) {
    run.problems.push_back("a flight recorder claims a world of " + std::to_string(claimed) +
                           " ranks: read as " + std::to_string(kMaxRanks));
    claimed = kMaxRanks;
  }
  while (static_cast<int64_t>(run.ranks.size()) < claimed) {
    RankFiles files;
    files.rank = static_cast<int>(run.ranks.size());
    run.ranks.push_back(std::move(files));
  }
  run.world_size = static_cast<int>(run.ranks.size());
  std::vector<int> missing;
  for (const RankFiles& files : run.ranks) {
    if (!files.dir_present) missing.push_back(files.rank);
  }
  if (missing.size() <= kMaxMissingListed) {
    for (int r : missing) run.problems.push_back(RunDir::RankDirName(r) + "/ missing");
  } else {
    run.problems.push_back("rank folders missing for " + base::NameRanks(missing));
  }
  if (run.world_size == 0) {
    run.problems.push_back("no rank folders and no summary.json: nothing to analyse");
  }
  return run;
}

}  // namespace dlaunch::rundir
