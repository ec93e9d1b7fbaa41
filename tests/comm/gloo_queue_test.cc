// The gloo communicator's queue with ranks as threads: a caller that waits runs the queued ops
// ahead of its own on its thread, in order, while the worker stands aside; ops that nobody waits
// for still complete (the worker takes them once callers are gone).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "core/comm/comm_options.h"
#include "core/comm/flight_recorder.h"
#include "tests/comm/rank_threads.h"

namespace dlaunch::core {
namespace {

using testing::GlooOptions;
using testing::RunRanks;
constexpr int kRanks = 3;
constexpr auto kWait = std::chrono::seconds(30);

TEST(GlooQueueTest, WaitingForTheLastOfABatchRunsThemAllInOrder) {
  auto store = MakeMemoryStore();
  RunRanks(kRanks, [&](int rank) {
    auto comm = MakeCommunicator(GlooOptions(rank, kRanks, store));
    constexpr int kOps = 60;
    std::vector<std::vector<float>> bufs(kOps, std::vector<float>(64));
    std::vector<std::shared_ptr<Work>> works;
    for (int i = 0; i < kOps; ++i) {
      std::fill(bufs[i].begin(), bufs[i].end(), static_cast<float>(rank + i));
      works.push_back(comm->AllReduce({bufs[i].data(), bufs[i].size()}, ReduceOp::kSum));
    }
    works.back()->Wait(kWait);
    for (int i = 0; i < kOps; ++i) {
      EXPECT_TRUE(works[i]->IsCompleted()) << "op " << i << " after the last";
      EXPECT_EQ(static_cast<float>(0 + 1 + 2 + kRanks * i), bufs[i][0]) << "op " << i;
    }
    for (const auto& e : comm->flight_recorder().Entries()) {
      EXPECT_EQ(OpState::kCompleted, e.state) << e.op << " " << e.seq;
    }
  });
}

TEST(GlooQueueTest, OpsNobodyWaitsForCompleteRightAfterACallerRanOps) {
  auto store = MakeMemoryStore();
  RunRanks(kRanks, [&](int rank) {
    auto comm = MakeCommunicator(GlooOptions(rank, kRanks, store));
    std::vector<float> buf(256, 1.0f);
    comm->AllReduce({buf.data(), buf.size()}, ReduceOp::kSum)->Wait(kWait);  // run by the caller
    // Right after: launched and never waited for, as DDP's buckets during the backward pass.
    std::vector<std::shared_ptr<Work>> works;
    for (int i = 0; i < 20; ++i) {
      works.push_back(comm->AllReduce({buf.data(), buf.size()}, ReduceOp::kMax));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!works.back()->IsCompleted()) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "queued ops never ran";
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(static_cast<float>(kRanks), buf[0]);
    comm->Barrier()->Wait(kWait);
  });
}

}  // namespace
}  // namespace dlaunch::core
