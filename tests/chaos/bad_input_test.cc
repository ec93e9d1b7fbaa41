// Bad input never crashes or hangs dlaunch: every malformed command line is refused with exit
// code 2 and a "dlaunch: ..." line before any rank or run directory exists, and `dlaunch
// diagnose` reads a corpus of corrupt run directories (hostile numbers, FIFOs, symlink loops,
// endless files, random byte flips of real ones) to a report, exit code below 128, in seconds.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <random>

#include "core/base/proc.h"
#include "launcher/cli/options.h"
#include "process_harness.h"
#include "tests/chaos/chaos_util.h"
#include "tests/common/test_dir.h"

namespace dlaunch::testing::chaos {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;
using Args = std::vector<std::string>;

// Command lines that must be refused: each value of each flag kind that is wrong.
std::vector<Args> BadCommandLines() {
  std::vector<Args> cases;
  const Args bad_seconds = {"inf", "-inf", "nan", "1e300", "-1", "abc", "", "1e400", "0x"};
  for (const char* flag : {"--hang-timeout", "--grace-period", "--rdzv-timeout",
                           "--heartbeat-interval", "--heartbeat-timeout"}) {
    for (const std::string& v : bad_seconds) {
      cases.push_back({flag, v, "true"});
      cases.push_back({std::string(flag) + "=" + v, "true"});
    }
  }
  for (const char* v : {"0", "-1", "abc", "1e3", "99999999999", "", "70000", "2x", "GPU"}) {
    cases.push_back({"--nproc", v, "true"});
  }
  if (!fs::exists("/proc/driver/nvidia/gpus")) cases.push_back({"--nproc", "gpu", "true"});
  for (const char* v : {"0", "-1", "abc", "4294967296"}) cases.push_back({"--nnodes", v, "true"});
  cases.push_back({"--node-rank", "-1", "true"});
  cases.push_back({"--node-rank", "3", "true"});
  cases.push_back({"--nnodes", "2", "--node-rank", "2", "true"});
  for (const char* v : {"-1", "70000", "abc", "65536"})
    cases.push_back({"--master-port", v, "true"});
  for (const char* v : {"-1", "abc", "1.5"}) cases.push_back({"--max-restarts", v, "true"});
  for (const char* v : {"foo", "", "EXIT"}) cases.push_back({"--on-hang", v, "true"});
  for (const char* v : {"foo", "", "info"}) cases.push_back({"--nccl-debug", v, "true"});
  for (const char* v : {"foo", "etcd"}) cases.push_back({"--rdzv-backend", v, "true"});
  for (const char* v : {",", "a", "3-1", "-1", "1,", ""})
    cases.push_back({"--ranks-filter", v, "true"});
  for (const char* v : {"noequals", "=x", ""}) cases.push_back({"--env", v, "true"});
  for (const char* v : {"a/b", "..", ".", "/abs"}) cases.push_back({"--run-id", v, "true"});
  for (const char* v : {"0644", "8", "abc", "07777", "", "0600"}) {
    cases.push_back({"--run-dir-mode", v, "true"});
  }
  cases.push_back({"-m", "--run-path", "x.py"});
  cases.push_back({"--no-python", "-m", "mod"});
  cases.push_back({"--bogus", "true"});
  cases.push_back({"--nproc"});
  cases.push_back({"-x", "true"});
  cases.push_back({});
  cases.push_back({"--"});
  cases.push_back({"/nonexistent/program"});
  cases.push_back({"no-such-program-in-path"});
  cases.push_back({"/"});
  cases.push_back({"/etc/hostname"});  // not executable
  cases.push_back({"--tls-cert", "/nonexistent.pem", "true"});
  cases.push_back({"--nnodes", "2", "--node-rank", "1", "true"});  // no endpoint to join
  cases.push_back({"--rdzv-endpoint", "nocolon", "--nnodes", "2", "true"});
  for (const Args& train : std::vector<Args>{{"--lr", "inf"},
                                             {"--lr", "nan"},
                                             {"--epochs", "-1"},
                                             {"--batch-size", "0"},
                                             {"--model", "foo"},
                                             {"--data", "foo"},
                                             {"--bogus"},
                                             {"--lr", "1e400"},
                                             {"--fail-at-step", "-3"},
                                             {"--heartbeat-interval", "1e-9"}}) {
    Args a = {"--skip-doctor", "train"};
    a.insert(a.end(), train.begin(), train.end());
    cases.push_back(a);
  }
  for (const Args& pre : std::vector<Args>{{"--ops", ""},
                                           {"--ops", "foo"},
                                           {"-b", "0"},
                                           {"-e", "abc"},
                                           {"-b", "1G", "-e", "1K"},
                                           {"--bogus"}}) {
    Args a = {"--skip-doctor", "preflight"};
    a.insert(a.end(), pre.begin(), pre.end());
    cases.push_back(a);
  }
  cases.push_back({"diagnose", "/nonexistent/run"});
  cases.push_back({"diagnose", "/etc/hostname"});
  cases.push_back({"diagnose"});
  cases.push_back({"diagnose", "--world-size", "-1", "."});
  cases.push_back({"--heartbeat-interval", "1e-9", "true"});
  cases.push_back({"--heartbeat-interval", "0.001", "true"});
  return cases;
}

std::string Show(const Args& a) {
  std::string s;
  for (const auto& x : a) s += (s.empty() ? "'" : " '") + x + "'";
  return s;
}

// Runs dlaunch with `args` (and `env`, KEY=VAL) and checks it refused them as bad input should:
// exit 2, a first stderr line "dlaunch...", nothing on stdout, no run directory in `logs`, and
// `want` in the message when given. Records the trial for RELIABILITY.md.
bool RefusedBeforeStart(const fs::path& logs, const Args& args,
                        const std::vector<std::string>& env = {}, const std::string& want = "") {
  Args argv = {DLAUNCH_BIN, "--log-dir", logs.string()};
  if (!args.empty() && args[0] == "diagnose") argv = {DLAUNCH_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  Launched l(argv, env);
  const auto t0 = std::chrono::steady_clock::now();
  const int code = l.Wait(seconds(20));
  const int64_t ms = MsSince(t0);
  std::error_code ec;
  const bool no_run_dir = !fs::exists(logs, ec) || fs::is_empty(logs, ec);
  const bool one_line = !l.err_lines.empty() && l.err_lines[0].rfind("dlaunch", 0) == 0;
  const bool named = want.empty() || l.err_text().find(want) != std::string::npos;
  const bool ok = code == 2 && no_run_dir && one_line && named && l.out_lines.empty();
  Record({{"fault", "bad command line"},
          {"right", ok},
          {"exit_code", code},
          {"ms", ms},
          {"crash", code < 0 || code >= 128}});
  EXPECT_TRUE(ok) << Show(args) << " -> exit " << code << " in " << ms << " ms"
                  << (named ? "" : ", without '" + want + "'") << "\n"
                  << l.err_text();
  fs::remove_all(logs, ec);
  return ok;
}

TEST(ChaosBadInputTest, EveryBadCommandLineIsExitTwoBeforeAnyRank) {
  TestDir dir("chaos-cli");
  const fs::path logs = dir.path() / "logs";
  std::vector<Args> cases = BadCommandLines();
  ASSERT_GE(cases.size(), 150u);
  const size_t step = LongCampaign() ? 1 : 5;
  int right = 0, tried = 0;
  for (size_t i = 0; i < cases.size(); i += step) {
    right += RefusedBeforeStart(logs, cases[i]);
    ++tried;
  }
  EXPECT_EQ(right, tried);
}

// What only a rank used to find (#28, #30): data that cannot fill one step, options that need
// image data, a GPU or another backend, and torchrun spellings and PET_* variables with bad
// values. Each is refused before start, in words that name the input as the user gave it.
TEST(ChaosBadInputTest, WhatTheRanksWouldFindIsRefusedBeforeStart) {
  TestDir dir("chaos-early");
  const fs::path logs = dir.path() / "logs";
  const std::string csv = (dir.path() / "three.csv").string();
  std::ofstream(csv) << "0.1,0.2,0.3,1\n0.3,0.2,0.1,0\n";
  struct Case {
    Args args;
    std::vector<std::string> env;
    std::string want;
  };
  const std::vector<std::string> token = {"DLAUNCH_JOB_TOKEN=chaos-early-token-0123456789"};
  std::vector<Case> cases = {
      {{"--skip-doctor", "train", "--data", "synthetic", "--batch-size", "100000"},
       {},
       "do not fill one step of --batch-size 100000"},
      {{"--skip-doctor", "--nproc", "2", "train", "--data", "synthetic", "--samples", "100",
        "--batch-size", "40", "--grad-accum", "2"},
       {},
       "100 samples over 2 ranks"},
      {{"--skip-doctor", "--nnodes", "1:2", "--nproc", "2", "train", "--data", "synthetic",
        "--samples", "100", "--batch-size", "64"},
       {},
       "over 2 ranks"},
      {{"--skip-doctor", "train", "--data", "synthetic", "--augment"}, {}, "--augment"},
      {{"--skip-doctor", "train", "--data", csv, "--model", "cnn"}, {}, "--model cnn"},
      {{"--skip-doctor", "train", "--transport", "shm", "--backend", "nccl", "--device", "cuda"},
       {},
       "--transport shm"},
      {{"--skip-doctor", "train", "--fail-at-step", "-3"}, {}, "--fail-at-step"},
      {{"--skip-doctor", "preflight", "--transport", "shm", "--backend", "nccl"},
       {},
       "--transport shm"},
      {{"--rdzv-conf", "bogus=1", "true"}, {}, "unknown key 'bogus'"},
      {{"--rdzv_conf", "timeout=soon", "true"}, {}, "timeout must be a number"},
      {{"--rdzv-conf", "read_timeout", "true"}, {}, "read_timeout needs a value"},
      {{"--start_method", "thread", "true"}, {}, "--start-method"},
      {{"--role", "", "true"}, {}, "--role"},
      {{"--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "127.0.0.1:29391", "--master-port",
        "29391", "true"},
       token,
       "where node 0's coordinator listens"},
      {{"true"}, {"PET_NPROC_PER_NODE=abc"}, "PET_NPROC_PER_NODE: "},
      {{"true"}, {"PET_NPROC_PER_NODE=0"}, "PET_NPROC_PER_NODE: "},
      {{"true"}, {"PET_START_METHOD=thread"}, "PET_START_METHOD: "},
      {{"true"}, {"PET_RDZV_CONF=timeout=x"}, "PET_RDZV_CONF: "},
      {{"diagnose", "--world-size", "-1", "."}, {}, "--world-size"},
      {{"--heartbeat-interval", "1e-9", "true"}, {}, "--heartbeat-interval"},
  };
  if (!fs::exists(base::kNvidiaGpuList) || fs::is_empty(base::kNvidiaGpuList)) {
    cases.push_back({{"--skip-doctor", "train", "--device", "cuda"}, {}, "no GPU"});
    cases.push_back({{"--skip-doctor", "preflight", "--backend", "nccl"}, {}, "no GPU"});
    cases.push_back({{"--skip-doctor", "preflight", "-G", "2"}, {}, "-G (--cudagraph"});
  }
  int right = 0;
  for (const Case& c : cases) right += RefusedBeforeStart(logs, c.args, c.env, c.want);
  EXPECT_EQ(right, static_cast<int>(cases.size()));
}

// Too few file descriptors for the ranks is a set-up error naming the limit, before any rank.
TEST(ChaosBadInputTest, TooFewFileDescriptorsIsExitTwoNamingTheLimit) {
  TestDir dir("chaos-fds");
  Launched l({"/bin/sh", "-c",
              std::string("ulimit -n 256 && exec ") + DLAUNCH_BIN + " --log-dir " +
                  (dir.path() / "logs").string() + " --nproc 128 true"});
  const int code = l.Wait(seconds(20));
  EXPECT_EQ(code, 2) << l.err_text();
  EXPECT_NE(l.err_text().find("ulimit -n is 256; 128 ranks need about"), std::string::npos)
      << l.err_text();
  EXPECT_FALSE(fs::exists(dir.path() / "logs"));
  Record({{"fault", "bad command line"}, {"right", code == 2}, {"exit_code", code}});
}

// Each entry makes one corrupt run directory in `dir`.
using Corruption = std::function<void(const fs::path& dir)>;

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string Summary(const std::string& ranks) {
  return R"({"run_id":"c","exit_code":1,"ranks":[)" + ranks + "]}";
}

std::vector<std::pair<std::string, Corruption>> CorruptRunDirs() {
  std::vector<std::pair<std::string, Corruption>> c;
  auto add = [&](const std::string& name, Corruption f) { c.emplace_back(name, std::move(f)); };
  add("empty", [](const fs::path&) {});
  add("summary garbage", [](const fs::path& d) { Write(d / "summary.json", "{{{{"); });
  add("summary truncated", [](const fs::path& d) {
    Write(d / "summary.json", Summary(R"({"rank":0,"status":"fai)").substr(0, 40));
  });
  add("rank 2147483647", [](const fs::path& d) {
    Write(d / "summary.json", Summary(R"({"rank":2147483647,"status":"failed","exit_code":1})"));
  });
  add("rank -5 and strings", [](const fs::path& d) {
    Write(d / "summary.json", Summary(R"({"rank":-5,"status":7,"exit_code":"x","pid":"y"})"));
  });
  add("rank 1e8", [](const fs::path& d) {
    Write(d / "summary.json", Summary(R"({"rank":100000000,"status":"failed"},{"rank":1e300})"));
  });
  add("folder rank100000000",
      [](const fs::path& d) { fs::create_directories(d / "rank100000000"); });
  add("folder rank overflow", [](const fs::path& d) {
    fs::create_directories(d / "rank99999999999999999999");
    fs::create_directories(d / "rank-1");
    fs::create_directories(d / "rank0x10");
  });
  add("fifo events", [](const fs::path& d) {
    fs::create_directories(d / "rank0");
    ::mkfifo((d / "rank0" / "events.jsonl").c_str(), 0600);
  });
  add("fifo summary", [](const fs::path& d) { ::mkfifo((d / "summary.json").c_str(), 0600); });
  add("fifo flight and error", [](const fs::path& d) {
    fs::create_directories(d / "rank0");
    ::mkfifo((d / "rank0" / "flight.json").c_str(), 0600);
    ::mkfifo((d / "rank0" / "error.json").c_str(), 0600);
    ::mkfifo((d / "rank0" / "stderr.log").c_str(), 0600);
  });
  add("binary events", [](const fs::path& d) {
    std::string junk;
    std::mt19937 rng(7);
    for (int i = 0; i < 100000; ++i) junk.push_back(static_cast<char>(rng()));
    Write(d / "rank0" / "events.jsonl", junk);
    Write(d / "rank0" / "stacks.txt", junk);
  });
  add("zero-byte flight", [](const fs::path& d) { Write(d / "rank0" / "flight.json", ""); });
  add("hostile flight numbers", [](const fs::path& d) {
    Write(d / "rank0" / "flight.json",
          R"({"rank":0,"entries":[{"seq":9223372036854775807,"op":"allreduce","count":-1,)"
          R"("state":"started"},{"seq":-3,"op":"","count":1e308}]})");
  });
  add("deep json", [](const fs::path& d) {
    Write(d / "rank0" / "error.json", std::string(200000, '[') + std::string(200000, ']'));
    Write(d / "summary.json", std::string(100000, '{'));
  });
  add("symlink loop", [](const fs::path& d) {
    fs::create_directory_symlink(d / "rank0", d / "rank0");
    fs::create_symlink(d / "summary.json", d / "summary.json");
  });
  add("endless file", [](const fs::path& d) {
    fs::create_directories(d / "rank0");
    fs::create_symlink("/dev/zero", d / "rank0" / "events.jsonl");
    fs::create_symlink("/dev/urandom", d / "rank0" / "stdout.log");
  });
  add("directory for file", [](const fs::path& d) {
    fs::create_directories(d / "rank0" / "flight.json");
    fs::create_directories(d / "summary.json");
  });
  add("8 GiB sparse summary", [](const fs::path& d) {
    Write(d / "summary.json", "{");
    ::truncate((d / "summary.json").c_str(), int64_t{8} << 30);
  });
  add("10 MB line", [](const fs::path& d) {
    Write(d / "rank0" / "events.jsonl",
          "{\"kind\":\"error\",\"message\":\"" + std::string(10 << 20, 'x') + "\"}\n");
  });
  add("rank folder is a file", [](const fs::path& d) { Write(d / "rank0", "not a folder"); });
  add("lost node with hostile ranks", [](const fs::path& d) {
    Write(
        d / "summary.json",
        R"({"exit_code":1,"ranks":[{"rank":1,"node_rank":99,"status":"lost"}],)"
        R"("nodes":[{"node_rank":2147483647,"status":"lost"},{"node_rank":-1,"status":"lost"}]})");
  });
  add("diagnosis garbage", [](const fs::path& d) { Write(d / "diagnosis.json", "\x01\x02{"); });
  add("heartbeat nonsense", [](const fs::path& d) {
    Write(d / "rank0" / "heartbeat.json", R"({"step":"NaN","phase":[1,2],"unix_ms":-1e400})");
  });
  return c;
}

// `dlaunch diagnose DIR` on `dir`: a report (any exit code below 128) within 30 s.
void ExpectReport(const fs::path& dir, const std::string& name) {
  Launched l({DLAUNCH_BIN, "diagnose", dir.string()});
  const auto t0 = std::chrono::steady_clock::now();
  const int code = l.Wait(seconds(30));
  const int64_t ms = MsSince(t0);
  const bool ok = code >= 0 && code < 128;
  Record({{"fault", "corrupt run directory"}, {"right", ok}, {"exit_code", code}, {"ms", ms}});
  EXPECT_TRUE(ok) << name << ": exit " << code << " after " << ms << " ms\n" << l.err_text();
}

TEST(ChaosBadInputTest, DiagnoseReadsEveryCorruptRunDirectory) {
  TestDir dir("chaos-corpus");
  int i = 0;
  for (const auto& [name, corrupt] : CorruptRunDirs()) {
    const fs::path run = dir.path() / ("run" + std::to_string(i++));
    fs::create_directories(run);
    corrupt(run);
    ExpectReport(run, name);
  }
}

// Random byte flips and truncations of a real run directory (the OOM fixture).
TEST(ChaosBadInputTest, DiagnoseReadsRandomlyDamagedRunDirectories) {
  TestDir dir("chaos-flips");
  std::mt19937 rng(std::random_device{}());
  const int trials = Trials(5, 100);
  for (int t = 0; t < trials; ++t) {
    const fs::path run = dir.path() / ("run" + std::to_string(t));
    fs::copy(DLAUNCH_DIAGNOSE_FIXTURES "/oom", run, fs::copy_options::recursive);
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(run)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
    for (int k = 0; k < 4; ++k) {
      const fs::path& f = files[rng() % files.size()];
      std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
      const auto size = static_cast<int64_t>(fs::file_size(f));
      if (size == 0) continue;
      if (rng() % 4 == 0) {
        io.close();
        fs::resize_file(f, rng() % size);
        continue;
      }
      for (int n = 0; n < 8; ++n) {
        io.seekp(static_cast<std::streamoff>(rng() % size));
        io.put(static_cast<char>(rng()));
      }
    }
    ExpectReport(run, "flips " + std::to_string(t));
  }
}

}  // namespace
}  // namespace dlaunch::testing::chaos
