// Bad input that used to get past the command line's checks (issue 42, item 6): a malformed
// --rdzv-endpoint, run ids that are not a folder name, an empty program name, PET_* variables set
// but empty, and #! lines. Each is a UsageError (exit 2) saying exactly what is wrong.
#include "launcher/launch_checks.h"

#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "launcher/cli/options.h"

namespace dlaunch::launcher {
namespace {

// The UsageError message of `argv` parsed with `env`; "" when it parses.
std::string ParseError(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& env = {}) {
  try {
    ParseCommandLine(argv, env);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

std::string EndpointError(const std::string& endpoint) {
  try {
    SplitEndpoint(endpoint);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchChecksTest, EndpointsThatAreHostAndPort) {
  EXPECT_EQ(SplitEndpoint("h:29400"), (std::pair<std::string, int>{"h", 29400}));
  EXPECT_EQ(SplitEndpoint("10.0.0.1:1"), (std::pair<std::string, int>{"10.0.0.1", 1}));
  EXPECT_EQ(SplitEndpoint("node-0.cluster_a:65535"),
            (std::pair<std::string, int>{"node-0.cluster_a", 65535}));
  // IPv6 in brackets; the host comes back bare, as MASTER_ADDR and getaddrinfo take it.
  EXPECT_EQ(SplitEndpoint("[::1]:5"), (std::pair<std::string, int>{"::1", 5}));
  EXPECT_EQ(SplitEndpoint("[fd00::7]:29400"), (std::pair<std::string, int>{"fd00::7", 29400}));
  EXPECT_EQ(JoinEndpoint("fd00::7", "29400"), "[fd00::7]:29400");
  EXPECT_EQ(JoinEndpoint("m0", "1"), "m0:1");
}

// Each malformed endpoint is refused with what is wrong with it (a joining node used to retry
// these until its join timeout, 305 s for "[::1").
TEST(LaunchChecksTest, MalformedEndpointsSayWhatIsWrong) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[::1", "the '[' of an IPv6 address has no ']'"},
      {"[x]:5", "'x' in brackets is not an IPv6 address"},
      {"[::1]5", "a ':' and the port must follow the ']'"},
      {"a:b:c:1", "more than one ':'"},
      {"fd00::1:29400", "an IPv6 address needs brackets: [fd00::1]:29400"},
      {"nocolon", "no ':' and port"},
      {":5", "the host is empty"},
      {"ho st:5", "'ho st' is not a host name"},
      {"h:", "the port must be a number from 1 to 65535 (got '')"},
      {"h:0", "from 1 to 65535"},
      {"h:65536", "from 1 to 65535"},
      {"h:+5", "from 1 to 65535"},
      {"h:5x", "from 1 to 65535"},
  };
  for (const auto& [endpoint, why] : cases) {
    const std::string error = EndpointError(endpoint);
    EXPECT_EQ(error.rfind("--rdzv-endpoint '" + endpoint + "' is not host:port: ", 0), 0u)
        << endpoint << ": " << error;
    EXPECT_NE(error.find(why), std::string::npos) << endpoint << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

// At parse time, on every node (a joining node's too), and from PET_RDZV_ENDPOINT naming it.
TEST(LaunchChecksTest, TheEndpointIsCheckedWhenParsed) {
  for (const char* endpoint : {"[::1", "[x]:5", "a:b:c:1"}) {
    const std::string error =
        ParseError({"--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", endpoint, "prog"});
    EXPECT_NE(error.find("is not host:port"), std::string::npos) << endpoint << ": " << error;
  }
  EXPECT_NE(ParseError({"prog"}, {{"PET_RDZV_ENDPOINT", "a:b:c:1"}})
                .rfind("PET_RDZV_ENDPOINT: --rdzv-endpoint 'a:b:c:1' is not host:port", 0),
            std::string::npos);
  EXPECT_EQ(ParseError({"--rdzv-endpoint", "[::1]:29400", "prog"}), "");
  // --standalone ignores the endpoint, as torchrun does.
  EXPECT_EQ(ParseError({"--standalone", "--rdzv-endpoint", "[::1", "prog"}), "");
}

TEST(LaunchChecksTest, HostNamesResolveOrSayWhy) {
  std::vector<std::string> notes;
  EXPECT_NO_THROW(CheckHostResolves("localhost", "--rdzv-endpoint localhost:1", &notes));
  EXPECT_NO_THROW(CheckHostResolves("127.0.0.1", "--rdzv-endpoint 127.0.0.1:1", &notes));
  EXPECT_TRUE(notes.empty());
}

TEST(LaunchChecksTest, RunIdsAreOnePlainFolderName) {
  EXPECT_NE(ParseError({"--run-id", "..", "prog"})
                .find("--run-id '..' is not a folder name of its own: '.' and '..' name"),
            std::string::npos);
  EXPECT_NE(ParseError({"--rdzv-id", ".", "prog"}).find("--run-id '.' is not a folder name"),
            std::string::npos);
  EXPECT_NE(ParseError({"--run-id", "a/b", "prog"})
                .find("--run-id 'a/b' holds a '/': the run id is one folder name"),
            std::string::npos);
  EXPECT_NE(ParseError({"--run-id", std::string(256, 'x'), "prog"}).find("at most 255"),
            std::string::npos);
  EXPECT_NE(ParseError({"--run-id", "a\nb", "prog"}).find("control character"), std::string::npos);
  EXPECT_NE(ParseError({"prog"}, {{"PET_RDZV_ID", ".."}}).rfind("PET_RDZV_ID: --run-id '..'", 0),
            std::string::npos);
  EXPECT_EQ(ParseError({"--run-id", "job.1_a-b", "prog"}), "");
  EXPECT_EQ(ParseError({"--run-id", "..job", "prog"}), "");
}

TEST(LaunchChecksTest, AnEmptyProgramNameIsSaidSo) {
  EXPECT_NE(ParseError({"--nproc", "2", ""}).find("the program name is empty"), std::string::npos);
  EXPECT_NE(ParseError({"--", ""}).find("the program name is empty"), std::string::npos);
  EXPECT_NE(ParseError({"-m", ""}).find("-m needs a module name"), std::string::npos);
}

// torchrun fails on PET_NPROC_PER_NODE="" (int("")): set but empty is a mistake, not "unset".
TEST(LaunchChecksTest, PetVariablesSetButEmptyAreErrors) {
  EXPECT_EQ(ParseError({"prog"}, {{"PET_NPROC_PER_NODE", ""}}),
            "PET_NPROC_PER_NODE is set but empty: give it a value, or unset it");
  EXPECT_NE(ParseError({"prog"}, {{"PET_STANDALONE", ""}}).find("PET_STANDALONE is set but empty"),
            std::string::npos);
  // The command line wins over the variable, as in torchrun, whose default it only is.
  EXPECT_EQ(ParseError({"--nproc", "2", "prog"}, {{"PET_NPROC_PER_NODE", ""}}), "");
  EXPECT_EQ(ParseError({"prog"}, {{"PET_NPROC_PER_NODE", "2"}}), "");
}

TEST(LaunchChecksTest, ShebangLines) {
  EXPECT_FALSE(ParseShebang("echo hi").has_value());
  EXPECT_FALSE(ParseShebang("").has_value());
  auto s = ParseShebang("#!/bin/sh -e");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->interpreter, "/bin/sh");
  EXPECT_EQ(s->env_name, "");
  EXPECT_EQ(ParseShebang("#! \t/usr/bin/python3")->interpreter, "/usr/bin/python3");
  EXPECT_EQ(ParseShebang("#!")->interpreter, "");
  EXPECT_EQ(ParseShebang("#!/usr/bin/env python3")->env_name, "python3");
  EXPECT_EQ(ParseShebang("#!/usr/bin/env -S python3 -u")->env_name, "python3");
  EXPECT_EQ(ParseShebang("#!/usr/bin/env -S A=1 python3")->env_name, "python3");
  EXPECT_EQ(ParseShebang("#!/usr/bin/env -Spython3 -u")->env_name, "python3");
  // What only env itself can tell (options, or words the kernel passes as one argument).
  EXPECT_EQ(ParseShebang("#!/usr/bin/env -i python3")->env_name, "");
  EXPECT_EQ(ParseShebang("#!/usr/bin/env python3 -u")->env_name, "");
  EXPECT_EQ(ParseShebang("#!/usr/bin/env")->env_name, "");
}

}  // namespace
}  // namespace dlaunch::launcher
