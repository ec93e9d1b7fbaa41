// The coordinator's logic without a network, and the same service over real gRPC on loopback.
#include "launcher/rendezvous/coordinator.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "core/coordinator_client.h"
#include "core/error.h"
#include "core/runtime.h"

namespace dlaunch::launcher {
namespace {

using std::chrono::milliseconds;

CoordinatorConfig Config(int world, milliseconds rdzv = milliseconds(5000)) {
  CoordinatorConfig c;
  c.world_size = world;
  c.nproc_per_node = world;
  c.token = "secret";
  c.run_id = "r";
  c.rdzv_timeout = rdzv;
  return c;
}

// Records the coordinator's notices for the tests to wait on.
class TestListener : public CoordinatorListener {
 public:
  void OnRankEvent(const v1::Event& event) override { Set(events, event); }
  void OnRendezvousTimeout(const std::string& message) override { Set(rendezvous, message); }
  void OnNodeFault(const NodeFault& fault) override { Set(node_faults, fault); }

  std::promise<v1::Event> events;
  std::promise<std::string> rendezvous;
  std::promise<NodeFault> node_faults;

 private:
  // The first notice of each kind fulfils its promise; later ones are dropped.
  template <typename T>
  void Set(std::promise<T>& p, const T& value) {
    try {
      p.set_value(value);
    } catch (const std::future_error&) {
    }
  }
};

v1::RegisterRequest Req(int rank) {
  v1::RegisterRequest r;
  r.set_rank(rank);
  return r;
}

TEST(CoordinatorHandlerTest, RegisterWaitsForEveryRank) {
  CoordinatorHandler h(Config(3));
  std::vector<std::future<v1::RegisterResponse>> regs;
  for (int r = 0; r < 3; ++r)
    regs.push_back(std::async(std::launch::async, [&h, r] { return h.Register(Req(r)); }));
  for (int r = 0; r < 3; ++r) {
    auto resp = regs[r].get();
    EXPECT_EQ(resp.rank(), r);
    EXPECT_EQ(resp.world_size(), 3);
    EXPECT_EQ(resp.local_rank(), r);
  }
}

TEST(CoordinatorHandlerTest, RendezvousTimeoutNamesAbsentRanksAndTellsTheListener) {
  CoordinatorHandler h(Config(4, milliseconds(200)));
  TestListener listener;
  h.SetListener(&listener);
  auto a = std::async(std::launch::async, [&] { return h.Register(Req(0)); });
  auto b = std::async(std::launch::async, [&] { return h.Register(Req(2)); });
  for (auto* f : {&a, &b}) {
    try {
      f->get();
      ADD_FAILURE() << "rendezvous should time out";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
      EXPECT_NE(std::string(e.what()).find("ranks 1,3 never registered"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_NE(listener.rendezvous.get_future().get().find("ranks 1,3"), std::string::npos);
}

TEST(CoordinatorHandlerTest, RejectsRanksOutsideTheWorld) {
  CoordinatorHandler h(Config(2));
  EXPECT_THROW(h.Register(Req(2)), Error);
  EXPECT_THROW(h.Register(Req(-1)), Error);
}

TEST(CoordinatorHandlerTest, HeartbeatsTrackProgressAndCommandsReachStreams) {
  CoordinatorHandler h(Config(2));
  std::vector<v1::Command> got;
  h.OnStreamOpened(1, [&](const v1::Command& c) {
    got.push_back(c);
    return true;
  });
  v1::RankStatus s;
  s.set_rank(1);
  s.set_step(5);
  h.OnHeartbeat(s);
  auto snap = h.Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_TRUE(snap[0].streaming);
  EXPECT_EQ(snap[0].status->step(), 5);
  const int64_t progress = snap[0].last_progress_unix_ms;
  EXPECT_GT(progress, 0);
  v1::Command dump;
  dump.set_kind(v1::Command::DUMP);
  EXPECT_EQ(h.Broadcast(dump), 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].kind(), v1::Command::DUMP);
  h.OnStreamClosed(1);
  EXPECT_FALSE(h.Snapshot()[0].streaming);
  EXPECT_EQ(h.Broadcast(dump), 0);
}

TEST(CoordinatorHandlerTest, AuthorizeNeedsTheExactToken) {
  CoordinatorHandler h(Config(1));
  EXPECT_TRUE(h.Authorize("secret", "test", "Register"));
  EXPECT_FALSE(h.Authorize("", "test", "Register"));
  EXPECT_FALSE(h.Authorize("secreT", "test", "Register"));
}

class CoordinatorGrpcTest : public ::testing::Test {
 protected:
  CoordinatorHandler handler_{Config(2, milliseconds(3000))};
  CoordinatorServer server_{&handler_, "127.0.0.1:0"};
  std::string address() { return "127.0.0.1:" + std::to_string(server_.port()); }
};

TEST_F(CoordinatorGrpcTest, StoreRoundTripsOverGrpc) {
  auto client = std::make_shared<core::CoordinatorClient>(address(), "secret");
  auto store = core::MakeCoordinatorStore(client);
  store->Set("k", std::string("v\0w", 3));
  EXPECT_EQ(store->Get("k", milliseconds(1000)), std::string("v\0w", 3));
  EXPECT_EQ(store->Add("n", 2), 2);
  EXPECT_EQ(store->Add("n", 3), 5);
  EXPECT_TRUE(store->Check("k"));
  EXPECT_FALSE(store->Check("absent"));
  auto waiter = std::async(std::launch::async, [&] { store->Wait({"late"}, milliseconds(5000)); });
  store->Set("late", "x");
  waiter.get();
  try {
    store->Get("never", milliseconds(100));
    ADD_FAILURE() << "expected a timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
  }
}

// A rank blocked in a long store wait (a barrier whose peer hung) must neither hold the launcher's
// exit for its whole timeout nor keep a server thread after the call is gone.
TEST_F(CoordinatorGrpcTest, AnHourLongStoreWaitDoesNotHoldTheServersShutdown) {
  auto client = std::make_shared<core::CoordinatorClient>(address(), "secret");
  auto store = core::MakeCoordinatorStore(client);
  auto waiter = std::async(std::launch::async, [&] {
    try {
      store->Wait({"never"}, std::chrono::hours(1));
      return std::string("returned");
    } catch (const Error& e) {
      return std::string(e.what());
    }
  });
  // Nothing signals that the call reached the server's handler; give it the time to get there.
  std::this_thread::sleep_for(milliseconds(300));
  server_.Shutdown();
  ASSERT_EQ(waiter.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_NE(waiter.get(), "returned");
}

TEST_F(CoordinatorGrpcTest, WrongTokenCannotReadWriteRegisterOrReport) {
  auto bad = std::make_shared<core::CoordinatorClient>(address(), "guess");
  auto store = core::MakeCoordinatorStore(bad);
  auto expect_refused = [](auto&& call) {
    try {
      call();
      ADD_FAILURE() << "call was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnauthenticated) << e.what();
    }
  };
  expect_refused([&] { store->Set("k", "v"); });
  expect_refused([&] { store->Get("k", milliseconds(10)); });
  expect_refused([&] { bad->Register(Req(0), milliseconds(1000)); });
  v1::Event e;
  e.set_kind(v1::EVENT_ERROR);
  expect_refused([&] { bad->ReportEvent(e, milliseconds(1000)); });
  EXPECT_FALSE(handler_.store().Check("k"));
  EXPECT_TRUE(handler_.Snapshot().empty());
}

TEST_F(CoordinatorGrpcTest, RuntimeHeartbeatsCarryStatusAndReceiveCommands) {
  CoordinatorHandler handler(Config(1));
  CoordinatorServer server(&handler, "127.0.0.1:0");
  ::setenv("DLAUNCH_COORDINATOR", ("127.0.0.1:" + std::to_string(server.port())).c_str(), 1);
  ::setenv("DLAUNCH_JOB_TOKEN", "secret", 1);
  ::setenv("DLAUNCH_HEARTBEAT_MS", "20", 1);
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "1", 1);
  TestListener listener;
  handler.SetListener(&listener);
  {
    auto rt = core::Runtime::FromEnv();
    std::promise<core::CommandKind> command;
    rt->OnCommand([&](core::CommandKind kind, const std::string&) { command.set_value(kind); });
    rt->UpdateStatus([](core::RankStatus& s) {
      s.step = 42;
      s.phase = core::Phase::kBackward;
      s.last_completed_seq = 7;
    });
    EXPECT_TRUE(handler.WaitForStatus(
        0,
        [](const v1::RankStatus& s) {
          return s.step() == 42 && s.phase() == v1::PHASE_BACKWARD && s.last_completed_seq() == 7 &&
                 s.rss_bytes() > 0;
        },
        milliseconds(10000)));
    v1::Command dump;
    dump.set_kind(v1::Command::DUMP);
    EXPECT_EQ(handler.Broadcast(dump), 1);
    auto got = command.get_future();
    ASSERT_EQ(got.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    EXPECT_EQ(got.get(), core::CommandKind::kDump);
    rt->ReportEvent(core::EventKind::kOom, R"({"message":"boom"})");
    auto e = listener.events.get_future();
    ASSERT_EQ(e.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    const v1::Event got_event = e.get();
    EXPECT_EQ(got_event.kind(), v1::EVENT_OOM);
    EXPECT_EQ(got_event.json(), R"({"message":"boom"})");
  }
  handler.SetListener(nullptr);
  for (const char* k :
       {"DLAUNCH_COORDINATOR", "DLAUNCH_JOB_TOKEN", "DLAUNCH_HEARTBEAT_MS", "RANK", "WORLD_SIZE"}) {
    ::unsetenv(k);
  }
}

TEST_F(CoordinatorGrpcTest, ABusyPortIsAClearError) {
  EXPECT_THROW(CoordinatorServer(&handler_, address()), UsageError);
}

}  // namespace
}  // namespace dlaunch::launcher
