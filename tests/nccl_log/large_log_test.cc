// A 100 MB interleaved log of 512 ranks is read line by line in bounded memory: the peak RSS
// grows by far less than the file's size, and every rank comes out complete.
#include "tests/nccl_log/large_log.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "core/base/proc.h"
#include "launcher/nccl_log/parser.h"
#include "launcher/nccl_log/report.h"
#include "tests/common/test_dir.h"

namespace dlaunch::launcher::nccl_log {
namespace {

TEST(LargeLogTest, HundredMegabytesInBoundedMemory) {
  const dlaunch::testing::TestDir test_dir("nccl-large");
  const std::string path = test_dir.string() + "/nccl-large.log";
  const int64_t written = testing::WriteLargeNcclLog(path, 100 << 20);
  ASSERT_GE(written, 100 << 20);
  const int64_t before = base::PeakRssBytes();
  ParseResult p = ParseFiles({path});
  const int64_t grown = base::PeakRssBytes() - before;
  std::remove(path.c_str());
  EXPECT_EQ(p.bytes, written);
  EXPECT_TRUE(p.problems.empty());
  ASSERT_EQ(p.ranks.size(),
            static_cast<size_t>(testing::kLargeLogNodes * testing::kLargeLogGpusPerNode));
  EXPECT_LT(grown, 48 << 20) << "peak RSS grew by " << (grown >> 20) << " MiB";
  for (const RankLog& r : p.ranks) {
    ASSERT_EQ(r.step, InitStep::kComplete) << r.rank;
    ASSERT_GT(r.comms.size(), 10u);
  }
  NcclReport report = Analyze(std::move(p));
  EXPECT_TRUE(report.verdicts.empty()) << FormatReport(report);
  EXPECT_EQ(report.transports.cells[7][8], "IB/GDR");
}

}  // namespace
}  // namespace dlaunch::launcher::nccl_log
