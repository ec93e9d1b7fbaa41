// Checkpoints under attack (#30 part 9): every damaged or mismatched checkpoint given to
// `train --resume` is refused with exit 2 and one line before any rank starts (truncated, a flipped
// byte, a FIFO, a directory, another model's shapes, another batch...), and a rank 0 SIGKILLed
// while it writes a checkpoint every step leaves neither a temporary file nor a bad checkpoint.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "process_harness.h"
#include "tests/chaos/chaos_util.h"
#include "tests/common/test_dir.h"
#include "worker/train/checkpoint_file.h"

namespace dlaunch::testing::chaos {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;
using Args = std::vector<std::string>;

const Args kTrain = {"--skip-doctor", "train",     "--data", "synthetic", "--model",
                     "mlp",           "--samples", "512",    "--quiet",   "--no-preflight"};

Args TrainArgs(const fs::path& logs, int nproc, const Args& extra) {
  Args a = {DLAUNCH_BIN, "--log-dir", logs.string(), "--nproc", std::to_string(nproc)};
  a.insert(a.end(), kTrain.begin(), kTrain.end());
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteAll(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

// checkpoint.pt.tmp.* left in `dir`.
int Temps(const fs::path& dir) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    n += e.path().filename().string().rfind("checkpoint.pt.tmp.", 0) == 0;
  return n;
}

class ChaosCheckpointTest : public ::testing::Test {
 protected:
  // A real checkpoint of 2 ranks, step 8.
  void SetUp() override {
    Launched l(
        TrainArgs(dir_.path() / "first", 2, {"--steps", "8", "--checkpoint-dir", good_.string()}));
    ASSERT_EQ(l.Wait(seconds(120)), 0) << l.err_text();
    good_bytes_ = ReadAll(good_ / "checkpoint.pt");
    ASSERT_GT(good_bytes_.size(), 1000u);
  }

  TestDir dir_{"chaos-ckpt"};
  const fs::path good_ = dir_.path() / "good";
  std::string good_bytes_;
};

TEST_F(ChaosCheckpointTest, EveryBadCheckpointIsExitTwoBeforeAnyRank) {
  struct Case {
    std::string name;
    std::function<void(const fs::path& ckpt)> make;
    Args extra;
    std::string says;
  };
  const std::string& g = good_bytes_;
  auto bytes = [](std::string b) { return [b](const fs::path& p) { WriteAll(p, b); }; };
  std::string flipped = g;
  flipped[g.size() / 3] ^= 0x5a;  // inside a tensor's data: only the CRC-32 can tell
  std::string tampered = g;
  tampered.replace(tampered.rfind("\"per_rank_batch\":32"), 19, "\"per_rank_batch\":31");
  std::vector<Case> cases = {
      {"truncated to half", bytes(g.substr(0, g.size() / 2)), {}, "truncated"},
      {"truncated by one byte", bytes(g.substr(0, g.size() - 1)), {}, "truncated"},
      {"a flipped byte", bytes(flipped), {}, "fails its CRC-32 check"},
      {"empty", bytes(""), {}, "is empty"},
      {"text", bytes("hello\n"), {}, "not a torch archive"},
      {"FIFO", [](const fs::path& p) { ::mkfifo(p.c_str(), 0600); }, {}, "(a FIFO)"},
      {"directory", [](const fs::path& p) { fs::create_directories(p); }, {}, "(a directory)"},
      {"manifest inconsistent", bytes(tampered), {}, "inconsistent"},
      {"other hidden width", bytes(g), {"--hidden", "128"}, "--hidden 256"},
      {"other classes", bytes(g), {"--classes", "4"}, "classes"},
      {"other features", bytes(g), {"--features", "32"}, "values per sample"},
      {"neither batch kept", bytes(g), {"--batch-size", "7"}, "keep one of them"},
  };
  int right = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const fs::path ckpt = dir_.path() / ("bad" + std::to_string(i));
    fs::create_directories(ckpt);
    c.make(ckpt / "checkpoint.pt");
    const fs::path logs = dir_.path() / ("logs" + std::to_string(i));
    Args extra = {"--steps", "16", "--checkpoint-dir", ckpt.string(), "--resume"};
    extra.insert(extra.end(), c.extra.begin(), c.extra.end());
    Launched l(TrainArgs(logs, 2, extra));
    const auto t0 = std::chrono::steady_clock::now();
    const int code = l.Wait(seconds(30));
    const int64_t ms = MsSince(t0);
    const bool one_line = !l.err_lines.empty() && l.err_lines[0].rfind("dlaunch: train", 0) == 0 &&
                          l.err_lines[0].find(c.says) != std::string::npos;
    const bool ok = code == 2 && one_line && !fs::exists(logs);
    right += ok;
    Record({{"fault", "bad checkpoint"},
            {"right", ok},
            {"exit_code", code},
            {"ms", ms},
            {"crash", code < 0 || code >= 128}});
    EXPECT_TRUE(ok) << c.name << " -> exit " << code << " in " << ms << " ms\n" << l.err_text();
  }
  EXPECT_EQ(right, static_cast<int>(cases.size()));
  // The untouched checkpoint, on 1 rank instead of 2: resumed, and what changed is said.
  Args resume = TrainArgs(dir_.path() / "resume", 1,
                          {"--steps", "16", "--checkpoint-dir", good_.string(), "--resume"});
  resume.erase(std::find(resume.begin(), resume.end(), "--quiet"));
  Launched l(resume);
  EXPECT_EQ(l.Wait(seconds(120)), 0) << l.err_text();
  std::string out;
  for (const auto& line : l.out_lines) out += line + "\n";
  EXPECT_NE(out.find("resumed step 8 of 8 with 1 rank instead of 2; the per-rank batch is kept, "
                     "so the global batch is now 32 (was 64); this run goes on at step 16 of 16"),
            std::string::npos)
      << out;
}

// The pid of the rank `rank` whose command line mentions `marker`, or -1.
pid_t FindRank(const std::string& marker, int rank) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmd = ReadAll(e.path() / "cmdline");
    if (cmd.find("dlaunch-worker") == std::string::npos || cmd.find(marker) == std::string::npos)
      continue;
    const std::string env = ReadAll(e.path() / "environ");
    if (env.find(std::string("\0RANK=", 6) + std::to_string(rank) + '\0') != std::string::npos)
      return std::stoi(name);
  }
  return -1;
}

TEST_F(ChaosCheckpointTest, ARankZeroKilledWhileWritingLeavesNoTemporaryFile) {
  std::mt19937 rng(std::random_device{}());
  const int trials = Trials(3, 30);
  int right = 0;
  for (int t = 0; t < trials; ++t) {
    const fs::path ckpt = dir_.path() / ("killed" + std::to_string(t));
    // A checkpoint every step: most of rank 0's time is spent writing one.
    Launched l(TrainArgs(dir_.path() / ("klogs" + std::to_string(t)), 2,
                         {"--steps", "100000", "--checkpoint-dir", ckpt.string(),
                          "--checkpoint-every", "1", "--heartbeat-interval", "0.05"}));
    pid_t rank0 = -1;
    const auto deadline = std::chrono::steady_clock::now() + seconds(60);
    while (std::chrono::steady_clock::now() < deadline &&
           (rank0 < 0 || !fs::exists(ckpt / "checkpoint.pt"))) {
      if (rank0 < 0) rank0 = FindRank(ckpt.string(), 0);
      l.WaitFor([](const std::vector<std::string>&) { return false; },
                std::chrono::milliseconds(20));
    }
    ASSERT_GT(rank0, 0) << l.err_text();
    l.WaitFor([](const std::vector<std::string>&) { return false; },
              std::chrono::milliseconds(rng() % 400));
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(::kill(rank0, SIGKILL), 0);
    const int code = l.Wait(seconds(60));
    const int64_t ms = MsSince(t0);
    const int temps = Temps(ckpt);
    std::string why;
    try {
      worker::ReadCheckpointFile((ckpt / "checkpoint.pt").string());
    } catch (const std::exception& e) {
      why = e.what();
    }
    const bool ok = code == 1 && temps == 0 && why.empty();
    right += ok;
    Record({{"fault", "checkpoint writer killed"},
            {"right", ok},
            {"exit_code", code},
            {"kill_ms", ms},
            {"temps", temps},
            {"crash", code < 0 || code >= 128}});
    EXPECT_TRUE(ok) << "exit " << code << ", " << temps << " temporary files, checkpoint: " << why
                    << "\n"
                    << l.err_text();
  }
  EXPECT_EQ(right, trials);
}

}  // namespace
}  // namespace dlaunch::testing::chaos
