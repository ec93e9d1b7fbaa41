// HangMonitor against a fake JobView with an injected clock; stacks come from a real stopped child.
#include "launcher/diagnose/hang_monitor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/common/paused_child.h"
#include "tests/diagnose/test_util.h"

namespace dlaunch::launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kT0 = 1764450000000;

// Ranks whose state the test sets; linked ranks that are not `silent` answer DUMP at once by
// writing flight.json from their status, the way libdlaunch does.
class FakeJob : public JobView {
 public:
  FakeJob(std::string run_dir, int world, bool linked) : run_dir_(std::move(run_dir)) {
    for (int r = 0; r < world; ++r) {
      RankLiveState s;
      s.rank = r;
      s.linked = linked;
      s.status.phase = core::Phase::kCommunication;
      ranks.push_back(s);
      std::filesystem::create_directories(run_dir_ + "/rank" + std::to_string(r));
    }
  }
  std::vector<RankLiveState> Ranks() override { return ranks; }
  void RequestDump(const std::string& reason) override {
    ++dump_requests;
    last_reason = reason;
    for (const RankLiveState& r : ranks) {
      if (!r.linked || silent.count(r.rank)) continue;
      nlohmann::json entries = nlohmann::json::array();
      for (int64_t s = 0; s <= r.status.last_started_seq; ++s) {
        bool done = s <= r.status.last_completed_seq;
        entries.push_back({{"seq", s},
                           {"op", "allreduce"},
                           {"dtype", "float"},
                           {"count", 256},
                           {"bytes", 1024},
                           {"peer", -1},
                           {"root", -1},
                           {"state", done ? "completed" : "started"},
                           {"scheduled_unix_ns", (kT0 + s) * 1000000},
                           {"started_unix_ns", (kT0 + s) * 1000000},
                           {"completed_unix_ns", done ? (kT0 + s + 1) * 1000000 : 0},
                           {"duration_us", done ? 1000 : 0},
                           {"error", ""}});
      }
      nlohmann::json flight = {{"rank", r.rank},        {"world_size", ranks.size()},
                               {"backend", "gloo"},     {"reason", "request"},
                               {"dumped_unix_ms", kT0}, {"capacity", 2000},
                               {"entries", entries}};
      std::ofstream(run_dir_ + "/rank" + std::to_string(r.rank) + "/flight.json") << flight.dump();
    }
  }
  std::string run_dir() const override { return run_dir_; }
  std::optional<std::vector<rundir::StragglerVerdict>> Stragglers() override { return stragglers; }

  void Heartbeat(int64_t now) {
    for (RankLiveState& r : ranks) {
      if (!silent.count(r.rank)) r.last_heartbeat_unix_ms = now;
    }
  }

  std::vector<RankLiveState> ranks;
  std::set<int> silent;
  int dump_requests = 0;
  std::string last_reason;
  std::optional<std::vector<rundir::StragglerVerdict>> stragglers;  // nullopt: no detector

 private:
  std::string run_dir_;
};

HangMonitor::Options FastOptions() {
  HangMonitor::Options o;
  o.hang_timeout = std::chrono::seconds(10);
  o.heartbeat_timeout = std::chrono::seconds(5);
  o.dump_wait = std::chrono::milliseconds(500);
  o.stack_timeout = std::chrono::seconds(20);
  return o;
}

// A stand-in for a hung rank.
using Child = ::dlaunch::testing::PausedChild;

TEST(HangMonitorTest, ProgressingJobNeverFires) {
  const testing::TestDir tmp("diagnose");
  FakeJob job(tmp.string(), 4, /*linked=*/true);
  HangMonitor monitor(job, FastOptions());
  for (int64_t t = 0; t < 60000; t += 250) {
    for (RankLiveState& r : job.ranks) r.status.last_completed_seq = t / 1000;
    job.Heartbeat(kT0 + t);
    EXPECT_FALSE(monitor.Poll(kT0 + t).has_value()) << "t=" << t;
  }
  EXPECT_EQ(job.dump_requests, 0);
}

TEST(HangMonitorTest, StalledJobIsDiagnosedAfterHangTimeout) {
  const testing::TestDir tmp("diagnose");
  FakeJob job(tmp.string(), 4, true);
  Child stopped;
  ASSERT_EQ(::kill(stopped.pid(), SIGSTOP), 0);
  for (RankLiveState& r : job.ranks) {
    r.pid = r.rank == 2 ? stopped.pid() : 0;
    r.status.last_completed_seq = 4;
    r.status.last_started_seq = r.rank == 2 ? 4 : 5;
    r.status.step = 3;
  }
  job.ranks[2].status.phase = core::Phase::kData;
  job.silent = {2};
  HangMonitor monitor(job, FastOptions());
  // Rank 2 keeps its heartbeat going (it is slow, not dead): only the no-progress rule applies.
  for (RankLiveState& r : job.ranks) r.last_heartbeat_unix_ms = kT0 + 10000;
  EXPECT_FALSE(monitor.Poll(kT0).has_value());
  EXPECT_FALSE(monitor.Poll(kT0 + 10000).has_value());
  std::optional<Diagnosis> d = monitor.Poll(kT0 + 10001);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(job.dump_requests, 1);
  EXPECT_THAT(job.last_reason, HasSubstr("no progress for 10 s"));
  EXPECT_EQ(d->kind, DiagnosisKind::kHang);
  EXPECT_THAT(d->culprit_ranks, ElementsAre(2));
  EXPECT_EQ(d->seq, 5);
  EXPECT_THAT(d->missing_ranks, ElementsAre(2));
  EXPECT_THAT(d->headline,
              HasSubstr("rank 2 never entered (last completed #4, phase data for 10 s"));
  EXPECT_THAT(d->headline, HasSubstr("did not answer the dump request"));
  EXPECT_EQ(d->ranks[2].process_state, "T (stopped)");

  // Stacks only for the rank that did not answer; the files are in the run directory.
  std::ifstream stacks(tmp.string() + "/rank2/stacks.txt");
  ASSERT_TRUE(stacks.good());
  std::stringstream text;
  text << stacks.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("pid " + std::to_string(stopped.pid())));
  EXPECT_FALSE(std::filesystem::exists(tmp.string() + "/rank0/stacks.txt"));
  EXPECT_TRUE(std::filesystem::exists(tmp.string() + "/diagnosis.txt"));
  EXPECT_TRUE(std::filesystem::exists(tmp.string() + "/diagnosis.json"));
  EXPECT_TRUE(std::filesystem::exists(tmp.string() + "/trace.json"));

  // One diagnosis per incident, until the launcher restarts the ranks.
  for (RankLiveState& r : job.ranks) r.last_heartbeat_unix_ms = kT0 + 30001;
  EXPECT_FALSE(monitor.Poll(kT0 + 20000).has_value());
  monitor.Reset();
  EXPECT_FALSE(monitor.Poll(kT0 + 20000).has_value());
  EXPECT_FALSE(monitor.Poll(kT0 + 30000).has_value());
  EXPECT_TRUE(monitor.Poll(kT0 + 30001).has_value());
  EXPECT_EQ(job.dump_requests, 2);
}

TEST(HangMonitorTest, ANativeRanksStallCountsFromWhenItEnteredTheCollective) {
  // The launcher saw ranks 0, 1 and 3 enter #5 at kT0, a heartbeat after they did: their
  // heartbeats say they entered it 1.5 s before that, which counts (within stall_confirm).
  const testing::TestDir tmp("diagnose");
  FakeJob job(tmp.string(), 4, true);
  for (RankLiveState& r : job.ranks) {
    r.status.last_completed_seq = 4;
    r.status.last_started_seq = r.rank == 2 ? 4 : 5;
    r.status.arrivals_first_seq = 0;
    r.status.arrival_unix_us = {(kT0 - 1500) * 1000};
    r.last_progress_unix_ms = kT0;
  }
  job.ranks[2].status.phase = core::Phase::kData;
  HangMonitor::Options o = FastOptions();
  o.stall_confirm = std::chrono::seconds(2);
  HangMonitor monitor(job, o);
  job.Heartbeat(kT0 + 8400);
  EXPECT_FALSE(monitor.Poll(kT0 + 8400).has_value());
  job.Heartbeat(kT0 + 8600);
  std::optional<Diagnosis> d = monitor.Poll(kT0 + 8600);
  ASSERT_TRUE(d.has_value());
  EXPECT_THAT(job.last_reason,
              HasSubstr("no progress for 10 s in collective #5, rank 2 has not entered it"));
  // An entry older than stall_confirm before the launcher saw it counts only as that much.
  FakeJob old(tmp.string(), 4, true);
  for (RankLiveState& r : old.ranks) {
    r.status = job.ranks[r.rank].status;
    r.status.arrival_unix_us = {(kT0 - 60000) * 1000};
    r.last_progress_unix_ms = kT0;
  }
  HangMonitor bounded(old, o);
  old.Heartbeat(kT0 + 7900);
  EXPECT_FALSE(bounded.Poll(kT0 + 7900).has_value());
  old.Heartbeat(kT0 + 8100);
  EXPECT_TRUE(bounded.Poll(kT0 + 8100).has_value());
}

TEST(HangMonitorTest, QuietHeartbeatFiresBeforeHangTimeout) {
  const testing::TestDir tmp("diagnose");
  FakeJob job(tmp.string(), 4, true);
  for (RankLiveState& r : job.ranks) {
    r.status.last_completed_seq = 7;
    r.status.last_started_seq = r.rank == 1 ? 7 : 8;
  }
  HangMonitor::Options options = FastOptions();
  HangMonitor monitor(job, options);
  job.Heartbeat(kT0);
  EXPECT_FALSE(monitor.Poll(kT0).has_value());
  job.silent = {1};
  job.Heartbeat(kT0 + 5000);
  EXPECT_FALSE(monitor.Poll(kT0 + 5000).has_value());
  job.Heartbeat(kT0 + 5001);
  std::optional<Diagnosis> d = monitor.Poll(kT0 + 5001);
  ASSERT_TRUE(d.has_value());
  EXPECT_THAT(d->trigger, HasSubstr("rank 1: no heartbeat for 5.0 s"));
  EXPECT_THAT(d->culprit_ranks, ElementsAre(1));
  EXPECT_EQ(d->seq, 8);
}

TEST(HangMonitorTest, LiveDiagnosisCarriesTheDetectorsStragglers) {
  const testing::TestDir tmp("diagnose");
  FakeJob job(tmp.string(), 2, true);
  for (RankLiveState& r : job.ranks) {
    r.status.last_completed_seq = 7;
    r.status.last_started_seq = r.rank == 1 ? 7 : 8;
  }
  rundir::StragglerVerdict v;
  v.rank = 1;
  v.relative = 10.69;
  v.start_step = 27;
  v.text = "straggler: rank 1 (host h) 10.69x the median step time over the last 21 steps";
  job.stragglers = std::vector<rundir::StragglerVerdict>{v};
  HangMonitor monitor(job, FastOptions());
  job.Heartbeat(kT0);
  EXPECT_FALSE(monitor.Poll(kT0).has_value());
  job.silent = {1};
  job.Heartbeat(kT0 + 5001);
  std::optional<Diagnosis> d = monitor.Poll(kT0 + 5001);
  ASSERT_TRUE(d.has_value());
  ASSERT_EQ(d->stragglers.size(), 1u);
  EXPECT_EQ(d->stragglers[0].rank, 1);
  std::ifstream json(tmp.string() + "/diagnosis.json");
  const nlohmann::json written = nlohmann::json::parse(json);
  ASSERT_EQ(written["stragglers"].size(), 1u) << written.dump(1);
  EXPECT_EQ(written["stragglers"][0]["start_step"], 27);
  std::stringstream text;
  text << std::ifstream(tmp.string() + "/diagnosis.txt").rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("    " + v.text + " (from step 27, still on)\n"));
}

TEST(HangMonitorTest, ExitedRanksDoNotStall) {
  const testing::TestDir tmp("diagnose");
  FakeJob job(tmp.string(), 2, true);
  for (RankLiveState& r : job.ranks) r.exited = true;
  HangMonitor monitor(job, FastOptions());
  EXPECT_FALSE(monitor.Poll(kT0).has_value());
  EXPECT_FALSE(monitor.Poll(kT0 + 3600000).has_value());
}

TEST(HangMonitorTest, UnlinkedProgramWithoutOutputIsAHang) {
  // A program with neither libdlaunch nor the Python agent: rank 2 never prints, the others printed
  // until 9.9 s.
  const testing::TestDir tmp("diagnose");
  FakeJob job(tmp.string(), 4, /*linked=*/false);
  Child child;
  for (RankLiveState& r : job.ranks) r.pid = r.rank == 2 ? child.pid() : 0;
  HangMonitor::Options options = FastOptions();
  options.silence_is_hang = true;  // --hang-on-silence: silence is the only signal of such ranks
  HangMonitor monitor(job, options);
  EXPECT_FALSE(monitor.Poll(kT0).has_value());
  for (RankLiveState& r : job.ranks) {
    if (r.rank != 2) r.last_output_unix_ms = kT0 + 9900;
  }
  EXPECT_FALSE(monitor.Poll(kT0 + 10000).has_value());
  std::optional<Diagnosis> d = monitor.Poll(kT0 + 10001);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(job.dump_requests, 1);
  EXPECT_THAT(d->trigger, HasSubstr("rank 2: no output and no exit for 10 s"));
  EXPECT_EQ(d->kind, DiagnosisKind::kHang);
  EXPECT_THAT(d->culprit_ranks, ElementsAre(2));
  EXPECT_THAT(d->headline, HasSubstr("not linked with libdlaunch"));
  EXPECT_TRUE(std::filesystem::exists(tmp.string() + "/rank2/stacks.txt"));
}

}  // namespace
}  // namespace dlaunch::launcher
