// ShmGroup's meetings with ranks as threads: each rank arrives by raising its own flag and waits
// for its peers' flags one by one, sleeping on the first missing one. A peer that arrives late
// (after the others went to sleep on its flag), in every position; the double-buffered slots
// staying race-free when the ranks drift apart; a rank that never arrives (timeout naming it,
// Abort releasing the sleepers); ranks that disagree on the op.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/comm/shm_group.h"
#include "core/error.h"
#include "tests/comm/rank_threads.h"

namespace dlaunch::core {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testing::JoinShmGroup;
using testing::RunRanks;

constexpr int kRanks = 4;

Clock::time_point In(milliseconds ms) { return Clock::now() + ms; }

// A small allreduce (one meeting) and a large one (pipelined over many): every rank's input is
// (rank + 1) * (round + 1), so a value read from a slot of another round shows in the sum.
void AllReduceRound(ShmGroup& g, int round, size_t count) {
  std::vector<float> buf(count, static_cast<float>((g.local_rank() + 1) * (round + 1)));
  g.AllReduce(buf.data(), count, DataType::kFloat32, ReduceOp::kSum, 0, -1,
              In(std::chrono::seconds(30)));
  const float want = static_cast<float>(10 * (round + 1));  // (1 + 2 + 3 + 4) * (round + 1)
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(want, buf[i]) << "rank " << g.local_rank() << " round " << round << " at " << i;
  }
}

TEST(ShmMeetingTest, APeerArrivingAfterTheOthersSleptOnItsFlagReleasesThem) {
  // Late by 60 ms: past the spin and yield phases, so the others are asleep on its flag.
  for (int late : {0, 2, kRanks - 1}) {
    auto store = MakeMemoryStore();
    std::vector<Clock::time_point> done(kRanks);
    Clock::time_point arrived;
    RunRanks(kRanks, [&](int r) {
      auto g = JoinShmGroup(r, kRanks, store);
      g->Barrier(In(std::chrono::seconds(30)));
      if (r == late) {
        std::this_thread::sleep_for(milliseconds(60));
        arrived = Clock::now();
      }
      AllReduceRound(*g, 0, 256);
      done[r] = Clock::now();
      g->Barrier(In(std::chrono::seconds(30)));
    });
    for (int r = 0; r < kRanks; ++r) EXPECT_GE(done[r], arrived) << "rank " << r;
  }
}

TEST(ShmMeetingTest, RanksDriftingApartNeverReadASlotOfAnotherRound) {
  // Each round a different rank is late by a different amount, so the ranks overtake each other
  // on the way in and out of every meeting: a slot reused before its readers are done, or a
  // flag read as a later round's, would show up as a wrong sum.
  auto store = MakeMemoryStore();
  RunRanks(kRanks, [&](int r) {
    auto g = JoinShmGroup(r, kRanks, store);
    for (int round = 0; round < 300; ++round) {
      if ((round * 7 + r * 3) % 11 == 0) {
        std::this_thread::sleep_for(std::chrono::microseconds((round % 5) * 150));
      }
      AllReduceRound(*g, round, round % 3 == 0 ? 3000 : 200);  // 3000 floats span 3 chunks
      if (::testing::Test::HasFatalFailure()) return;
    }
  });
}

TEST(ShmMeetingTest, ARankThatNeverArrivesIsNamedAtTheDeadline) {
  auto store = MakeMemoryStore();
  constexpr int kAbsent = 2;
  RunRanks(kRanks, [&](int r) {
    auto g = JoinShmGroup(r, kRanks, store);
    if (r == kAbsent) {
      // Present (attached, alive) but never at the meeting, until the others gave up.
      store->Get("gave_up", std::chrono::seconds(30));
      return;
    }
    const auto start = Clock::now();
    try {
      float x = 1;
      g->AllReduce(&x, 1, DataType::kFloat32, ReduceOp::kSum, 0, -1, In(milliseconds(300)));
      ADD_FAILURE() << "rank " << r << ": allreduce without rank " << kAbsent << " returned";
    } catch (const Error& e) {
      EXPECT_EQ(ErrorKind::kTimeout, e.kind()) << e.what();
      EXPECT_NE(std::string::npos, std::string(e.what()).find("not arrived: rank 12")) << e.what();
      EXPECT_GE(Clock::now() - start, milliseconds(300));
    }
    // Everyone stays until all gave up: a group destroyed earlier would read as a rank that left.
    if (store->Add("gave_up_count", 1) == kRanks - 1) store->Set("gave_up", "1");
    store->Get("gave_up", std::chrono::seconds(30));
  });
}

TEST(ShmMeetingTest, AbortReleasesRanksAsleepOnAMissingFlag) {
  auto store = MakeMemoryStore();
  constexpr int kAbsent = 3;
  std::vector<std::unique_ptr<ShmGroup>> groups(kRanks);
  RunRanks(kRanks, [&](int r) {
    groups[r] = JoinShmGroup(r, kRanks, store);
    store->Add("joined", 1);
    if (r == kAbsent) {
      store->Get("released", std::chrono::seconds(30));
      return;
    }
    std::thread aborter;
    if (r == 0) {
      // Abort once the others are long asleep on rank 3's flag.
      aborter = std::thread([&] {
        std::this_thread::sleep_for(milliseconds(200));
        groups[0]->Abort();
      });
    }
    const auto start = Clock::now();
    try {
      groups[r]->Barrier(In(std::chrono::seconds(20)));
      ADD_FAILURE() << "rank " << r << ": barrier without rank " << kAbsent << " returned";
    } catch (const Error& e) {
      EXPECT_LT(Clock::now() - start, std::chrono::seconds(5)) << e.what();
      const std::string what = e.what();
      EXPECT_NE(std::string::npos, what.find(r == 0 ? "communicator aborted" : "rank 10 aborted"))
          << what;
    }
    if (aborter.joinable()) aborter.join();
    if (store->Add("released_count", 1) == kRanks - 1) store->Set("released", "1");
    store->Get("released", std::chrono::seconds(30));
  });
}

TEST(ShmMeetingTest, RanksCallingDifferentOpsAllStopWithBothShapes) {
  auto store = MakeMemoryStore();
  RunRanks(kRanks, [&](int r) {
    auto g = JoinShmGroup(r, kRanks, store);
    std::vector<float> buf(64, 1.0f);
    const size_t count = r == 1 ? 63 : 64;
    try {
      g->AllReduce(buf.data(), count, DataType::kFloat32, ReduceOp::kSum, 0, -1,
                   In(std::chrono::seconds(30)));
      ADD_FAILURE() << "rank " << r << ": a mismatched allreduce returned";
    } catch (const Error& e) {
      EXPECT_EQ(ErrorKind::kInvalidArgument, e.kind()) << e.what();
      EXPECT_NE(std::string::npos, std::string(e.what()).find("allreduce of 63 float (sum)"))
          << e.what();
    }
  });
}

}  // namespace
}  // namespace dlaunch::core
