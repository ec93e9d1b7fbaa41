// On a GPU: the NCCL communicator's CUDA-graph capture, buffer registration (-R 1 and 2) and
// alltoallv, then the preflight suite on NCCL with -G and -R, every op verified (#wrong 0). One
// rank in this process (NCCL takes one rank per device in a communicator); scripts/gpu-check.sh
// runs the multi-rank preflights. Skipped where no CUDA device is visible.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/comm/comm_options.h"
#include "core/store.h"
#include "tests/common/test_dir.h"
#include "worker/preflight/preflight.h"

namespace dlaunch::worker {
namespace {

namespace fs = std::filesystem;
using core::Buffer;
using core::BufferRegistration;
using core::DataType;

constexpr std::chrono::seconds kWait{60};

class NcclGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!core::NcclAvailable()) GTEST_SKIP() << "no NCCL build or no visible GPU";
    core::CommOptions o;
    o.backend = "nccl";
    o.timeout = std::chrono::seconds(60);
    comm_ = core::MakeCommunicator(o);
  }

  // `count` floats on the device, filled with `value`.
  std::shared_ptr<void> Floats(size_t count, float value,
                               BufferRegistration reg = BufferRegistration::kNone) {
    auto mem = comm_->AllocateRegistered(count * sizeof(float), reg);
    std::vector<float> host(count, value);
    comm_->CopyIn(comm_->MakeBuffer(mem.get(), count, DataType::kFloat32), host.data());
    return mem;
  }
  std::vector<float> Read(const std::shared_ptr<void>& mem, size_t count) {
    std::vector<float> host(count);
    comm_->CopyOut(host.data(), comm_->MakeBuffer(mem.get(), count, DataType::kFloat32));
    return host;
  }

  std::unique_ptr<core::Communicator> comm_;
};

// The ops run when the graph is launched, not when it is captured, and read the buffers as they
// are at launch.
TEST_F(NcclGpuTest, CapturedOpsRunOnLaunch) {
  const size_t n = 1 << 20;
  auto in = Floats(n, 1.0f), out = Floats(n, 0.0f);
  Buffer bin = comm_->MakeBuffer(in.get(), n, DataType::kFloat32);
  Buffer bout = comm_->MakeBuffer(out.get(), n, DataType::kFloat32);
  auto graph = comm_->Capture([&] {
    for (int i = 0; i < 3; ++i) comm_->AllReduce(bin, bout, core::ReduceOp::kSum)->Wait(kWait);
  });
  EXPECT_EQ(0.0f, Read(out, n)[n - 1]) << "an op ran during capture";
  std::vector<float> sevens(n, 7.0f);
  comm_->CopyIn(bin, sevens.data());
  graph->Launch(2)->Wait(kWait);
  EXPECT_EQ(7.0f, Read(out, n)[n - 1]);
}

TEST_F(NcclGpuTest, RegisteredBuffersCarryCollectives) {
  for (BufferRegistration reg : {BufferRegistration::kLocal, BufferRegistration::kSymmetric}) {
    const size_t n = 1 << 18;
    auto in = Floats(n, 3.0f, reg), out = Floats(n, 0.0f, reg);
    comm_
        ->AllReduce(comm_->MakeBuffer(in.get(), n, DataType::kFloat32),
                    comm_->MakeBuffer(out.get(), n, DataType::kFloat32), core::ReduceOp::kSum)
        ->Wait(kWait);
    EXPECT_EQ(3.0f, Read(out, n)[n / 2]) << static_cast<int>(reg);
  }
}

TEST_F(NcclGpuTest, AllToAllVOnOneRankCopiesItsBlock) {
  auto in = Floats(64, 5.0f), out = Floats(64, 0.0f);
  comm_
      ->AllToAllV(comm_->MakeBuffer(in.get(), 64, DataType::kFloat32), {64},
                  comm_->MakeBuffer(out.get(), 64, DataType::kFloat32), {64})
      ->Wait(kWait);
  EXPECT_EQ(5.0f, Read(out, 64)[63]);
}

// The suite on NCCL with nccl-tests' -G and -R: every op of the table, both column groups,
// verified.
TEST_F(NcclGpuTest, PreflightWithGraphsAndRegistration) {
  comm_.reset();  // the suite makes its own on this device
  const std::vector<std::vector<std::string>> variants = {{"-G", "2"}, {"-R", "1"}, {"-R", "2"}};
  for (const auto& v : variants) {
    const dlaunch::testing::TestDir test_dir("preflight-gpu");
    const fs::path dir = test_dir.path();
    fs::create_directories(dir / "rank0");
    PreflightContext ctx;
    ctx.store = core::MakeMemoryStore();
    ctx.run_dir = dir.string();
    ctx.rank_dir = (dir / "rank0").string();
    std::vector<std::string> args = {"--backend", "nccl", "-b", "8",  "-e",
                                     "16M",       "-f",   "16", "-w", "2",
                                     "-n",        "5",    "-T", "60", "--no-hang-test"};
    args.insert(args.end(), v.begin(), v.end());
    ASSERT_EQ(0, RunPreflight(ctx, args)) << v[0] << " " << v[1];
    std::ifstream in(dir / "preflight.json");
    auto doc = nlohmann::json::parse(in);
    EXPECT_EQ("PASS", doc["verdict"]) << doc["reasons"].dump();
    EXPECT_EQ(10u, doc["bandwidth"].size());
    for (const auto& op : doc["bandwidth"]) {
      if (op.contains("skipped")) continue;  // sendrecv needs two ranks
      EXPECT_EQ(0, op["out_of_bounds"]) << op["op"] << " " << v[0] << " " << v[1];
    }
  }
}

}  // namespace
}  // namespace dlaunch::worker
