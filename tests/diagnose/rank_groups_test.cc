// Ranks in the same state printed as one line once there are many.
#include "launcher/diagnose/rank_groups.h"

#include <gtest/gtest.h>

namespace dlaunch::launcher {
namespace {

RankDiagnosis Rank(int r, const std::string& rest, bool culprit = false) {
  RankDiagnosis d;
  d.rank = r;
  d.culprit = culprit;
  d.line = "rank " + std::to_string(r) + (culprit ? " [culprit]" : "") + ": " + rest;
  return d;
}

TEST(RankGroupsTest, FewRanksKeepTheirOwnLines) {
  const std::vector<RankDiagnosis> ranks = {Rank(0, "waiting in #3 for 4.1 s"),
                                            Rank(1, "waiting in #3 for 4.2 s")};
  EXPECT_EQ(GroupRankLines(ranks), (std::vector<std::string>{ranks[0].line, ranks[1].line}));
}

TEST(RankGroupsTest, AThousandRanksAreTheCulpritAndOneLineWithRanges) {
  std::vector<RankDiagnosis> ranks;
  for (int r = 0; r < 1024; ++r) {
    if (r == 777) {
      ranks.push_back(Rank(r, "never entered #1234; phase data for 312 s", true));
    } else {
      const double s = 4.1 + (r % 3) * 0.1;
      char wait[32];
      std::snprintf(wait, sizeof(wait), "%.1f s", s);
      ranks.push_back(Rank(r, std::string("waiting in #1234 for ") + wait +
                                  "; last completed #1233; rss " +
                                  (r % 2 ? "900 MiB" : "1.2 GiB")));
    }
  }
  ranks[5].line = "rank 5: exited with code 1";
  const std::vector<std::string> lines = GroupRankLines(ranks);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "rank 777 [culprit]: never entered #1234; phase data for 312 s");
  EXPECT_EQ(lines[1],
            "ranks 0-4,6-776,778-1023: waiting in #1234 for 4.1-4.3 s; last completed #1233; rss "
            "900 MiB-1.2 GiB");
  EXPECT_EQ(lines[2], "rank 5: exited with code 1");
}

}  // namespace
}  // namespace dlaunch::launcher
