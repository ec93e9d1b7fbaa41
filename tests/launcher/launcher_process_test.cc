// dlaunch as users run it: real rank processes, real gRPC on loopback, real signals.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "launcher/rendezvous/ports.h"
#include "launcher/supervision/placement.h"
#include "process_harness.h"
#include "tests/common/test_dir.h"

namespace dlaunch::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {}

  // dlaunch --log-dir <tmp> --run-id run <flags...> <program...>
  std::vector<std::string> Cmd(std::vector<std::string> args) {
    std::vector<std::string> argv = {DLAUNCH_BIN, "--log-dir", (dir_ / "logs").string(), "--run-id",
                                     "run"};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  fs::path RankDir(int r) { return dir_ / "logs" / "run" / ("rank" + std::to_string(r)); }
  nlohmann::json Summary() {
    std::ifstream in(dir_ / "logs" / "run" / "summary.json");
    return nlohmann::json::parse(in);
  }
  static std::vector<std::string> ReadLines(const fs::path& p) {
    std::ifstream in(p);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  }
  static std::map<std::string, std::string> ReadEnv(const fs::path& p) {
    std::map<std::string, std::string> env;
    for (const auto& l : ReadLines(p)) env[l.substr(0, l.find('='))] = l.substr(l.find('=') + 1);
    return env;
  }
  const TestDir test_dir_{"test"};
  const fs::path dir_ = test_dir_.path();
};

TEST_F(LauncherTest, EveryRankGetsTorchrunEnvironment) {
  Launched l(Cmd({"--nproc", "3", "--env", "EXTRA=42", "--nccl-debug", "INFO",
                  "--nccl-socket-ifname", "lo", TEST_RANK_BIN, "env"}),
             {"OMP_NUM_THREADS="});
  ASSERT_EQ(l.Wait(seconds(30)), 0) << l.err_text();
  launcher::PlacementRequest three;
  three.nproc = 3;
  const auto placement =
      launcher::PlanPlacement(three, launcher::ReadTopology());  // this machine's share of cores
  std::set<std::string> ports, tokens;
  for (int r = 0; r < 3; ++r) {
    auto env = ReadEnv(RankDir(r) / "stdout.log");
    EXPECT_EQ(env["RANK"], std::to_string(r));
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(r));
    EXPECT_EQ(env["WORLD_SIZE"], "3");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "3");
    EXPECT_EQ(env["GROUP_RANK"], "0");
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "0");
    EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "run");
    EXPECT_EQ(env["OMP_NUM_THREADS"], std::to_string(placement[r].threads));
    EXPECT_EQ(env["NCCL_DEBUG"], "INFO");
    EXPECT_EQ(env["NCCL_DEBUG_FILE"], (RankDir(r) / "nccl.log").string());
    EXPECT_EQ(env["NCCL_SOCKET_IFNAME"], "lo");
    EXPECT_EQ(env["EXTRA"], "42");
    EXPECT_EQ(env["DLAUNCH_RANK_DIR"], RankDir(r).string());
    EXPECT_EQ(env["DLAUNCH_COORDINATOR"].rfind("127.0.0.1:", 0), 0u);
    // Each rank's own rank token (#30): "R." and 32 hex digits.
    EXPECT_EQ(env["DLAUNCH_JOB_TOKEN"].rfind(std::to_string(r) + ".", 0), 0u);
    EXPECT_EQ(env["DLAUNCH_JOB_TOKEN"].size(), 34u);
    EXPECT_GT(std::stoi(env["MASTER_PORT"]), 0);
    ports.insert(env["MASTER_PORT"]);
    tokens.insert(env["DLAUNCH_JOB_TOKEN"]);
  }
  EXPECT_EQ(ports.size(), 1u);
  EXPECT_EQ(tokens.size(), 3u);
  EXPECT_EQ(Summary()["exit_code"], 0);
}

TEST_F(LauncherTest, EightRanksMeetAndShareTheStore) {
  Launched l(Cmd({"--nproc", "8", TEST_RANK_BIN, "register"}));
  ASSERT_EQ(l.Wait(seconds(60)), 0) << l.err_text();
  std::set<int> arrived;
  std::regex re(R"(\[rank (\d)\] registered rank (\d) of 8 local (\d) arrived (\d+))");
  std::smatch m;
  for (const auto& line : l.out_lines) {
    if (!std::regex_match(line, m, re)) continue;
    EXPECT_EQ(m[1], m[2]);
    EXPECT_EQ(m[2], m[3]);
    arrived.insert(std::stoi(m[4]));
  }
  EXPECT_EQ(arrived, (std::set<int>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST_F(LauncherTest, RendezvousTimeoutNamesTheAbsentRank) {
  Launched l(Cmd({"--nproc", "3", "--rdzv-timeout", "1", "--grace-period", "2", TEST_RANK_BIN,
                  "register-except", "1"}));
  EXPECT_EQ(l.Wait(seconds(30)), 1);
  EXPECT_NE(l.err_text().find("rank 1 never registered"), std::string::npos) << l.err_text();
}

TEST_F(LauncherTest, SigkilledRankTearsDownTheRestAndIsNamed) {
  Launched l(Cmd({"--nproc", "4", "--grace-period", "5", TEST_RANK_BIN, "sleep"}));
  ASSERT_TRUE(l.WaitFor(ReadyCount(4), seconds(30)));
  auto pids = ReadyPids(l.out_lines);
  ASSERT_EQ(::kill(pids[2], SIGKILL), 0);
  EXPECT_EQ(l.Wait(seconds(30)), 1);
  EXPECT_NE(l.err_text().find("rank 2 failed"), std::string::npos) << l.err_text();
  EXPECT_NE(l.err_text().find("SIGKILL"), std::string::npos);
  auto summary = Summary();
  EXPECT_EQ(summary["exit_code"], 1);
  for (const auto& r : summary["ranks"]) {
    if (r["rank"] == 2) {
      EXPECT_EQ(r["status"], "failed");
      EXPECT_EQ(r["signal"], "SIGKILL");
      EXPECT_EQ(r["exit_code"], -9);
    } else {
      EXPECT_EQ(r["status"], "killed");
    }
  }
}

TEST_F(LauncherTest, FailingRankGetsRootCauseWithItsStderr) {
  Launched l(Cmd({"--nproc", "3", TEST_RANK_BIN, "exit-after", "1", "5"}));
  EXPECT_EQ(l.Wait(seconds(30)), 1);
  const std::string err = l.err_text();
  const size_t block = err.find("Root Cause (first observed failure)");
  ASSERT_NE(block, std::string::npos) << err;
  // Once, in one format: the diagnosis after it does not repeat the block.
  EXPECT_EQ(err.find("Root Cause (first observed failure)", block + 1), std::string::npos) << err;
  EXPECT_NE(err.find("rank      : 1 (local_rank: 1)"), std::string::npos) << err;
  EXPECT_NE(err.find("exit code 5"), std::string::npos) << err;
  EXPECT_NE(err.find("    rank 1 giving up"), std::string::npos) << err;
  EXPECT_NE(err.find(RankDir(1).string()), std::string::npos) << err;
}

TEST_F(LauncherTest, NoRankOutlivesASigkilledLauncher) {
  Launched l(Cmd({"--nproc", "4", TEST_RANK_BIN, "sleep"}));
  ASSERT_TRUE(l.WaitFor(ReadyCount(4), seconds(30)));
  std::vector<pid_t> pids;
  for (auto [rank, pid] : ReadyPids(l.out_lines)) pids.push_back(pid);
  ExitWatch ranks(pids);
  ASSERT_EQ(ranks.watched(), 4u);
  ASSERT_EQ(::kill(l.pid(), SIGKILL), 0);
  // Every rank must be gone within 1 s: each pidfd becomes readable when its process exits.
  EXPECT_TRUE(ranks.AllExit(seconds(1)));
}

TEST_F(LauncherTest, SignalsAreForwardedToEveryRank) {
  Launched l(Cmd({"--nproc", "2", TEST_RANK_BIN, "signals"}));
  ASSERT_TRUE(l.WaitFor(ReadyCount(2), seconds(30)));
  auto count = [&](const std::string& what) {
    return [what](const std::vector<std::string>& lines) {
      return std::count_if(lines.begin(), lines.end(), [&](const std::string& s) {
               return s.find(what) != std::string::npos;
             }) >= 2;
    };
  };
  ::kill(l.pid(), SIGUSR1);
  ASSERT_TRUE(l.WaitFor(count("got USR1"), seconds(10))) << l.err_text() << l.out_lines.size();
  ::kill(l.pid(), SIGUSR2);
  EXPECT_TRUE(l.WaitFor(count("got USR2"), seconds(10)));
  ::kill(l.pid(), SIGTERM);
  EXPECT_TRUE(l.WaitFor(count("got TERM"), seconds(10)));
  EXPECT_EQ(l.Wait(seconds(30)), 143);
  EXPECT_EQ(Summary()["exit_code"], 143);
}

TEST_F(LauncherTest, CallWithWrongTokenIsRefused) {
  Launched l(Cmd({"--nproc", "1", TEST_RANK_BIN, "wrong-token"}));
  EXPECT_EQ(l.Wait(seconds(30)), 0) << l.err_text();
  EXPECT_NE(std::find(l.out_lines.begin(), l.out_lines.end(), "[rank 0] refused: unauthenticated"),
            l.out_lines.end());
  EXPECT_NE(l.err_text().find("refused StoreSet"), std::string::npos) << l.err_text();
}

TEST_F(LauncherTest, HeavyOutputStaysLineAtomic) {
  const int kLines = 4000;
  Launched l(Cmd({"--nproc", "4", TEST_RANK_BIN, "spam", std::to_string(kLines)}));
  ASSERT_EQ(l.Wait(seconds(120)), 0) << l.err_text();
  std::map<int, int> per_rank;
  std::regex re(R"(\[rank (\d)\] R(\d) (\d+) ([a-d]+) end(\d))");
  std::smatch m;
  for (const auto& line : l.out_lines) {
    ASSERT_TRUE(std::regex_match(line, m, re)) << "torn line: " << line.substr(0, 120);
    const int rank = std::stoi(m[1]);
    ASSERT_EQ(std::stoi(m[2]), rank);
    ASSERT_EQ(std::stoi(m[5]), rank);
    ASSERT_EQ(m[4].length(), static_cast<size_t>(200 + rank * 37));
    ++per_rank[rank];
  }
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(per_rank[r], kLines);
    EXPECT_EQ(ReadLines(RankDir(r) / "stdout.log").size(), static_cast<size_t>(kLines));
  }
}

TEST_F(LauncherTest, QuietAndRanksFilterLimitTheConsoleOnly) {
  Launched l(Cmd({"--nproc", "3", "--ranks-filter", "1", TEST_RANK_BIN, "env"}));
  ASSERT_EQ(l.Wait(seconds(30)), 0);
  for (const auto& line : l.out_lines) EXPECT_EQ(line.rfind("[rank 1] ", 0), 0u) << line;
  EXPECT_FALSE(l.out_lines.empty());
  EXPECT_FALSE(ReadLines(RankDir(0) / "stdout.log").empty());
  Launched q(Cmd({"--nproc", "2", "--quiet", TEST_RANK_BIN, "env"}));
  ASSERT_EQ(q.Wait(seconds(30)), 0);
  EXPECT_TRUE(q.out_lines.empty());
}

// torchrun's spellings on one node (#28): --rdzv_endpoint is the ranks' MASTER_ADDR/PORT, --role
// their ROLE_NAME, TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE their console prefix; --rdzv_conf
// timeout and --start_method fork are accepted, what does nothing here said once on stderr.
TEST_F(LauncherTest, TorchrunSpellingsReachTheRanksOnOneNode) {
  const std::string port = std::to_string(launcher::PickFreePort("127.0.0.1"));
  Launched l(Cmd({"--nproc", "2", "--rdzv_endpoint", "localhost:" + port, "--rdzv_conf",
                  "timeout=60,read_timeout=5", "--start_method", "fork", "--role", "trainer", "--",
                  "/bin/sh", "-c", "echo \"master $MASTER_ADDR:$MASTER_PORT $ROLE_NAME\""}),
             {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE=<${role_name}/${local_rank}/${rank}> "});
  ASSERT_EQ(l.Wait(seconds(30)), 0) << l.err_text();
  for (int r = 0; r < 2; ++r) {
    const std::string want = "<trainer/" + std::to_string(r) + "/" + std::to_string(r) +
                             "> master localhost:" + port + " trainer";
    EXPECT_NE(std::find(l.out_lines.begin(), l.out_lines.end(), want), l.out_lines.end())
        << want << "\n"
        << l.err_text();
  }
  EXPECT_NE(l.err_text().find("dlaunch: --rdzv-conf read_timeout has no effect under dlaunch"),
            std::string::npos)
      << l.err_text();
  EXPECT_NE(l.err_text().find("dlaunch: --start-method fork: "), std::string::npos);
}

TEST_F(LauncherTest, RestartsRerunAllRanksWithTheAttemptNumber) {
  Launched l(Cmd({"--nproc", "2", "--max-restarts", "2", "--", "/bin/sh", "-c",
                  "test \"$TORCHELASTIC_RESTART_COUNT\" -ge 1"}));
  EXPECT_EQ(l.Wait(seconds(30)), 0) << l.err_text();
  EXPECT_NE(l.err_text().find("restarting all ranks (restart 1 of 2)"), std::string::npos);
  EXPECT_EQ(Summary()["restarts"], 1);
}

TEST_F(LauncherTest, OnHangRestartRerunsAHungJob) {
  // Attempt 0 hangs silently (an unlinked program: no output); attempt 1 finishes.
  Launched l(Cmd({"--nproc", "2", "--hang-timeout", "1", "--hang-on-silence", "--on-hang",
                  "restart", "--max-restarts", "1", "--grace-period", "2", "--", "/bin/sh", "-c",
                  "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then exec sleep 600; fi"}));
  EXPECT_EQ(l.Wait(seconds(120)), 0) << l.err_text();
  EXPECT_NE(l.err_text().find("HANG"), std::string::npos) << l.err_text();
  EXPECT_NE(l.err_text().find("restarting all ranks (restart 1 of 1)"), std::string::npos);
  EXPECT_EQ(Summary()["restarts"], 1);
}

TEST_F(LauncherTest, PythonScriptsRunWithPython) {
  fs::path script = dir_ / "hello.py";
  std::ofstream(script) << "import os\nprint('py rank', os.environ['RANK'])\n";
  Launched l(Cmd({"--nproc", "2", script.string()}));
  ASSERT_EQ(l.Wait(seconds(60)), 0) << l.err_text();
  EXPECT_EQ(ReadLines(RankDir(1) / "stdout.log"), std::vector<std::string>{"py rank 1"});
}

struct BadInput {
  std::string name;
  std::vector<std::string> args;
  std::string message;
};

TEST_F(LauncherTest, BadInputExitsTwoBeforeAnyRankStarts) {
  fs::path not_exec = dir_ / "plain.txt";
  std::ofstream(not_exec) << "x";
  fs::path file_as_dir = dir_ / "file";
  std::ofstream(file_as_dir) << "x";
  // A port held by a listening socket.
  int sock = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(sock, 1), 0);
  ::getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string busy = std::to_string(ntohs(addr.sin_port));

  std::vector<BadInput> cases = {
      {"unknown flag", {"--frobnicate", "true"}, "unrecognised option '--frobnicate'"},
      {"nproc 0", {"--nproc", "0", "true"}, "--nproc must be a positive integer"},
      {"no program", {"--nproc", "2"}, "no program given"},
      {"missing program", {"no-such-program-xyz"}, "not found in PATH"},
      {"not executable", {not_exec.string()}, "is not executable"},
      {"bad log dir",
       {"--log-dir", (file_as_dir / "sub").string(), "true"},
       "cannot use --log-dir"},
      {"port in use", {"--master-port", busy, "true"}, "already in use"},
      {"bad env", {"--env", "NOEQUALS", "true"}, "--env takes KEY=VAL"},
      {"bad filter", {"--ranks-filter", "2-1", "true"}, "bad rank list"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {DLAUNCH_BIN, "--log-dir", (dir_ / "bad-logs").string()};
    if (c.name == "bad log dir") argv.resize(1);
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    Launched l(argv);
    EXPECT_EQ(l.Wait(seconds(10)), 2) << c.name;
    EXPECT_NE(l.err_text().find(c.message), std::string::npos) << c.name << ": " << l.err_text();
  }
  ::close(sock);
  // Nothing ran, so no run directory was made.
  EXPECT_FALSE(fs::exists(dir_ / "bad-logs"));
}

TEST_F(LauncherTest, TwoJobsAtOnceNeverCollide) {
  Launched a(Cmd({"--nproc", "2", TEST_RANK_BIN, "register"}));
  std::vector<std::string> argv = {DLAUNCH_BIN, "--log-dir", (dir_ / "logs2").string(),
                                   "--nproc",   "2",         TEST_RANK_BIN,
                                   "register"};
  Launched b(argv);
  EXPECT_EQ(a.Wait(seconds(60)), 0) << a.err_text();
  EXPECT_EQ(b.Wait(seconds(60)), 0) << b.err_text();
}

}  // namespace
}  // namespace dlaunch::testing
