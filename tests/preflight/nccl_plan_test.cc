// The NCCL communicator's GPU-free decisions (core/comm/nccl_plan.h): which NCCL can register
// buffers as -R asks, and the block offsets of alltoallv's grouped sends and receives.
#include "core/comm/nccl_plan.h"

#include <gtest/gtest.h>

namespace dlaunch::core {
namespace {

TEST(NcclPlanTest, VersionCodesFollowNcclH) {
  EXPECT_EQ(22809, NcclVersionCode(2, 28, 9));  // nccl.h's NCCL_VERSION_CODE of 2.28.9
  EXPECT_EQ(2804, NcclVersionCode(2, 8, 4));    // the old layout, before 2.9
  EXPECT_EQ("2.28.9", NcclVersionText(22809));
  EXPECT_EQ("2.8.4", NcclVersionText(2804));
  EXPECT_EQ("2.19.0", NcclVersionText(NcclVersionCode(2, 19, 0)));
}

TEST(NcclPlanTest, RegistrationNeedsNcclNewEnoughAtBuildAndRunTime) {
  const int v2289 = NcclVersionCode(2, 28, 9);
  for (auto reg :
       {BufferRegistration::kNone, BufferRegistration::kLocal, BufferRegistration::kSymmetric}) {
    EXPECT_EQ("", RegistrationRefusal(reg, v2289, v2289)) << RegistrationName(reg);
  }
  EXPECT_EQ("", RegistrationRefusal(BufferRegistration::kNone, 2804, 2804));
  // -R 1 came with 2.19, -R 2 with 2.27; the message says which NCCL is too old.
  const std::string built =
      RegistrationRefusal(BufferRegistration::kLocal, NcclVersionCode(2, 18, 3), v2289);
  EXPECT_NE(std::string::npos,
            built.find("needs NCCL 2.19.0 or later; dlaunch was built with 2.18.3"))
      << built;
  const std::string loaded =
      RegistrationRefusal(BufferRegistration::kSymmetric, v2289, NcclVersionCode(2, 26, 2));
  EXPECT_NE(std::string::npos, loaded.find("symmetric registration (ncclCommWindowRegister)"));
  EXPECT_NE(std::string::npos, loaded.find("the NCCL loaded is 2.26.2")) << loaded;
  EXPECT_EQ("", RegistrationRefusal(BufferRegistration::kLocal, v2289, NcclVersionCode(2, 26, 2)));
  EXPECT_STREQ("symmetric", RegistrationName(BufferRegistration::kSymmetric));
}

TEST(NcclPlanTest, BlockOffsetsAreRunningSums) {
  EXPECT_EQ((std::vector<size_t>{0, 16, 16, 48}), BlockOffsets({4, 0, 8, 1}, 4));
  EXPECT_TRUE(BlockOffsets({}, 4).empty());
}

}  // namespace
}  // namespace dlaunch::core
