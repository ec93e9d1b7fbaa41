// The whole suite in one process, ranks as threads over an in-memory store and real gloo.
// One file past 600 lines: every case shares RunWorld and the quick arguments kQuick.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "core/comm/comm_options.h"
#include "core/error.h"
#include "core/store.h"
#include "tests/common/test_dir.h"
#include "tests/preflight/nccl_parsers.h"
#include "worker/preflight/preflight.h"

namespace dlaunch::worker {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  std::vector<int> exit_codes;
  std::vector<std::pair<std::string, std::string>> events;  // (kind, json) of every rank
};

Outcome RunWorld(int n, const std::vector<std::string>& args, const fs::path& run_dir,
                 const P2PInject& inject = {}) {
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
      ctx.p2p_inject = inject;
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
  const dlaunch::testing::TestDir test_dir("preflight-pass");
  const fs::path dir = test_dir.path();
  Outcome out = RunWorld(3, kQuick, dir);
  EXPECT_EQ((std::vector<int>{0, 0, 0}), out.exit_codes);

  std::ifstream in(dir / "preflight.json");
  ASSERT_TRUE(in.good());
  auto doc = nlohmann::json::parse(in);
  EXPECT_EQ("PASS", doc["verdict"]) << doc["reasons"].dump();
  EXPECT_EQ(3, doc["world_size"]);
  EXPECT_EQ("gloo", doc["backend"]);
  ASSERT_EQ(10u, doc["bandwidth"].size());
  for (const auto& op : doc["bandwidth"]) {
    ASSERT_EQ(3u, op["rows"].size()) << op["op"];  // 8 B, 512 B, 32 KiB
    const bool in_place_checked =
        op["op"] != "alltoall" && op["op"] != "alltoallv" && op["op"] != "sendrecv";
    for (const auto& row : op["rows"]) {
      EXPECT_EQ(0, row["wrong"]) << op["op"] << " " << row["size"];
      EXPECT_EQ(in_place_checked ? nlohmann::json(0) : nlohmann::json(nullptr),
                row["in_place"]["wrong"])
          << op["op"] << " " << row["size"];
      EXPECT_GT(row["time_us"].get<double>(), 0) << op["op"];
      EXPECT_GT(row["in_place"]["time_us"].get<double>(), 0) << op["op"];
    }
    EXPECT_EQ(0, op["out_of_bounds"]);
    EXPECT_GT(op["avg_busbw_gbps"].get<double>(), 0) << op["op"];
  }
  ASSERT_EQ(3u, doc["devices"].size());
  EXPECT_EQ(2, doc["devices"][2]["rank"]);
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
  const dlaunch::testing::TestDir test_dir("preflight-hang");
  const fs::path dir = test_dir.path();
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
  const dlaunch::testing::TestDir test_dir("preflight-fail");
  const fs::path dir = test_dir.path();
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
  const dlaunch::testing::TestDir test_dir("preflight-single");
  const fs::path dir = test_dir.path();
  Outcome out = RunWorld(1, kQuick, dir);
  EXPECT_EQ(std::vector<int>{0}, out.exit_codes);
  std::ifstream in(dir / "preflight.json");
  auto doc = nlohmann::json::parse(in);
  EXPECT_EQ("PASS", doc["verdict"]);
  EXPECT_EQ("needs at least 2 ranks", doc["hang_test"]["skipped"]);
}

TEST(PreflightSuiteTest, CoordinatorDumpCommandWritesTheFlightRecorder) {
  const dlaunch::testing::TestDir test_dir("preflight-dump");
  const fs::path dir = test_dir.path();
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

// Tiny sizes, one timed iteration, no hang test and no p2p: the checks of the flags and ops.
// A flag in `extra` replaces its default here.
std::vector<std::string> Small(std::vector<std::string> extra) {
  const std::vector<std::pair<std::string, std::string>> defaults = {
      {"-b", "64"}, {"-e", "4K"}, {"-f", "64"}, {"-w", "0"}, {"-n", "1"}, {"-T", "5"}};
  std::vector<std::string> args = {"--backend", "gloo", "--no-hang-test", "--no-p2p"};
  for (const auto& [flag, value] : defaults) {
    if (std::find(extra.begin(), extra.end(), flag) != extra.end()) continue;
    if (flag == "-f" && std::find(extra.begin(), extra.end(), "-i") != extra.end()) continue;
    args.insert(args.end(), {flag, value});
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

nlohmann::json Doc(const fs::path& dir) {
  std::ifstream in(dir / "preflight.json");
  return nlohmann::json::parse(in);
}

// Every checked cell of every row holds #wrong 0; returns the number of rows.
size_t ExpectNoWrong(const nlohmann::json& doc) {
  size_t rows = 0;
  for (const auto& op : doc["bandwidth"]) {
    for (const auto& row : op["rows"]) {
      ++rows;
      for (const auto& place : {row, row["in_place"]}) {
        if (!place["wrong"].is_null()) {
          EXPECT_EQ(0, place["wrong"]) << op["op"] << " " << row.dump();
        }
      }
    }
  }
  return rows;
}

TEST(PreflightSuiteTest, EveryOpTypeAndReductionIsCorrect) {
  const dlaunch::testing::TestDir test_dir("preflight-all");
  const fs::path dir = test_dir.path();
  Outcome out = RunWorld(3, Small({"-d", "all", "-o", "all", "-r", "1", "-e", "64"}), dir);
  EXPECT_EQ((std::vector<int>{0, 0, 0}), out.exit_codes);
  auto doc = Doc(dir);
  EXPECT_EQ("PASS", doc["verdict"]) << doc["reasons"].dump();
  // One size x 8 types, times 5 reductions for allreduce, reduce_scatter and reduce.
  std::map<std::string, size_t> rows;
  for (const auto& op : doc["bandwidth"]) rows[op["op"]] = op["rows"].size();
  for (const char* op : {"allreduce", "reduce_scatter", "reduce"}) EXPECT_EQ(40u, rows[op]) << op;
  for (const char* op :
       {"allgather", "broadcast", "alltoall", "gather", "scatter", "sendrecv", "alltoallv"}) {
    EXPECT_EQ(8u, rows[op]) << op;
  }
  EXPECT_EQ(ExpectNoWrong(doc), 3 * 40u + 7 * 8u);
  for (const auto& row : doc["bandwidth"][4]["rows"]) {
    EXPECT_NE("none", row["redop"]);
    EXPECT_EQ(1, row["root"]);
  }
}

// alltoallv's uneven blocks (op_table.h) at several world sizes and every dtype, on both
// transports: the shared-memory groups have no alltoall family, so with --transport shm (and
// auto) alltoallv still runs on gloo's TCP mesh inside the hierarchical communicator.
TEST(PreflightSuiteTest, AllToAllVIsCorrectAtSeveralWorldSizes) {
  for (int n : {1, 2, 3, 4, 5}) {
    for (const char* transport : {"shm", "tcp"}) {
      const dlaunch::testing::TestDir test_dir("preflight-alltoallv");
      const fs::path dir = test_dir.path();
      Outcome out = RunWorld(n,
                             Small({"--ops", "alltoallv", "-d", "all", "-b", "1K", "-e", "64K",
                                    "-f", "8", "--transport", transport}),
                             dir);
      EXPECT_EQ(std::vector<int>(n, 0), out.exit_codes) << n << " " << transport;
      auto doc = Doc(dir);
      EXPECT_EQ("PASS", doc["verdict"]) << doc["reasons"].dump();
      ASSERT_EQ(1u, doc["bandwidth"].size());
      const auto& rows = doc["bandwidth"][0]["rows"];
      ASSERT_EQ(8u * 3, rows.size()) << n;  // 8 types x 1 KiB, 8 KiB, 64 KiB
      for (const auto& row : rows) {
        EXPECT_GT(row["count"].get<size_t>(), 0u) << row.dump();  // a real exchange, not empty
        EXPECT_EQ(0, row["wrong"]) << n << " " << transport << " " << row.dump();
        EXPECT_TRUE(row["in_place"]["wrong"].is_null());  // overlapping views, as alltoall
      }
      EXPECT_EQ(0, doc["bandwidth"][0]["out_of_bounds"]);
    }
  }
}

// The Communicator calls behind alltoallv, -G and -R, on gloo: bad split counts are refused by the
// shared call check, and gloo names itself when asked for graphs or registered buffers.
TEST(PreflightSuiteTest, GlooAnswersAllToAllVGraphsAndRegistrationPlainly) {
  core::CommOptions o;
  o.backend = "gloo";
  auto comm = core::MakeCommunicator(o);
  auto mem = comm->Allocate(64 * sizeof(float));
  core::Buffer buf = comm->MakeBuffer(mem.get(), 64, core::DataType::kFloat32);
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      EXPECT_EQ(ErrorKind::kInvalidArgument, e.kind());
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(std::string::npos,
            message([&] { comm->AllToAllV(buf, {60}, buf, {64}); })
                .find("gloo alltoallv input counts add up to 60 elements but the input buffer "
                      "holds 64"));
  EXPECT_NE(std::string::npos, message([&] {
                                 comm->AllToAllV(buf, {32, 32}, buf, {64});
                               }).find("needs one input count per rank (got 2"));
  comm->AllToAllV(buf, {64}, buf, {64})->Wait(std::chrono::seconds(10));
  EXPECT_NE(std::string::npos,
            message([&] { comm->Capture([] {}); }).find("the gloo communicator cannot capture"));
  EXPECT_NE(std::string::npos, message([&] {
                                 comm->AllocateRegistered(64, core::BufferRegistration::kLocal);
                               }).find("the gloo communicator cannot register buffers"));
  EXPECT_NE(nullptr, comm->AllocateRegistered(64, core::BufferRegistration::kNone));
}

// -G and -R need the NCCL communicator: with --backend auto on a host without a GPU the ranks
// resolve gloo and refuse them (exit 2) before any collective.
TEST(PreflightSuiteTest, GraphAndRegistrationFlagsAreRefusedWhereAutoPicksGloo) {
  if (core::NcclAvailable()) GTEST_SKIP() << "a GPU is visible: auto picks nccl";
  for (const char* flag : {"-G", "-R"}) {
    const dlaunch::testing::TestDir test_dir("preflight-auto-graph");
    const fs::path dir = test_dir.path();
    std::vector<std::string> args = Small({flag, "1", "--ops", "allreduce"});
    args[1] = "auto";  // Small() starts with --backend gloo
    ::testing::internal::CaptureStderr();
    Outcome out = RunWorld(2, args, dir);
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ((std::vector<int>{2, 2}), out.exit_codes) << flag;
    EXPECT_NE(std::string::npos, err.find(std::string(flag) + " (--")) << err;
    EXPECT_NE(std::string::npos, err.find("runs on gloo")) << err;
    EXPECT_FALSE(fs::exists(dir / "preflight.json"));
  }
}

TEST(PreflightSuiteTest, EveryRootIsCorrect) {
  const dlaunch::testing::TestDir test_dir("preflight-roots");
  const fs::path dir = test_dir.path();
  Outcome out = RunWorld(3, Small({"--ops", "broadcast,reduce,gather,scatter", "-r", "all"}), dir);
  EXPECT_EQ((std::vector<int>{0, 0, 0}), out.exit_codes);
  auto doc = Doc(dir);
  EXPECT_EQ(4 * 3 * 2u, ExpectNoWrong(doc));  // 3 roots x 2 sizes per op
  for (const auto& op : doc["bandwidth"]) {
    std::set<int> roots;
    for (const auto& row : op["rows"]) roots.insert(row["root"].get<int>());
    EXPECT_EQ((std::set<int>{0, 1, 2}), roots) << op["op"];
  }
}

TEST(PreflightSuiteTest, BlockingAverageAndCheckFlags) {
  const std::vector<std::vector<std::string>> variants = {
      {"-z", "1", "-a", "0"}, {"-z", "2", "-a", "2"}, {"-z", "3", "-a", "3", "-c", "3"}};
  for (const auto& v : variants) {
    const dlaunch::testing::TestDir test_dir("preflight-flags");
    const fs::path dir = test_dir.path();
    std::vector<std::string> args = v;
    args.insert(args.end(), {"--ops", "allreduce,gather,alltoall", "-n", "2"});
    Outcome out = RunWorld(2, Small(args), dir);
    EXPECT_EQ((std::vector<int>{0, 0}), out.exit_codes) << v[1];
    auto doc = Doc(dir);
    EXPECT_EQ("PASS", doc["verdict"]) << doc["reasons"].dump();
    EXPECT_EQ(6u, ExpectNoWrong(doc));
    EXPECT_EQ(std::stoi(v[1]), doc["options"]["blocking"]);
  }
  // -c 0: nothing checked, every #wrong is N/A.
  const dlaunch::testing::TestDir test_dir("preflight-nocheck");
  const fs::path dir = test_dir.path();
  EXPECT_EQ((std::vector<int>{0, 0}),
            RunWorld(2, Small({"--ops", "allreduce", "-c", "0"}), dir).exit_codes);
  auto unchecked = Doc(dir);
  for (const auto& row : unchecked["bandwidth"][0]["rows"]) {
    EXPECT_TRUE(row["wrong"].is_null());
    EXPECT_TRUE(row["in_place"]["wrong"].is_null());
  }
}

TEST(PreflightSuiteTest, LinearStepsVisitEverySize) {
  const dlaunch::testing::TestDir test_dir("preflight-linear");
  const fs::path dir = test_dir.path();
  RunWorld(2, Small({"--ops", "broadcast", "-b", "1K", "-e", "3K", "-i", "1K"}), dir);
  std::vector<size_t> sizes;
  auto doc = Doc(dir);
  for (const auto& row : doc["bandwidth"][0]["rows"]) sizes.push_back(row["size"]);
  EXPECT_EQ((std::vector<size_t>{1024, 2048, 3072}), sizes);
}

// Rank 0's stdout with one op is a file nccl-tests' readers take unchanged; --json and --csv put
// machine-readable output there instead.
TEST(PreflightSuiteTest, StdoutFormats) {
  const dlaunch::testing::TestDir test_dir("preflight-stdout");
  const fs::path dir = test_dir.path();
  ::testing::internal::CaptureStdout();
  Outcome out = RunWorld(2, Small({"--ops", "all_reduce_perf", "-e", "64K", "-f", "4"}), dir);
  std::string text = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ((std::vector<int>{0, 0}), out.exit_codes);
  auto section = testing::ParseNcclTests(text);
  EXPECT_EQ(2u, section.device_lines.size());
  EXPECT_EQ(6u, section.rows.size());  // 64 B .. 64 KiB
  EXPECT_EQ(1u, testing::FlagPerfAvgBusBw(text).size()) << text;
  EXPECT_GE(testing::SuperbenchOld(text), 0) << text;
  EXPECT_EQ(6u, testing::SuperbenchNew(text, true).size()) << text;
  double avg = -1;
  EXPECT_EQ(6u, testing::AwsNcclToCsv(text, &avg).size()) << text;
  EXPECT_GE(avg, 0);
  // Everything after the table is a comment.
  const size_t end = text.find("# Collective test concluded: all_reduce_perf");
  ASSERT_NE(std::string::npos, end);
  for (const std::string& line : testing::Lines(text.substr(end))) {
    EXPECT_TRUE(line.empty() || line[0] == '#') << line;
  }
  EXPECT_NE(std::string::npos, text.find("# verdict: PASS"));

  ::testing::internal::CaptureStdout();
  RunWorld(2, Small({"--ops", "allreduce,scatter", "--json"}), dir);
  std::string json_text = ::testing::internal::GetCapturedStdout();
  auto doc = nlohmann::json::parse(json_text);  // stdout is the document and nothing else
  EXPECT_EQ("PASS", doc["verdict"]);
  EXPECT_EQ(2u, doc["bandwidth"].size());

  ::testing::internal::CaptureStdout();
  RunWorld(2, Small({"--ops", "allreduce,scatter", "--csv"}), dir);
  auto lines = testing::Lines(::testing::internal::GetCapturedStdout());
  ASSERT_EQ(5u, lines.size());  // header + 2 sizes x 2 ops
  EXPECT_EQ(0u, lines[0].rfind("op,size,count,", 0));
  EXPECT_EQ(0u, lines[3].rfind("scatter,", 0));
}

// The shared 2-core host deschedules a rank now and then: a link measured slow once is measured
// again before it is flagged, and the verdict gives every figure.
TEST(PreflightSuiteTest, NoiseOnALinkIsRemeasuredNotFlagged) {
  const dlaunch::testing::TestDir test_dir("preflight-noise");
  const fs::path dir = test_dir.path();
  auto slow_first_round = [](int src, int dst, int round) {
    if (src == 0 && dst == 1 && round == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  };
  Outcome out = RunWorld(3,
                         {"--backend",
                          "gloo",
                          "--ops",
                          "sendrecv",
                          "-b",
                          "8",
                          "-e",
                          "8",
                          "-w",
                          "0",
                          "-n",
                          "1",
                          "--no-hang-test",
                          "--p2p-bytes",
                          "64K",
                          "--p2p-iters",
                          "3",
                          "--slow-link-factor",
                          "0.05",
                          "--p2p-retries",
                          "5"},
                         dir, slow_first_round);
  auto doc = Doc(dir);
  const auto& recovered = doc["p2p"]["recovered_links"];
  bool found = false;
  for (const auto& l : recovered) {
    if (l["src"] == 0 && l["dst"] == 1) {
      found = true;
      EXPECT_LT(l["first_gbps"].get<double>(), 0.05 * doc["p2p"]["median_gbps"].get<double>());
      EXPECT_GE(l["repeats_gbps"].size(), 1u);
    }
  }
  if (!found && doc["p2p"]["recovered_links"].empty() && doc["p2p"]["slow_links"].empty()) {
    GTEST_SKIP() << "this host is so loaded that a 200 ms stall did not stand out: "
                 << doc["p2p"].dump();
  }
  EXPECT_TRUE(found) << doc["p2p"].dump();
  for (const auto& l : doc["p2p"]["slow_links"]) {
    EXPECT_FALSE(l["src"] == 0 && l["dst"] == 1) << doc["p2p"].dump();
  }
  // The verdict does not blame the link. (Other links are not asserted on: with three ranks as
  // threads on this loaded 2-core host, a link into a descheduled rank can stay slow through
  // every re-measurement, which is then a real finding about this host.)
  for (const auto& r : doc["reasons"]) {
    const std::string reason = r.get<std::string>();
    EXPECT_FALSE(reason.rfind("p2p link rank 0", 0) == 0 &&
                 reason.find("-> rank 1") != std::string::npos)
        << reason;
  }
  EXPECT_EQ(out.exit_codes[0], out.exit_codes[2]);
}

TEST(PreflightSuiteTest, PersistentSlowLinkFailsWithRepeatFigures) {
  const dlaunch::testing::TestDir test_dir("preflight-slowlink");
  const fs::path dir = test_dir.path();
  auto always_slow = [](int src, int dst, int) {
    if (src == 2 && dst == 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
  };
  Outcome out = RunWorld(3,
                         {"--backend",
                          "gloo",
                          "--ops",
                          "sendrecv",
                          "-b",
                          "8",
                          "-e",
                          "8",
                          "-w",
                          "0",
                          "-n",
                          "1",
                          "--no-hang-test",
                          "--p2p-bytes",
                          "64K",
                          "--p2p-iters",
                          "3",
                          "--slow-link-factor",
                          "0.1",
                          "--p2p-retries",
                          "2"},
                         dir, always_slow);
  EXPECT_EQ((std::vector<int>{4, 4, 4}), out.exit_codes);
  auto doc = Doc(dir);
  EXPECT_EQ("FAIL", doc["verdict"]);
  bool named = false;
  for (const auto& r : doc["reasons"]) {
    const std::string reason = r.get<std::string>();
    if (reason.find("p2p link rank 2") == 0 && reason.find("-> rank 0") != std::string::npos) {
      named = true;
      EXPECT_NE(std::string::npos, reason.find("x the median")) << reason;
      EXPECT_NE(std::string::npos, reason.find("re-measured ")) << reason;
      EXPECT_EQ(std::string::npos, reason.find("re-measured none")) << reason;
    }
  }
  EXPECT_TRUE(named) << doc["reasons"].dump();
  for (const auto& l : doc["p2p"]["slow_links"]) {
    if (l["src"] == 2 && l["dst"] == 0) {
      EXPECT_EQ(2u, l["repeats_gbps"].size());
    }
  }
}

TEST(RunPreflightTest, BadArgumentsExitTwo) {
  PreflightContext ctx;
  EXPECT_EQ(2, RunPreflight(ctx, {"--bogus"}));
  EXPECT_EQ(2, RunPreflight(ctx, {"--root", "3"}));  // not a rank of a world of one
  EXPECT_EQ(2, RunPreflight(ctx, {"--hang-rank", "1"}));
}

}  // namespace
}  // namespace dlaunch::worker
