// What a job-token holder may ask of the coordinator (#11's control-plane findings): a fake node
// notice in a single-node job, heartbeats and events for ranks outside the world, file pushes
// that would make a 1 TiB sparse file or leave the rank folder, store writes past a rank's quota,
// a node registration that would learn the job's id without the token.
#include "launcher/rendezvous/request_checks.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "core/error.h"
#include "launcher/rendezvous/coordinator.h"
#include "launcher/rendezvous/credentials.h"
#include "launcher/rendezvous/push_quota.h"
#include "launcher/rendezvous/refusal_log.h"
#include "launcher/rendezvous/store_quota.h"
#include "tests/common/test_dir.h"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;

class CountingListener : public CoordinatorListener {
 public:
  void OnRankEvent(const v1::Event&) override { ++events; }
  void OnRendezvousTimeout(const std::string&) override {}
  void OnNodeFault(const NodeFault&) override { ++faults; }
  int events = 0, faults = 0;
};

class RequestChecksTest : public ::testing::Test {
 protected:
  CoordinatorConfig Config(int nnodes) const {
    CoordinatorConfig c;
    c.nnodes = nnodes;
    c.nproc_per_node = 2;
    c.world_size = 2 * nnodes;
    c.token = "t";
    c.run_dir = run_dir_.string();
    c.rdzv_timeout = std::chrono::milliseconds(2000);
    return c;
  }

  static v1::FileChunk Chunk(int rank, const std::string& name, int64_t offset,
                             const std::string& data) {
    v1::FileChunk c;
    c.set_rank(rank);
    c.set_name(name);
    c.set_offset(offset);
    c.set_data(data);
    return c;
  }

  // Node 1's first join.
  static v1::NodeRequest Join() {
    v1::NodeRequest join;
    join.set_node_rank(-1);
    join.set_host("node1");
    join.set_nproc(2);
    return join;
  }

  // Node 0 and node 1 form the first round of `h`; node 1's answer.
  static v1::NodeResponse FormRound(CoordinatorHandler& h) {
    auto node0 = std::async(std::launch::async, [&] { return h.JoinRound("node0", "{}", 0, ""); });
    v1::NodeResponse joined = h.RegisterNode(Join());
    EXPECT_EQ(node0.get().nnodes, 2);
    EXPECT_EQ(joined.node_rank(), 1);
    return joined;
  }

  static void ExpectRefused(const std::function<void()>& f) {
    try {
      f();
      ADD_FAILURE() << "not refused";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    }
  }

  const dlaunch::testing::TestDir test_dir_{"checks"};
  const fs::path run_dir_ = test_dir_.path();
};

TEST_F(RequestChecksTest, ASingleNodeJobTakesNoNodeNoticesAndNoFilePushes) {
  CoordinatorHandler h(Config(1));
  const int member = 1;
  CountingListener listener;
  h.SetListener(&listener);
  v1::NodeStatus fake;
  fake.set_node_rank(7);
  fake.set_done(true);
  fake.set_exit_code(1);
  fake.set_message("node 7 failed");
  h.OnNodeStatus(fake);
  h.OnNodeStreamOpened(7, [](const v1::Command&) { return true; });
  h.OnNodeStreamClosed(7);
  h.CheckNodes();
  EXPECT_EQ(listener.faults, 0);
  EXPECT_TRUE(h.Nodes().empty());
  ExpectRefused([&] { h.WriteFileChunk(member, Chunk(0, "stdout.log", 0, "x")); });
  EXPECT_FALSE(fs::exists(run_dir_ / "rank0" / "stdout.log"));
  h.SetListener(nullptr);
}

TEST_F(RequestChecksTest, RanksOutsideTheWorldAreIgnoredOrRefused) {
  CoordinatorHandler h(Config(1));
  CountingListener listener;
  h.SetListener(&listener);
  for (int rank : {999, -5, 2}) {
    v1::RankStatus s;
    s.set_rank(rank);
    h.OnStreamOpened(rank, [](const v1::Command&) { return true; });
    h.OnHeartbeat(s);
    h.OnStreamClosed(rank);
    v1::Event e;
    e.set_rank(rank);
    ExpectRefused([&] { h.OnEvent(e); });
  }
  EXPECT_TRUE(h.Snapshot().empty());
  EXPECT_EQ(h.Broadcast(v1::Command()), 0);
  EXPECT_EQ(listener.events, 0);
  v1::Event ok;
  ok.set_rank(1);
  h.OnEvent(ok);
  EXPECT_EQ(listener.events, 1);
  h.SetListener(nullptr);
}

TEST_F(RequestChecksTest, PushesComeOnlyFromARegisteredAgentNodeForItsRanksWithinBounds) {
  CoordinatorHandler h(Config(2));
  CountingListener listener;
  h.SetListener(&listener);
  int member = 1;  // the id node 1 will get
  // Before node 1 joined nobody may push or speak for it.
  ExpectRefused([&] { h.WriteFileChunk(member, Chunk(2, "stdout.log", 0, "early")); });
  v1::NodeStatus early;
  early.set_node_rank(1);
  early.set_done(true);
  early.set_exit_code(1);
  h.OnNodeStatus(early);
  EXPECT_EQ(listener.faults, 0);

  // Node 0 and node 1 join the first round; it closes once both are in.
  const v1::NodeResponse joined = FormRound(h);
  ASSERT_EQ(joined.node_rank(), 1);
  member = joined.member_id();
  ExpectRefused([&] { h.WriteFileChunk(0, Chunk(2, "stdout.log", 0, "node 0 is no agent")); });
  h.WriteFileChunk(member, Chunk(2, "stdout.log", 0, "hello "));
  h.WriteFileChunk(member, Chunk(2, "stdout.log", 6, "world\n"));
  std::ifstream in(run_dir_ / "rank2" / "stdout.log");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "hello world\n");
  struct stat st {};
  ASSERT_EQ(::stat((run_dir_ / "rank2" / "stdout.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077, 0u) << std::oct << st.st_mode;

  ExpectRefused([&] { h.WriteFileChunk(member, Chunk(0, "stdout.log", 0, "node 0's own rank")); });
  ExpectRefused([&] { h.WriteFileChunk(member, Chunk(2, "stdout.log", int64_t{1} << 40, "x")); });
  ExpectRefused([&] { h.WriteFileChunk(member, Chunk(2, "stdout.log", 1000, "hole")); });
  ExpectRefused([&] { h.WriteFileChunk(member, Chunk(2, "stdout.log", -1, "x")); });
  ExpectRefused([&] { h.WriteFileChunk(member, Chunk(2, "../summary.json", 0, "x")); });
  ExpectRefused([&] { h.WriteFileChunk(member, Chunk(2, "..", 0, "x")); });
  ExpectRefused([&] { h.WriteFileChunk(member, Chunk(5, "stdout.log", 0, "x")); });
  EXPECT_EQ(fs::file_size(run_dir_ / "rank2" / "stdout.log"), 12u);

  // A symbolic link planted in the rank folder is not followed out of it.
  fs::create_directories(run_dir_ / "rank3");
  fs::create_symlink(run_dir_ / "outside.txt", run_dir_ / "rank3" / "events.jsonl");
  EXPECT_THROW(h.WriteFileChunk(member, Chunk(3, "events.jsonl", 0, "x")), Error);
  EXPECT_FALSE(fs::exists(run_dir_ / "outside.txt"));

  // The registered node's own notice counts.
  v1::NodeStatus failed;
  failed.set_member_id(joined.member_id());
  failed.set_attempt(joined.attempt());
  failed.set_node_rank(1);
  failed.set_done(true);
  failed.set_exit_code(1);
  failed.set_message("rank 3 failed");
  h.OnNodeStatus(failed);
  EXPECT_EQ(listener.faults, 1);
  h.SetListener(nullptr);
}

// #30: `NodeStream{member_id: 0, done: true}` aborted node 0 with free(): invalid size.
TEST_F(RequestChecksTest, NoStatusSpeaksForNodeZero) {
  CoordinatorHandler h(Config(2));
  CountingListener listener;
  h.SetListener(&listener);
  FormRound(h);
  for (int node_rank : {0, 1, -1, 1 << 30}) {
    v1::NodeStatus forged;
    forged.set_member_id(0);
    forged.set_node_rank(node_rank);
    forged.set_done(true);
    forged.set_exit_code(1);
    h.OnNodeStatus(forged);
  }
  h.OnNodeStreamOpened(0, [](const v1::Command&) { return true; });
  h.OnNodeStreamClosed(0);
  EXPECT_EQ(listener.faults, 0);
  EXPECT_EQ(h.BroadcastToNodes(v1::Command()), 0);
  h.SetListener(nullptr);
}

// The job token admits everything, a rank token only the rank calls of its own rank; a node's
// later join needs the credential its first join got.
TEST_F(RequestChecksTest, RanksGetTheirOwnTokenAndNodesTheirOwnCredential) {
  CoordinatorHandler h(Config(2));
  EXPECT_EQ(h.CallerOf("t").role, CallerRole::kNode);
  EXPECT_EQ(h.CallerOf(RankToken("t", 1)).role, CallerRole::kRank);
  EXPECT_EQ(h.CallerOf(RankToken("t", 1)).rank, 1);
  EXPECT_EQ(h.CallerOf("").role, CallerRole::kNone);
  EXPECT_EQ(h.CallerOf(RankToken(RankToken("t", 0), 0)).role, CallerRole::kNone);
  EXPECT_EQ(h.CallerOf(RankToken("u", 0)).role, CallerRole::kNone);
  EXPECT_TRUE(h.Authorize(RankToken("t", 0), "test", "Register"));
  EXPECT_FALSE(h.Authorize(RankToken("t", 0), "test", "RegisterNode", CallerRole::kNode));
  EXPECT_TRUE(h.Authorize("t", "test", "RegisterNode", CallerRole::kNode));
  EXPECT_NE(RankToken("t", 0), RankToken("u", 0));
  EXPECT_NE(RankToken("t", 0), RankToken("t", 1));
  // A rank speaks for itself only; the job token for any rank.
  EXPECT_TRUE(h.AuthorizeRank(RankToken("t", 1), "test", "Heartbeat", 1));
  EXPECT_FALSE(h.AuthorizeRank(RankToken("t", 1), "test", "Heartbeat", 0));
  EXPECT_TRUE(h.AuthorizeRank("t", "test", "ReportEvent", 0));
  EXPECT_FALSE(h.AuthorizeRank("", "test", "ReportEvent", 0));
  // Another rank's prefix on this rank's MAC, and tokens that are not "R.HEX".
  const std::string mine = RankToken("t", 1);
  EXPECT_EQ(h.CallerOf("0" + mine.substr(1)).role, CallerRole::kNone);
  for (const std::string& bad : {std::string("."), std::string("-1.") + mine.substr(2),
                                 std::string("99999999999.x"), mine.substr(2), mine + "0"}) {
    EXPECT_EQ(h.CallerOf(bad).role, CallerRole::kNone) << bad;
  }

  const v1::NodeResponse first = FormRound(h);
  ASSERT_EQ(first.node_credential().size(), 32u);
  EXPECT_EQ(h.AuthorizeNode("t", first.node_credential(), "test", "NodeStream"), first.member_id());
  EXPECT_FALSE(h.AuthorizeNode(RankToken("t", 0), first.node_credential(), "test", "NodeStream"));
  EXPECT_FALSE(h.AuthorizeNode("t", "", "test", "NodeStream"));
  EXPECT_FALSE(h.AuthorizeNode("t", std::string(32, '0'), "test", "NodeStream"));

  v1::NodeRequest join = Join();
  join.set_member_id(first.member_id());
  for (const std::string& credential : {std::string(), std::string(32, '0')}) {
    try {
      h.RegisterNode(join, credential);
      ADD_FAILURE() << "a rejoin without the credential was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnauthenticated) << e.what();
    }
  }
  EXPECT_EQ(h.RegisterNode(join, first.node_credential()).node_rank(), 1);
}

// A rank's token admits the store calls, and the store lives in node 0's launcher: each rank's
// writes are bounded (one rank once grew node 0 by 200 MiB), the launchers' are not.
TEST_F(RequestChecksTest, ARanksStoreWritesStayWithinItsQuotaAndTheLaunchersAreNotBounded) {
  CoordinatorConfig c = Config(1);
  c.store_limits = StoreLimits{24, 60, 3};
  CoordinatorHandler h(c);
  const Caller one = h.CallerOf(RankToken("t", 1));
  const Caller zero = h.CallerOf(RankToken("t", 0));
  const Caller launcher = h.CallerOf("t");
  const std::string value24(24, 'v');
  EXPECT_EQ(h.StoreSet(one, "a", value24), "");  // 25 bytes of 60
  EXPECT_NE(h.StoreSet(one, "b", value24 + "v").find("at most 24 B"), std::string::npos);
  EXPECT_FALSE(h.store().Check("b"));
  EXPECT_EQ(h.StoreSet(one, "a", value24), "");         // written again: still 25 bytes
  EXPECT_EQ(h.StoreSet(one, "bbbbbbbb", value24), "");  // 57
  EXPECT_NE(h.StoreSet(one, "c", "123").find("the 60 B a rank may store"), std::string::npos);
  EXPECT_FALSE(h.store().Check("c"));
  int64_t value = 0;
  EXPECT_NE(h.StoreAdd(one, "n", 1, &value).find("60 B"), std::string::npos);
  EXPECT_FALSE(h.store().Check("n"));
  // Another rank's quota is its own; its write of rank 1's key counts for it, not for rank 1.
  EXPECT_EQ(h.StoreSet(zero, "bbbbbbbb", "1"), "");
  EXPECT_EQ(h.StoreAdd(one, "n", 5, &value), "");  // 25 and a counter's widest: 46
  EXPECT_EQ(value, 5);
  EXPECT_EQ(h.StoreSet(one, "d", ""), "");
  EXPECT_NE(h.StoreSet(one, "e", "").find("the 3 store keys"), std::string::npos);
  EXPECT_EQ(h.store().Get("bbbbbbbb", std::chrono::milliseconds(0)), "1");
  // The launchers (the job token, the coordinator's own store()) are not bounded.
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(h.StoreSet(launcher, "l" + std::to_string(i), value24 + value24), "");
  EXPECT_EQ(h.StoreAdd(launcher, "n", 1, &value), "");  // rank 1's counter: now the launcher's
  EXPECT_EQ(h.StoreSet(one, "e", ""), "");
  h.store().Set("big", std::string(100, 'x'));
  EXPECT_THROW(h.StoreSet(Caller{}, "x", ""), Error);
  // A new attempt starts with an empty store and quota.
  h.Reset();
  EXPECT_EQ(h.StoreSet(one, "f", value24), "");
  EXPECT_EQ(h.StoreSet(one, "g", value24), "");
}

// RegisterNode checks the token first: without the job token, a caller hears the same whatever
// job id it names, and never this job's id.
TEST_F(RequestChecksTest, OnlyTheJobTokenHearsWhichJobANodeReached) {
  CoordinatorConfig c = Config(2);
  c.job_id = "run id 'ours'";
  CoordinatorHandler h(c);
  v1::NodeRequest req = Join();
  for (const std::string& job_id : {std::string("run id 'theirs'"), c.job_id, std::string()}) {
    req.set_job_id(job_id);
    for (const std::string& token : {std::string(), RankToken("t", 0), std::string("u")})
      EXPECT_EQ(h.OtherJob(token, req), "") << job_id << " with token '" << token << "'";
  }
  req.set_job_id("run id 'theirs'");
  EXPECT_NE(h.OtherJob("t", req).find("the coordinator of run id 'ours'"), std::string::npos);
  req.set_job_id(c.job_id);
  EXPECT_EQ(h.OtherJob("t", req), "");
}

TEST(StoreQuotaTest, BoundsAValueAndTheKeysAndBytesOfEachRank) {
  StoreQuota q(StoreLimits{24, 60, 3});
  auto set = [&](int rank, const std::string& key, int64_t bytes) {
    std::string refused = q.Check(rank, key, bytes);
    if (refused.empty()) q.Record(rank, key, bytes);
    return refused;
  };
  EXPECT_NE(set(1, "a", 25).find("at most 24 B"), std::string::npos);
  EXPECT_EQ(set(1, "a", 24), "");  // 25 bytes with its key
  EXPECT_EQ(set(1, "a", 24), "");  // written again: counts once
  EXPECT_EQ(q.bytes(1), 25);
  EXPECT_EQ(q.keys(1), 1);
  EXPECT_EQ(set(1, "b", 24), "");                                               // 50
  EXPECT_NE(set(1, "c", 10).find("60 B a rank may store"), std::string::npos);  // 61
  EXPECT_EQ(set(1, "c", 9), "");                                                // exactly 60
  EXPECT_NE(set(1, "d", 0).find("3 store keys"), std::string::npos);
  EXPECT_EQ(set(1, "c", 0), "");  // a smaller value frees bytes
  EXPECT_EQ(q.bytes(1), 51);
  // Rank 2 writes rank 1's key: it counts for rank 2 now.
  EXPECT_EQ(set(2, "a", 1), "");
  EXPECT_EQ(q.bytes(1), 26);
  EXPECT_EQ(q.keys(1), 2);
  EXPECT_EQ(q.bytes(2), 2);
  EXPECT_EQ(set(StoreQuota::kLauncher, "b", 1 << 20), "");  // a launcher: no bound
  EXPECT_EQ(q.keys(1), 1);
  EXPECT_EQ(set(StoreQuota::kLauncher, "huge", int64_t{1} << 40), "");
  q.Clear();
  EXPECT_EQ(q.bytes(1), 0);
  EXPECT_EQ(q.bytes(StoreQuota::kLauncher), 0);
}

TEST(PushQuotaTest, BoundsTheFilesOfARankAndTheBytesOfANode) {
  PushQuota q(PushLimits{3, 100});
  auto chunk = [](int rank, const std::string& name, int64_t offset, size_t size) {
    v1::FileChunk c;
    c.set_rank(rank);
    c.set_name(name);
    c.set_offset(offset);
    c.set_data(std::string(size, 'x'));
    return c;
  };
  EXPECT_EQ(q.Admit(1, chunk(2, "a", 0, 10)), "");
  EXPECT_EQ(q.Admit(1, chunk(2, "b", 0, 10)), "");
  EXPECT_EQ(q.Admit(1, chunk(2, "c", 0, 10)), "");
  EXPECT_NE(q.Admit(1, chunk(2, "d", 0, 1)).find("3 files"), std::string::npos);
  EXPECT_EQ(q.Admit(1, chunk(3, "d", 0, 10)), "");   // another rank's folder
  EXPECT_EQ(q.Admit(1, chunk(2, "a", 10, 10)), "");  // a file that grows: 50 bytes in all
  EXPECT_EQ(q.Admit(1, chunk(2, "a", 0, 20)), "");   // sent again whole: nothing more
  EXPECT_NE(q.Admit(1, chunk(2, "b", 10, 51)).find("100 B"), std::string::npos);
  EXPECT_EQ(q.Admit(1, chunk(2, "b", 10, 50)), "");  // exactly 100
  EXPECT_EQ(q.Admit(2, chunk(4, "a", 0, 100)), "");  // another node
  q.Clear();
  EXPECT_EQ(q.Admit(1, chunk(2, "d", 0, 100)), "");
}

TEST(RefusalLogTest, PrintsTheFirstRefusalsOfAWindowAndCountsTheRest) {
  std::ostringstream out;
  RefusalLog log(&out, std::chrono::milliseconds(10000), 2);
  for (int i = 0; i < 250; ++i) log.Refused("refused Register from p: wrong job token", 1000 + i);
  auto lines = [&] {
    std::string text = out.str();
    return std::count(text.begin(), text.end(), '\n');
  };
  EXPECT_EQ(lines(), 2);
  log.Refused("refused PushFile from q: no job token", 20000);  // the next window
  EXPECT_EQ(lines(), 4);
  EXPECT_NE(out.str().find("refused 248 more calls (250 in all so far); the last: refused "
                           "Register from p: wrong job token"),
            std::string::npos)
      << out.str();
  log.Flush();
  EXPECT_EQ(lines(), 4);  // nothing left to count
  log.Refused("x", 20001);
  log.Refused("y", 20002);
  log.Flush();
  EXPECT_EQ(lines(), 6);
  EXPECT_NE(out.str().find("refused 1 more call (253 in all so far); the last: y"),
            std::string::npos)
      << out.str();
  EXPECT_EQ(log.total(), 253);
}

}  // namespace
}  // namespace dlaunch::launcher
