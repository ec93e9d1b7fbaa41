// What a job-token holder may ask of the coordinator (#11's control-plane findings): a fake node
// notice in a single-node job, heartbeats and events for ranks outside the world, file pushes
// that would make a 1 TiB sparse file or leave the rank folder.
#include "launcher/rendezvous/request_checks.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "core/error.h"
#include "launcher/rendezvous/coordinator.h"
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
  ExpectRefused([&] { h.WriteFileChunk(Chunk(0, "stdout.log", 0, "x")); });
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
  // Before node 1 joined nobody may push or speak for it.
  ExpectRefused([&] { h.WriteFileChunk(Chunk(2, "stdout.log", 0, "early")); });
  v1::NodeStatus early;
  early.set_node_rank(1);
  early.set_done(true);
  early.set_exit_code(1);
  h.OnNodeStatus(early);
  EXPECT_EQ(listener.faults, 0);

  // Node 0 and node 1 join the first round; it closes once both are in.
  auto node0 = std::async(std::launch::async, [&] { return h.JoinRound("node0", "{}", 0, ""); });
  v1::NodeRequest join;
  join.set_node_rank(-1);
  join.set_host("node1");
  join.set_nproc(2);
  const v1::NodeResponse joined = h.RegisterNode(join);
  ASSERT_EQ(node0.get().nnodes, 2);
  ASSERT_EQ(joined.node_rank(), 1);
  h.WriteFileChunk(Chunk(2, "stdout.log", 0, "hello "));
  h.WriteFileChunk(Chunk(2, "stdout.log", 6, "world\n"));
  std::ifstream in(run_dir_ / "rank2" / "stdout.log");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "hello world\n");
  struct stat st {};
  ASSERT_EQ(::stat((run_dir_ / "rank2" / "stdout.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077, 0u) << std::oct << st.st_mode;

  ExpectRefused([&] { h.WriteFileChunk(Chunk(0, "stdout.log", 0, "node 0's own rank")); });
  ExpectRefused([&] { h.WriteFileChunk(Chunk(2, "stdout.log", int64_t{1} << 40, "x")); });
  ExpectRefused([&] { h.WriteFileChunk(Chunk(2, "stdout.log", 1000, "hole")); });
  ExpectRefused([&] { h.WriteFileChunk(Chunk(2, "stdout.log", -1, "x")); });
  ExpectRefused([&] { h.WriteFileChunk(Chunk(2, "../summary.json", 0, "x")); });
  ExpectRefused([&] { h.WriteFileChunk(Chunk(2, "..", 0, "x")); });
  ExpectRefused([&] { h.WriteFileChunk(Chunk(5, "stdout.log", 0, "x")); });
  EXPECT_EQ(fs::file_size(run_dir_ / "rank2" / "stdout.log"), 12u);

  // A symbolic link planted in the rank folder is not followed out of it.
  fs::create_directories(run_dir_ / "rank3");
  fs::create_symlink(run_dir_ / "outside.txt", run_dir_ / "rank3" / "events.jsonl");
  EXPECT_THROW(h.WriteFileChunk(Chunk(3, "events.jsonl", 0, "x")), Error);
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

}  // namespace
}  // namespace dlaunch::launcher
