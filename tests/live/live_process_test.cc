// `dlaunch status` and /metrics over a real 2-rank job (test_rank's "steps" mode: libdlaunch
// ranks with heartbeats, steps and a collective in flight): both ranks shown with steps, a wrong
// token and a finished job refused with exit 2, a metrics port in use refused before any rank
// starts, the exposition passing `promtool check metrics`, a real Prometheus server scraping a
// per-rank series, /healthz 200 (and 503 after a real rank failure), and an idle client that
// connects and sends nothing while the job goes on to exit 0.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "process_harness.h"
#include "tests/common/test_dir.h"
#include "tests/common/test_tools.h"

namespace dlaunch::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr char kRunId[] = "live";

// A listening loopback socket on a free port; closed when it goes.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 4);
    socklen_t n = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n);
    port_ = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A free loopback port (for a server the test starts; freed again at once).
int FreePort() { return Listener().port(); }

// A TCP client that connects to `port` and sends nothing.
int IdleClient(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

bool HasLine(const std::vector<std::string>& lines, const std::string& what) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(what) != std::string::npos; });
}

std::string Text(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

class LiveProcessTest : public ::testing::Test {
 protected:
  TestDir dir_{"live"};
  fs::path RunDir() const { return dir_.path() / "logs" / kRunId; }

  // dlaunch with 2 ranks of `program`, heartbeats every 100 ms, and `extra` options.
  std::vector<std::string> Launch(const std::vector<std::string>& extra,
                                  const std::vector<std::string>& program) const {
    std::vector<std::string> argv = {DLAUNCH_BIN,
                                     "--nproc",
                                     "2",
                                     "--log-dir",
                                     (dir_.path() / "logs").string(),
                                     "--run-id",
                                     kRunId,
                                     "--heartbeat-interval",
                                     "0.1",
                                     "--quiet"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back("--");
    argv.insert(argv.end(), program.begin(), program.end());
    return argv;
  }
  // A 2-rank job of `steps` steps of 50 ms each.
  std::vector<std::string> Job(int steps, const std::vector<std::string>& extra = {}) const {
    return Launch(extra, {TEST_RANK_BIN, "steps", std::to_string(steps), "50"});
  }

  // `dlaunch status ARGS...`, its exit code; its output in `out`, `err`.
  int Status(std::vector<std::string> args, std::string* out, std::string* err,
             std::vector<std::string> env = {}) {
    args.insert(args.begin(), {DLAUNCH_BIN, "status"});
    Launched s(args, env);
    const int rc = s.Wait(seconds(20));
    *out = Text(s.out_lines);
    *err = Text(s.err_lines);
    return rc;
  }

  // Polls `dlaunch status RUN_DIR --json` until both ranks report a step > 0 (deadline 30 s).
  nlohmann::json WaitForSteps() {
    const auto deadline = std::chrono::steady_clock::now() + seconds(30);
    std::string out, err;
    while (std::chrono::steady_clock::now() < deadline) {
      if (Status({RunDir().string(), "--json"}, &out, &err) == 0) {
        nlohmann::json doc = nlohmann::json::parse(out, nullptr, false);
        if (doc.is_object() && doc["ranks"].size() == 2 && doc["ranks"][0]["step"].is_number() &&
            doc["ranks"][1]["step"].is_number() && doc["ranks"][0]["step"].get<int>() > 0 &&
            doc["ranks"][1]["step"].get<int>() > 0) {
          return doc;
        }
      }
      std::this_thread::sleep_for(milliseconds(100));  // the next poll of the job's state
    }
    ADD_FAILURE() << "no step from both ranks within 30 s; last: " << out << err;
    return {};
  }
};

TEST_F(LiveProcessTest, StatusShowsBothRanksThenRefusesBadTokenAndFinishedJob) {
  Launched job(Job(160));
  const nlohmann::json doc = WaitForSteps();
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["schema"], "dlaunch.status/1");
  EXPECT_EQ(doc["job"]["state"], "running");
  EXPECT_EQ(doc["job"]["world_size"], 2);
  EXPECT_EQ(doc["job"]["run_id"], kRunId);
  for (int r = 0; r < 2; ++r) {
    const auto& rank = doc["ranks"][r];
    EXPECT_EQ(rank["rank"], r);
    EXPECT_EQ(rank["state"], "running");
    EXPECT_GT(rank["pid"].get<int>(), 0);
    EXPECT_EQ(rank["phase"], "forward");
    EXPECT_EQ(rank["collective"]["op"], "allreduce");
    EXPECT_GT(rank["rss_bytes"].get<int64_t>(), 0);
    EXPECT_TRUE(rank["heartbeat_age_s"].is_number());
  }
  // The text view, and how long the answer takes.
  std::string out, err;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(Status({RunDir().string()}, &out, &err), 0) << err;
  const auto took =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
  std::cout << "dlaunch status answered in " << took.count() << " ms (process included)\n" << out;
  EXPECT_THAT(out, HasSubstr("job live: running, attempt 0, 0 restarts, 2 ranks on 1 node"));
  EXPECT_THAT(out, HasSubstr("allreduce #"));
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2 + 1 + 2) << out;
  // The status token is the run directory owner's only.
  EXPECT_EQ(fs::status(RunDir() / "live.json").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  // --endpoint with a wrong token: one line, exit 2.
  std::ifstream live(RunDir() / "live.json");
  const nlohmann::json endpoint = nlohmann::json::parse(live);
  EXPECT_EQ(Status({"--endpoint", endpoint["endpoint"]}, &out, &err,
                   {"DLAUNCH_STATUS_TOKEN=not-the-token"}),
            2);
  EXPECT_THAT(err, HasSubstr("refused the token"));
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  // The right one, by the env variable.
  EXPECT_EQ(Status({"--endpoint", endpoint["endpoint"], "--json"}, &out, &err,
                   {"DLAUNCH_STATUS_TOKEN=" + endpoint["status_token"].get<std::string>()}),
            0)
      << err;
  EXPECT_THAT(out, HasSubstr("dlaunch.status/1"));
  EXPECT_EQ(job.Wait(seconds(60)), 0) << job.err_text();
  // Finished: one line, exit 2, and no live.json left behind.
  EXPECT_EQ(Status({RunDir().string()}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("job finished"));
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_FALSE(fs::exists(RunDir() / "live.json"));
}

TEST_F(LiveProcessTest, WatchRedrawsInPlaceUntilTheJobEnds) {
  Launched job(Job(60));
  WaitForSteps();
  Launched watch({DLAUNCH_BIN, "status", RunDir().string(), "--watch", "0.2"});
  EXPECT_EQ(watch.Wait(seconds(60)), 0) << watch.err_text();
  const std::string out = Text(watch.out_lines);
  size_t redraws = 0;
  for (size_t at = out.find("\033[H\033[2J"); at != std::string::npos;
       at = out.find("\033[H\033[2J", at + 1)) {
    ++redraws;
  }
  EXPECT_GE(redraws, 2u) << out;
  EXPECT_THAT(watch.err_text(), HasSubstr("job finished"));
  EXPECT_EQ(job.Wait(seconds(30)), 0) << job.err_text();
}

TEST_F(LiveProcessTest, UnknownDirectoryAndMissingArgumentsAreExit2) {
  std::string out, err;
  EXPECT_EQ(Status({(dir_.path() / "nowhere").string()}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("no run directory at"));
  fs::create_directories(dir_.path() / "empty");
  EXPECT_EQ(Status({(dir_.path() / "empty").string()}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("not a dlaunch run directory"));
  EXPECT_EQ(Status({"--endpoint", "127.0.0.1:1"}, &out, &err, {"DLAUNCH_JOB_TOKEN="}), 2);
  EXPECT_THAT(err, HasSubstr("DLAUNCH_STATUS_TOKEN"));
}

TEST_F(LiveProcessTest, MetricsPortInUseFailsBeforeAnyRankStarts) {
  Listener taken;
  Launched job(Job(10, {"--metrics-port", std::to_string(taken.port())}));
  EXPECT_EQ(job.Wait(seconds(30)), 2);
  EXPECT_THAT(job.err_text(), HasSubstr("--metrics-port " + std::to_string(taken.port())));
  EXPECT_THAT(job.err_text(), HasSubstr("in use"));
  EXPECT_FALSE(HasLine(job.out_lines, "ready")) << Text(job.out_lines);
  EXPECT_FALSE(fs::exists(RunDir() / "rank0"));
}

// A real failure: rank 1 exits 1 when the test opens its FIFO, while rank 0 ignores SIGTERM,
// which holds the job in its grace period; /healthz answers 200 before and 503 once the failure
// is judged.
TEST_F(LiveProcessTest, HealthzAnswers503OnceARankHasFailed) {
  const fs::path gate = dir_.path() / "go";
  ASSERT_EQ(::mkfifo(gate.c_str(), 0600), 0);
  Launched job(Launch({"--grace-period", "5", "--metrics-port", "0"},
                      {TEST_RANK_BIN, "exit-after-hold", "1", "1", gate.string()}));
  const int port = WaitForMetricsPort(job, seconds(30));
  ASSERT_GT(port, 0) << job.err_text();
  httplib::Client http("127.0.0.1", port);
  http.set_connection_timeout(5);
  http.set_read_timeout(5);
  auto before = http.Get("/healthz");
  ASSERT_TRUE(before);
  EXPECT_EQ(before->status, 200);
  // Rank 1 fails now; rank 0 holds the teardown for its 5 s of grace. The view is refreshed
  // when a rank exits, so 503 comes within a poll or two of the failure.
  ::close(::open(gate.c_str(), O_WRONLY));
  int last = 0;
  const auto deadline = std::chrono::steady_clock::now() + seconds(15);
  while (std::chrono::steady_clock::now() < deadline) {
    auto res = http.Get("/healthz");
    ASSERT_TRUE(res) << "no answer from /healthz";
    last = res->status;
    if (last == 503) break;
    std::this_thread::sleep_for(milliseconds(100));  // the next refresh of the live view
  }
  EXPECT_EQ(last, 503) << job.err_text();
  auto metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, HasSubstr("dlaunch_job_state{state=\"failed\"} 1"));
  EXPECT_EQ(job.Wait(seconds(60)), 1) << job.err_text();
}

TEST_F(LiveProcessTest, MetricsScrapedByPromtoolAndPrometheusWhileAnIdleClientWaits) {
  const std::string prometheus_bin = FindTestTool({"prometheus"});
  const std::string promtool_bin = FindTestTool({"promtool"});
  DLAUNCH_REQUIRE_TOOL(prometheus_bin, "prometheus", "scripts/install-deps.sh --test");
  DLAUNCH_REQUIRE_TOOL(promtool_bin, "promtool", "scripts/install-deps.sh --test");
  Launched job(Job(400, {"--metrics-port", "0"}));
  const int port = WaitForMetricsPort(job, seconds(30));
  ASSERT_GT(port, 0) << job.err_text();
  // A client that connects and sends nothing, held for the rest of the test.
  const int idle = IdleClient(port);
  httplib::Client http("127.0.0.1", port);
  http.set_connection_timeout(5);
  http.set_read_timeout(5);
  std::string metrics;
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  int64_t slowest_ms = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto start = std::chrono::steady_clock::now();
    auto res = http.Get("/metrics");
    slowest_ms = std::max<int64_t>(
        slowest_ms,
        std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start).count());
    ASSERT_TRUE(res) << "no answer from /metrics while an idle client is connected";
    EXPECT_EQ(res->status, 200);
    metrics = res->body;
    if (metrics.find("dlaunch_rank_step{rank=\"1\"") != std::string::npos) break;
    std::this_thread::sleep_for(milliseconds(100));  // the next heartbeat
  }
  ASSERT_THAT(metrics, HasSubstr("dlaunch_rank_step{rank=\"1\""));
  EXPECT_THAT(metrics, HasSubstr("dlaunch_job_state{state=\"running\"} 1"));
  EXPECT_LT(slowest_ms, 1000) << "a scrape waited for the idle client";
  std::cout << "slowest /metrics answer beside an idle client: " << slowest_ms << " ms\n";
  // No secret in it.
  std::ifstream live(RunDir() / "live.json");
  const std::string token = nlohmann::json::parse(live)["status_token"];
  EXPECT_EQ(metrics.find(token), std::string::npos);
  auto health = http.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);

  // promtool's linter over the exposition.
  const fs::path exposition = dir_.path() / "metrics.txt";
  std::ofstream(exposition) << metrics;
  Launched promtool({"/bin/sh", "-c", promtool_bin + " check metrics < " + exposition.string()});
  EXPECT_EQ(promtool.Wait(seconds(30)), 0) << Text(promtool.out_lines) << promtool.err_text();

  // A real Prometheus server scraping the job every second; its API shows a per-rank series.
  const int prom_port = FreePort();
  const fs::path config = dir_.path() / "prometheus.yml";
  std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                           "scrape_configs:\n  - job_name: dlaunch\n    static_configs:\n"
                           "      - targets: ['127.0.0.1:"
                        << port << "']\n";
  Launched prom({prometheus_bin, "--config.file=" + config.string(),
                 "--storage.tsdb.path=" + (dir_.path() / "tsdb").string(),
                 "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)});
  httplib::Client api("127.0.0.1", prom_port);
  api.set_connection_timeout(2);
  api.set_read_timeout(5);
  std::string answer;
  const auto prom_deadline = std::chrono::steady_clock::now() + seconds(60);
  bool found = false;
  while (!found && std::chrono::steady_clock::now() < prom_deadline) {
    if (auto res = api.Get("/api/v1/query?query=dlaunch_rank_step")) {
      answer = res->body;
      const nlohmann::json doc = nlohmann::json::parse(answer, nullptr, false);
      if (doc.is_object() && doc.value("status", "") == "success") {
        for (const auto& series : doc["data"]["result"]) {
          found = found || (series["metric"].value("rank", "") == "1" &&
                            series["metric"].value("job", "") == "dlaunch");
        }
      }
    }
    if (!found) std::this_thread::sleep_for(milliseconds(250));  // the next scrape
  }
  EXPECT_TRUE(found) << "Prometheus has no dlaunch_rank_step{rank=\"1\"}; last answer: " << answer
                     << prom.err_text();
  // The idle client never held the job back.
  EXPECT_EQ(job.Wait(seconds(60)), 0) << job.err_text();
  ::close(idle);
}

}  // namespace
}  // namespace dlaunch::testing
