// A rank that skips a collective must turn into a report naming it, never a hang.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/comm/comm_options.h"
#include "core/comm/flight_recorder.h"
#include "core/error.h"
#include "tests/comm/rank_threads.h"
#include "tests/common/test_dir.h"

namespace dlaunch::core {
namespace {

namespace fs = std::filesystem;
using testing::GlooOptions;
using testing::RunRanks;

TEST(WatchdogTest, SkippedCollectiveIsReportedWithTheMissingRank) {
  constexpr int kSize = 3;
  constexpr int kSkipper = 2;
  const auto timeout = std::chrono::milliseconds(800);
  // A directory of its own: a stale dump from another run of this test must not be read as ours.
  const dlaunch::testing::TestDir tmp("watchdog");
  const fs::path& dir = tmp.path();
  auto store = MakeMemoryStore();
  std::mutex mu;
  std::vector<TimeoutReport> reports;

  RunRanks(kSize, [&](int rank) {
    CommOptions o = GlooOptions(rank, kSize, store, timeout);
    o.flight_dump_path = (dir / ("flight" + std::to_string(rank) + ".json")).string();
    o.on_timeout = [&](const TimeoutReport& r) {
      std::lock_guard<std::mutex> lock(mu);
      reports.push_back(r);
    };
    auto comm = MakeCommunicator(o);
    std::vector<float> buf(1024, 1.0f);
    comm->AllReduce({buf.data(), buf.size()}, ReduceOp::kSum)->Wait(std::chrono::seconds(10));
    if (rank == kSkipper) {
      // Stay away from seq 1 until the others have reported, then leave.
      store->Wait({"test/reported0", "test/reported1"}, std::chrono::seconds(20));
      return;
    }
    auto start = std::chrono::steady_clock::now();
    auto work = comm->AllReduce({buf.data(), buf.size()}, ReduceOp::kSum);
    try {
      // Wait longer than the collective timeout: the watchdog must end it first.
      work->Wait(std::chrono::seconds(20));
      ADD_FAILURE() << "allreduce without rank " << kSkipper << " completed";
    } catch (const Error& e) {
      EXPECT_EQ(ErrorKind::kTimeout, e.kind()) << e.what();
    }
    auto elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_LT(elapsed, timeout + std::chrono::seconds(1));
    // Not long before the timeout either: the first rank to time out closes its gloo
    // connections, so the other may end a little early, through "peer gone" plus the same lookup.
    EXPECT_GE(elapsed, timeout / 2);
    store->Set("test/reported" + std::to_string(rank), "1");
    // Keep the communicator until both have reported: a peer that tears down early turns the
    // other's timeout into "peer gone".
    store->Wait({"test/reported0", "test/reported1"}, std::chrono::seconds(20));
  });

  ASSERT_EQ(2u, reports.size());
  for (const auto& r : reports) {
    EXPECT_NE(kSkipper, r.rank);
    EXPECT_EQ(1, r.seq);
    EXPECT_EQ("allreduce", r.op);
    EXPECT_EQ(std::vector<int>{kSkipper}, r.missing_ranks);
    EXPECT_NE(std::string::npos, r.message.find("rank 2 missing from seq 1")) << r.message;
    auto body = nlohmann::json::parse(r.ToJson());
    EXPECT_EQ(800, body["timeout_ms"]);
    EXPECT_EQ(nlohmann::json::array({2}), body["missing_ranks"]);
  }
  // The timed-out ranks dumped their flight recorders, showing seq 1 as the stuck op.
  std::ifstream in(dir / "flight0.json");
  ASSERT_TRUE(in.good());
  auto doc = nlohmann::json::parse(in);
  EXPECT_EQ("timeout", doc["reason"]);
  ASSERT_EQ(2u, doc["entries"].size());
  EXPECT_EQ("completed", doc["entries"][0]["state"]);
  EXPECT_EQ(1, doc["entries"][1]["seq"]);
  EXPECT_EQ("started", doc["entries"][1]["state"]);
  // The skipper never timed out: its recorder was written only when its communicator went.
  std::ifstream skipper(dir / "flight2.json");
  ASSERT_TRUE(skipper.good());
  EXPECT_EQ("exit", nlohmann::json::parse(skipper)["reason"]);
}

TEST(WatchdogTest, AnOpItAbortsFailsWithItsReportOnlyOnceTheCallbackRan) {
  // A wait that gives up fires the watchdog, whose abort ends the op on the communicator's thread
  // while the firing is still under way. The op must fail with the report, and not before
  // on_timeout has run: a caller woken by the failure (the preflight hang test) reads what
  // on_timeout recorded.
  auto store = MakeMemoryStore();
  std::mutex mu;
  std::condition_variable cv;
  bool op_failed = false;
  bool failed_during_callback = false;
  RunRanks(2, [&](int rank) {
    CommOptions o = GlooOptions(rank, 2, store, std::chrono::seconds(5));
    o.on_timeout = [&](const TimeoutReport&) {
      // An event that must not come: wait a while for it all the same.
      std::unique_lock<std::mutex> lock(mu);
      failed_during_callback =
          cv.wait_for(lock, std::chrono::milliseconds(500), [&] { return op_failed; });
    };
    auto comm = MakeCommunicator(o);
    if (rank == 1) {
      store->Wait({"test/reported"}, std::chrono::seconds(20));
      return;
    }
    std::vector<float> buf(16, 1.0f);
    auto work = comm->AllReduce({buf.data(), buf.size()}, ReduceOp::kSum);
    // Waits shorter than the collective timeout leave the op to the communicator's thread.
    std::thread waiter([&] {
      try {
        work->Wait(std::chrono::seconds(3));
        ADD_FAILURE() << "allreduce without rank 1 completed";
      } catch (const Error& e) {
        EXPECT_EQ(ErrorKind::kTimeout, e.kind()) << e.what();
        EXPECT_NE(std::string::npos, std::string(e.what()).find("rank 1 missing from seq 0"))
            << e.what();
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        op_failed = true;
      }
      cv.notify_all();
    });
    EXPECT_THROW(work->Wait(std::chrono::milliseconds(200)), Error);  // fires the watchdog
    waiter.join();
    store->Set("test/reported", "1");
  });
  EXPECT_FALSE(failed_during_callback);
}

TEST(WatchdogTest, FiresWithoutAnyoneWaiting) {
  // Nobody calls Wait(): the watchdog thread alone must notice and report.
  auto store = MakeMemoryStore();
  std::promise<TimeoutReport> fired;
  auto fired_future = fired.get_future();
  RunRanks(2, [&](int rank) {
    CommOptions o = GlooOptions(rank, 2, store, std::chrono::milliseconds(300));
    if (rank == 0) o.on_timeout = [&](const TimeoutReport& r) { fired.set_value(r); };
    auto comm = MakeCommunicator(o);
    if (rank == 1) {
      store->Wait({"test/done"}, std::chrono::seconds(20));
      return;
    }
    std::vector<int32_t> buf(8);
    auto work = comm->Barrier();
    ASSERT_EQ(std::future_status::ready, fired_future.wait_for(std::chrono::seconds(5)));
    TimeoutReport r = fired_future.get();
    EXPECT_EQ("barrier", r.op);
    EXPECT_EQ(0, r.seq);
    EXPECT_EQ(std::vector<int>{1}, r.missing_ranks);
    // Later work fails at once: the communicator is aborted.
    auto later = comm->AllReduce({buf.data(), buf.size(), DataType::kInt32}, ReduceOp::kSum);
    EXPECT_THROW(later->Wait(std::chrono::seconds(5)), Error);
    store->Set("test/done", "1");
  });
}

TEST(WatchdogTest, AbortFailsQueuedWork) {
  auto store = MakeMemoryStore();
  RunRanks(2, [&](int rank) {
    auto comm = MakeCommunicator(GlooOptions(rank, 2, store, std::chrono::milliseconds(500)));
    if (rank == 1) {
      store->Wait({"test/aborted"}, std::chrono::seconds(20));
      return;
    }
    std::vector<float> buf(16);
    auto first = comm->Barrier();  // blocks the worker: rank 1 never joins
    auto queued = comm->AllReduce({buf.data(), buf.size()}, ReduceOp::kSum);
    comm->Abort();
    try {
      queued->Wait(std::chrono::seconds(5));
      ADD_FAILURE() << "queued work survived an abort";
    } catch (const Error& e) {
      EXPECT_NE(std::string::npos, std::string(e.what()).find("aborted")) << e.what();
    }
    EXPECT_THROW(first->Wait(std::chrono::seconds(5)), Error);
    store->Set("test/aborted", "1");
  });
}

// A rank process whose collective hangs exits with code 3 once the watchdog has reported, even
// when its main thread never comes back from elsewhere.
void HangThenBlockForever() {
  auto store = MakeMemoryStore();
  CommOptions o = GlooOptions(0, 2, store, std::chrono::milliseconds(300));
  o.exit_on_timeout = true;
  o.on_timeout = [](const TimeoutReport& r) {
    std::fprintf(stderr, "reported: %s\n", r.message.c_str());
  };
  std::thread peer([store] {
    // Rank 1 joins the rendezvous and then never calls the collective.
    auto comm = MakeCommunicator(GlooOptions(1, 2, store, std::chrono::seconds(60)));
    std::this_thread::sleep_for(std::chrono::seconds(60));
  });
  auto comm = MakeCommunicator(o);
  comm->Barrier();  // never waited for
  std::this_thread::sleep_for(std::chrono::seconds(60));
  peer.join();
}

TEST(WatchdogDeathTest, HungRankExitsWithCodeThree) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      HangThenBlockForever(), ::testing::ExitedWithCode(3),
      "reported: barrier seq 0 timed out after 300 ms on rank 0; rank 1 missing from seq 0");
}

}  // namespace
}  // namespace dlaunch::core
