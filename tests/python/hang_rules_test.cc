// The hang rule for ranks with progress (libdlaunch or the Python agent): a collective in flight
// past --hang-timeout with a peer absent or nothing moving; never a rank outside collectives,
// nor a declared section. Fake job view, injected clock; no rank answers a dump.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "launcher/diagnose/hang_monitor.h"
#include "launcher/python/agent_files.h"
#include "tests/common/test_dir.h"

namespace dlaunch::launcher {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kT0 = 1764450000000;
constexpr int64_t kTimeoutMs = 10000;

class QuietJob : public JobView {
 public:
  explicit QuietJob(int world) {
    for (int r = 0; r < world; ++r) {
      RankLiveState s;
      s.rank = r;
      s.linked = s.runs_agent = true;
      s.last_heartbeat_unix_ms = kT0;
      ranks.push_back(s);
    }
  }
  std::vector<RankLiveState> Ranks() override { return ranks; }
  void RequestDump(const std::string&) override { ++dumps; }
  std::string run_dir() const override { return dir_.string(); }
  // Every rank completed #seq; `waiting` ranks entered #seq + 1.
  void Place(int64_t seq, const std::vector<int>& waiting) {
    for (RankLiveState& r : ranks) {
      r.status.last_completed_seq = seq;
      r.status.last_started_seq = seq;
    }
    for (int w : waiting) ranks[w].status.last_started_seq = seq + 1;
  }
  std::vector<RankLiveState> ranks;
  int dumps = 0;

 private:
  const dlaunch::testing::TestDir dir_{"hang-rules"};
};

HangMonitor::Options Quick() {
  HangMonitor::Options o;
  o.hang_timeout = std::chrono::milliseconds(kTimeoutMs);
  o.heartbeat_timeout = std::chrono::milliseconds(2000);
  o.dump_wait = std::chrono::milliseconds(1);
  o.write_files = false;
  return o;
}

// As the launcher runs it: a stall waits for heartbeats sent since, or 2 s at the latest.
HangMonitor::Options Confirming() {
  HangMonitor::Options o = Quick();
  o.stall_confirm = std::chrono::milliseconds(2000);
  return o;
}

TEST(HangRulesTest, SilentRanksOutsideAnyCollectiveAreNoHang) {
  QuietJob job(3);
  job.Place(4, {});
  HangMonitor monitor(job, Quick());
  // Heartbeats of the Python agent stop too (a long call holding the GIL): still no hang.
  for (int64_t t = 0; t <= 10 * kTimeoutMs; t += 1000) {
    EXPECT_FALSE(monitor.Poll(kT0 + t).has_value()) << t;
  }
  EXPECT_EQ(job.dumps, 0);
}

TEST(HangRulesTest, CollectiveWithAnAbsentPeerIsAHangAfterTheTimeout) {
  QuietJob job(3);
  job.Place(4, {0, 2});
  HangMonitor monitor(job, Quick());
  EXPECT_FALSE(monitor.Poll(kT0).has_value());
  EXPECT_FALSE(monitor.Poll(kT0 + kTimeoutMs).has_value());
  auto d = monitor.Poll(kT0 + kTimeoutMs + 1);
  ASSERT_TRUE(d.has_value());
  EXPECT_THAT(d->trigger, HasSubstr("in collective #5, rank 1 has not entered it"));
}

TEST(HangRulesTest, EveryRankInTheCollectiveAndNothingMovingIsAHang) {
  QuietJob job(2);
  job.Place(4, {0, 1});
  HangMonitor monitor(job, Quick());
  EXPECT_FALSE(monitor.Poll(kT0).has_value());
  auto d = monitor.Poll(kT0 + kTimeoutMs + 1);
  ASSERT_TRUE(d.has_value());
  EXPECT_THAT(d->trigger, HasSubstr("no rank made progress since"));
}

TEST(HangRulesTest, DeclaredSectionHoldsOffTheHangUntilItsTimeout) {
  QuietJob job(2);
  job.Place(4, {0});
  job.ranks[1].section = "checkpoint";
  job.ranks[1].section_since_unix_ms = kT0;
  job.ranks[1].section_timeout_ms = 5 * kTimeoutMs;
  HangMonitor monitor(job, Quick());
  EXPECT_FALSE(monitor.Poll(kT0).has_value());
  EXPECT_FALSE(monitor.Poll(kT0 + 2 * kTimeoutMs).has_value());
  EXPECT_FALSE(monitor.Poll(kT0 + 5 * kTimeoutMs).has_value());
  EXPECT_TRUE(monitor.Poll(kT0 + 5 * kTimeoutMs + 1).has_value());
}

TEST(HangRulesTest, AStallMustOutlastStaleHeartbeatsToCount) {
  // Rank 1 leaves its section and enters #5; rank 0's heartbeat, a moment old, still shows it
  // waiting alone until its next write says #5 completed.
  QuietJob job(2);
  job.Place(4, {0});
  HangMonitor monitor(job, Confirming());
  EXPECT_FALSE(monitor.Poll(kT0).has_value());
  EXPECT_FALSE(monitor.Poll(kT0 + kTimeoutMs + 1).has_value());
  EXPECT_FALSE(monitor.Poll(kT0 + kTimeoutMs + 1000).has_value());
  job.Place(5, {});  // the next heartbeats: both completed #5
  EXPECT_FALSE(monitor.Poll(kT0 + kTimeoutMs + 2500).has_value());
  // A stall that holds is declared once the window has passed.
  job.Place(5, {0});
  EXPECT_FALSE(monitor.Poll(kT0 + 3 * kTimeoutMs).has_value());
  EXPECT_FALSE(monitor.Poll(kT0 + 3 * kTimeoutMs + 1999).has_value());
  auto d = monitor.Poll(kT0 + 3 * kTimeoutMs + 2000);
  ASSERT_TRUE(d.has_value());
  EXPECT_THAT(d->trigger, HasSubstr("in collective #6, rank 1 has not entered it"));
}

// Heartbeats written after the stall first held show where every rank is now: no need to wait
// out the whole confirmation window.
TEST(HangRulesTest, HeartbeatsSentSinceTheStallConfirmItAtOnce) {
  QuietJob job(3);
  job.Place(4, {0, 2});
  HangMonitor monitor(job, Confirming());
  EXPECT_FALSE(monitor.Poll(kT0).has_value());
  EXPECT_FALSE(monitor.Poll(kT0 + kTimeoutMs + 1).has_value());  // heartbeats from before it
  job.ranks[0].last_heartbeat_unix_ms = job.ranks[1].last_heartbeat_unix_ms =
      kT0 + kTimeoutMs + 150;
  EXPECT_FALSE(monitor.Poll(kT0 + kTimeoutMs + 200).has_value());  // rank 2's is still older
  job.ranks[2].last_heartbeat_unix_ms = kT0 + kTimeoutMs + 210;
  auto d = monitor.Poll(kT0 + kTimeoutMs + 250);
  ASSERT_TRUE(d.has_value());
  EXPECT_THAT(d->trigger, HasSubstr("in collective #5, rank 1 has not entered it"));
}

TEST(HangRulesTest, AHeartbeatSinceTheStallThatShowsThePeerInsideClearsIt) {
  QuietJob job(2);
  job.Place(4, {0});
  HangMonitor monitor(job, Confirming());
  EXPECT_FALSE(monitor.Poll(kT0).has_value());
  EXPECT_FALSE(monitor.Poll(kT0 + kTimeoutMs + 1).has_value());
  // Rank 1 left a section and entered #5 just after its last heartbeat; the next one says so.
  job.ranks[1].status.last_started_seq = 5;
  job.ranks[1].last_progress_unix_ms = kT0 + kTimeoutMs - 300;
  for (RankLiveState& r : job.ranks) r.last_heartbeat_unix_ms = kT0 + kTimeoutMs + 100;
  for (int64_t t = 250; t <= 5000; t += 250) {
    EXPECT_FALSE(monitor.Poll(kT0 + kTimeoutMs + t).has_value()) << t;
  }
}

// The Python agent reports when its rank last moved, the start of the call it is in included:
// the timeout runs from there, not from when the monitor first read the heartbeat.
TEST(HangRulesTest, TheTimeoutRunsFromTheProgressTheRankReports) {
  QuietJob job(2);
  job.Place(4, {0});
  for (RankLiveState& r : job.ranks) r.last_progress_unix_ms = kT0 - 900;
  HangMonitor monitor(job, Quick());
  EXPECT_FALSE(monitor.Poll(kT0).has_value());
  EXPECT_FALSE(monitor.Poll(kT0 + kTimeoutMs - 900).has_value());
  auto d = monitor.Poll(kT0 + kTimeoutMs - 899);
  ASSERT_TRUE(d.has_value());
  EXPECT_THAT(d->trigger, HasSubstr("no progress for 10 s in collective #5"));
}

TEST(HangRulesTest, OpaqueSilenceCountsOnlyWhenAskedFor) {
  QuietJob job(2);
  for (RankLiveState& r : job.ranks) r.linked = r.runs_agent = false;
  HangMonitor plain(job, Quick());
  EXPECT_FALSE(plain.Poll(kT0).has_value());
  EXPECT_FALSE(plain.Poll(kT0 + 10 * kTimeoutMs).has_value());
  HangMonitor::Options asked = Quick();
  asked.silence_is_hang = true;
  HangMonitor on_silence(job, asked);
  EXPECT_FALSE(on_silence.Poll(kT0).has_value());
  auto d = on_silence.Poll(kT0 + kTimeoutMs + 1);
  ASSERT_TRUE(d.has_value());
  EXPECT_THAT(d->trigger, HasSubstr("--hang-on-silence"));
}

TEST(AgentFilesTest, HeartbeatFileBecomesRankStatus) {
  const dlaunch::testing::TestDir test_dir("agent-files");
  const std::filesystem::path& dir = test_dir.path();
  EXPECT_FALSE(python::ReadAgentHeartbeat(dir.string()).has_value());
  std::ofstream(dir / "heartbeat.json")
      << R"({"schema":"dlaunch.heartbeat/1","rank":1,"pid":42,"unix_ms":5,"step":7,)"
         R"("phase":"backward","last_started_seq":9,"last_completed_seq":8,"current_op":"allreduce",)"
         R"("progress_unix_ms":4,"rss_bytes":100,"device_allocated_bytes":20,)"
         R"("device_reserved_bytes":800,"section":{"name":"checkpoint","timeout_s":900,)"
         R"("since_unix_ms":3}})";
  auto beat = python::ReadAgentHeartbeat(dir.string());
  ASSERT_TRUE(beat.has_value());
  EXPECT_EQ(beat->pid, 42);
  EXPECT_EQ(beat->status.step, 7);
  EXPECT_EQ(beat->status.phase, core::Phase::kBackward);
  EXPECT_EQ(beat->status.last_started_seq, 9);
  EXPECT_EQ(beat->status.current_op, "allreduce");
  EXPECT_EQ(beat->status.device_reserved_bytes, 800);
  EXPECT_EQ(beat->section, "checkpoint");
  EXPECT_EQ(beat->section_timeout_s, 900);
  python::ClearAgentFiles(dir.string());
  EXPECT_FALSE(python::ReadAgentHeartbeat(dir.string()).has_value());
  python::RequestAgentDump(dir.string(), "hang");
  EXPECT_TRUE(std::filesystem::exists(dir / "dump_request"));
}

// #30: the line the agent sends through its pipe when heartbeat.json cannot be written.
TEST(AgentFilesTest, PipedHeartbeatCarriesWhyTheFileCouldNotBeWritten) {
  auto beat = python::ParseAgentHeartbeat(
      R"({"schema":"dlaunch.heartbeat/1","rank":1,"pid":42,"unix_ms":5,"step":126,)"
      R"("phase":"communication","last_started_seq":9,"last_completed_seq":8,)"
      R"("write_error":"heartbeat.json: [Errno 28] No space left on device"})");
  ASSERT_TRUE(beat.has_value());
  EXPECT_EQ(beat->unix_ms, 5);
  EXPECT_EQ(beat->status.step, 126);
  EXPECT_EQ(beat->status.last_completed_seq, 8);
  EXPECT_EQ(beat->write_error, "heartbeat.json: [Errno 28] No space left on device");
  EXPECT_FALSE(python::ParseAgentHeartbeat("").has_value());
  EXPECT_FALSE(python::ParseAgentHeartbeat(R"({"schema":"dlaunch.heartbeat/1","ra)").has_value());
  EXPECT_FALSE(python::ParseAgentHeartbeat(R"({"schema":"dlaunch.flight/1"})").has_value());
}

}  // namespace
}  // namespace dlaunch::launcher
