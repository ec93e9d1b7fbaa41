// Several dlaunch launchers acting as nodes of one job, on this machine: over loopback, under
// mpirun, under a simulated Slurm, and in network namespaces joined by a veth pair.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "launcher/rendezvous/ports.h"
#include "process_harness.h"
#include "tests/common/test_dir.h"

namespace dlaunch::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

const char kToken[] = "DLAUNCH_JOB_TOKEN=multinode-test-token-0123456789";

class MultiNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = std::to_string(launcher::PickFreePort("0.0.0.0"));
    endpoint_ = "127.0.0.1:" + port_;
  }

  // dlaunch as node `node` of 2 with 2 ranks each, over loopback.
  std::vector<std::string> Node(int node, std::vector<std::string> program,
                                std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = TwoNodeArgv(DLAUNCH_BIN, node, endpoint_, LogDir(node));
    argv.insert(argv.end(), {"--heartbeat-timeout", "3"});
    if (std::find(extra.begin(), extra.end(), "--rdzv-timeout") == extra.end()) {
      extra.insert(extra.end(), {"--rdzv-timeout", "20"});
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), program.begin(), program.end());
    return argv;
  }
  std::string LogDir(int node) { return (dir_ / ("node" + std::to_string(node))).string(); }
  fs::path RunDir(int node) { return fs::path(LogDir(node)) / "job"; }
  nlohmann::json Summary() {
    std::ifstream in(RunDir(0) / "summary.json");
    return nlohmann::json::parse(in);
  }
  static std::map<std::string, std::string> ReadEnv(const fs::path& p) {
    std::ifstream in(p);
    std::map<std::string, std::string> env;
    for (std::string l; std::getline(in, l);)
      env[l.substr(0, l.find('='))] = l.substr(l.find('=') + 1);
    return env;
  }
  static bool Has(const std::string& text, const std::string& what) {
    return text.find(what) != std::string::npos;
  }

  const TestDir test_dir_{"mn"};
  const fs::path dir_ = test_dir_.path();
  std::string port_, endpoint_;
};

// #30: a rank holds the coordinator's address and its token; with them it tried to crash node 0
// (`NodeStream{member_id: 0, done: true}`), to end the job as node 1 or take its place, and to
// plant error.json and 300 files, and to fail or look alive as the next rank. Every call is
// refused, and the job ends as its ranks did.
TEST_F(MultiNodeTest, ARankCannotSpeakForANodeOrPushFiles) {
  Launched n0(Node(0, {TEST_RANK_BIN, "forge-node"}), {kToken});
  Launched n1(Node(1, {TEST_RANK_BIN, "forge-node"}), {kToken});
  ASSERT_EQ(n1.Wait(seconds(60)), 0) << n1.err_text();
  ASSERT_EQ(n0.Wait(seconds(60)), 0) << n0.err_text();
  for (int r = 0; r < 4; ++r) {
    const fs::path dir = RunDir(0) / ("rank" + std::to_string(r));
    std::ifstream in(dir / "stdout.log");
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, "forged 308 node calls, 0 accepted") << r;
    std::getline(in, line);
    EXPECT_EQ(line, "forged 2 calls as rank " + std::to_string((r + 1) % 4) + ", 0 accepted") << r;
    EXPECT_FALSE(fs::exists(dir / "error.json")) << r;
    EXPECT_FALSE(fs::exists(dir / "planted4")) << r;
  }
  EXPECT_EQ(Summary()["exit_code"], 0);
  // 1232 refusals, a few console lines each 10 s: not one line each.
  const std::string err = n0.err_text();
  size_t lines = 0;
  for (size_t at = err.find("refused "); at != std::string::npos; at = err.find("refused ", at + 1))
    ++lines;
  EXPECT_GT(lines, 0u) << err;
  EXPECT_LT(lines, 40u) << err;
  // The ones not printed are counted.
  EXPECT_NE(err.find(" in all so far); the last: refused "), std::string::npos) << err;
}

TEST_F(MultiNodeTest, TwoLaunchersFormOneJobAndNodeZeroSeesEveryRank) {
  Launched n0(Node(0, {TEST_RANK_BIN, "env"}), {kToken});
  Launched n1(Node(1, {TEST_RANK_BIN, "env"}), {kToken});
  ASSERT_EQ(n1.Wait(seconds(60)), 0) << n1.err_text();
  ASSERT_EQ(n0.Wait(seconds(60)), 0) << n0.err_text();
  std::set<std::string> master;
  for (int r = 0; r < 4; ++r) {
    // Node 1's ranks' logs were streamed into node 0's run directory.
    auto env = ReadEnv(RunDir(0) / ("rank" + std::to_string(r)) / "stdout.log");
    EXPECT_EQ(env["RANK"], std::to_string(r));
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(r % 2));
    EXPECT_EQ(env["GROUP_RANK"], std::to_string(r / 2));
    EXPECT_EQ(env["WORLD_SIZE"], "4");
    // Node 0's ranks call the coordinator; node 1's call their own launcher on loopback, which
    // relays them (rank_relay.h).
    if (r < 2) {
      EXPECT_EQ(env["DLAUNCH_COORDINATOR"], endpoint_);
    } else {
      EXPECT_NE(env["DLAUNCH_COORDINATOR"], endpoint_);
      EXPECT_EQ(env["DLAUNCH_COORDINATOR"].rfind("127.0.0.1:", 0), 0u)
          << env["DLAUNCH_COORDINATOR"];
    }
    // The ranks' token admits only rank calls: never the job token itself (#30).
    EXPECT_EQ(env["DLAUNCH_JOB_TOKEN"].rfind(std::to_string(r) + ".", 0), 0u);
    EXPECT_EQ(env["DLAUNCH_JOB_TOKEN"].size(), 34u);
    EXPECT_EQ(std::string(kToken).find(env["DLAUNCH_JOB_TOKEN"]), std::string::npos);
    master.insert(env["MASTER_ADDR"] + ":" + env["MASTER_PORT"]);
  }
  EXPECT_EQ(master.size(), 1u);
  auto summary = Summary();
  EXPECT_EQ(summary["exit_code"], 0);
  EXPECT_EQ(summary["ranks"].size(), 4u);
  EXPECT_EQ(summary["nodes"].size(), 2u);
}

// #25: `dlaunch status` on node 0's run directory shows node 1's ranks too, with their steps and
// node 1's pids, while the two-node job runs.
TEST_F(MultiNodeTest, StatusOnNodeZeroShowsTheOtherNodesRanks) {
  const std::vector<std::string> steps = {TEST_RANK_BIN, "steps", "120", "50"};
  Launched n0(Node(0, steps, {"--heartbeat-interval", "0.1"}), {kToken});
  Launched n1(Node(1, steps, {"--heartbeat-interval", "0.1"}), {kToken});
  auto all_stepping = [](const nlohmann::json& doc) {
    if (!doc.is_object() || doc["ranks"].size() != 4) return false;
    for (const auto& r : doc["ranks"]) {
      if (!r["step"].is_number() || r["step"].get<int>() <= 0) return false;
    }
    return true;
  };
  nlohmann::json doc;
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + seconds(40);
  while (!all_stepping(doc) && std::chrono::steady_clock::now() < deadline) {
    Launched status({DLAUNCH_BIN, "status", RunDir(0).string(), "--json"});
    if (status.Wait(seconds(20)) == 0) {
      out.clear();
      for (const auto& l : status.out_lines) out += l + "\n";
      doc = nlohmann::json::parse(out, nullptr, false);
    }
    if (!all_stepping(doc)) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(all_stepping(doc)) << out << n0.err_text() << n1.err_text();
  EXPECT_EQ(doc["job"]["nodes"], 2);
  EXPECT_EQ(doc["job"]["world_size"], 4);
  std::set<int> node1_pids;
  for (int r = 2; r < 4; ++r) {
    const auto& rank = doc["ranks"][r];
    EXPECT_EQ(rank["rank"], r);
    EXPECT_EQ(rank["state"], "running") << rank.dump();
    EXPECT_GT(rank["pid"].get<int>(), 0) << rank.dump();
    EXPECT_FALSE(rank["host"].get<std::string>().empty()) << rank.dump();
    node1_pids.insert(rank["pid"].get<int>());
  }
  EXPECT_EQ(node1_pids.size(), 2u) << doc.dump(2);
  // The text view says so in its job line.
  Launched text({DLAUNCH_BIN, "status", RunDir(0).string()});
  ASSERT_EQ(text.Wait(seconds(20)), 0) << text.err_text();
  std::string view;
  for (const auto& l : text.out_lines) view += l + "\n";
  EXPECT_TRUE(Has(view, "4 ranks on 2 nodes")) << view;
  ASSERT_EQ(n1.Wait(seconds(60)), 0) << n1.err_text();
  ASSERT_EQ(n0.Wait(seconds(60)), 0) << n0.err_text();
}

TEST_F(MultiNodeTest, RanksOfBothNodesMeetThroughNodeZerosCoordinator) {
  Launched n0(Node(0, {TEST_RANK_BIN, "register"}), {kToken});
  Launched n1(Node(1, {TEST_RANK_BIN, "register"}), {kToken});
  ASSERT_EQ(n1.Wait(seconds(60)), 0) << n1.err_text();
  ASSERT_EQ(n0.Wait(seconds(60)), 0) << n0.err_text();
  std::ifstream in(RunDir(0) / "rank3" / "stdout.log");
  std::string line;
  std::getline(in, line);
  EXPECT_TRUE(std::regex_match(line, std::regex("registered rank 3 of 4 local 1 arrived [1-4]")))
      << line;
}

TEST_F(MultiNodeTest, AFailureOnOneNodeTearsDownTheWholeJob) {
  Launched n0(Node(0, {TEST_RANK_BIN, "exit-after", "3", "5"}), {kToken});
  Launched n1(Node(1, {TEST_RANK_BIN, "exit-after", "3", "5"}), {kToken});
  EXPECT_EQ(n1.Wait(seconds(60)), 1) << n1.err_text();
  EXPECT_EQ(n0.Wait(seconds(60)), 1) << n0.err_text();
  EXPECT_TRUE(Has(n0.err_text(), "node 1 (")) << n0.err_text();
  EXPECT_TRUE(Has(n0.err_text(), "rank 3 failed: exit code 5")) << n0.err_text();
  auto summary = Summary();
  EXPECT_EQ(summary["exit_code"], 1);
  EXPECT_TRUE(Has(summary["error"].get<std::string>(), "rank 3"));
}

TEST_F(MultiNodeTest, ASigkilledNodeAgentIsDetectedAndNamed) {
  Launched n0(Node(0, {TEST_RANK_BIN, "sleep"}), {kToken});
  Launched n1(Node(1, {TEST_RANK_BIN, "sleep"}), {kToken});
  auto ready = [](const std::vector<std::string>& lines) {
    return std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
             return l.find("ready") != std::string::npos;
           }) >= 2;
  };
  ASSERT_TRUE(n1.WaitFor(ready, seconds(60)));
  ASSERT_TRUE(n0.WaitFor(ready, seconds(60)));
  ASSERT_EQ(::kill(n1.pid(), SIGKILL), 0);
  // Within --heartbeat-timeout (3 s) plus teardown.
  EXPECT_EQ(n0.Wait(seconds(20)), 1) << n0.err_text();
  EXPECT_TRUE(Has(n0.err_text(), "node 1 (")) << n0.err_text();
  EXPECT_TRUE(Has(n0.err_text(), "lost")) << n0.err_text();
  auto summary = Summary();
  EXPECT_EQ(summary["nodes"][1]["status"], "lost");
}

TEST_F(MultiNodeTest, PreflightAcrossNodesFoldsTheP2PMatrixPerNode) {
  const std::vector<std::string> preflight = {
      "preflight", "--backend", "gloo", "--ops",          "allreduce",          "-b",
      "1K",        "-e",        "16K",  "--no-hang-test", "--slow-link-factor", "0.01"};
  Launched n0(Node(0, preflight, {"--skip-doctor"}), {kToken});
  Launched n1(Node(1, preflight, {"--skip-doctor"}), {kToken});
  ASSERT_EQ(n1.Wait(seconds(120)), 0) << n1.err_text();
  ASSERT_EQ(n0.Wait(seconds(120)), 0) << n0.err_text();
  std::ifstream in(RunDir(0) / "preflight.json");
  auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["verdict"], "PASS");
  EXPECT_EQ(doc["world_size"], 4);
  EXPECT_EQ(doc["node_matrix"]["ranks_per_node"], 2);
  ASSERT_EQ(doc["node_matrix"]["matrix_gbps"].size(), 2u);
  EXPECT_GT(doc["node_matrix"]["matrix_gbps"][0][1].get<double>(), 0);
}

TEST_F(MultiNodeTest, WrongTokenCannotJoin) {
  Launched n0(Node(0, {TEST_RANK_BIN, "env"}, {"--rdzv-timeout", "3"}), {kToken});
  Launched n1(Node(1, {TEST_RANK_BIN, "env"}, {"--rdzv-timeout", "3"}),
              {"DLAUNCH_JOB_TOKEN=someone-elses-token-000"});
  EXPECT_NE(n1.Wait(seconds(30)), 0);
  EXPECT_TRUE(Has(n1.err_text(), "wrong or missing job token")) << n1.err_text();
  EXPECT_EQ(n0.Wait(seconds(30)), 1);
  EXPECT_TRUE(Has(n0.err_text(), "refused RegisterNode")) << n0.err_text();
  EXPECT_TRUE(Has(n0.err_text(), "node 1 never joined")) << n0.err_text();
}

TEST_F(MultiNodeTest, MultiNodeNeedsATokenAndAnEndpoint) {
  Launched a({DLAUNCH_BIN, "--nnodes", "2", "--rdzv-endpoint", endpoint_, "true"},
             {"DLAUNCH_JOB_TOKEN="});
  EXPECT_EQ(a.Wait(seconds(10)), 2);
  EXPECT_TRUE(Has(a.err_text(), "shared job token")) << a.err_text();
  Launched b({DLAUNCH_BIN, "--nnodes", "2", "true"}, {kToken});
  EXPECT_EQ(b.Wait(seconds(10)), 2);
  EXPECT_TRUE(Has(b.err_text(), "needs --rdzv-endpoint")) << b.err_text();
}

TEST_F(MultiNodeTest, SlurmEnvironmentAloneIsEnough) {
  auto slurm = [&](int node) {
    return std::vector<std::string>{kToken,
                                    "SLURM_STEP_ID=0",
                                    "SLURM_STEP_NUM_TASKS=2",
                                    "SLURM_PROCID=" + std::to_string(node),
                                    "SLURM_STEP_NODELIST=localhost,nohost[1-3]",
                                    "SLURM_JOB_ID=4242",
                                    "DLAUNCH_RDZV_PORT=" + port_};
  };
  Launched n0({DLAUNCH_BIN, "--log-dir", LogDir(0), "--nproc", "2", TEST_RANK_BIN, "register"},
              slurm(0));
  Launched n1({DLAUNCH_BIN, "--log-dir", LogDir(1), "--nproc", "2", TEST_RANK_BIN, "register"},
              slurm(1));
  ASSERT_EQ(n1.Wait(seconds(60)), 0) << n1.err_text();
  ASSERT_EQ(n0.Wait(seconds(60)), 0) << n0.err_text();
  // Node 0's run id (slurm-<job>.<step>-<time>-<random>) is the job's.
  std::vector<fs::path> runs;
  for (const auto& e : fs::directory_iterator(LogDir(0))) runs.push_back(e.path());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].filename().string().rfind("slurm-4242.0-", 0), 0u) << runs[0];
  EXPECT_TRUE(fs::exists(runs[0] / "rank3" / "stdout.log"));
}

TEST_F(MultiNodeTest, KubeflowVariablesAreHonoured) {
  auto pet = [&](int node) {
    return std::vector<std::string>{kToken, "PET_NNODES=2", "PET_NODE_RANK=" + std::to_string(node),
                                    "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port_};
  };
  Launched n0({DLAUNCH_BIN, "--log-dir", LogDir(0), "--run-id", "job", "--nproc", "1",
               TEST_RANK_BIN, "register"},
              pet(0));
  Launched n1({DLAUNCH_BIN, "--log-dir", LogDir(1), "--nproc", "1", TEST_RANK_BIN, "register"},
              pet(1));
  ASSERT_EQ(n1.Wait(seconds(60)), 0) << n1.err_text();
  ASSERT_EQ(n0.Wait(seconds(60)), 0) << n0.err_text();
  EXPECT_EQ(Summary()["ranks"].size(), 2u);
}

TEST_F(MultiNodeTest, MpirunStartsOneLauncherPerNode) {
  if (::access(MPIRUN_BIN, X_OK) != 0) GTEST_SKIP() << "mpirun is not installed";
  Launched m({MPIRUN_BIN, "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x",
              "DLAUNCH_JOB_TOKEN", DLAUNCH_BIN, "--log-dir", LogDir(0), "--run-id", "job",
              "--nproc", "2", TEST_RANK_BIN, "register"},
             {kToken, "OMPI_MCA_plm_rsh_agent=false"});
  ASSERT_EQ(m.Wait(seconds(120)), 0) << m.err_text();
  auto summary = Summary();
  EXPECT_EQ(summary["exit_code"], 0);
  EXPECT_EQ(summary["ranks"].size(), 4u);
}

// Certificates made with the openssl command line for this test only.
class TlsTest : public MultiNodeTest {
 protected:
  bool MakeCa(const std::string& name) {
    std::string d = dir_.string();
    std::string cmd = "cd " + d +
                      " && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=" + name +
                      " -keyout " + name + ".key -out " + name + ".pem >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0;
  }
  bool MakeCert(const std::string& ca, const std::string& name) {
    std::string d = dir_.string();
    std::string cmd = "cd " + d +
                      " && openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout " +
                      name + ".key -out " + name +
                      ".csr >/dev/null 2>&1 && printf "
                      "'subjectAltName=DNS:localhost,IP:127.0.0.1' > " +
                      name + ".ext && openssl x509 -req -in " + name + ".csr -CA " + ca +
                      ".pem -CAkey " + ca + ".key -CAcreateserial -days 1 -extfile " + name +
                      ".ext -out " + name + ".pem >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0;
  }
  std::vector<std::string> TlsFlags(const std::string& ca, const std::string& cert) {
    return {"--tls-ca",   (dir_ / (ca + ".pem")).string(),
            "--tls-cert", (dir_ / (cert + ".pem")).string(),
            "--tls-key",  (dir_ / (cert + ".key")).string()};
  }
};

TEST_F(TlsTest, NodesAndRanksTalkTlsAndAForeignCertificateIsRefused) {
  if (std::system("command -v openssl >/dev/null") != 0) GTEST_SKIP() << "no openssl";
  ASSERT_TRUE(MakeCa("ca") && MakeCert("ca", "node0") && MakeCert("ca", "node1"));
  ASSERT_TRUE(MakeCa("evil") && MakeCert("evil", "intruder"));
  endpoint_ = "localhost:" + port_;
  {
    Launched n0(Node(0, {TEST_RANK_BIN, "register"}, TlsFlags("ca", "node0")), {kToken});
    Launched n1(Node(1, {TEST_RANK_BIN, "register"}, TlsFlags("ca", "node1")), {kToken});
    ASSERT_EQ(n1.Wait(seconds(60)), 0) << n1.err_text();
    ASSERT_EQ(n0.Wait(seconds(60)), 0) << n0.err_text();
  }
  port_ = std::to_string(launcher::PickFreePort("0.0.0.0"));
  endpoint_ = "localhost:" + port_;
  Launched n0(Node(0, {TEST_RANK_BIN, "env"}, TlsFlags("ca", "node0")), {kToken});
  // The right token but a certificate from another CA: the handshake fails.
  Launched n1(Node(1, {TEST_RANK_BIN, "env"}, TlsFlags("ca", "intruder")), {kToken});
  EXPECT_NE(n1.Wait(seconds(60)), 0);
  EXPECT_EQ(n0.Wait(seconds(60)), 1) << n0.err_text();
  EXPECT_TRUE(Has(n0.err_text(), "node 1 never joined")) << n0.err_text();
}

// Two hosts with their own addresses: network namespaces joined by a veth pair.
TEST_F(MultiNodeTest, NodesInSeparateNetworkNamespaces) {
  const std::string a = "dlt" + std::to_string(::getpid() % 100000) + "a";
  const std::string b = "dlt" + std::to_string(::getpid() % 100000) + "b";
  auto sh = [](const std::string& cmd) {
    return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
  };
  if (!sh("ip netns add " + a)) GTEST_SKIP() << "cannot create network namespaces here";
  sh("ip netns add " + b);
  bool ok = sh("ip link add " + a + "v type veth peer name " + b + "v") &&
            sh("ip link set " + a + "v netns " + a) && sh("ip link set " + b + "v netns " + b) &&
            sh("ip -n " + a + " addr add 10.231.7.1/24 dev " + a + "v") &&
            sh("ip -n " + b + " addr add 10.231.7.2/24 dev " + b + "v") &&
            sh("ip -n " + a + " link set " + a + "v up") &&
            sh("ip -n " + b + " link set " + b + "v up") && sh("ip -n " + a + " link set lo up") &&
            sh("ip -n " + b + " link set lo up");
  if (ok) {
    endpoint_ = "10.231.7.1:" + port_;
    auto in = [&](const std::string& ns, std::vector<std::string> argv) {
      argv.insert(argv.begin(), {"/usr/sbin/ip", "netns", "exec", ns});
      return argv;
    };
    Launched n0(in(a, Node(0, {TEST_RANK_BIN, "register"}, {"--master-addr", "10.231.7.1"})),
                {kToken});
    Launched n1(in(b, Node(1, {TEST_RANK_BIN, "register"})), {kToken});
    EXPECT_EQ(n1.Wait(seconds(60)), 0) << n1.err_text();
    EXPECT_EQ(n0.Wait(seconds(60)), 0) << n0.err_text();
    auto env_line = [&](int r) {
      std::ifstream in(RunDir(0) / ("rank" + std::to_string(r)) / "stdout.log");
      std::string l;
      std::getline(in, l);
      return l;
    };
    EXPECT_TRUE(Has(env_line(3), "registered rank 3 of 4")) << env_line(3);
  }
  sh("ip netns del " + a);
  sh("ip netns del " + b);
  if (!ok) GTEST_SKIP() << "cannot wire a veth pair between namespaces here";
}

}  // namespace
}  // namespace dlaunch::testing
