// Mixed shared memory and TCP in one real job: two dlaunch launchers as two nodes of 2 ranks each
// run preflight (every collective and the send/recv matrix, each result checked element by
// element). Inside a node the ranks must meet over shared memory, across nodes over TCP, and
// preflight.json must record exactly that for every pair.
//
// Which ranks share a host is decided by their host identity (host name, boot id, the node rank
// the launcher hands its ranks as GROUP_RANK). The first test runs both launchers on this machine
// over loopback, so only the node rank tells the nodes apart; the second gives each launcher its
// own network and UTS namespace, i.e. its own address and host name, like two real hosts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "launcher/rendezvous/ports.h"
#include "process_harness.h"
#include "tests/common/test_dir.h"
#include "tests/common/veth_hosts.h"

namespace dlaunch::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::seconds;

const char kToken[] = "DLAUNCH_JOB_TOKEN=shm-two-node-test-token-0123456789";

class ShmTwoNodeTest : public ::testing::Test {
 protected:
  void SetUp() override { port_ = std::to_string(launcher::PickFreePort("0.0.0.0")); }

  std::vector<std::string> Node(int node, const std::string& endpoint,
                                std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = TwoNodeArgv(
        DLAUNCH_BIN, node, endpoint, (dir_.path() / ("node" + std::to_string(node))).string());
    argv.insert(argv.end(), {"--rdzv-timeout", "30", "--skip-doctor"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    // Every op the shared-memory path carries, with sizes past one 1 MiB slot, then the
    // send/recv matrix; --transport shm makes a failure to set it up an error.
    argv.insert(argv.end(), {"preflight", "--backend", "gloo", "--transport", "shm", "--ops",
                             "allreduce,allgather,broadcast,reduce_scatter,reduce,sendrecv", "-b",
                             "1K", "-e", "4M", "-f", "16", "--no-hang-test", "--slow-link-factor",
                             "0.001", "--p2p-bytes", "1M"});
    return argv;
  }

  json Preflight() {
    std::ifstream in(dir_.path() / "node0" / "job" / "preflight.json");
    return json::parse(in);
  }

  // Every pair inside a node on shared memory, every pair across nodes on TCP, for collectives
  // and send/recv alike; every result correct.
  void ExpectMixedPaths(const json& doc) {
    EXPECT_EQ(doc["verdict"], "PASS") << doc["reasons"].dump();
    EXPECT_EQ(doc["world_size"], 4);
    EXPECT_EQ(doc["options"]["transport"], "shm");
    for (const char* kind : {"collectives", "p2p"}) {
      const json& m = doc["link_paths"][kind];
      ASSERT_EQ(m.size(), 4u) << doc["link_paths"].dump();
      for (int s = 0; s < 4; ++s) {
        for (int d = 0; d < 4; ++d) {
          const char* want = s / 2 == d / 2 ? "shm" : "tcp";
          EXPECT_EQ(m[s][d], want) << kind << " " << s << "->" << d;
        }
      }
    }
    // Every op ran, and each row's results were checked (out of place at the top of a row).
    ASSERT_EQ(doc["bandwidth"].size(), 6u);
    for (const json& sweep : doc["bandwidth"]) {
      ASSERT_FALSE(sweep["rows"].empty()) << sweep["op"];
      for (const json& row : sweep["rows"]) {
        EXPECT_EQ(row["wrong"], 0) << sweep["op"] << " " << row.dump();
        // sendrecv has no in-place form.
        if (!row["in_place"]["wrong"].is_null()) {
          EXPECT_EQ(row["in_place"]["wrong"], 0) << sweep["op"] << " " << row.dump();
        }
      }
    }
    EXPECT_EQ(doc["p2p"]["wrong"], 0);
  }

  const TestDir dir_{"shm2n"};
  std::string port_;
};

TEST_F(ShmTwoNodeTest, TwoLaunchersOnLoopbackUseShmInsideEachNodeAndTcpAcross) {
  const std::string endpoint = "127.0.0.1:" + port_;
  Launched n0(Node(0, endpoint), {kToken});
  Launched n1(Node(1, endpoint), {kToken});
  ASSERT_EQ(n1.Wait(seconds(150)), 0) << n1.err_text();
  ASSERT_EQ(n0.Wait(seconds(150)), 0) << n0.err_text();
  const json doc = Preflight();
  ExpectMixedPaths(doc);
  // Rank 0 prints the same, grouped by path.
  std::ifstream log(dir_.path() / "node0" / "job" / "rank0" / "stdout.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("# link paths: shm 0-1 2-3; tcp 0-2 0-3 1-2 1-3\n"), std::string::npos)
      << text;
}

// Two hosts with their own host names and addresses: each launcher in its own network and UTS
// namespace, the namespaces joined by a veth pair.
TEST_F(ShmTwoNodeTest, NodesWithTheirOwnHostNamesAndAddressesUseShmInsideAndTcpAcross) {
  VethHosts hosts("dls", 9);
  if (!hosts.wired) GTEST_SKIP() << "cannot wire a veth pair between network namespaces here";
  // Inside its namespaces each launcher gets its own host name and binds gloo to its veth.
  auto host = [&](size_t i, const std::string& name, std::vector<std::string> argv) {
    std::vector<std::string> wrapped = hosts.Prefix(i, name);
    wrapped.insert(wrapped.end(), argv.begin(), argv.end());
    return wrapped;
  };
  const std::string endpoint = hosts.Address(0) + ":" + port_;
  Launched n0(host(0, "dlhost-a", Node(0, endpoint, {"--master-addr", hosts.Address(0)})),
              {kToken});
  Launched n1(host(1, "dlhost-b", Node(1, endpoint)), {kToken});
  EXPECT_EQ(n1.Wait(seconds(150)), 0) << n1.err_text();
  EXPECT_EQ(n0.Wait(seconds(150)), 0) << n0.err_text();
  if (fs::exists(dir_.path() / "node0" / "job" / "preflight.json")) {
    const json doc = Preflight();
    ExpectMixedPaths(doc);
    // The ranks really ran under the two host names.
    ASSERT_EQ(doc["devices"].size(), 4u);
    for (int r = 0; r < 4; ++r)
      EXPECT_EQ(doc["devices"][r]["hostname"], r < 2 ? "dlhost-a" : "dlhost-b") << r;
  } else {
    ADD_FAILURE() << "no preflight.json; node 0 said: " << n0.err_text();
  }
}

}  // namespace
}  // namespace dlaunch::testing
