// #30: a rank of `train` over the shared-memory transport killed or stopped mid-training. The
// others' errors are about it ("shared memory allreduce: rank 2 (pid P) died", "rank 0 left");
// they are fallout, so the killed rank is the root cause (exit 1, a rank failed), and a stopped
// one is the culprit of a hang (exit 3), never a rank that saw it go.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <regex>

#include "process_harness.h"
#include "tests/chaos/chaos_util.h"
#include "tests/common/test_dir.h"

namespace dlaunch::testing::chaos {
namespace {

using std::chrono::seconds;

constexpr int kVictim = 2;

class ChaosShmRankTest : public ::testing::Test {
 protected:
  nlohmann::json ReadJson(const std::string& id, const std::string& file) const {
    std::ifstream in(dir_.path() / id / file);
    auto j = nlohmann::json::parse(in, nullptr, false);
    return j.is_discarded() ? nlohmann::json::object() : j;
  }

  // Runs 4 ranks of train over shared memory, sends `sig` to rank 2 once training steps, and
  // returns dlaunch's exit code (-1: it never trained); `err` gets its stderr.
  int Trial(const std::string& id, int sig, std::string* err) {
    Launched job({DLAUNCH_BIN,
                  "--nproc",
                  "4",
                  "--log-dir",
                  dir_.path().string(),
                  "--run-id",
                  id,
                  "--hang-timeout",
                  "30",
                  "--skip-doctor",
                  "train",
                  "--steps",
                  "100000",
                  "--transport",
                  "shm",
                  "--timeout",
                  "5",
                  "--no-preflight",
                  "--model",
                  "mlp"});
    const bool training = job.WaitFor(
        [](const std::vector<std::string>& lines) {
          return std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
            return l.find("[train] step") != std::string::npos;
          });
        },
        seconds(120));
    pid_t victim = 0;
    for (const auto& r : ReadJson(id, "summary.json").value("ranks", nlohmann::json::array())) {
      if (r.value("rank", -1) == kVictim) victim = r.value("pid", 0);
    }
    if (!training || victim <= 0 || ::kill(victim, sig) != 0) {
      *err = job.err_text();
      return -1;
    }
    const int code = job.Wait(seconds(120));
    if (sig == SIGSTOP) ::kill(victim, SIGKILL);
    *err = job.err_text();
    return code;
  }

  const TestDir dir_{"chaos_shm"};
};

TEST_F(ChaosShmRankTest, AKilledRankIsTheRootCauseNotThePeersThatSawItDie) {
  const int trials = Trials(1, 10);
  int right = 0;
  for (int t = 0; t < trials; ++t) {
    const std::string id = "shmkill" + std::to_string(t);
    std::string err;
    const int code = Trial(id, SIGKILL, &err);
    ASSERT_NE(code, -1) << err;
    const auto culprits = ReadJson(id, "diagnosis.json").value("culprit_ranks", nlohmann::json());
    const bool ok = code == 1 &&
                    err.find("  rank      : " + std::to_string(kVictim) + " (local_rank") !=
                        std::string::npos &&
                    culprits == nlohmann::json::array({kVictim});
    right += ok;
    Record({{"fault", "shared-memory rank SIGKILLed"}, {"right", ok}, {"exit", code}});
    EXPECT_TRUE(ok) << "trial " << t << ": exit " << code << ", diagnosis " << culprits.dump()
                    << "\n"
                    << err;
  }
  EXPECT_EQ(right, trials);
}

TEST_F(ChaosShmRankTest, AStoppedRankIsAHangsCulpritNotThePeersThatSawThemLeave) {
  const int trials = Trials(1, 5);
  int right = 0;
  for (int t = 0; t < trials; ++t) {
    const std::string id = "shmstop" + std::to_string(t);
    std::string err;
    const int code = Trial(id, SIGSTOP, &err);
    ASSERT_NE(code, -1) << err;
    const nlohmann::json d = ReadJson(id, "diagnosis.json");
    const bool ok = code == 3 && d.value("kind", "") == "hang" &&
                    d.value("culprit_ranks", nlohmann::json()) == nlohmann::json::array({kVictim});
    right += ok;
    Record({{"fault", "shared-memory rank SIGSTOPped"}, {"right", ok}, {"exit", code}});
    EXPECT_TRUE(ok) << "trial " << t << ": exit " << code << ", diagnosis " << d.dump() << "\n"
                    << err;
  }
  EXPECT_EQ(right, trials);
}

}  // namespace
}  // namespace dlaunch::testing::chaos
