// What a job-token holder may ask of the coordinator (#11's control-plane findings): a fake node
// notice in a single-node job, heartbeats and events for ranks outside the world, file pushes
// that would make a 1 TiB sparse file or leave the rank folder.
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
