// #30's control-plane campaign over real gRPC on loopback, against a real coordinator of a
// two-node job whose node 1 is a real NodeAgent: every RPC of proto/dlaunch.proto gets malformed
// and hostile messages from a rank (rank 0's token), from a job-token holder that never
// registered, from one with a wrong node credential and from one with no token at all. None may
// crash node 0, end the job, speak for a node, or write into the run directory; the real agent
// still ends the job as it should. Each RPC's outcome is one line of the campaign's results
// (chaos_util.h), so RELIABILITY.md says what was tried. About 700 lines: every case shares
// the one fixture (a live coordinator and node agent); splitting the campaign would move that
// fixture into a header for two files of the same tests.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <climits>
#include <filesystem>
#include <future>
#include <random>
#include <thread>

#include "chaos_util.h"
#include "core/coordinator_client.h"
#include "launcher/rendezvous/coordinator.h"
#include "launcher/rendezvous/credentials.h"
#include "launcher/rendezvous/node_agent.h"
#include "tests/common/test_dir.h"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kJobToken[] = "control-plane-test-token-0123456789";

class CountingListener : public CoordinatorListener {
 public:
  void OnRankEvent(const v1::Event&) override { ++events; }
  void OnRendezvousTimeout(const std::string&) override {}
  void OnNodeFault(const NodeFault& f) override {
    std::lock_guard<std::mutex> lock(mu);
    faults.push_back(f.message);
  }
  std::atomic<int> events{0};
  std::mutex mu;
  std::vector<std::string> faults;
};

// Who calls: the ranks' token, the job token without a node credential, the job token with a
// made-up one, nothing.
struct Caller {
  std::string name;
  std::shared_ptr<core::CoordinatorClient> client;
};

class ControlPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorConfig c;
    c.nnodes = 2;
    c.nproc_per_node = 2;
    c.world_size = 4;
    c.token = kJobToken;
    c.run_id = "cp-run";
    c.job_id = "run id 'cp-run'";
    c.run_dir = run_dir_.string();
    c.rdzv_timeout = seconds(20);
    c.join_timeout = seconds(20);
    c.node_heartbeat_timeout = seconds(60);
    fs::create_directories(run_dir_);
    handler_ = std::make_unique<CoordinatorHandler>(c);
    handler_->SetListener(&listener_);
    server_ = std::make_unique<CoordinatorServer>(handler_.get(), "127.0.0.1:0");
    address_ = "127.0.0.1:" + std::to_string(server_->port());

    // Node 0 and the real node 1 form the first round.
    auto node0 = std::async(std::launch::async,
                            [&] { return handler_->JoinRound("node0", "{}", 0, "attempt0"); });
    agent_client_ = std::make_shared<core::CoordinatorClient>(address_, kJobToken);
    agent_ = std::make_unique<NodeAgent>(agent_client_, 1);
    v1::NodeRequest join;
    join.set_node_rank(1);
    join.set_host("node1");
    join.set_nproc(2);
    joined_ = agent_->Join(join, seconds(20));
    ASSERT_EQ(node0.get().nnodes, 2);
    ASSERT_EQ(joined_.node_rank(), 1);
    ASSERT_EQ(joined_.node_credential().size(), 32u);
    agent_client_->SetNodeCredential(joined_.node_credential());
    agent_->Start(
        [this] {
          v1::NodeStatus s;
          s.set_node_rank(1);
          s.set_member_id(joined_.member_id());
          s.set_attempt(joined_.attempt());
          return s;
        },
        milliseconds(50), [this](const std::string&, int) { ++aborts_; });
    ASSERT_TRUE(Eventually([&] { return NodeOne().streaming; }));

    auto client = [&](const std::string& token, const std::string& credential) {
      auto c = std::make_shared<core::CoordinatorClient>(address_, token);
      if (!credential.empty()) c->SetNodeCredential(credential);
      return c;
    };
    callers_ = {{"rank token", client(RankToken(kJobToken, 0), "")},
                {"job token alone", client(kJobToken, "")},
                {"job token + wrong credential", client(kJobToken, std::string(32, '0'))},
                {"no token", client("", "")}};
  }

  void TearDown() override {
    // As node 0's launcher closes: the verdict first, so no node waits on, then the agent goes.
    handler_->Finish(0, "");
    agent_.reset();
    // Forged calls left waiting (a Register for a rank that never comes, a new node waiting for
    // a round) do not hold the shutdown until their deadlines (20 s here).
    const auto t0 = std::chrono::steady_clock::now();
    server_->Shutdown();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(5));
    handler_->SetListener(nullptr);
  }

  // The handler has no event for "node 1's stream is open"; poll it briefly.
  static bool Eventually(const std::function<bool()>& pred) {
    const auto deadline = std::chrono::steady_clock::now() + seconds(10);
    while (!pred()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return true;
  }

  NodeView NodeOne() const {
    for (const auto& n : handler_->Nodes())
      if (n.node_rank == 1) return n;
    return {};
  }

  // The job is as the real agent left it: node 1 streams, is neither done nor lost, no fault.
  void ExpectJobUntouched(const std::string& what) {
    const NodeView n = NodeOne();
    EXPECT_TRUE(n.streaming) << what;
    EXPECT_FALSE(n.lost) << what;
    EXPECT_FALSE(n.status && n.status->done()) << what;
    std::lock_guard<std::mutex> lock(listener_.mu);
    EXPECT_TRUE(listener_.faults.empty()) << what << ": " << listener_.faults.front();
  }

  // The files in the run directory, as "rank2/stdout.log".
  std::set<std::string> Files() const {
    std::set<std::string> files;
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(run_dir_, ec))
      if (e.is_regular_file()) files.insert(fs::relative(e.path(), run_dir_).string());
    return files;
  }

  // One RPC's row of the campaign: `tried` cases, all refused or harmless.
  void Record(const std::string& rpc, int tried, bool right,
              std::chrono::steady_clock::time_point t0) {
    testing::chaos::Record({{"fault", "forged " + rpc},
                            {"right", right},
                            {"trials", tried},
                            {"ms", testing::chaos::MsSince(t0)},
                            {"crash", false}});
  }

  static grpc::Status PushChunk(core::CoordinatorClient& c, int rank, const std::string& name,
                                int64_t offset, const std::string& data) {
    v1::FileChunk chunk;
    chunk.set_rank(rank);
    chunk.set_name(name);
    chunk.set_offset(offset);
    chunk.set_data(data);
    v1::FileAck ack;
    auto ctx = c.NewContext(seconds(5));
    return c.stub().PushFile(ctx.get(), chunk, &ack);
  }

  // Opens a node stream, writes `messages`, closes it; the call's status.
  static grpc::Status Stream(core::CoordinatorClient& c,
                             const std::vector<v1::NodeStatus>& messages) {
    auto ctx = c.NewContext(seconds(5));
    auto stream = c.stub().NodeStream(ctx.get());
    for (const auto& m : messages)
      if (!stream->Write(m)) break;
    stream->WritesDone();
    return stream->Finish();
  }

  const dlaunch::testing::TestDir test_dir_{"control-plane"};
  const fs::path run_dir_ = test_dir_.path() / "run";
  CountingListener listener_;
  std::unique_ptr<CoordinatorHandler> handler_;
  std::unique_ptr<CoordinatorServer> server_;
  std::string address_;
  std::shared_ptr<core::CoordinatorClient> agent_client_;
  std::unique_ptr<NodeAgent> agent_;
  v1::NodeResponse joined_;
  std::atomic<int> aborts_{0};
  std::vector<Caller> callers_;
};

v1::NodeStatus NodeStatus(int member, int node_rank, bool done, int exit_code,
                          const std::string& message, int attempt = 0) {
  v1::NodeStatus s;
  s.set_member_id(member);
  s.set_node_rank(node_rank);
  s.set_done(done);
  s.set_exit_code(exit_code);
  s.set_message(message);
  s.set_attempt(attempt);
  return s;
}

TEST_F(ControlPlaneTest, NoForgedNodeStreamCrashesNodeZeroOrEndsTheJob) {
  const auto t0 = std::chrono::steady_clock::now();
  const int member = joined_.member_id();
  // The campaign's crash, node 1's verdicts, statuses that claim every member and rank, garbage.
  std::vector<std::vector<v1::NodeStatus>> forgeries = {
      {NodeStatus(0, 0, true, 1, "forged")},
      {NodeStatus(member, 1, true, 1, "forged failure of node 1")},
      {NodeStatus(member, 1, true, 0, "forged success of node 1")},
      {NodeStatus(INT_MIN, INT_MAX, true, -1, std::string(1 << 20, 'x'), INT_MAX)},
      {},  // an empty stream: open, then close
  };
  std::vector<v1::NodeStatus> many;
  for (int i = 0; i < 500; ++i) many.push_back(NodeStatus(i % 4 - 1, i % 3, i % 2, i, "flood"));
  forgeries.push_back(many);
  v1::NodeStatus ranks = NodeStatus(member, 1, true, 1, "node 1's ranks all failed");
  for (int r = -2; r < 6; ++r) ranks.add_ranks()->set_rank(r);
  forgeries.push_back({ranks});

  int tried = 0;
  bool right = true;
  for (const auto& caller : callers_) {
    for (const auto& messages : forgeries) {
      ++tried;
      const grpc::Status s = Stream(*caller.client, messages);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << caller.name;
      right = right && s.error_code() == grpc::StatusCode::UNAUTHENTICATED;
    }
  }
  ExpectJobUntouched("after forged node streams");
  EXPECT_EQ(aborts_.load(), 0);
  EXPECT_GE(handler_->refused_calls(), tried);
  Record("NodeStream", tried, right && !HasFailure(), t0);

  // The real agent still decides: its verdict ends the attempt, successfully.
  v1::NodeStatus done = NodeStatus(member, 1, true, 0, "", joined_.attempt());
  agent_->Finish(done);
  EXPECT_FALSE(handler_->WaitForNodesDone());
  EXPECT_TRUE(NodeOne().status && NodeOne().status->done());
}

TEST_F(ControlPlaneTest, OnlyTheRegisteredAgentPushesFilesAndOnlyItsOwnWithinBounds) {
  const auto t0 = std::chrono::steady_clock::now();
  int tried = 0;
  bool right = true;
  for (const auto& caller : callers_) {
    // A fake root cause for every rank, 300 files, a path out of the folder, a 1 TiB offset.
    for (int rank : {0, 1, 2, 3}) {
      ++tried;
      const auto s = PushChunk(*caller.client, rank, "error.json", 0,
                               R"({"message":"planted","rank":)" + std::to_string(rank) + "}");
      right = right && s.error_code() == grpc::StatusCode::UNAUTHENTICATED;
    }
    for (int i = 0; i < 300; ++i) {
      ++tried;
      right = right && PushChunk(*caller.client, 2, "f" + std::to_string(i), 0, "x").error_code() ==
                           grpc::StatusCode::UNAUTHENTICATED;
    }
    ++tried;
    right = right && !PushChunk(*caller.client, 2, "../summary.json", 0, "{}").ok();
    ++tried;
    right = right && !PushChunk(*caller.client, 2, "stdout.log", int64_t{1} << 40, "x").ok();
  }
  EXPECT_TRUE(right);
  EXPECT_TRUE(Files().empty()) << *Files().begin();

  // The agent itself: not node 0's ranks, not past the bound of files a rank folder holds.
  EXPECT_EQ(PushChunk(*agent_client_, 0, "error.json", 0, "{}").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(PushChunk(*agent_client_, 1, "error.json", 0, "{}").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  for (int i = 0; i < 300; ++i) {
    // Dropped past the bound, not refused: the agent goes on with its other files.
    ASSERT_TRUE(PushChunk(*agent_client_, 2, "f" + std::to_string(i), 0, "x").ok()) << i;
  }
  EXPECT_TRUE(PushChunk(*agent_client_, 3, "error.json", 0, R"({"message":"real"})").ok());
  const auto files = Files();
  EXPECT_EQ(files.size(), static_cast<size_t>(PushLimits{}.files_per_rank + 1));
  EXPECT_TRUE(files.count("rank3/error.json"));
  EXPECT_FALSE(files.count("rank0/error.json"));
  ExpectJobUntouched("after forged pushes");
  Record("PushFile", tried, right && !HasFailure(), t0);
}

TEST_F(ControlPlaneTest, NoRegisterNodeTakesTheAgentsPlaceOrItsCredential) {
  const auto t0 = std::chrono::steady_clock::now();
  int tried = 0;
  bool right = true;
  auto join = [](int member, int node_rank, int nproc, const std::string& host) {
    v1::NodeRequest r;
    r.set_member_id(member);
    r.set_node_rank(node_rank);
    r.set_nproc(nproc);
    r.set_host(host);
    return r;
  };
  const int member = joined_.member_id();
  const std::vector<v1::NodeRequest> requests = {
      join(member, 1, 2, "forger"),   // the agent's member id: its credential, its place
      join(member, -1, 2, "forger"),  // the same, any rank
      join(0, 0, 2, "forger"),        // node 0's rank
      join(0, 99, 2, "forger"),       // a rank outside the job
      join(0, 1, -1, "forger"),       // a negative --nproc
      join(INT_MAX, 1, 2, "forger"),  // a member id never given
      join(INT_MIN, INT_MIN, INT_MIN, std::string(1 << 20, 'h')),
  };
  for (const auto& caller : callers_) {
    for (const auto& req : requests) {
      ++tried;
      v1::NodeResponse resp;
      auto ctx = caller.client->NewContext(milliseconds(500));
      const grpc::Status s = caller.client->stub().RegisterNode(ctx.get(), req, &resp);
      // Refused outright, or (a new node with the job token) left waiting for a next round.
      const bool refused = !s.ok() && resp.node_credential().empty();
      EXPECT_TRUE(refused) << caller.name << " member " << req.member_id() << ": "
                           << s.error_message();
      right = right && refused;
    }
  }
  ExpectJobUntouched("after forged registrations");
  Record("RegisterNode", tried, right && !HasFailure(), t0);
}

TEST_F(ControlPlaneTest, RankCallsWithHostileArgumentsAreRefusedOrHarmless) {
  const auto t0 = std::chrono::steady_clock::now();
  int tried = 0;
  auto rank = callers_[0].client;
  auto call_ok = [&](auto&& rpc) {
    ++tried;
    return rpc().ok();
  };
  // Register: ranks outside the world; huge host names.
  for (int r : {-1, 4, INT_MAX, INT_MIN}) {
    v1::RegisterRequest req;
    req.set_rank(r);
    req.set_host(std::string(1 << 16, 'h'));
    EXPECT_FALSE(call_ok([&] {
      v1::RegisterResponse resp;
      auto ctx = rank->NewContext(seconds(2));
      return rank->stub().Register(ctx.get(), req, &resp);
    })) << r;
  }
  // The store: timeouts that overflow the clock or never end, a counter that overflows. (The
  // wait's 10000 missing keys once made a status message past gRPC's trailer bound, which broke
  // the connection this process's clients share, and with it node 1's stream.)
  for (int64_t timeout : {int64_t{-5}, int64_t{0}, INT64_MAX, INT64_MIN}) {
    const auto before = std::chrono::steady_clock::now();
    EXPECT_FALSE(call_ok([&] {
      v1::StoreGetRequest req;
      req.set_key("never");
      req.set_timeout_ms(timeout);
      v1::StoreGetResponse resp;
      auto ctx = rank->NewContext(milliseconds(300));
      return rank->stub().StoreGet(ctx.get(), req, &resp);
    }));
    EXPECT_FALSE(call_ok([&] {
      v1::StoreWaitRequest req;
      for (int i = 0; i < 10000; ++i) req.add_keys("k" + std::to_string(i));
      req.set_timeout_ms(timeout);
      v1::StoreWaitResponse resp;
      auto ctx = rank->NewContext(milliseconds(300));
      return rank->stub().StoreWait(ctx.get(), req, &resp);
    }));
    EXPECT_LT(std::chrono::steady_clock::now() - before, seconds(5)) << timeout;
  }
  auto add = [&](const std::string& key, int64_t delta) {
    return call_ok([&] {
      v1::StoreAddRequest req;
      req.set_key(key);
      req.set_delta(delta);
      v1::StoreAddResponse resp;
      auto ctx = rank->NewContext(seconds(2));
      return rank->stub().StoreAdd(ctx.get(), req, &resp);
    });
  };
  EXPECT_TRUE(add("n", INT64_MAX));
  EXPECT_FALSE(add("n", 1));  // overflow: refused, the counter stays
  EXPECT_EQ(handler_->store().Add("n", 0), INT64_MAX);
  EXPECT_TRUE(call_ok([&] {
    v1::StoreSetRequest req;
    req.set_key("text");
    req.set_value("not a number");
    v1::StoreSetResponse resp;
    auto ctx = rank->NewContext(seconds(2));
    return rank->stub().StoreSet(ctx.get(), req, &resp);
  }));
  EXPECT_FALSE(add("text", 1));
  // Events: ranks outside the world, unknown kinds, bodies that are no JSON.
  for (int r : {-1, 4, INT_MAX}) {
    EXPECT_FALSE(call_ok([&] {
      v1::Event e;
      e.set_rank(r);
      e.set_kind(v1::EVENT_ERROR);
      v1::EventAck ack;
      auto ctx = rank->NewContext(seconds(2));
      return rank->stub().ReportEvent(ctx.get(), e, &ack);
    }));
  }
  for (const std::string& body : {std::string("not json"), std::string(1 << 20, '{')}) {
    call_ok([&] {
      v1::Event e;
      e.set_rank(1);
      e.set_kind(static_cast<v1::EventKind>(9999));
      e.set_json(body);
      v1::EventAck ack;
      auto ctx = rank->NewContext(seconds(2));
      return rank->stub().ReportEvent(ctx.get(), e, &ack);
    });
  }
  // Heartbeats for ranks outside the world and with values nobody sends.
  {
    ++tried;
    auto ctx = rank->NewContext(seconds(5));
    auto stream = rank->stub().Heartbeat(ctx.get());
    for (int r : {-1, 4, INT_MAX, INT_MIN}) {
      v1::RankStatus s;
      s.set_rank(r);
      s.set_step(INT64_MIN);
      s.set_phase(static_cast<v1::Phase>(1234));
      stream->Write(s);
    }
    stream->WritesDone();
    EXPECT_FALSE(stream->Finish().ok());  // rank 0's token does not speak for rank -1
  }
  for (const auto& v : handler_->Snapshot()) EXPECT_TRUE(v.rank >= 0 && v.rank < 4) << v.rank;
  ExpectJobUntouched("after hostile rank calls");
  Record("rank calls (Register, Store*, ReportEvent, Heartbeat)", tried, !HasFailure(), t0);
}

// Each rank holds a token of its own: with it, rank 0 cannot register, fail or look alive as
// rank 1 (a heartbeat for a hung rank would hide its hang). Rank 1's own token, and the job
// token, still can.
TEST_F(ControlPlaneTest, ARanksTokenSpeaksForThatRankOnly) {
  const auto t0 = std::chrono::steady_clock::now();
  int tried = 0;
  auto as = [&](const std::string& token) {
    return std::make_shared<core::CoordinatorClient>(address_, token);
  };
  const auto zero = as(RankToken(kJobToken, 0));
  const auto one = as(RankToken(kJobToken, 1));
  auto report_error = [&](core::CoordinatorClient& c, int r) {
    ++tried;
    v1::Event e;
    e.set_rank(r);
    e.set_kind(v1::EVENT_ERROR);
    e.set_json(R"({"message":"forged"})");
    v1::EventAck ack;
    auto ctx = c.NewContext(seconds(2));
    return c.stub().ReportEvent(ctx.get(), e, &ack);
  };
  auto heartbeat = [&](core::CoordinatorClient& c, int r, int64_t step) {
    ++tried;
    auto ctx = c.NewContext(seconds(5));
    auto stream = c.stub().Heartbeat(ctx.get());
    v1::RankStatus s;
    s.set_rank(r);
    s.set_step(step);
    stream->Write(s);
    stream->WritesDone();
    return stream->Finish();
  };
  auto step_of = [&](int r) -> int64_t {
    for (const auto& v : handler_->Snapshot())
      if (v.rank == r && v.status) return v.status->step();
    return -1;
  };
  {
    ++tried;
    v1::RegisterRequest req;
    req.set_rank(1);
    v1::RegisterResponse resp;
    auto ctx = zero->NewContext(seconds(2));
    EXPECT_EQ(zero->stub().Register(ctx.get(), req, &resp).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(report_error(*zero, 1).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(listener_.events.load(), 0);
  EXPECT_EQ(heartbeat(*zero, 1, 777).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(step_of(1), -1);
  // The rank's own calls, and the job token's for any rank, are taken.
  EXPECT_TRUE(heartbeat(*one, 1, 5).ok());
  EXPECT_EQ(step_of(1), 5);
  EXPECT_TRUE(heartbeat(*as(kJobToken), 2, 6).ok());
  EXPECT_EQ(step_of(2), 6);
  EXPECT_TRUE(report_error(*one, 1).ok());
  EXPECT_EQ(listener_.events.load(), 1);
  ExpectJobUntouched("after calls as another rank");
  Record("rank calls as another rank (Register, ReportEvent, Heartbeat)", tried, !HasFailure(), t0);
}

// One rank once stored 200 values of 1 MiB with its token and grew node 0's launcher by 200 MiB:
// now a rank's writes stop at its quota (64 MiB of keys and values), with RESOURCE_EXHAUSTED
// naming it, while other ranks and the launchers (the job token) store on.
TEST_F(ControlPlaneTest, ARanksStoreWritesStopAtItsQuotaAndOthersStoreOn) {
  const auto t0 = std::chrono::steady_clock::now();
  int tried = 0;
  auto set = [&](core::CoordinatorClient& c, const std::string& key, size_t bytes) {
    ++tried;
    v1::StoreSetRequest req;
    req.set_key(key);
    req.set_value(std::string(bytes, 'v'));
    v1::StoreSetResponse resp;
    auto ctx = c.NewContext(seconds(10));
    return c.stub().StoreSet(ctx.get(), req, &resp);
  };
  constexpr size_t kMiB = size_t{1} << 20;
  auto& zero = *callers_[0].client;
  int stored = 0;
  grpc::Status first_refusal;
  for (int i = 0; i < 200; ++i) {
    const grpc::Status s = set(zero, "k" + std::to_string(i), kMiB);
    if (first_refusal.ok()) {
      if (s.ok()) {
        ++stored;
      } else {
        first_refusal = s;
      }
    } else {
      EXPECT_FALSE(s.ok()) << i;  // once refused, every new 1 MiB key is
    }
  }
  // 63 values of 1 MiB and their keys fit in 64 MiB; the 64th passes it.
  EXPECT_EQ(stored, 63);
  EXPECT_EQ(first_refusal.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(first_refusal.error_message().find("64 MiB a rank may store"), std::string::npos)
      << first_refusal.error_message();
  EXPECT_FALSE(handler_->store().Check("k63"));
  // Writing a stored key again counts once; what is left (just under 1 MiB) still takes a
  // counter.
  EXPECT_TRUE(set(zero, "k0", kMiB).ok());
  {
    ++tried;
    v1::StoreAddRequest req;
    req.set_key("n");
    req.set_delta(1);
    v1::StoreAddResponse resp;
    auto ctx = zero.NewContext(seconds(2));
    EXPECT_TRUE(zero.stub().StoreAdd(ctx.get(), req, &resp).ok());
    EXPECT_EQ(resp.value(), 1);
  }
  // Rank 1 stores on, within the bound on one value; the launchers' writes have no bound.
  auto one = std::make_shared<core::CoordinatorClient>(address_, RankToken(kJobToken, 1));
  const grpc::Status big = set(*one, "big", 16 * kMiB + 1);
  EXPECT_EQ(big.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(big.error_message().find("at most 16 MiB"), std::string::npos) << big.error_message();
  EXPECT_TRUE(set(*one, "id", 128).ok());
  for (int i = 0; i < 70; ++i) EXPECT_TRUE(set(*agent_client_, "l" + std::to_string(i), kMiB).ok());
  EXPECT_TRUE(handler_->store().Check("l69"));
  ExpectJobUntouched("after a rank's store flood");
  Record("store flood (StoreSet, StoreAdd past a rank's quota)", tried, !HasFailure(), t0);
}

// RegisterNode checks the token first: a caller without the job token gets the one refusal,
// whether the job id it names is this job's, another or none, and never hears the run id.
TEST_F(ControlPlaneTest, RegisterNodeWithoutTheJobTokenLearnsNothingOfTheJob) {
  const auto t0 = std::chrono::steady_clock::now();
  int tried = 0;
  auto register_node = [&](core::CoordinatorClient& c, const std::string& job_id) {
    ++tried;
    v1::NodeRequest req;
    req.set_node_rank(1);
    req.set_nproc(2);
    req.set_host("prober");
    req.set_job_id(job_id);
    v1::NodeResponse resp;
    auto ctx = c.NewContext(milliseconds(500));
    return c.stub().RegisterNode(ctx.get(), req, &resp);
  };
  auto wrong = std::make_shared<core::CoordinatorClient>(address_, "another-jobs-token-012345");
  std::vector<std::shared_ptr<core::CoordinatorClient>> tokenless = {callers_[0].client,
                                                                     callers_[3].client, wrong};
  std::set<std::pair<int, std::string>> answers;
  for (const auto& client : tokenless) {
    for (const char* job_id : {"run id 'cp-run'", "run id 'other'", ""}) {
      const grpc::Status s = register_node(*client, job_id);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << job_id;
      EXPECT_EQ(s.error_message().find("cp-run"), std::string::npos) << s.error_message();
      answers.insert({s.error_code(), s.error_message()});
    }
  }
  EXPECT_EQ(answers.size(), 1u);
  // The job token's holder of another job (one token for all of a user's jobs) hears which it
  // reached.
  const grpc::Status other = register_node(*callers_[1].client, "run id 'other'");
  EXPECT_EQ(other.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(other.error_message().find("the coordinator of run id 'cp-run'"), std::string::npos)
      << other.error_message();
  ExpectJobUntouched("after tokenless registrations");
  Record("RegisterNode without the job token, any job id", tried, !HasFailure(), t0);
}

// Message `index` of a malformed call's trial `trial`: trial 0 sends empty messages, trial 1
// first a length past the end, the others random bytes (up to 512).
std::string Garbage(std::mt19937& rng, int trial, size_t index = 0) {
  std::string bytes(trial == 0 ? 0 : 1 + rng() % 512, '\0');
  for (auto& b : bytes) b = static_cast<char>(rng());
  if (trial == 1 && index == 0) bytes = "\x0a\xff\xff\xff\xff\x0f";
  return bytes;
}

// Bytes that are no protobuf message at all, to every unary method.
TEST_F(ControlPlaneTest, MalformedBytesToEveryUnaryMethodAreRefused) {
  const auto t0 = std::chrono::steady_clock::now();
  auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  std::mt19937 rng(30);
  int tried = 0;
  for (const char* method : {"Register", "StoreSet", "StoreGet", "StoreAdd", "StoreWait",
                             "ReportEvent", "RegisterNode", "PushFile", "GetStatus"}) {
    for (int trial = 0; trial < 20; ++trial) {
      grpc::Slice slice(Garbage(rng, trial));
      grpc::ByteBuffer request(&slice, 1);
      for (const std::string& token : {RankToken(kJobToken, 0), std::string(kJobToken)}) {
        ++tried;
        grpc::ClientContext ctx;
        ctx.AddMetadata(core::kTokenMetadataKey, token);
        ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(500));
        grpc::CompletionQueue cq;
        auto call = stub.PrepareUnaryCall(&ctx, std::string("/dlaunch.v1.Coordinator/") + method,
                                          request, &cq);
        call->StartCall();
        grpc::ByteBuffer response;
        grpc::Status status;
        call->Finish(&response, &status, reinterpret_cast<void*>(1));
        void* tag = nullptr;
        bool ok = false;
        ASSERT_TRUE(cq.Next(&tag, &ok));
        cq.Shutdown();
        while (cq.Next(&tag, &ok)) {
        }
      }
    }
  }
  EXPECT_TRUE(Files().empty());
  ExpectJobUntouched("after malformed bytes");
  Record("bytes to every unary method", tried, !HasFailure(), t0);
}

// Bytes that are no protobuf message, as the messages of both streams, from a rank and from a
// job-token holder that never registered.
TEST_F(ControlPlaneTest, MalformedBytesToBothStreamsAreRefused) {
  const auto t0 = std::chrono::steady_clock::now();
  auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  std::mt19937 rng(31);
  int tried = 0;
  const int64_t refused_before = handler_->refused_calls();
  // One asynchronous operation of `call`, waited for; whether it went through.
  auto step = [](grpc::CompletionQueue& cq, auto&& start) {
    start(reinterpret_cast<void*>(1));
    void* tag = nullptr;
    bool ok = false;
    return cq.Next(&tag, &ok) && ok;
  };
  for (const char* method : {"Heartbeat", "NodeStream"}) {
    for (int trial = 0; trial < 10; ++trial) {
      std::vector<std::string> messages(1 + rng() % 3);
      for (size_t i = 0; i < messages.size(); ++i) messages[i] = Garbage(rng, trial, i);
      for (const std::string& token : {RankToken(kJobToken, 0), std::string(kJobToken)}) {
        ++tried;
        grpc::ClientContext ctx;
        ctx.AddMetadata(core::kTokenMetadataKey, token);
        ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(1000));
        grpc::CompletionQueue cq;
        auto call = stub.PrepareCall(&ctx, std::string("/dlaunch.v1.Coordinator/") + method, &cq);
        if (step(cq, [&](void* tag) { call->StartCall(tag); })) {
          for (const std::string& m : messages) {
            grpc::Slice slice(m);
            grpc::ByteBuffer buffer(&slice, 1);
            if (!step(cq, [&](void* tag) { call->Write(buffer, tag); })) break;
          }
          step(cq, [&](void* tag) { call->WritesDone(tag); });
        }
        grpc::Status status;
        step(cq, [&](void* tag) { call->Finish(&status, tag); });
        cq.Shutdown();
        void* tag = nullptr;
        bool ok = false;
        while (cq.Next(&tag, &ok)) {
        }
      }
    }
  }
  for (const auto& v : handler_->Snapshot()) EXPECT_TRUE(v.rank >= 0 && v.rank < 4) << v.rank;
  EXPECT_TRUE(Files().empty());
  // The calls reached the coordinator: every node stream was refused (no node credential).
  EXPECT_GE(handler_->refused_calls() - refused_before, 20);
  ExpectJobUntouched("after malformed stream messages");
  Record("bytes to both streams (Heartbeat, NodeStream)", tried, !HasFailure(), t0);
}

}  // namespace
}  // namespace dlaunch::launcher
