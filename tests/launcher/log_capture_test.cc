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
  EXPECT_EQ(PrefixLines(DefaultLinePrefix(3), {"a", "b"}), "[rank 3] a\n[rank 3] b\n");
  EXPECT_EQ(PrefixLines("[3]:", {"a"}), "[3]:a\n");
}

// torchrun's TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, as Python's Template.safe_substitute reads it.
TEST(PrefixLinesTest, TorchrunTemplateIsExpandedAsPythonDoes) {
  EXPECT_EQ(ExpandLinePrefix("[${role_name}${local_rank}]:", "default", 5, 1), "[default1]:");
  EXPECT_EQ(ExpandLinePrefix("[${rank}]:", "trainer", 5, 1), "[5]:");
  EXPECT_EQ(ExpandLinePrefix("$role_name-$rank/$local_rank ", "t", 12, 0), "t-12/0 ");
  // Unknown names, "$$", a lone "$", an unclosed brace and other cases stay as Python keeps them.
  EXPECT_EQ(ExpandLinePrefix("${host} $$ $ ${rank $RANK $1 $", "r", 2, 0),
            "${host} $ $ ${rank $RANK $1 $");
  EXPECT_EQ(ExpandLinePrefix("${rank}${rank}$ranks", "r", 7, 0), "77$ranks");
  EXPECT_EQ(ExpandLinePrefix("", "r", 7, 0), "");
  // torchrun 2.15's ${hostname}: the node's short name.
  EXPECT_EQ(ExpandLinePrefix("${hostname}:${rank}: ", "r", 3, 1, "r12i0n8"), "r12i0n8:3: ");
}

}  // namespace
}  // namespace dlaunch::launcher
