// What tools read from `dlaunch preflight`, end to end through the real launcher and real rank
// processes on Gloo: stdout holds the --json or --csv document alone (with and without -q), and
// rank0/<perf_name>.txt holds one op's table, which the nccl-tests parsers of FlagPerf, superbench
// (both rules) and AWS's nccl_to_csv read as that one program's output (tests/preflight/
// nccl_parsers.h restates their rules). doctor --json and diagnose --json keep stdout clean too.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "core/run_dir/paths.h"
#include "core/run_dir/report_files.h"
#include "tests/common/test_dir.h"
#include "tests/preflight/nccl_parsers.h"
#include "tests/preflight/process_util.h"

namespace {

namespace fs = std::filesystem;
using dlaunch::worker::testing::AwsNcclToCsv;
using dlaunch::worker::testing::Fields;
using dlaunch::worker::testing::FlagPerfAvgBusBw;
using dlaunch::worker::testing::Lines;
using dlaunch::worker::testing::ParseNcclTests;
using dlaunch::worker::testing::SuperbenchNew;
using dlaunch::worker::testing::SuperbenchOld;

using dlaunch::testing::Binary;
using dlaunch::testing::ReadFile;
using dlaunch::testing::RunCommand;

const std::string kDlaunch = Binary("DLAUNCH_TEST_BIN", DLAUNCH_BIN);
const std::string kWorker = Binary("DLAUNCH_TEST_WORKER", DLAUNCH_WORKER_BIN);

// Small sizes, and a slow-link factor no shared machine fails, so the verdict is PASS.
constexpr char kSmall[] =
    " --backend gloo -b 8 -e 64K -f 64 -w 1 -n 2 --collective-timeout 2 --p2p-bytes 64K"
    " --p2p-iters 3 --slow-link-factor 0.001";

class PreflightOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kDlaunch) || !fs::exists(kWorker)) {
      GTEST_SKIP() << "dlaunch or dlaunch-worker not built: " << kDlaunch << ", " << kWorker;
    }
  }
  // `dlaunch [flags] --nproc 2 preflight <args>` with stdout and stderr in files of their own.
  int Preflight(const std::string& flags, const std::string& args) {
    return RunCommand("timeout 120 env DLAUNCH_WORKER=" + kWorker + " " + kDlaunch + " " + flags +
                      " --nproc 2 --skip-doctor --log-dir " + logs_.string() + " --run-id pf" +
                      " preflight " + args + kSmall + " > " + out_.string() + " 2> " +
                      err_.string());
  }
  const dlaunch::testing::TestDir dir_{"preflight-output"};
  const fs::path logs_ = dir_.path();
  const fs::path out_ = logs_ / "out.txt";
  const fs::path err_ = logs_ / "err.txt";
  const fs::path run_ = logs_ / "pf";
};

TEST_F(PreflightOutputTest, JsonOnStdoutIsTheDocumentAloneWithAndWithoutQuiet) {
  for (const char* flags : {"", "-q"}) {
    fs::remove_all(run_);
    ASSERT_EQ(0, Preflight(flags, "--json")) << ReadFile(err_);
    const std::string out = ReadFile(out_);
    // json.load's strictness: the whole stream is one document, nothing before or after it.
    nlohmann::json doc = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << flags << ": stdout is not one JSON document:\n" << out;
    EXPECT_EQ("PASS", doc["verdict"]) << flags;
    EXPECT_EQ(2, doc["world_size"]) << flags;
    EXPECT_EQ(10u, doc["bandwidth"].size()) << flags;
    // The same verdict as the run directory's preflight.json; the notes went to stderr.
    nlohmann::json file = nlohmann::json::parse(ReadFile(run_ / "preflight.json"));
    EXPECT_EQ(file["bandwidth"], doc["bandwidth"]) << flags;
    EXPECT_EQ(std::string::npos, out.find("[rank ")) << flags;
    if (std::string(flags).empty()) {
      EXPECT_NE(std::string::npos, ReadFile(err_).find("[rank 0] # verdict: PASS"));
    }
  }
}

TEST_F(PreflightOutputTest, CsvOnStdoutIsTheDocumentAloneWithAndWithoutQuiet) {
  for (const char* flags : {"", "-q"}) {
    fs::remove_all(run_);
    ASSERT_EQ(0, Preflight(flags, "--csv")) << ReadFile(err_);
    const std::vector<std::string> lines = Lines(ReadFile(out_));
    ASSERT_FALSE(lines.empty()) << flags << ": stdout is empty";
    EXPECT_EQ(0u, lines.front().rfind("op,size,count,type,redop,root,time_us,", 0)) << flags;
    nlohmann::json doc = nlohmann::json::parse(ReadFile(run_ / "preflight.json"));
    size_t rows = 0;
    for (const auto& op : doc["bandwidth"]) rows += op["rows"].size();
    EXPECT_EQ(rows + 1, lines.size()) << flags;
    for (const std::string& line : lines) {
      EXPECT_EQ(13, std::count(line.begin(), line.end(), ',')) << flags << ": " << line;
    }
  }
}

// The default text keeps the tables on stdout, with the console's rank prefixes.
TEST_F(PreflightOutputTest, TextStaysOnStdout) {
  ASSERT_EQ(0, Preflight("", "")) << ReadFile(err_);
  EXPECT_NE(std::string::npos, ReadFile(out_).find("[rank 0] # Avg bus bandwidth"));
}

// Each op file read by the four parsers gives that op's numbers and nothing else; the run's
// stdout, ten ops in a row, is what they cannot read (FlagPerf gets ten numbers, superbench
// the last op's table).
TEST_F(PreflightOutputTest, EachOpFileFeedsTheNcclTestsParsers) {
  ASSERT_EQ(0, Preflight("-q", "--json")) << ReadFile(err_);
  nlohmann::json doc = nlohmann::json::parse(ReadFile(run_ / "preflight.json"));
  const dlaunch::rundir::RankDir rank0((run_ / "rank0").string());
  const std::map<std::string, std::string> perf = {{"allreduce", "all_reduce_perf"},
                                                   {"allgather", "all_gather_perf"},
                                                   {"reduce_scatter", "reduce_scatter_perf"},
                                                   {"broadcast", "broadcast_perf"},
                                                   {"reduce", "reduce_perf"},
                                                   {"alltoall", "alltoall_perf"},
                                                   {"gather", "gather_perf"},
                                                   {"scatter", "scatter_perf"},
                                                   {"sendrecv", "sendrecv_perf"},
                                                   {"alltoallv", "alltoallv_perf"}};
  ASSERT_EQ(perf.size(), doc["bandwidth"].size());
  for (const auto& op : doc["bandwidth"]) {
    const std::string name = op["op"];
    ASSERT_TRUE(perf.count(name)) << name;
    const std::string path = rank0.op_table(perf.at(name));
    std::string table;
    std::vector<std::string> problems;
    ASSERT_EQ(dlaunch::rundir::FileState::kOk,
              dlaunch::rundir::ReadOpTable(path, name, &table, &problems))
        << path;
    EXPECT_TRUE(problems.empty()) << problems.front();
    const std::string text = ReadFile(path);  // what a tool reads: the schema line included
    const auto section = ParseNcclTests(text);
    EXPECT_EQ(perf.at(name), section.starting);
    ASSERT_EQ(op["rows"].size(), section.rows.size()) << name;

    // The printed out-of-place busbw cells, the number each parser should report.
    double max_oop = -1;
    std::map<long, double> by_size;
    for (const auto& row : section.rows) {
      const double busbw = std::stod(row[row.size() - 6]);
      max_oop = std::max(max_oop, busbw);
      if (std::stol(row[0]) != 0) by_size[std::stol(row[0])] = busbw;
    }
    // FlagPerf: one number, which `float($data)` accepts, equal to the Avg line.
    auto flagperf = FlagPerfAvgBusBw(text);
    ASSERT_EQ(1u, flagperf.size()) << name;
    EXPECT_NEAR(op["avg_busbw_gbps"].get<double>(), std::stod(flagperf[0]),
                1e-5 + 1e-5 * op["avg_busbw_gbps"].get<double>())
        << name;
    // superbench, old rule: the largest out-of-place busbw of this table.
    const double old_sb = SuperbenchOld(text);
    EXPECT_FALSE(std::isnan(old_sb)) << name << ": superbench would report an invalid format";
    EXPECT_DOUBLE_EQ(max_oop, old_sb) << name;
    // superbench, new rule: every non-zero size of this table, with its busbw.
    EXPECT_EQ(by_size, SuperbenchNew(text, false)) << name;
    EXPECT_EQ(by_size.size(), SuperbenchNew(text, true).size()) << name;
    // AWS nccl_to_csv: every row, and the Avg line.
    double avg = -1;
    EXPECT_EQ(section.rows.size(), AwsNcclToCsv(text, &avg).size()) << name;
    EXPECT_NEAR(std::stod(flagperf[0]), avg, 1e-9) << name;
  }
  // Ops that did not run leave no file.
  EXPECT_FALSE(fs::exists(run_ / "rank1" / "all_reduce_perf.txt"));
}

TEST_F(PreflightOutputTest, DoctorAndDiagnoseJsonAreTheDocumentAlone) {
  ASSERT_EQ(0, Preflight("-q", "--json")) << ReadFile(err_);
  for (const std::string& args :
       {std::string("doctor --json"), "diagnose " + run_.string() + " --json --trace"}) {
    ASSERT_EQ(0, RunCommand("timeout 120 " + kDlaunch + " " + args + " > " + out_.string() +
                            " 2> " + err_.string()))
        << args << ": " << ReadFile(err_);
    nlohmann::json doc = nlohmann::json::parse(ReadFile(out_), nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << args << ":\n" << ReadFile(out_);
    EXPECT_TRUE(doc.is_object()) << args;
  }
}

}  // namespace
