// #30's evidence bombs: hostile PyTorch flight-recorder dumps (scripts/evidence_bombs.py) in rank
// folders, read by a real `dlaunch diagnose` and by a real launcher after its rank failed. The
// memory is the process's own peak (wait4's ru_maxrss), the time is wall time. Each trial is
// recorded (DLAUNCH_CHAOS_RESULTS) for RELIABILITY.md's table of bombs.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "chaos_util.h"
#include "tests/common/test_dir.h"

namespace dlaunch::testing::chaos {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

constexpr int64_t kMiB = 1 << 20;

struct Measured {
  int exit_code = -1;
  int64_t peak_bytes = 0;  // of the process and its descendants
  int64_t ms = 0;
  std::string out, err;
};

std::string ReadText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Runs `argv` under `timeout 300`, its output into files of `dir`.
Measured RunMeasured(const std::vector<std::string>& argv, const fs::path& dir) {
  const fs::path out = dir / "out.txt", err = dir / "err.txt";
  std::vector<std::string> all = {"timeout", "300"};
  all.insert(all.end(), argv.begin(), argv.end());
  std::vector<char*> args;
  for (std::string& a : all) args.push_back(a.data());
  args.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execvp("timeout", args.data());
    ::_exit(127);
  }
  Measured m;
  int status = 0;
  rusage ru{};
  ::wait4(pid, &status, 0, &ru);
  m.ms = MsSince(t0);
  m.peak_bytes = static_cast<int64_t>(ru.ru_maxrss) * 1024;
  m.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  m.out = ReadText(out);
  m.err = ReadText(err);
  return m;
}

// evidence_bombs.py: `kinds` as <prefix>0, <prefix>1...
void Plant(const std::string& prefix, const std::vector<std::string>& kinds, int mib = 60) {
  std::string cmd = "python3 " + std::string(EVIDENCE_BOMBS_PY) + " --mib " + std::to_string(mib) +
                    " --prefix " + prefix;
  for (const std::string& k : kinds) cmd += " " + k;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

struct Bomb {
  std::string kind;
  std::string reason;  // in skipped_evidence; "" when the dump is read (and bounded)
};

class EvidenceBombTest : public ::testing::TestWithParam<Bomb> {};

// One 60 MiB bomb (or a few bytes that expand as much): `dlaunch diagnose` reports within bounded
// memory and time, names the file with its reason, and writes a small diagnosis.
TEST_P(EvidenceBombTest, DiagnoseStaysBoundedAndNamesTheFile) {
  const Bomb& bomb = GetParam();
  const TestDir dir("bomb");
  fs::create_directories(dir.path() / "run" / "rank0");
  Plant((dir.path() / "run" / "rank0" / "torch_trace_").string(), {bomb.kind});
  const Measured m =
      RunMeasured({DLAUNCH_BIN, "diagnose", (dir.path() / "run").string(), "--json"}, dir.path());
  json d = json::parse(m.out, nullptr, false);
  const bool named = d.is_object() && d["skipped_evidence_count"] == (bomb.reason.empty() ? 0 : 1);
  const bool right = m.exit_code == 0 && named && m.peak_bytes < 400 * kMiB && m.ms < 30000 &&
                     m.out.size() < size_t{1} << 20;
  Record({{"fault", "evidence bomb: " + bomb.kind},
          {"bomb", true},
          {"right", right},
          {"exit_code", m.exit_code},
          {"ms", m.ms},
          {"peak_mib", m.peak_bytes / kMiB},
          {"file_mib", fs::file_size(dir.path() / "run" / "rank0" / "torch_trace_0") / kMiB},
          {"json_bytes", m.out.size()}});
  std::cout << "bomb " << bomb.kind << ": " << m.peak_bytes / kMiB << " MiB peak, " << m.ms
            << " ms, " << m.out.size() << " bytes of JSON\n";
  ASSERT_EQ(m.exit_code, 0) << m.err;
  ASSERT_TRUE(d.is_object()) << m.out.substr(0, 1000);
  EXPECT_LT(m.peak_bytes, 400 * kMiB);
  EXPECT_LT(m.ms, 30000);
  EXPECT_LT(m.out.size(), size_t{1} << 20);
  if (bomb.reason.empty()) {
    EXPECT_EQ(d["skipped_evidence_count"], 0) << d["skipped_evidence"];
    ASSERT_EQ(d["torch_flight"]["dumps"].size(), 1u);
  } else {
    ASSERT_EQ(d["skipped_evidence_count"], 1) << d["skipped_evidence"];
    EXPECT_EQ(d["skipped_evidence"][0]["file"], "rank0/torch_trace_0");
    EXPECT_THAT(d["skipped_evidence"][0]["reason"].get<std::string>(), HasSubstr(bomb.reason));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Bombs, EvidenceBombTest,
    ::testing::Values(Bomb{"small_objects", "needs more than 128 MiB to read"},
                      Bomb{"memo_dicts", "needs more than 128 MiB to read"},
                      Bomb{"laughs", "not a readable pickle: "},
                      Bomb{"huge_string", ""},  // read: its 60 MiB name is cut to 256 bytes
                      Bomb{"string_laughs", "not a readable pickle: "},
                      Bomb{"marks", "needs more than 128 MiB to read"},
                      Bomb{"dups", "needs more than 128 MiB to read"},
                      Bomb{"memo_flood", "needs more than 128 MiB to read"},
                      Bomb{"wide_entries", "read, but left out of diagnosis.json"}),
    [](const auto& info) { return info.param.kind; });

// 32 bombs over 8 ranks: the first are refused one by one, the rest skipped once the pass's bytes
// are spent; all named, none read past the budget, no bad_alloc.
TEST(EvidenceBombsTest, ManyFilesStopAtTheTotalBudget) {
  const TestDir dir("bombs");
  for (int r = 0; r < 8; ++r) {
    const fs::path rank = dir.path() / "run" / ("rank" + std::to_string(r));
    fs::create_directories(rank);
    Plant((rank / "torch_trace_").string(),
          {"small_objects", "small_objects", "small_objects", "small_objects"}, 9);
  }
  const Measured m =
      RunMeasured({DLAUNCH_BIN, "diagnose", (dir.path() / "run").string(), "--json"}, dir.path());
  json d = json::parse(m.out, nullptr, false);
  const bool right = m.exit_code == 0 && d.is_object() && d["skipped_evidence_count"] == 32 &&
                     m.peak_bytes < 600 * kMiB;
  Record({{"fault", "evidence bombs: 32 files of 9 MiB"},
          {"bomb", true},
          {"right", right},
          {"exit_code", m.exit_code},
          {"ms", m.ms},
          {"peak_mib", m.peak_bytes / kMiB},
          {"file_mib", 32 * 9},
          {"json_bytes", m.out.size()}});
  std::cout << "32 bombs: " << m.peak_bytes / kMiB << " MiB peak, " << m.ms << " ms\n";
  ASSERT_EQ(m.exit_code, 0) << m.err;
  ASSERT_TRUE(d.is_object());
  EXPECT_EQ(d["skipped_evidence_count"], 32);
  EXPECT_LT(m.peak_bytes, 600 * kMiB);
  EXPECT_LT(m.ms, 60000);
  int over_budget = 0;
  for (const json& s : d["skipped_evidence"]) {
    const std::string reason = s["reason"];
    EXPECT_THAT(reason, ::testing::Not(HasSubstr("out of memory"))) << s;
    over_budget += reason.find("of torch dumps one diagnosis reads") != std::string::npos;
  }
  EXPECT_GE(over_budget, 32 - 28);  // 256 MiB read at most: 28 files of 9 MiB
}

// Seven bombs planted by a rank in its own folder before it fails: the launcher's exit is delayed
// by a few seconds at most (the launcher reads dumps for 3 s a pass), its diagnosis.json stays
// small and names every bomb it did not read.
TEST(EvidenceBombsTest, BombsInALiveRankFolderBarelyDelayTheLaunchersExit) {
  const std::vector<std::string> kinds = {"small_objects", "memo_dicts",    "laughs",
                                          "huge_string",   "string_laughs", "marks",
                                          "wide_entries"};
  // The same rank, once writing its bombs outside the run directory: what the rank itself takes.
  auto job = [&](const TestDir& dir, bool in_rank_folder) {
    std::vector<std::string> argv = {DLAUNCH_BIN,
                                     "--log-dir",
                                     (dir.path() / "logs").string(),
                                     "--run-id",
                                     "run",
                                     "--nproc",
                                     "1",
                                     "--python",
                                     "/usr/bin/python3",
                                     EVIDENCE_BOMBS_PY,
                                     "--exit",
                                     "1"};
    if (!in_rank_folder)
      argv.insert(argv.end(), {"--prefix", (dir.path() / "elsewhere_").string()});
    argv.insert(argv.end(), kinds.begin(), kinds.end());
    return RunMeasured(argv, dir.path());
  };
  const TestDir plain_dir("bombs-live");
  const Measured plain = job(plain_dir, false);
  ASSERT_EQ(plain.exit_code, 1) << plain.err;
  const TestDir dir("bombs-live");
  const Measured m = job(dir, true);
  const fs::path run = dir.path() / "logs" / "run";
  const std::string text = ReadText(run / "diagnosis.json");
  json d = json::parse(text, nullptr, false);
  const int64_t delay_ms = m.ms - plain.ms;
  int64_t planted = 0;
  for (size_t i = 0; i < kinds.size(); ++i) {
    std::error_code ec;
    planted += static_cast<int64_t>(
        fs::file_size(run / "rank0" / ("torch_trace_" + std::to_string(i)), ec));
  }
  Record({{"fault", "evidence bombs: 7 in a live rank folder"},
          {"bomb", true},
          {"right", m.exit_code == 1 && delay_ms < 25000 && text.size() < size_t{1} << 20},
          {"exit_code", m.exit_code},
          {"ms", delay_ms},
          {"peak_mib", m.peak_bytes / kMiB},
          {"file_mib", planted / kMiB},
          {"json_bytes", text.size()}});
  std::cout << "live bombs: exit after " << m.ms << " ms (" << plain.ms << " elsewhere), "
            << text.size() << " bytes of diagnosis.json, " << m.peak_bytes / kMiB
            << " MiB peak of launcher and rank\n";
  ASSERT_EQ(m.exit_code, 1) << m.err;
  EXPECT_LT(delay_ms, 25000);
  EXPECT_LT(text.size(), size_t{1} << 20);
  ASSERT_TRUE(d.is_object());
  // Every bomb is accounted for: read (and bounded) or named with its reason.
  std::set<std::string> seen;
  for (const json& s : d["skipped_evidence"]) {
    EXPECT_FALSE(s["reason"].get<std::string>().empty()) << s;
    seen.insert(s["file"].get<std::string>());
  }
  if (d["torch_flight"].contains("dumps")) {
    for (const json& dump : d["torch_flight"]["dumps"]) {
      seen.insert("rank0/" + fs::path(dump["file"].get<std::string>()).filename().string());
    }
  }
  for (size_t i = 0; i < kinds.size(); ++i) {
    EXPECT_TRUE(seen.count("rank0/torch_trace_" + std::to_string(i))) << kinds[i] << "\n" << text;
  }
  const std::string report = ReadText(run / "diagnosis.txt");
  EXPECT_THAT(report, HasSubstr("not read or left out: "));
  EXPECT_LT(report.size(), size_t{256} << 10);
}

}  // namespace
}  // namespace dlaunch::testing::chaos
