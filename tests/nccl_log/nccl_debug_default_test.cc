// Which NCCL_DEBUG level the ranks get: INFO for train/preflight on NCCL unless told otherwise.
#include "launcher/nccl_log/nccl_debug_default.h"

#include <gtest/gtest.h>

namespace dlaunch::launcher::nccl_log {
namespace {

TEST(NcclDebugDefaultTest, InfoForBuiltinsUnlessTheUserChose) {
  EXPECT_EQ(ResolveNcclDebug("", true, {}, false), "INFO");
  EXPECT_EQ(ResolveNcclDebug("", true, {"--backend", "nccl"}, false), "INFO");
  EXPECT_EQ(ResolveNcclDebug("", true, {"--backend", "gloo"}, false), "");
  EXPECT_EQ(ResolveNcclDebug("", true, {"--backend=gloo"}, false), "");
  EXPECT_EQ(ResolveNcclDebug("", true, {}, true), "");    // NCCL_DEBUG already set
  EXPECT_EQ(ResolveNcclDebug("", false, {}, false), "");  // any other program: NCCL's default
  EXPECT_EQ(ResolveNcclDebug("off", true, {}, false), "");
  EXPECT_EQ(ResolveNcclDebug("WARN", true, {}, false), "WARN");
  EXPECT_EQ(ResolveNcclDebug("TRACE", false, {}, true), "TRACE");
}

}  // namespace
}  // namespace dlaunch::launcher::nccl_log
