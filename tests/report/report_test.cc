// The report's logic over run directories written by core/run_dir's writers: what it reads, how
// it downsamples, what it escapes, and what it says about missing or hostile inputs.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "core/run_dir/paths.h"
#include "gtest/gtest.h"
#include "launcher/report/plots.h"
#include "launcher/report/report_command.h"
#include "launcher/report/report_data.h"
#include "launcher/report/report_page.h"
#include "launcher/report/svg_chart.h"
#include "tests/common/test_dir.h"
#include "tests/report/report_fixture.h"

namespace dlaunch::launcher::report {
namespace {

namespace fs = std::filesystem;
using dlaunch::testing::TestDir;

TEST(ReportEscape, EscapesMarkupQuotesAndBadBytes) {
  EXPECT_EQ(Escape("<script>a&b</script>"), "&lt;script&gt;a&amp;b&lt;/script&gt;");
  EXPECT_EQ(Escape("\"x\" 'y'"), "&quot;x&quot; &#39;y&#39;");
  EXPECT_EQ(Escape(std::string("a\x01\xff"
                               "b",
                               4)),
            "a\xEF\xBF\xBD\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(Escape("h\xC3\xA9"), "h\xC3\xA9");  // valid UTF-8 stays
}

TEST(ReportTicks, LinearTicksAreRoundAndCoverTheRange) {
  const std::vector<double> t = LinearTicks(0, 1000, 5);
  EXPECT_EQ(t.front(), 0);
  EXPECT_GE(t.back(), 1000);
  EXPECT_EQ(t[1], 200);
  const std::vector<double> odd = LinearTicks(0, 1.3, 5);
  EXPECT_GE(odd.back(), 1.3);
  EXPECT_LT(odd.back(), 1.3 + (odd[1] - odd[0]));
}

TEST(ReportTicks, Log2TicksArePowersOfTwoWithinBounds) {
  const std::vector<double> t = Log2Ticks(1024, 1 << 20, 8);
  EXPECT_EQ(t.front(), 1024);
  EXPECT_EQ(t.back(), 1 << 20);
  EXPECT_LE(t.size(), 8u);
  EXPECT_EQ(FormatBytes(t.back()), "1 MiB");
}

TEST(ReportDownsample, KeepsPeaksAndCountBounded) {
  std::vector<RankPoint> points(1000);
  for (size_t i = 0; i < points.size(); ++i) {
    points[i].t_s = i;
    points[i].rss_mib = i == 537 ? 9999 : 10;
    points[i].step_ms = 100;
  }
  const std::vector<RankPoint> out = Downsample(points, 200);
  ASSERT_EQ(out.size(), 200u);
  double peak = 0;
  for (const RankPoint& p : out) {
    peak = std::max(peak, p.rss_mib);
    EXPECT_EQ(p.step_ms, 100);
  }
  EXPECT_EQ(peak, 9999);
  EXPECT_EQ(out.back().t_s, 999);
  EXPECT_EQ(Downsample(points, 2000).size(), 1000u);
}

TEST(ReportSnapshot, ReadsTheFixtureRun) {
  TestDir dir("report");
  dlaunch::testing::WriteFixtureRun(dir.string());
  const ReportSnapshot s = LoadReportSnapshot(dir.string());
  EXPECT_EQ(s.world_size, 4);
  EXPECT_EQ(s.run_id, "fixture-run");
  EXPECT_FALSE(s.live);
  ASSERT_TRUE(s.exit_code);
  EXPECT_EQ(*s.exit_code, 1);
  EXPECT_EQ(s.verdict, "FAILED");
  ASSERT_EQ(s.ranks.size(), 4u);
  EXPECT_LE(s.ranks[3].points.size(), kMaxPointsPerRank);
  EXPECT_NEAR(s.ranks[3].peak_rss_mib, dlaunch::testing::kPeakRssMib, 0.01);
  EXPECT_EQ(SlowRanks(s), std::vector<int>{1});
  EXPECT_EQ(s.busbw.size(), 4u);  // two ops, out-of-place and in-place
  ASSERT_TRUE(s.p2p);
  ASSERT_EQ(s.p2p->slow.size(), 1u);
  EXPECT_EQ(s.p2p->slow[0], std::make_pair(1, 2));
  EXPECT_EQ(s.evals.size(), 3u);
  EXPECT_FALSE(s.phase_memory.empty());
  EXPECT_TRUE(std::any_of(s.markers.begin(), s.markers.end(),
                          [](const Marker& m) { return m.kind == "oom" && m.rank == 2; }));
}

TEST(ReportPage, HasEveryPlotAndEscapesRankOutput) {
  TestDir dir("report");
  dlaunch::testing::WriteFixtureRun(dir.string());
  const std::string page = RenderReportPage(LoadReportSnapshot(dir.string()));
  for (const char* plot : {"memory", "phase-memory", "step-time", "comm-share", "busbw", "p2p",
                           "timeline", "loss", "accuracy"}) {
    EXPECT_NE(page.find(std::string("data-plot=\"") + plot + "\""), std::string::npos) << plot;
  }
  // Our one script, and no other.
  size_t scripts = 0;
  for (size_t at = page.find("<script"); at != std::string::npos;
       at = page.find("<script", at + 1)) {
    ++scripts;
  }
  EXPECT_EQ(scripts, 1u);
  EXPECT_NE(page.find("&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;"),
            std::string::npos);
  EXPECT_EQ(page.find("http://"), page.find("http://www.w3.org/2000/svg"));  // no fetches
  EXPECT_EQ(page.find("https://", page.find("<body")), page.find("https://ui.perfetto.dev"));
}

TEST(ReportPage, SaysWhatIsMissing) {
  TestDir dir("report");
  fs::create_directories(dir.path() / "rank0");
  fs::create_directories(dir.path() / "rank1");
  std::ofstream(dir.path() / "summary.json") << "{\"schema\": \"dlaunch.summ";  // cut short
  std::ofstream(dir.path() / "rank1" / "events.jsonl") << "{not json\n\x01\x02\n";
  std::ofstream(dir.path() / "preflight.json") << "[]";
  ASSERT_TRUE(IsRunDir(dir.string()));
  const ReportSnapshot s = LoadReportSnapshot(dir.string());
  EXPECT_FALSE(s.problems.empty());
  const std::string page = RenderReportPage(s);
  EXPECT_NE(page.find("No memory figures"), std::string::npos);
  EXPECT_NE(page.find("summary.json"), std::string::npos);
  EXPECT_NE(page.find("What is missing"), std::string::npos);
  EXPECT_NE(page.find("</html>"), std::string::npos);
}

TEST(ReportPage, HostileFilesGiveAPageWithoutBlocking) {
  TestDir dir("report");
  fs::create_directories(dir.path() / "rank0");
  fs::create_directories(dir.path() / "rank1");
  // A FIFO would block a naive reader for ever; /dev/zero would never end.
  ASSERT_EQ(::mkfifo((dir.path() / "rank0" / "events.jsonl").c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", dir.path() / "rank1" / "events.jsonl");
  std::ofstream(dir.path() / "preflight.json")
      << R"({"schema": "dlaunch.preflight/1", "verdict": "PASS",
             "p2p": {"matrix_gbps": [[1, "x"], 7, [null]]},
             "bandwidth": [{"op": "<b>op</b>", "rows": [{"size": -1},
                            {"size": 1e308, "busbw_gbps": 1e308}]}]})";
  const std::string page = RenderReportPage(LoadReportSnapshot(dir.string()));
  EXPECT_EQ(page.find("<b>op"), std::string::npos);
  EXPECT_NE(page.find("&lt;b&gt;op"), std::string::npos);
  EXPECT_NE(page.find("rank0/events.jsonl"), std::string::npos);  // named as unreadable
  EXPECT_EQ(page.find("nan"), std::string::npos);
  EXPECT_EQ(page.find("inf\""), std::string::npos);
}

TEST(ReportCommand, ExitTwoForAPathThatIsNotARunDirectory) {
  TestDir dir("report");
  EXPECT_EQ(RunReportCommand({(dir.path() / "absent").string()}), 2);
  EXPECT_EQ(RunReportCommand({dir.string()}), 2);  // an empty directory
  std::ofstream(dir.path() / "file") << "x";
  EXPECT_EQ(RunReportCommand({(dir.path() / "file").string()}), 2);
  EXPECT_EQ(RunReportCommand({}), 2);
  EXPECT_EQ(RunReportCommand({dir.string(), "--bogus"}), 2);
  EXPECT_FALSE(fs::exists(dir.path() / "report.html"));
}

TEST(ReportCommand, WritesThePageWhereAsked) {
  TestDir dir("report");
  dlaunch::testing::WriteFixtureRun(dir.string());
  EXPECT_EQ(RunReportCommand({dir.string()}), 0);
  EXPECT_TRUE(fs::is_regular_file(rundir::RunDir(dir.string()).report()));
  const fs::path out = dir.path() / "elsewhere.html";
  EXPECT_EQ(RunReportCommand({dir.string(), "-o", out.string()}), 0);
  EXPECT_GT(fs::file_size(out), 1000u);
  // A page that cannot be written is exit 2, and the old page stays.
  EXPECT_EQ(RunReportCommand({dir.string(), "-o", (dir.path() / "no" / "such.html").string()}), 2);
}

TEST(ReportSnapshot, ALiveRunDirectoryReportsRunning) {
  TestDir dir("report");
  dlaunch::testing::WriteFixtureRun(dir.string());
  rundir::Summary summary;
  std::vector<std::string> problems;
  ASSERT_EQ(rundir::ReadSummary(rundir::RunDir(dir.string()).summary(), "s", &summary, &problems),
            rundir::FileState::kOk);
  summary.exit_code = -1;
  summary.error.clear();
  for (auto& r : summary.ranks)
    r.status = rundir::RankStatus::kRunning, r.end_unix_ms.reset(), r.exit_code.reset();
  rundir::WriteSummary(rundir::RunDir(dir.string()).summary(), summary);
  const ReportSnapshot s = LoadReportSnapshot(dir.string());
  EXPECT_TRUE(s.live);
  const std::string page = RenderReportPage(s);
  EXPECT_NE(page.find("still running"), std::string::npos);
}

}  // namespace
}  // namespace dlaunch::launcher::report
