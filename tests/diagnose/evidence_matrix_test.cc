// Missing evidence is "unknown", never a verdict: every evidence file of every rank of real run
// directories (native gloo ranks, Python ranks with the agent), made empty, cut short, blanked,
// overwritten with garbage or removed, leaves the diagnosis with its culprit, or with none; it
// never turns into a mismatch or a new culprit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "launcher/diagnose/analyzer.h"
#include "launcher/diagnose/run_snapshot.h"
#include "test_util.h"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;

const char* const kStates[] = {"empty", "truncated", "blanks", "garbage", "absent"};

// The evidence files a diagnosis reads, for either kind of rank.
const char* const kFiles[] = {
    "flight.json", "flight_tail.jsonl", "heartbeat.json", "events.jsonl",     "error.json",
    "stacks.txt",  "py_stacks.txt",     "stderr.log",     "torch_error.json", "torch_trace_0"};

void Spoil(const fs::path& file, const std::string& state) {
  std::string text;
  {
    std::ifstream in(file, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  if (state == "absent") {
    fs::remove(file);
    return;
  }
  if (state == "empty") {
    text.clear();
  } else if (state == "truncated") {
    text.resize(text.size() / 2);
  } else if (state == "blanks") {
    text.assign(text.size(), ' ');
  } else {
    std::mt19937 gen(static_cast<uint32_t>(text.size()));
    for (char& c : text) c = static_cast<char>(gen());
  }
  std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
}

struct Verdict {
  std::string kind;
  std::set<int> culprits;
  std::string mismatch;
  std::string headline;
};

Verdict Judge(const std::string& run_dir) {
  const Diagnosis d = Analyze(LoadRunDir(run_dir));
  return {std::string(rundir::DiagnosisKindName(d.kind)),
          {d.culprit_ranks.begin(), d.culprit_ranks.end()},
          rundir::MismatchKindName(d.mismatch),
          d.headline};
}

class EvidenceMatrixTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EvidenceMatrixTest, SpoiledEvidenceNeverBlamesAnotherRankOrInventsAMismatch) {
  const testing::TestDir base_dir("evm");
  const std::string base = testing::CopyFixture(GetParam(), base_dir);
  const Verdict truth = Judge(base);
  ASSERT_FALSE(truth.culprits.empty()) << truth.headline;
  int cases = 0;
  for (const auto& rank : fs::directory_iterator(base)) {
    if (!rank.is_directory() || rank.path().filename().string().rfind("rank", 0) != 0) continue;
    for (const char* file : kFiles) {
      if (!fs::exists(rank.path() / file)) continue;
      for (const char* state : kStates) {
        const testing::TestDir dir("evm");
        const std::string run = testing::CopyFixture(GetParam(), dir);
        const fs::path target = fs::path(run) / rank.path().filename() / file;
        Spoil(target, state);
        const Verdict v = Judge(run);
        ++cases;
        const std::string what = rank.path().filename().string() + "/" + file + " " + state + ": " +
                                 v.headline + "\n  was: " + truth.headline;
        for (int c : v.culprits) EXPECT_TRUE(truth.culprits.count(c)) << what;
        if (truth.kind != "mismatch") {
          EXPECT_NE(v.kind, "mismatch") << what;
        } else if (v.kind == "mismatch") {
          EXPECT_EQ(v.mismatch, truth.mismatch) << what;
        }
      }
    }
  }
  EXPECT_GT(cases, 20);
}

INSTANTIATE_TEST_SUITE_P(RealRunDirectories, EvidenceMatrixTest,
                         ::testing::Values("hang_never_entered", "count_mismatch", "op_mismatch",
                                           "exited_in_collective", "python_hang",
                                           "python_size_mismatch"));

}  // namespace
}  // namespace dlaunch::launcher
