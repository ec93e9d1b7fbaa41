// The live view from a fake job: what LiveStatus builds from rank states, the status text and
// its dlaunch.status/1 document, and the Prometheus exposition, without a process or a network.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "launcher/live/live_snapshot.h"
#include "launcher/live/live_status.h"
#include "launcher/live/metrics_text.h"
#include "launcher/rendezvous/coordinator.h"
#include "launcher/rendezvous/credentials.h"

namespace dlaunch::launcher {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kNow = 1764659702000;

LiveSnapshot FakeSnapshot(int world) {
  LiveSnapshot s;
  s.job.run_id = "run-1";
  s.job.run_dir = "/tmp/dlaunch-logs/run-1";
  s.job.state = "running";
  s.job.attempt = 1;
  s.job.restarts = 1;
  s.job.world_size = world;
  s.job.nodes = 2;
  s.job.start_unix_ms = kNow - 75000;
  s.job.unix_ms = kNow;
  for (int r = 0; r < world; ++r) {
    LiveRank x;
    x.rank = r;
    x.host = r < world / 2 ? "node-a" : "node-b";
    x.pid = 1000 + r;
    x.remote = r >= world / 2;
    x.state = "running";
    x.step = 120;
    x.step_age_s = 0.25;
    x.phase = "communication";
    x.collective_op = "allreduce";
    x.collective_seq = 240;
    x.collective_age_s = 0.1;
    x.collectives_completed = 240;
    x.heartbeat_age_s = 0.4;
    x.rss_bytes = int64_t{1} << 30;
    x.samples_per_s = 512;
    x.step_time_p50_s = 0.012;
    x.comm_share = 0.31;
    x.straggler_score = 1.0;
    s.ranks.push_back(x);
  }
  return s;
}

TEST(LiveStatusTextTest, OneLinePerRankWithEveryFigure) {
  LiveSnapshot s = FakeSnapshot(2);
  s.ranks[1].cuda_allocated_bytes = int64_t{2} << 30;
  s.ranks[1].cuda_reserved_bytes = int64_t{3} << 30;
  s.ranks[1].cuda_peak_bytes = int64_t{4} << 30;
  s.ranks[1].straggler = true;
  s.ranks[1].straggler_score = 1.41;
  rundir::StragglerVerdict v;
  v.rank = 1;
  v.text = "straggler: rank 1 (host node-b) 1.41x the median step time over the last 200 steps";
  s.job.stragglers.push_back(v);
  const std::string text = RenderStatusText(s);
  EXPECT_THAT(text, HasSubstr("job run-1: running, attempt 1, 1 restart, 2 ranks on 2 nodes, up "
                              "75 s"));
  EXPECT_THAT(text, HasSubstr("1 active straggler (1 so far)"));
  EXPECT_THAT(text, HasSubstr(v.text + " [active]"));
  EXPECT_THAT(text, HasSubstr("RANK"));
  EXPECT_THAT(text, HasSubstr("node-b"));
  EXPECT_THAT(text, HasSubstr("1001"));
  EXPECT_THAT(text, HasSubstr("running STRAGGLER"));
  EXPECT_THAT(text, HasSubstr("120 (250 ms)"));
  EXPECT_THAT(text, HasSubstr("allreduce #240 100 ms"));
  EXPECT_THAT(text, HasSubstr("1 GiB"));
  EXPECT_THAT(text, HasSubstr("cuda 2 GiB/3 GiB/4 GiB"));
  EXPECT_THAT(text, HasSubstr("31%"));
  EXPECT_THAT(text, HasSubstr("1.41"));
  // Rank lines: a header and two rows after the job lines.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2 + 1 + 1 + 2);
}

TEST(LiveStatusTextTest, ManyRanksAreGroupedWithOutliersOneByOne) {
  LiveSnapshot s = FakeSnapshot(64);
  s.ranks[5].straggler = true;
  s.ranks[9].step = 121;
  s.ranks[63].state = "exited";
  s.ranks[63].collective_op.clear();
  s.ranks[63].phase = "done";
  const std::string text = RenderStatusText(s);
  EXPECT_THAT(text, HasSubstr("ranks 0-4,6-62: running, step 120-121, communication, allreduce "
                              "#240, heartbeat 400 ms, score 1.00"));
  EXPECT_THAT(text, HasSubstr("rank 63: exited, step 120, done"));
  EXPECT_THAT(text, HasSubstr("running STRAGGLER"));
  EXPECT_LT(std::count(text.begin(), text.end(), '\n'), 10);
}

TEST(LiveStatusJsonTest, DocumentRoundTripsAndUnknownIsNull) {
  LiveSnapshot s = FakeSnapshot(2);
  s.ranks[0].cuda_allocated_bytes = 77;
  s.ranks[1].collective_op.clear();
  s.ranks[1].step_time_p50_s = -1;
  const nlohmann::json doc = StatusToJson(s);
  EXPECT_EQ(doc["schema"], "dlaunch.status/1");
  EXPECT_EQ(doc["job"]["state"], "running");
  EXPECT_EQ(doc["job"]["healthy"], true);
  EXPECT_DOUBLE_EQ(doc["job"]["uptime_s"].get<double>(), 75.0);
  ASSERT_EQ(doc["ranks"].size(), 2u);
  EXPECT_EQ(doc["ranks"][0]["collective"]["op"], "allreduce");
  EXPECT_TRUE(doc["ranks"][1]["collective"].is_null());
  EXPECT_TRUE(doc["ranks"][1]["step_time_p50_s"].is_null());
  EXPECT_TRUE(doc["ranks"][1]["cuda_allocated_bytes"].is_null());
  EXPECT_EQ(doc["ranks"][0]["cuda_allocated_bytes"], 77);
  LiveSnapshot back;
  std::string problem;
  ASSERT_TRUE(StatusFromJson(nlohmann::json::parse(doc.dump()), &back, &problem)) << problem;
  EXPECT_EQ(StatusToJson(back), doc);
  EXPECT_FALSE(StatusFromJson(nlohmann::json{{"schema", "dlaunch.summary/1"}}, &back, &problem));
}

TEST(LiveMetricsTest, ExpositionHasFamiliesOnceAndPerRankLabels) {
  LiveSnapshot s = FakeSnapshot(2);
  s.ranks[1].host = "we\"ird\\host";
  s.ranks[1].rss_bytes = -1;  // unknown: no sample rather than a made-up one
  const std::string text = RenderMetrics(s);
  EXPECT_THAT(text, HasSubstr("# TYPE dlaunch_job_restarts_total counter\n"
                              "dlaunch_job_restarts_total 1\n"));
  EXPECT_THAT(text, HasSubstr("dlaunch_job_state{state=\"running\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("dlaunch_job_state{state=\"hang\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("dlaunch_job_healthy 1\n"));
  EXPECT_THAT(text, HasSubstr("dlaunch_job_attempt 1\n"));
  EXPECT_THAT(text, HasSubstr("dlaunch_rank_step{rank=\"0\",host=\"node-a\"} 120\n"));
  EXPECT_THAT(text, HasSubstr("dlaunch_rank_step{rank=\"1\",host=\"we\\\"ird\\\\host\"} 120\n"));
  EXPECT_THAT(text, HasSubstr("dlaunch_rank_step_time_seconds{rank=\"0\",host=\"node-a\"} 0.012"));
  EXPECT_THAT(text, HasSubstr("dlaunch_rank_rss_bytes{rank=\"0\",host=\"node-a\"} 1073741824\n"));
  EXPECT_THAT(text, Not(HasSubstr("dlaunch_rank_rss_bytes{rank=\"1\"")));
  EXPECT_THAT(text, HasSubstr("dlaunch_rank_comm_share_ratio{rank=\"0\",host=\"node-a\"} 0.31"));
  EXPECT_THAT(text, HasSubstr("dlaunch_rank_collective_seq{rank=\"0\",host=\"node-a\"} 240\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE dlaunch_rank_collectives_completed_total counter\n"));
  EXPECT_THAT(text,
              HasSubstr("dlaunch_rank_heartbeat_age_seconds{rank=\"0\",host=\"node-a\"} 0.4"));
  EXPECT_THAT(text, HasSubstr("dlaunch_rank_straggler_score{rank=\"0\",host=\"node-a\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("dlaunch_rank_samples_per_second{rank=\"0\",host=\"node-a\"} 512\n"));
  // CUDA figures are unknown for every rank: no family at all.
  EXPECT_THAT(text, Not(HasSubstr("cuda")));
  // Each family's HELP and TYPE once, before its samples; counters only end in _total.
  std::map<std::string, int> types;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    std::istringstream w(line.substr(7));
    std::string name, type;
    w >> name >> type;
    ++types[name];
    const bool total = name.size() > 6 && name.substr(name.size() - 6) == "_total";
    EXPECT_EQ(type == "counter", total) << line;
    EXPECT_EQ(name.rfind("dlaunch_", 0), 0u) << line;
  }
  for (const auto& [name, n] : types) EXPECT_EQ(n, 1) << name;
  EXPECT_GE(types.size(), 15u);
}

TEST(LiveMetricsTest, HangIsUnhealthy) {
  LiveSnapshot s = FakeSnapshot(1);
  s.job.state = "hang";
  EXPECT_FALSE(s.job.healthy());
  EXPECT_THAT(RenderMetrics(s), HasSubstr("dlaunch_job_healthy 0\n"));
  EXPECT_THAT(RenderMetrics(s), HasSubstr("dlaunch_job_state{state=\"hang\"} 1\n"));
}

TEST(LiveStatusBuildTest, RankStatesStepAgesCommShareAndRemoteHosts) {
  std::vector<RankLiveState> ranks(3);
  for (int r = 0; r < 3; ++r) {
    ranks[r].rank = r;
    ranks[r].linked = r < 2;
    ranks[r].pid = r == 2 ? 0 : 500 + r;
    ranks[r].last_heartbeat_unix_ms = kNow - 300;
    ranks[r].status.step = 10;
    ranks[r].status.phase = core::Phase::kBackward;
    ranks[r].status.last_started_seq = 7;
    ranks[r].status.last_completed_seq = r == 0 ? 7 : 6;
    ranks[r].status.current_op = "allgather";
    ranks[r].status.steps_timed = 10;
    ranks[r].status.step_busy_ms_total = 100;
    ranks[r].status.rss_bytes = 4096;
  }
  ranks[2].remote = true;
  NodeView node;
  node.node_rank = 1;
  node.host = "node-b";
  node.status.emplace();
  auto* x = node.status->add_ranks();
  x->set_rank(2);
  x->set_pid(777);
  LiveJobFacts facts;
  facts.local_host = "node-a";
  facts.world_size = 3;
  facts.nodes = 2;
  facts.start_unix_ms = kNow - 1000;
  facts.scores.resize(3);
  facts.scores[1].step_ms_p50 = 15;
  facts.scores[1].relative = 1.5;
  std::map<int, LiveStatus::Track> tracks;
  LiveSnapshot s = LiveStatus::Build(ranks, {node}, facts, kNow, &tracks);
  ASSERT_EQ(s.ranks.size(), 3u);
  EXPECT_EQ(s.job.state, "running");
  EXPECT_EQ(s.ranks[0].host, "node-a");
  EXPECT_EQ(s.ranks[0].state, "running");
  EXPECT_EQ(s.ranks[0].phase, "backward");
  EXPECT_TRUE(s.ranks[0].collective_op.empty());  // seq 7 completed
  EXPECT_EQ(s.ranks[1].collective_op, "allgather");
  EXPECT_EQ(s.ranks[1].collective_seq, 7);
  EXPECT_DOUBLE_EQ(s.ranks[1].heartbeat_age_s, 0.3);
  EXPECT_DOUBLE_EQ(s.ranks[1].step_time_p50_s, 0.015);
  EXPECT_DOUBLE_EQ(s.ranks[1].straggler_score, 1.5);
  EXPECT_EQ(s.ranks[2].host, "node-b");
  EXPECT_EQ(s.ranks[2].pid, 777);
  EXPECT_EQ(s.ranks[2].state, "unknown");
  EXPECT_EQ(s.ranks[0].comm_share, -1);  // one heartbeat: no share yet
  // 10 more steps in 200 ms of heartbeats, 120 ms of them busy: 40% waiting.
  for (auto& r : ranks) {
    r.status.step = 20;
    r.status.steps_timed = 20;
    r.status.step_busy_ms_total = 220;
    r.last_heartbeat_unix_ms = kNow - 100;
  }
  ranks[0].exited = true;
  s = LiveStatus::Build(ranks, {node}, facts, kNow + 500, &tracks);
  EXPECT_NEAR(s.ranks[1].comm_share, 0.4, 1e-9);
  EXPECT_DOUBLE_EQ(s.ranks[1].step_age_s, 0);
  EXPECT_EQ(s.ranks[0].state, "exited");
  ranks[1].exited = ranks[1].failed = true;
  s = LiveStatus::Build(ranks, {node}, facts, kNow + 550, &tracks);
  EXPECT_EQ(s.ranks[1].state, "failed");
  EXPECT_EQ(s.job.state, "failed");
  EXPECT_EQ(s.job.reason, "rank 1 failed");
  EXPECT_FALSE(s.job.healthy());
  ranks[1].exited = ranks[1].failed = false;
  facts.hang = "HANG at collective #7";
  s = LiveStatus::Build(ranks, {node}, facts, kNow + 600, &tracks);
  EXPECT_EQ(s.job.state, "hang");
  EXPECT_FALSE(s.job.healthy());
  EXPECT_DOUBLE_EQ(s.ranks[1].step_age_s, 0.1);
}

TEST(LiveStatusTokenTest, AdmitsGetStatusOnlyAndTheJobTokenToo) {
  CoordinatorConfig c;
  c.token = "job-token";
  CoordinatorHandler handler(c);
  EXPECT_EQ(handler.StatusJson(), "");  // before the job is watched: nothing to answer
  handler.SetStatusSource("status-token", [] { return std::string("{\"schema\": 1}"); });
  EXPECT_TRUE(handler.AuthorizeStatus("status-token", "peer"));
  EXPECT_TRUE(handler.AuthorizeStatus("job-token", "peer"));
  EXPECT_FALSE(handler.AuthorizeStatus(RankToken("job-token", 0), "peer"));
  EXPECT_FALSE(handler.AuthorizeStatus("", "peer"));
  EXPECT_FALSE(handler.AuthorizeStatus("status-token-x", "peer"));
  EXPECT_EQ(handler.StatusJson(), "{\"schema\": 1}");
  // The status token is nobody for every other call.
  EXPECT_EQ(handler.CallerOf("status-token").role, CallerRole::kNone);
  EXPECT_FALSE(handler.Authorize("status-token", "peer", "StoreSet"));
  EXPECT_FALSE(handler.Authorize("status-token", "peer", "RegisterNode", CallerRole::kNode));
}

}  // namespace
}  // namespace dlaunch::launcher
