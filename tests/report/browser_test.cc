// The report page in a real headless Chromium: it loads from a file with no console message,
// every plot is drawn, the axes carry the run directory's numbers, and what a real rank printed
// stays text.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "httplib.h"
#include "launcher/report/svg_chart.h"
#include "process_harness.h"
#include "tests/common/test_dir.h"
#include "tests/common/test_tools.h"
#include "tests/report/report_fixture.h"

namespace dlaunch::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

struct Page {
  int exit_code = -1;
  std::string dom;
  std::string log;
};

// Loads `url` in headless Chromium and returns the DOM after scripts ran, and its log.
std::string Chromium() { return FindTestTool({"chromium", "chromium-browser"}); }

Page LoadUrlInChromium(const std::string& url, const fs::path& scratch) {
  const fs::path profile = scratch / "chromium-profile";
  fs::create_directories(profile);
  Launched browser({Chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-background-networking", "--disable-component-update",
                    "--no-first-run", "--user-data-dir=" + profile.string(),
                    "--enable-logging=stderr", "--dump-dom", url});
  Page page;
  page.exit_code = browser.Wait(seconds(120));
  for (const auto& l : browser.out_lines) page.dom += l + "\n";
  page.log = browser.err_text();
  return page;
}

Page LoadInChromium(const fs::path& file, const fs::path& scratch) {
  return LoadUrlInChromium("file://" + fs::absolute(file).string(), scratch);
}

// The <svg> of one plot in the DOM.
std::string Plot(const std::string& dom, const std::string& id) {
  const size_t at = dom.find("data-plot=\"" + id + "\"");
  if (at == std::string::npos) return "";
  return dom.substr(at, dom.find("</svg>", at) - at);
}

std::vector<double> TickValues(const std::string& svg, const std::string& axis) {
  std::vector<double> out;
  const std::regex re("class=\"tick-" + axis + "\" data-value=\"([-0-9.e+]+)\"");
  for (std::sregex_iterator it(svg.begin(), svg.end(), re), end; it != end; ++it) {
    out.push_back(std::stod((*it)[1]));
  }
  return out;
}

std::vector<std::string> TickTexts(const std::string& svg, const std::string& axis) {
  std::vector<std::string> out;
  const std::regex re("class=\"tick-" + axis + "\"[^>]*>([^<]*)</text>");
  for (std::sregex_iterator it(svg.begin(), svg.end(), re), end; it != end; ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

// The top tick is the first round value at or above `max`: the axis was sized from the data.
void ExpectTopTickFits(const std::string& svg, double max, const std::string& what) {
  const std::vector<double> ticks = TickValues(svg, "y");
  ASSERT_GE(ticks.size(), 2u) << what;
  EXPECT_GE(ticks.back(), max) << what;
  EXPECT_LT(ticks[ticks.size() - 2], max) << what;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class ReportBrowserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DLAUNCH_REQUIRE_TOOL(Chromium(), "chromium", "scripts/install-deps.sh --test");
  }
};

TEST_F(ReportBrowserTest, DrawsEveryPlotWithTheRunsNumbers) {
  TestDir dir("report-browser");
  const fs::path run = dir.path() / "run";
  WriteFixtureRun(run.string());
  Launched report({DLAUNCH_BIN, "report", run.string()});
  ASSERT_EQ(report.Wait(seconds(60)), 0) << report.err_text();
  ASSERT_EQ(report.out_lines.size(), 1u);
  const fs::path file = report.out_lines[0];
  ASSERT_TRUE(fs::is_regular_file(file));

  const Page page = LoadInChromium(file, dir.path());
  ASSERT_EQ(page.exit_code, 0) << page.log;
  EXPECT_EQ(page.log.find("CONSOLE"), std::string::npos) << page.log;
  // The page's one script ran (the CSP hash admits it).
  EXPECT_NE(page.dom.find("data-rendered-ms=\""), std::string::npos);

  for (const char* id : {"memory", "phase-memory", "step-time", "comm-share", "busbw", "p2p",
                         "timeline", "loss", "accuracy"}) {
    const std::string svg = Plot(page.dom, id);
    ASSERT_FALSE(svg.empty()) << id << " missing";
    EXPECT_TRUE(svg.find("class=\"series") != std::string::npos ||
                svg.find("class=\"mark\"") != std::string::npos)
        << id << " is empty";
  }
  ExpectTopTickFits(Plot(page.dom, "memory"), kPeakRssMib, "memory MiB");
  ExpectTopTickFits(Plot(page.dom, "step-time"), kSlowStepMs, "step ms");
  ExpectTopTickFits(Plot(page.dom, "busbw"), kMaxBusbwGbps, "busbw GB/s");
  const std::vector<std::string> sizes = TickTexts(Plot(page.dom, "busbw"), "x");
  ASSERT_FALSE(sizes.empty());
  EXPECT_EQ(sizes.front(), launcher::report::FormatBytes(kMinSizeBytes));
  EXPECT_EQ(sizes.back(), launcher::report::FormatBytes(kMaxSizeBytes));
  const std::vector<double> steps = TickValues(Plot(page.dom, "step-time"), "x");
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.back(), kFixtureSteps);
  const std::string p2p = Plot(page.dom, "p2p");
  EXPECT_NE(p2p.find("1 -&gt; 2: 1 GB/s"), std::string::npos);
  EXPECT_EQ(Count(p2p, "stroke=\"#000\" stroke-width=\"1.5\""), 1u);  // the one flagged link
  EXPECT_NE(Plot(page.dom, "step-time").find("rank 1 (slow)"), std::string::npos);
  EXPECT_NE(Plot(page.dom, "memory").find("OOM r2"), std::string::npos);
}

TEST_F(ReportBrowserTest, WhatARealRankPrintsStaysText) {
  TestDir dir("report-browser");
  const fs::path logs = dir.path() / "logs";
  Launched job({DLAUNCH_BIN, "--nproc", "2", "--log-dir", logs.string(), "--run-id", "hostile",
                "--", "sh", "-c",
                "echo \"<script>document.title='pwned'</script><img src=x onerror=alert(1)>\" >&2; "
                "[ \"$RANK\" = 1 ] && exit 3; exit 0"});
  ASSERT_EQ(job.Wait(seconds(120)), 1) << job.err_text();
  Launched report({DLAUNCH_BIN, "report", (logs / "hostile").string()});
  ASSERT_EQ(report.Wait(seconds(60)), 0) << report.err_text();
  const fs::path file = logs / "hostile" / "report.html";
  ASSERT_TRUE(fs::is_regular_file(file));

  const Page page = LoadInChromium(file, dir.path());
  ASSERT_EQ(page.exit_code, 0) << page.log;
  EXPECT_EQ(page.log.find("CONSOLE"), std::string::npos) << page.log;
  EXPECT_EQ(Count(page.dom, "<script"), 1u);  // the page's own
  EXPECT_EQ(Count(page.dom, "<img"), 0u);
  EXPECT_EQ(page.dom.find("pwned</title>"), std::string::npos);
  EXPECT_NE(page.dom.find("&lt;script&gt;document.title='pwned'&lt;/script&gt;"), std::string::npos)
      << "the rank's line is shown as text";
}

// The same page for a running job, at `/` of node 0's --metrics-port server: a real 2-rank
// built-in train job, loaded once its ranks have reported steps.
TEST_F(ReportBrowserTest, TheLivePageOfARunningJobLoadsFromTheMetricsServer) {
  TestDir dir("report-browser");
  const fs::path logs = dir.path() / "logs";
  Launched job({DLAUNCH_BIN, "--nproc", "2", "--log-dir", logs.string(), "--run-id", "live",
                "--metrics-port", "0", "train", "--data", "synthetic", "--model", "mlp",
                "--no-preflight", "--steps", "100000"});
  const int port = WaitForMetricsPort(job, seconds(60));
  ASSERT_GT(port, 0) << job.err_text();
  ASSERT_TRUE(job.WaitFor(
      [&](const std::vector<std::string>& out) {
        return std::any_of(out.begin(), out.end(), [](const std::string& l) {
          return l.find("ms/step") != std::string::npos;
        });
      },
      seconds(90)))
      << job.err_text();
  const Page page = LoadUrlInChromium("http://127.0.0.1:" + std::to_string(port) + "/", dir.path());
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(10);
  ASSERT_EQ(page.exit_code, 0) << page.log;
  EXPECT_EQ(page.log.find("CONSOLE"), std::string::npos) << page.log;
  EXPECT_NE(page.dom.find("data-rendered-ms=\""), std::string::npos) << page.dom;
  EXPECT_NE(page.dom.find("dlaunch run live"), std::string::npos) << page.dom;
  EXPECT_NE(page.dom.find("verdict v-RUNNING"), std::string::npos) << page.dom;
  EXPECT_NE(page.dom.find("http-equiv=\"refresh\" content=\"5\""), std::string::npos);
  EXPECT_NE(page.dom.find("reloads every 5 s"), std::string::npos);
  for (const char* id : {"memory", "step-time", "comm-share"}) {
    const std::string svg = Plot(page.dom, id);
    ASSERT_FALSE(svg.empty()) << id << " missing";
    EXPECT_TRUE(svg.find("class=\"series") != std::string::npos ||
                svg.find("class=\"mark\"") != std::string::npos)
        << id << " is empty";
  }
  // Redrawn from the live run directory: a later answer is of a later moment of the job.
  auto as_of = [&] {
    std::string out;
    if (auto res = http.Get("/")) {
      const size_t at = res->body.find("still running (as of ");
      if (at != std::string::npos) out = res->body.substr(at, res->body.find(')', at) - at);
    }
    return out;
  };
  const std::string first = as_of();
  ASSERT_FALSE(first.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // past the 2 s the page is kept
  EXPECT_NE(as_of(), first);
  // The job goes on; SIGINT ends it as a user would (exit 130).
  ::kill(job.pid(), SIGINT);
  EXPECT_EQ(job.Wait(seconds(60)), 130) << job.err_text();
}

TEST_F(ReportBrowserTest, NotARunDirectoryIsExitTwo) {
  TestDir dir("report-browser");
  Launched report({DLAUNCH_BIN, "report", dir.string()});
  EXPECT_EQ(report.Wait(seconds(60)), 2);
  ASSERT_EQ(report.err_lines.size(), 1u) << report.err_text();
  EXPECT_NE(report.err_lines[0].find("is not a run directory"), std::string::npos);
}

}  // namespace
}  // namespace dlaunch::testing
