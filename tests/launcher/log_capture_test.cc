#include "launcher/supervision/log_capture.h"

#include <gtest/gtest.h>

namespace dlaunch::launcher {
namespace {

TEST(LineSplitterTest, JoinsPiecesIntoWholeLines) {
  LineSplitter s;
  std::vector<std::string> lines;
  s.Feed("hel", &lines);
  EXPECT_TRUE(lines.empty());
  s.Feed("lo\nwor", &lines);
  s.Feed("ld\n\nlast", &lines);
  EXPECT_EQ(lines, (std::vector<std::string>{"hello", "world", ""}));
  EXPECT_EQ(s.Flush(), "last");
  EXPECT_EQ(s.Flush(), std::nullopt);
}

TEST(LineSplitterTest, CutsRunawayLines) {
  LineSplitter s;
  std::vector<std::string> lines;
  std::string big(LineSplitter::kMaxLine + 10, 'x');
  s.Feed(big, &lines);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].size(), LineSplitter::kMaxLine);
  EXPECT_EQ(s.Flush()->size(), 10u);
}

TEST(PrefixLinesTest, PrefixesEachLine) {
  EXPECT_EQ(PrefixLines(3, {"a", "b"}), "[rank 3] a\n[rank 3] b\n");
}

}  // namespace
}  // namespace dlaunch::launcher
