// The NCCL backend on a real GPU; skipped cleanly where none is visible.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "core/comm/comm_options.h"
#include "core/comm/flight_recorder.h"
#include "core/error.h"

namespace dlaunch::core {
namespace {

TEST(NcclTest, SingleRankAllReduceOnDevice) {
  if (!NcclAvailable()) GTEST_SKIP() << "no NCCL build or no visible GPU";
  CommOptions o;
  o.backend = "nccl";
  o.timeout = std::chrono::seconds(60);
  auto comm = MakeCommunicator(o);
  EXPECT_STREQ("nccl", comm->backend());
  EXPECT_EQ(DeviceType::kCuda, comm->device_type());
  std::vector<float> host(1 << 20, 2.0f);
  auto mem = comm->Allocate(host.size() * sizeof(float));
  Buffer buf = comm->MakeBuffer(mem.get(), host.size(), DataType::kFloat32);
  comm->CopyIn(buf, host.data());
  comm->AllReduce(buf, ReduceOp::kSum)->Wait(std::chrono::seconds(60));
  std::fill(host.begin(), host.end(), 0.0f);
  comm->CopyOut(host.data(), buf);
  EXPECT_EQ(2.0f, host[0]);
  EXPECT_EQ(2.0f, host.back());
  EXPECT_EQ(0, comm->flight_recorder().last_completed_seq());
}

TEST(NcclTest, HungInitIsAbortedInTime) {
  if (!NcclAvailable()) GTEST_SKIP() << "no NCCL build or no visible GPU";
  // Rank 1 of this world never arrives: the non-blocking init must be polled and
  // ncclCommAbort'ed at the deadline instead of waiting forever (works with one GPU).
  CommOptions o;
  o.backend = "nccl";
  o.rank = 0;
  o.size = 2;
  o.store = MakeMemoryStore();
  o.rendezvous_timeout = std::chrono::seconds(3);
  auto start = std::chrono::steady_clock::now();
  try {
    MakeCommunicator(o);
    FAIL() << "init of a world with an absent rank succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(ErrorKind::kTimeout, e.kind()) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace dlaunch::core
