// Golden tests of the table layout against nccl-tests' documented format: a reference
// all_reduce_perf output (fixtures/all_reduce_perf.txt, nccl-tests 2.19's layout) and dlaunch's
// table go through one parser, feature by feature, and through three public tools' parsing rules.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>

#include "tests/preflight/nccl_parsers.h"
#include "tests/preflight/recorded_gpu.h"
#include "worker/preflight/nccl_table.h"
#include "worker/preflight/op_table.h"

namespace dlaunch::worker {
namespace {

using namespace testing;

std::string Fixture() {
  std::ifstream in(std::string(PREFLIGHT_FIXTURES) + "/all_reduce_perf.txt");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

PreflightOptions Options() {
  PreflightOptions o =
      ParsePreflightArgs({"-b", "8", "-e", "1M", "-f", "2", "-w", "1", "-n", "20"});
  o.ResolveDefaults("gloo");
  return o;
}

// An allreduce sweep of 8 B .. 1 MiB on 4 ranks with plausible figures.
SweepResult AllReduceSweep() {
  SweepResult s;
  s.op = FindOp("allreduce");
  double sum = 0;
  for (size_t bytes : SweepSizes(8, 1 << 20, 2)) {
    SweepRow r;
    r.bytes = bytes;
    r.count = bytes / 4;
    r.dtype = "float";
    r.redop = "sum";
    r.root = -1;
    for (PlaceResult* p : {&r.out_of_place, &r.in_place}) {
      p->time_us = 20 + bytes / 1000.0;
      p->algbw = OpAlgBw(*s.op, r.count, 4, p->time_us * 1e-6, 4);
      p->busbw = OpBusBw(*s.op, p->algbw, 4);
      p->checked = true;
      sum += p->busbw;
    }
    s.rows.push_back(r);
  }
  s.avg_busbw = sum / (2 * s.rows.size());
  return s;
}

std::vector<DeviceInfo> Devices() {
  std::vector<DeviceInfo> d;
  for (int r = 0; r < 4; ++r) d.push_back({r, 1000 + r, "node-a", r, "CPU (gloo)"});
  return d;
}

std::string Ours() { return FormatSweepTable(AllReduceSweep(), Options(), Devices()); }

TEST(NcclFormatTest, FixtureIsReadable) {
  NcclTestsSection ref = ParseNcclTests(Fixture());
  ASSERT_EQ("all_reduce_perf", ref.starting);
  EXPECT_EQ(25u, ref.rows.size());
  EXPECT_EQ(8u, ref.device_lines.size());
}

TEST(NcclFormatTest, SectionStartsAndEndsLikeThePerfProgram) {
  NcclTestsSection ours = ParseNcclTests(Ours());
  EXPECT_EQ("all_reduce_perf", ours.starting);
  EXPECT_EQ("all_reduce_perf", ours.concluded);
  std::string text = Ours();
  EXPECT_NE(std::string::npos,
            text.find("# nThread 1 nGpus 1 minBytes 8 maxBytes 1048576 step: 2(factor) warmup "
                      "iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0\n#\n"));
  // -G N shows in the header as nccl-tests prints its graph launches.
  PreflightOptions graphs = Options();
  graphs.graph_launches = 2;
  EXPECT_NE(std::string::npos, FormatSweepTable(AllReduceSweep(), graphs, Devices())
                                   .find("validation: 1 graph: 2 unalign: 0\n"));
}

TEST(NcclFormatTest, UsingDevicesBlock) {
  NcclTestsSection ref = ParseNcclTests(Fixture()), ours = ParseNcclTests(Ours());
  ASSERT_EQ(4u, ours.device_lines.size());
  // Both parse with one rule, field for field.
  for (const auto* lines : {&ref.device_lines, &ours.device_lines}) {
    for (size_t r = 0; r < lines->size(); ++r) {
      DeviceInfo d;
      ASSERT_TRUE(ParseDeviceLine((*lines)[r], &d)) << (*lines)[r];
      EXPECT_EQ(static_cast<int>(r), d.rank);
    }
  }
  DeviceInfo d;
  ASSERT_TRUE(ParseDeviceLine(ours.device_lines[2], &d));
  EXPECT_EQ(1002, d.pid);
  EXPECT_EQ("node-a", d.host);
  EXPECT_EQ("CPU (gloo)", d.name);
}

TEST(NcclFormatTest, TwoColumnGroupsWithIdenticalHeaders) {
  NcclTestsSection ref = ParseNcclTests(Fixture()), ours = ParseNcclTests(Ours());
  EXPECT_EQ(ref.group_line, ours.group_line);
  EXPECT_EQ(ref.header_line, ours.header_line);
  EXPECT_EQ(ref.units_line, ours.units_line);
  EXPECT_NE(std::string::npos, ours.group_line.find("in-place"));
}

TEST(NcclFormatTest, RowsHaveTheSameCellsAndWidths) {
  NcclTestsSection ref = ParseNcclTests(Fixture()), ours = ParseNcclTests(Ours());
  ASSERT_EQ(18u, ours.rows.size());
  const std::regex number(R"(-?\d+(\.\d+)?(e[+-]\d+)?)");
  for (const auto* rows : {&ref.rows, &ours.rows}) {
    for (const auto& row : *rows) {
      ASSERT_EQ(13u, row.size());
      for (size_t c : {0, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12}) {
        EXPECT_TRUE(std::regex_match(row[c], number)) << row[c];
      }
    }
  }
  // Fixed widths: the line of the same size has the same length in both.
  auto ref_lines = Lines(Fixture()), our_lines = Lines(Ours());
  auto row_of = [](const std::vector<std::string>& lines, const std::string& size) {
    for (const auto& l : lines)
      if (!l.empty() && l[0] != '#' && !Fields(l).empty() && Fields(l)[0] == size) return l;
    return std::string();
  };
  EXPECT_EQ(row_of(ref_lines, "1024").size(), row_of(our_lines, "1024").size());
  EXPECT_EQ(FloatCell(3.14159, 7), "   3.14");
  EXPECT_EQ(FloatCell(123456.7, 6), "123457");
  EXPECT_EQ(FloatCell(12345678.0, 7), "1.2e+07");
}

TEST(NcclFormatTest, UncheckedColumnsReadNA) {
  SweepResult s = AllReduceSweep();
  s.op = FindOp("alltoall");
  for (SweepRow& r : s.rows) r.in_place.checked = false;
  NcclTestsSection ours = ParseNcclTests(FormatSweepTable(s, Options(), Devices()));
  ASSERT_FALSE(ours.rows.empty());
  EXPECT_EQ("N/A", ours.rows[0][12]);
  EXPECT_EQ("0", ours.rows[0][8]);
  EXPECT_EQ("alltoall_perf", ours.starting);
}

TEST(NcclFormatTest, OutOfBoundsAndAverageLines) {
  NcclTestsSection ref = ParseNcclTests(Fixture()), ours = ParseNcclTests(Ours());
  const std::regex oob(R"(# Out of bounds values : \d+ (OK|FAILED))");
  const std::regex avg(R"(# Avg bus bandwidth    : [0-9.e+-]+ )");
  for (const auto* s : {&ref, &ours}) {
    EXPECT_TRUE(std::regex_match(s->out_of_bounds_line, oob)) << s->out_of_bounds_line;
    EXPECT_TRUE(std::regex_match(s->avg_line, avg)) << "[" << s->avg_line << "]";
  }
  SweepResult bad = AllReduceSweep();
  bad.out_of_bounds = 2;
  EXPECT_NE(
      std::string::npos,
      FormatSweepTable(bad, Options(), Devices()).find("# Out of bounds values : 2 FAILED\n"));
}

TEST(NcclFormatTest, SkippedOpIsOneCommentLine) {
  SweepResult s;
  s.op = FindOp("sendrecv");
  s.skipped = "needs at least 2 ranks";
  EXPECT_EQ("# sendrecv_perf skipped: needs at least 2 ranks\n\n",
            FormatSweepTable(s, Options(), Devices()));
}

// The three public tools' rules give the same kind of answer on the fixture and on dlaunch's
// table.
TEST(NcclFormatTest, PublicParsersReadBoth) {
  for (const std::string& text : {Fixture(), Ours()}) {
    auto flagperf = FlagPerfAvgBusBw(text);
    ASSERT_EQ(1u, flagperf.size());
    EXPECT_GT(std::stod(flagperf[0]), 0);

    double old_sb = SuperbenchOld(text);
    EXPECT_FALSE(std::isnan(old_sb));
    EXPECT_GT(old_sb, 0);

    auto new_oop = SuperbenchNew(text, false), new_ip = SuperbenchNew(text, true);
    EXPECT_FALSE(new_oop.empty());
    EXPECT_EQ(new_oop.size(), new_ip.size());

    double avg = -1;
    auto aws = AwsNcclToCsv(text, &avg);
    EXPECT_EQ(ParseNcclTests(text).rows.size(), aws.size());
    EXPECT_GT(avg, 0);
  }
  // The figures they read are the ones dlaunch computed.
  SweepResult s = AllReduceSweep();
  auto sb = SuperbenchNew(Ours(), false);
  EXPECT_NEAR(s.rows.back().out_of_place.busbw, sb[1 << 20], 0.01);
}

// Tables recorded on GPU machines by scripts/gpu-check.sh (fixtures/gpu/*.txt, rank 0's stdout of
// an NCCL preflight): every op's section keeps nccl-tests' layout.
TEST(NcclFormatTest, RecordedGpuTablesKeepTheLayout) {
  const auto files = RecordedGpuFiles(".txt");
  if (files.empty()) GTEST_SKIP() << "no GPU recordings (scripts/gpu-check.sh import)";
  const NcclTestsSection ref = ParseNcclTests(Fixture());
  for (const auto& path : files) {
    std::ifstream in(path);
    std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const std::string kStart = "# Collective test starting: ";
    int sections = 0;
    for (size_t at = text.find(kStart); at != std::string::npos; at = text.find(kStart, at + 1)) {
      const std::string section = text.substr(at, text.find(kStart, at + 1) - at);
      NcclTestsSection s = ParseNcclTests(section);
      ++sections;
      EXPECT_EQ(ref.header_line, s.header_line) << path << " " << s.starting;
      EXPECT_FALSE(s.device_lines.empty()) << path;
      for (const auto& row : s.rows) EXPECT_EQ(13u, row.size()) << path;
      EXPECT_EQ(1u, FlagPerfAvgBusBw(section).size()) << path;
    }
    EXPECT_GT(sections, 0) << path << " holds no nccl-tests section";
  }
}

TEST(NcclFormatTest, CsvHasOneLinePerRowAndBothGroups) {
  std::string csv = CsvHeader() + FormatSweepCsv(AllReduceSweep());
  auto lines = Lines(csv);
  ASSERT_EQ(19u, lines.size());
  EXPECT_EQ(14, std::count(lines[0].begin(), lines[0].end(), ',') + 1);
  EXPECT_EQ(0u, lines[1].rfind("allreduce,8,2,float,sum,-1,", 0));
  EXPECT_EQ(13, std::count(lines[5].begin(), lines[5].end(), ','));
}

}  // namespace
}  // namespace dlaunch::worker
