// The argument rules every backend shares: one table of calls that must be refused, checked for
// host (gloo) and device (nccl) memory alike.
#include "core/comm/call_check.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace dlaunch::core {
namespace {

std::string Refusal(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    EXPECT_EQ(ErrorKind::kInvalidArgument, e.kind());
    return e.what();
  }
  return "";
}

class CallCheckTest : public ::testing::TestWithParam<DeviceType> {};

TEST_P(CallCheckTest, RefusesWhatNoBackendCanRun) {
  const DeviceType dev = GetParam();
  const DeviceType other = dev == DeviceType::kCpu ? DeviceType::kCuda : DeviceType::kCpu;
  CallCheck check(dev == DeviceType::kCpu ? "gloo" : "nccl", 1, 4, dev);
  float mem[64];
  auto buf = [&](size_t count, DataType t = DataType::kFloat32) {
    return Buffer{mem, count, t, dev, 0};
  };
  // Accepted shapes.
  EXPECT_NO_THROW(check.Buffer("allreduce", buf(8)));
  EXPECT_NO_THROW(check.Buffer("allreduce", Buffer{nullptr, 0, DataType::kFloat32, dev, 0}));
  EXPECT_NO_THROW(check.AllGather(buf(2), buf(8)));
  EXPECT_NO_THROW(check.ReduceScatter(buf(8), buf(2)));
  EXPECT_NO_THROW(check.AllToAll(buf(8), buf(8)));
  EXPECT_NO_THROW(check.Peer("send", 3));
  EXPECT_NO_THROW(check.Root("broadcast", 0));

  EXPECT_NE("", Refusal([&] {
              check.Buffer("allreduce", Buffer{mem, 4, DataType::kFloat32, other, 0});
            }));
  EXPECT_NE("", Refusal([&] { check.Buffer("allreduce", Buffer{nullptr, 4}); }));
  // Mismatched dtypes are refused by every backend (NCCL used to accept them).
  std::string why = Refusal([&] { check.AllGather(buf(2), buf(8, DataType::kInt32)); });
  EXPECT_NE(std::string::npos, why.find("input is float but output is int32")) << why;
  EXPECT_NE("", Refusal([&] { check.ReduceScatter(buf(8), buf(2, DataType::kFloat64)); }));
  EXPECT_NE("", Refusal([&] { check.AllToAll(buf(8), buf(8, DataType::kInt64)); }));
  why = Refusal([&] { check.AllGather(buf(2), buf(7)); });
  EXPECT_NE(std::string::npos, why.find("rank 1: ")) << why;
  EXPECT_NE(std::string::npos, why.find("allgather output must hold size() * input")) << why;
  EXPECT_NE("", Refusal([&] { check.ReduceScatter(buf(7), buf(2)); }));
  EXPECT_NE("", Refusal([&] { check.AllToAll(buf(6), buf(6)); }));
  EXPECT_NE("", Refusal([&] { check.AllToAll(buf(8), buf(4)); }));
  EXPECT_NE("", Refusal([&] { check.Peer("send", 1); }));  // self
  EXPECT_NE("", Refusal([&] { check.Peer("recv", 4); }));
  EXPECT_NE("", Refusal([&] { check.Peer("recv", -1); }));
  EXPECT_NE("", Refusal([&] { check.Root("broadcast", 4); }));
}

INSTANTIATE_TEST_SUITE_P(Devices, CallCheckTest,
                         ::testing::Values(DeviceType::kCpu, DeviceType::kCuda));

}  // namespace
}  // namespace dlaunch::core
