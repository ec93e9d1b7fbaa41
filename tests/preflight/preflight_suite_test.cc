// The whole suite in one process, ranks as threads over an in-memory store and real gloo.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/store.h"
#include "worker/preflight/preflight.h"

namespace dlaunch::worker {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  std::vector<int> exit_codes;
  std::vector<std::pair<std::string, std::string>> events;  // (kind, json) of every rank
};

Outcome RunWorld(int n, const std::vector<std::string>& args, const fs::path& run_dir) {
  auto store = core::MakeMemoryStore();
  Outcome out;
  out.exit_codes.assign(n, -1);
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      PreflightContext ctx;
      ctx.rank = r;
      ctx.world_size = n;
      ctx.local_rank = r;
      ctx.store = store;
      ctx.run_dir = run_dir.string();
      ctx.rank_dir = (run_dir / ("rank" + std::to_string(r))).string();
      fs::create_directories(ctx.rank_dir);
      ctx.report_event = [&](const std::string& kind, const std::string& json) {
        std::lock_guard<std::mutex> lock(mu);
        out.events.emplace_back(kind, json);
      };
      out.exit_codes[r] = RunPreflight(ctx, args);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

fs::path FreshDir(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Small and quick. The slow-link factor is tiny because this box runs every rank as a thread on
// two shared cores, where a descheduled thread costs a transfer milliseconds; the flagging itself
// is covered by SlowLinkTest.
const std::vector<std::string> kQuick = {"--backend",
                                         "gloo",
                                         "-b",
                                         "8",
                                         "-e",
                                         "256K",
                                         "-f",
                                         "64",
                                         "-w",
                                         "1",
                                         "-n",
                                         "2",
                                         "--collective-timeout",
                                         "1",
                                         "--p2p-bytes",
                                         "64K",
                                         "--p2p-iters",
                                         "3",
                                         "--slow-link-factor",
                                         "0.001"};

TEST(PreflightSuiteTest, HealthyWorldPassesAndWritesEveryTable) {
  fs::path dir = FreshDir("dlaunch_preflight_pass");
  Outcome out = RunWorld(3, kQuick, dir);
  EXPECT_EQ((std::vector<int>{0, 0, 0}), out.exit_codes);

  std::ifstream in(dir / "preflight.json");
  ASSERT_TRUE(in.good());
  auto doc = nlohmann::json::parse(in);
  EXPECT_EQ("PASS", doc["verdict"]) << doc["reasons"].dump();
  EXPECT_EQ(3, doc["world_size"]);
  EXPECT_EQ("gloo", doc["backend"]);
  ASSERT_EQ(6u, doc["bandwidth"].size());
  for (const auto& op : doc["bandwidth"]) {
    ASSERT_EQ(3u, op["rows"].size()) << op["op"];  // 8 B, 512 B, 32 KiB
    for (const auto& row : op["rows"]) {
      EXPECT_EQ(0, row["wrong"]) << op["op"] << " " << row["size"];
      EXPECT_GT(row["time_us"].get<double>(), 0) << op["op"];
    }
    EXPECT_GT(op["avg_busbw_gbps"].get<double>(), 0) << op["op"];
  }
  const auto& p2p = doc["p2p"];
  ASSERT_EQ(3u, p2p["matrix_gbps"].size());
  EXPECT_GT(p2p["matrix_gbps"][0][1].get<double>(), 0);
  EXPECT_EQ(0, p2p["matrix_gbps"][1][1]);

  // The deliberate hang: ranks 0 and 1 named rank 2 within timeout + 1 s.
  const auto& hang = doc["hang_test"];
  EXPECT_TRUE(hang["passed"].get<bool>()) << hang.dump();
  EXPECT_EQ(2, hang["hang_rank"]);
  ASSERT_EQ(3u, hang["ranks"].size());
  for (int r : {0, 1}) {
    const auto& hr = hang["ranks"][r];
    EXPECT_TRUE(hr["detected"].get<bool>());
    EXPECT_EQ(nlohmann::json::array({2}), hr["missing_ranks"]);
    EXPECT_NE(std::string::npos,
              hr["message"].get<std::string>().find("rank 2 missing from seq 1"));
    EXPECT_LE(hr["elapsed_ms"].get<int64_t>(), 2000);
  }
  EXPECT_TRUE(hang["ranks"][2]["skipped_collective"].get<bool>());

  // Flight recorders of the rebuilt communicator were dumped at exit; the deliberate hang went
  // to a file of its own and was not reported as a real timeout.
  for (int r = 0; r < 3; ++r) {
    std::ifstream f(dir / ("rank" + std::to_string(r)) / "flight.json");
    ASSERT_TRUE(f.good());
    EXPECT_EQ("exit", nlohmann::json::parse(f)["reason"]);
  }
  EXPECT_TRUE(fs::exists(dir / "rank0" / "flight-hang-test.json"));
  for (const auto& [kind, body] : out.events) EXPECT_NE("timeout", kind) << body;
}

TEST(PreflightSuiteTest, RealHangExitsThreeWithTimeoutEventAndDump) {
  // The ranks disagree on the ops, so after allreduce rank 1 sits in allgather while rank 0 is
  // in the p2p matrix's barrier: a genuine hang, which the watchdog must end.
  fs::path dir = FreshDir("dlaunch_preflight_hang");
  auto store = core::MakeMemoryStore();
  std::vector<int> codes(2, -1);
  std::mutex mu;
  std::vector<std::string> kinds;
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      PreflightContext ctx;
      ctx.rank = r;
      ctx.world_size = 2;
      ctx.store = store;
      ctx.run_dir = dir.string();
      ctx.rank_dir = (dir / ("rank" + std::to_string(r))).string();
      fs::create_directories(ctx.rank_dir);
      ctx.report_event = [&](const std::string& kind, const std::string&) {
        std::lock_guard<std::mutex> lock(mu);
        kinds.push_back(kind);
      };
      std::vector<std::string> args = kQuick;
      // TCP: the shared-memory path would see the op mismatch and fail fast instead of hanging.
      args.insert(args.end(), {"--no-hang-test", "--transport", "tcp", "--ops",
                               r == 0 ? "allreduce" : "allreduce,allgather"});
      codes[r] = RunPreflight(ctx, args);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ((std::vector<int>{3, 3}), codes);
  EXPECT_GE(std::count(kinds.begin(), kinds.end(), "timeout"), 1);
  EXPECT_EQ(0, std::count(kinds.begin(), kinds.end(), "error"));
  bool dumped = false;
  for (int r = 0; r < 2; ++r) {
    std::ifstream f(dir / ("rank" + std::to_string(r)) / "flight.json");
    if (f.good()) dumped |= nlohmann::json::parse(f)["reason"] == "timeout";
  }
  EXPECT_TRUE(dumped);
  EXPECT_FALSE(fs::exists(dir / "preflight.json"));  // no verdict from a hung suite
}

TEST(PreflightSuiteTest, BusbwThresholdTurnsTheVerdictToFail) {
  fs::path dir = FreshDir("dlaunch_preflight_fail");
  std::vector<std::string> args = kQuick;
  args.insert(args.end(),
              {"--no-hang-test", "--no-p2p", "--ops", "allreduce", "--min-busbw", "100000"});
  Outcome out = RunWorld(2, args, dir);
  EXPECT_EQ((std::vector<int>{4, 4}), out.exit_codes);
  std::ifstream in(dir / "preflight.json");
  auto doc = nlohmann::json::parse(in);
  EXPECT_EQ("FAIL", doc["verdict"]);
  ASSERT_EQ(1u, doc["reasons"].size());
  EXPECT_NE(std::string::npos, doc["reasons"][0].get<std::string>().find("--min-busbw"));
}

TEST(PreflightSuiteTest, SingleRankRunsWithoutPeers) {
  fs::path dir = FreshDir("dlaunch_preflight_single");
  Outcome out = RunWorld(1, kQuick, dir);
  EXPECT_EQ(std::vector<int>{0}, out.exit_codes);
  std::ifstream in(dir / "preflight.json");
  auto doc = nlohmann::json::parse(in);
  EXPECT_EQ("PASS", doc["verdict"]);
  EXPECT_EQ("needs at least 2 ranks", doc["hang_test"]["skipped"]);
}

TEST(PreflightSuiteTest, CoordinatorDumpCommandWritesTheFlightRecorder) {
  fs::path dir = FreshDir("dlaunch_preflight_dump");
  std::function<void(core::CommandKind, const std::string&)> handler;
  std::vector<std::string> events;
  bool dumped_once = false;
  PreflightContext ctx;
  ctx.run_dir = dir.string();
  ctx.rank_dir = (dir / "rank0").string();
  fs::create_directories(ctx.rank_dir);
  ctx.set_command_handler = [&](auto h) { handler = std::move(h); };
  ctx.report_event = [&](const std::string& kind, const std::string& body) {
    events.push_back(kind + " " + body);
  };
  ctx.report_status = [&](const core::RankStatus& s) {
    // Mid-run, as the heartbeat thread would: ask for a dump once the suite is under way.
    if (handler && !dumped_once && s.last_completed_seq >= 0) {
      dumped_once = true;
      handler(core::CommandKind::kDump, "request");
      std::ifstream f(dir / "rank0" / "flight.json");
      ASSERT_TRUE(f.good());
      EXPECT_EQ("request", nlohmann::json::parse(f)["reason"]);
    }
  };
  std::vector<std::string> args = kQuick;
  args.insert(args.end(), {"--ops", "allreduce"});
  EXPECT_EQ(0, RunPreflight(ctx, args));
  EXPECT_TRUE(dumped_once);
  bool saw_request = false;
  for (const auto& e : events) saw_request |= e.find("\"reason\":\"request\"") != std::string::npos;
  EXPECT_TRUE(saw_request);
  // After the suite the handler is inert: the communicator is gone.
  ASSERT_TRUE(handler);
  handler(core::CommandKind::kDump, "late");
  handler(core::CommandKind::kAbort, "");
  std::ifstream f(dir / "rank0" / "flight.json");
  EXPECT_EQ("exit", nlohmann::json::parse(f)["reason"]);
}

}  // namespace
}  // namespace dlaunch::worker
