// Host names from a hosts file with no DNS server in reach, as on an air-gapped cluster: two
// launchers in network namespaces (veth_hosts.h), each with its own /etc/hosts and a
// resolv.conf naming a server nobody answers for (ip netns exec binds /etc/netns/<ns>/ over
// /etc). The nodes meet by name within the join timeout, because dlaunch resolves names the way
// the system does (getaddrinfo) instead of waiting on DNS first.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "launchers_fixture.h"
#include "tests/common/veth_hosts.h"

namespace dlaunch::testing {
namespace {

class HostsFileTest : public ElasticJobTest {
 protected:
  void TearDown() override {
    for (const auto& d : etc_) fs::remove_all(d);
  }
  // /etc/netns/<ns>/hosts and resolv.conf for every namespace of `hosts`.
  void WriteHostsFiles(const VethHosts& hosts) {
    for (const std::string& ns : hosts.ns) {
      const fs::path etc = fs::path("/etc/netns") / ns;
      fs::create_directories(etc);
      etc_.push_back(etc);
      std::ofstream(etc / "hosts") << "127.0.0.1 localhost\n"
                                   << hosts.Address(0) << " nodezero\n"
                                   << hosts.Address(1) << " nodeone\n";
      // An address on the veth's subnet that no namespace has: queries go unanswered.
      std::ofstream(etc / "resolv.conf")
          << "nameserver 10.231." << hosts.subnet << ".99\noptions timeout:5 attempts:3\n";
    }
  }
  std::vector<fs::path> etc_;
};

TEST_F(HostsFileTest, NodesMeetByHostsFileNamesWithNoDnsServerInReach) {
  VethHosts hosts("dlh", 9);
  if (!hosts.wired) GTEST_SKIP() << "cannot wire network namespaces here (needs root, iproute2)";
  WriteHostsFiles(hosts);
  endpoint_ = "nodezero:" + std::to_string(launcher::PickFreePort("0.0.0.0"));
  nproc_ = "1";
  // A join timeout well below the DNS servers' 15 s of silence times the lookups gRPC's own
  // resolver makes before it reads the hosts file.
  const std::vector<std::string> flags = {"--rdzv-conf", "join_timeout=10"};
  prefix_ = hosts.Prefix(0, "nodezero");
  auto n0 =
      Start("n0", "2", "echo rank $RANK at $MASTER_ADDR", {"--node-rank", "0", flags[0], flags[1]});
  prefix_ = hosts.Prefix(1, "nodeone");
  auto n1 =
      Start("n1", "2", "echo rank $RANK at $MASTER_ADDR", {"--node-rank", "1", flags[0], flags[1]});
  EXPECT_EQ(n1->Wait(seconds(60)), 0) << n1->err_text();
  EXPECT_EQ(n0->Wait(seconds(60)), 0) << n0->err_text();
  EXPECT_EQ(Lines(RunDir("n0") / "rank1" / "stdout.log"),
            std::vector<std::string>{"rank 1 at nodezero"});
}

}  // namespace
}  // namespace dlaunch::testing
