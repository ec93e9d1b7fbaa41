// The facts the restart policy weighs, read from a run directory written by the run directory's
// own writers: summary.json, the culprit's error.json, every rank's heartbeat.json.
#include "launcher/job/failure_facts.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/run_dir/error_file.h"
#include "core/run_dir/heartbeat_file.h"
#include "core/run_dir/paths.h"
#include "tests/common/test_dir.h"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;

rundir::SummaryRank Rank(int rank, rundir::RankStatus status, int64_t end, int exit_code,
                         int signal = 0) {
  rundir::SummaryRank r;
  r.rank = rank;
  r.local_rank = rank;
  r.status = status;
  r.end_unix_ms = end;
  r.exit_code = exit_code;
  r.signal = signal;
  return r;
}

void Beat(const rundir::RunDir& dir, int rank, int64_t step, int64_t completed) {
  fs::create_directories(dir.rank(rank).path());
  rundir::Heartbeat h;
  h.rank = rank;
  h.step = step;
  h.last_completed_seq = completed;
  rundir::WriteHeartbeat(dir.rank(rank).heartbeat(), h);
}

TEST(FailureFactsTest, TheFirstRankToFailByItselfIsTheCulpritInItsOwnWords) {
  const testing::TestDir tmp("failure_facts");
  const rundir::RunDir dir(tmp.path().string());
  rundir::Summary summary;
  summary.exit_code = 1;
  // Rank 0 was torn down after rank 2 failed; rank 1 failed later than rank 2.
  summary.ranks = {Rank(0, rundir::RankStatus::kKilled, 900, -15, 15),
                   Rank(1, rundir::RankStatus::kFailed, 1200, 1),
                   Rank(2, rundir::RankStatus::kFailed, 1000, 1)};
  Beat(dir, 0, 7, 41);
  Beat(dir, 1, 6, 40);
  Beat(dir, 2, 5, 39);
  rundir::ErrorReport error;
  error.rank = 2;
  error.kind = "error";
  error.message = "ValueError: bad config value";
  error.fields = {{"exception", "ValueError"}, {"call_site", "s.py:12 main"}};
  rundir::WriteError(dir.rank(2).error(), error);

  const FailureFacts f = ReadFailureFacts(dir.path(), summary, 3, false);
  EXPECT_EQ(f.attempt, 3);
  EXPECT_EQ(f.culprit_rank, 2);
  EXPECT_EQ(f.culprit_node, 0);
  EXPECT_EQ(f.rank_exit_code, 1);
  EXPECT_EQ(f.rank_signal, 0);
  EXPECT_FALSE(f.oom);
  EXPECT_EQ(f.exception, "ValueError");
  EXPECT_EQ(f.call_site, "s.py:12 main");
  EXPECT_EQ(f.step, 5);
  EXPECT_EQ(f.best_step, 7);
  EXPECT_TRUE(f.collective_completed);
  EXPECT_TRUE(f.heartbeat_seen);
  EXPECT_TRUE(f.lost_nodes.empty());

  // The launcher's root cause wins over the end times (rank 1 raised first; its exit was seen
  // later): the policy weighs the rank the root-cause block names.
  const FailureFacts named = ReadFailureFacts(dir.path(), summary, 3, false, 1);
  EXPECT_EQ(named.culprit_rank, 1);
  EXPECT_EQ(named.step, 6);
  EXPECT_EQ(named.exception, "");
}

TEST(FailureFactsTest, WhatNoFileSaysStaysUnknown) {
  const testing::TestDir tmp("failure_facts_bare");
  rundir::Summary summary;
  rundir::SummaryRank other = Rank(3, rundir::RankStatus::kFailed, 500, -9, 9);
  other.local_rank.reset();
  other.node_rank = 1;
  summary.ranks = {other};
  rundir::SummaryNode lost;
  lost.node_rank = 2;
  lost.status = rundir::RankStatus::kLost;
  summary.nodes = {lost};
  const FailureFacts f = ReadFailureFacts(tmp.path().string(), summary, 0, true);
  EXPECT_TRUE(f.hang);
  EXPECT_EQ(f.culprit_rank, 3);
  EXPECT_EQ(f.culprit_node, 1);
  EXPECT_EQ(f.rank_signal, 9);
  EXPECT_EQ(f.rank_exit_code, -1);
  EXPECT_EQ(f.exception, "");
  EXPECT_EQ(f.step, -1);
  EXPECT_EQ(f.best_step, -1);
  EXPECT_FALSE(f.collective_completed);
  EXPECT_FALSE(f.heartbeat_seen);
  EXPECT_EQ(f.lost_nodes, std::vector<int>{2});
}

}  // namespace
}  // namespace dlaunch::launcher
