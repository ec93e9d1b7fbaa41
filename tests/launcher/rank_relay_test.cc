// A joining node's relay of its ranks' calls (rank_relay.h), over real gRPC on loopback, and the
// coordinator's thread-free waits (call_waiters.h).
#include "launcher/rendezvous/rank_relay.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <future>

#include "core/coordinator_client.h"
#include "core/runtime.h"
#include "launcher/rendezvous/call_waiters.h"
#include "launcher/rendezvous/coordinator.h"
#include "launcher/rendezvous/credentials.h"

namespace dlaunch::launcher {
namespace {

using std::chrono::milliseconds;

constexpr char kToken[] = "relay-test-job-token";

CoordinatorConfig Config() {
  CoordinatorConfig c;
  c.world_size = 1;
  c.nproc_per_node = 1;
  c.token = kToken;
  c.run_id = "r";
  c.rdzv_timeout = milliseconds(10000);
  return c;
}

// The relay's latest status of `rank` that `pred` takes, polled until `timeout`.
std::optional<v1::RankStatus> FreshStatus(RankRelay* relay, int rank,
                                          const std::function<bool(const v1::RankStatus&)>& pred,
                                          milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    for (const v1::RankStatus& s : relay->TakeFresh())
      if (s.rank() == rank && pred(s)) return s;
    std::this_thread::sleep_for(milliseconds(10));  // the relay has no event for a reader
  }
  return std::nullopt;
}

TEST(RankRelayTest, ARankRegistersAndUsesTheStoreThroughItAndItsHeartbeatsStayThere) {
  CoordinatorHandler handler(Config());
  CoordinatorServer server(&handler, "127.0.0.1:0");
  auto node_zero = std::make_shared<core::CoordinatorClient>(
      "127.0.0.1:" + std::to_string(server.port()), kToken);
  RankRelay relay(kToken, node_zero);
  relay.SetRanks({0});
  ::setenv("DLAUNCH_COORDINATOR", relay.endpoint().c_str(), 1);
  ::setenv("DLAUNCH_JOB_TOKEN", RankToken(kToken, 0).c_str(), 1);
  ::setenv("DLAUNCH_HEARTBEAT_MS", "20", 1);
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "1", 1);
  {
    auto rt = core::Runtime::FromEnv();  // registered with node 0, under its own token
    EXPECT_TRUE(handler.AllRegistered());
    rt->store()->Set("k", "v");
    EXPECT_EQ(handler.store().Get("k", milliseconds(0)), "v");
    EXPECT_EQ(rt->store()->Get("k", milliseconds(1000)), "v");
    EXPECT_EQ(rt->store()->Add("n", 2), 2);
    // A store wait that node 0 holds ends when its key comes.
    auto waited =
        std::async(std::launch::async, [&] { rt->store()->Wait({"late"}, milliseconds(10000)); });
    handler.store().Set("late", "1");
    handler.StoreChanged();
    EXPECT_EQ(waited.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    waited.get();

    std::promise<core::CommandKind> command;
    rt->OnCommand([&](core::CommandKind kind, const std::string&) { command.set_value(kind); });
    rt->UpdateStatus([](core::RankStatus& s) { s.step = 42; });
    auto beat = FreshStatus(
        &relay, 0, [](const v1::RankStatus& s) { return s.step() == 42; }, milliseconds(10000));
    ASSERT_TRUE(beat);
    // The beat stayed at the relay: node 0 hears of it in the node's stream, not from the rank.
    for (const RankView& v : handler.Snapshot()) EXPECT_FALSE(v.status) << v.rank;
    v1::Command dump;
    dump.set_kind(v1::Command::DUMP);
    EXPECT_EQ(relay.Broadcast(dump), 1);
    auto got = command.get_future();
    ASSERT_EQ(got.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    EXPECT_EQ(got.get(), core::CommandKind::kDump);
  }
  for (const char* k :
       {"DLAUNCH_COORDINATOR", "DLAUNCH_JOB_TOKEN", "DLAUNCH_HEARTBEAT_MS", "RANK", "WORLD_SIZE"})
    ::unsetenv(k);
}

// A stream whose first message speaks for `rank`, opened with `token`; its final status.
grpc::Status OpenStream(const RankRelay& relay, const std::string& token, int rank) {
  core::CoordinatorClient client(relay.endpoint(), token);
  auto ctx = client.NewContext(milliseconds(10000));
  auto stream = client.stub().Heartbeat(ctx.get());
  v1::RankStatus s;
  s.set_rank(rank);
  stream->Write(s);
  stream->WritesDone();
  v1::Command cmd;
  while (stream->Read(&cmd)) {
  }
  return stream->Finish();
}

TEST(RankRelayTest, AStreamForAnotherRankOrForARankOfAnotherNodeIsRefused) {
  auto nowhere = std::make_shared<core::CoordinatorClient>("127.0.0.1:1", kToken);
  RankRelay relay(kToken, nowhere);
  relay.SetRanks({2, 3});
  EXPECT_EQ(OpenStream(relay, RankToken(kToken, 2), 3).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(OpenStream(relay, RankToken(kToken, 5), 5).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(OpenStream(relay, "wrong", 2).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(relay.refused_streams(), 3);
  EXPECT_TRUE(OpenStream(relay, RankToken(kToken, 2), 2).ok());
  EXPECT_TRUE(relay.TakeFresh().size() == 1u);
}

TEST(CallWaitersTest, AWaitEndsOnceWhenReadyAtItsDeadlineOrWhenCancelled) {
  CallWaiters waiters;
  std::atomic<bool> flag{false};
  std::promise<CallWaiters::End> ready_end, late_end, gone_end;
  std::atomic<int> gone_calls{0};
  auto ready = std::make_shared<CallWaiters::Waiter>(
      [&] { return flag.load(); }, CallWaiters::Clock::now() + std::chrono::hours(1),
      [&](CallWaiters::End e) { ready_end.set_value(e); });
  auto late = std::make_shared<CallWaiters::Waiter>(
      [] { return false; }, CallWaiters::Clock::now() + milliseconds(50),
      [&](CallWaiters::End e) { late_end.set_value(e); });
  auto gone = std::make_shared<CallWaiters::Waiter>(
      [] { return false; }, CallWaiters::Clock::now() + std::chrono::hours(1),
      [&](CallWaiters::End e) {
        ++gone_calls;
        gone_end.set_value(e);
      });
  ASSERT_TRUE(waiters.Add(ready));
  ASSERT_TRUE(waiters.Add(late));
  ASSERT_TRUE(waiters.Add(gone));
  flag = true;
  waiters.Poke();
  EXPECT_EQ(ready_end.get_future().get(), CallWaiters::End::kReady);
  auto l = late_end.get_future();
  ASSERT_EQ(l.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(l.get(), CallWaiters::End::kTimeout);
  waiters.Cancel(gone);
  waiters.Cancel(gone);
  waiters.EndAll();
  EXPECT_EQ(gone_end.get_future().get(), CallWaiters::End::kGone);
  EXPECT_EQ(gone_calls.load(), 1);
  EXPECT_EQ(waiters.size(), 0u);
  // A wait that is ready already is not held, and its `done` does not run.
  auto now = std::make_shared<CallWaiters::Waiter>([] { return true; }, CallWaiters::Clock::now(),
                                                   [](CallWaiters::End) { FAIL(); });
  EXPECT_FALSE(waiters.Add(now));
}

}  // namespace
}  // namespace dlaunch::launcher
