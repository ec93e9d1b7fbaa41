// Jobs that share a machine, with real launchers on loopback: a node that reaches another job's
// coordinator with that job's token is told which job it reached, one without it nothing of that
// job; and a coordinator port someone else holds is one line on the console, not gRPC's own log.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>

#include "launchers_fixture.h"

namespace dlaunch::testing {
namespace {

class SharedNodeTest : public ElasticJobTest {};

TEST_F(SharedNodeTest, ANodeOfAnotherJobIsToldWhichJobItReachedOnlyWithThatJobsToken) {
  auto n0 = Start("n0", "2", "true", {"--node-rank", "0"});
  ASSERT_TRUE(
      n0->WaitFor([&](auto&) { return Has(n0->err_text(), "waiting for 2 nodes"); }, seconds(60)))
      << n0->err_text();
  for (const char* token : {kToken, "DLAUNCH_JOB_TOKEN=another-jobs-token-0123456789"}) {
    // --rdzv-id names the other job (torchrun's spelling wins over the fixture's --run-id).
    std::vector<std::string> argv = {
        DLAUNCH_BIN,       "--nnodes",  "2",       "--node-rank", "1",
        "--rdzv-endpoint", endpoint_,   "--nproc", "1",           "--log-dir",
        LogDir("n1"),      "--rdzv-id", "other",   "true"};
    Launched other(argv, {token});
    if (std::string(token) == kToken) {
      // One token for all of a user's jobs: it is told which job it reached.
      EXPECT_EQ(other.Wait(seconds(30)), 2) << other.err_text();
      EXPECT_TRUE(Has(other.err_text(),
                      "this is the coordinator of run id 'job', not of this node's run id 'other'"))
          << other.err_text();
      EXPECT_FALSE(Has(other.err_text(), "token")) << other.err_text();
    } else {
      // Without this job's token it learns nothing of it, the run id included.
      EXPECT_EQ(other.Wait(seconds(30)), 1) << other.err_text();
      EXPECT_TRUE(Has(other.err_text(), "another job's coordinator on this port"))
          << other.err_text();
      EXPECT_FALSE(Has(other.err_text(), "'job'")) << other.err_text();
    }
  }
  // Node 0 still waits for its own node 1.
  ASSERT_EQ(::kill(n0->pid(), SIGTERM), 0);
  EXPECT_EQ(n0->Wait(seconds(15)), 143) << n0->err_text();
  // The call with another token is a refused call, logged as every one is.
  EXPECT_TRUE(Has(n0->err_text(), "refused RegisterNode")) << n0->err_text();
}

TEST_F(SharedNodeTest, ACoordinatorPortInUseIsOneLineWithoutGrpcsLog) {
  const int port = std::stoi(endpoint_.substr(endpoint_.rfind(':') + 1));
  const int held = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(held, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(::bind(held, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(held, 1), 0);
  auto n0 = Start("n0", "2", "true", {"--node-rank", "0"});
  EXPECT_EQ(n0->Wait(seconds(30)), 2) << n0->err_text();
  ::close(held);
  EXPECT_EQ(std::count_if(n0->err_lines.begin(), n0->err_lines.end(),
                          [](const std::string& l) { return l.rfind("dlaunch: ", 0) == 0; }),
            1)
      << n0->err_text();
  EXPECT_TRUE(Has(n0->err_text(), "cannot listen on 0.0.0.0:" + std::to_string(port)))
      << n0->err_text();
  EXPECT_FALSE(Has(n0->err_text(), "chttp2")) << n0->err_text();
}

}  // namespace
}  // namespace dlaunch::testing
