#include "launcher/cli/options.h"

#include <gtest/gtest.h>

#include <map>

#include "core/error.h"

namespace dlaunch::launcher {
namespace {

TEST(OptionsTest, TorchrunSpellingsAreAliases) {
  for (const char* flag : {"--nproc", "--nproc-per-node", "--nproc_per_node"}) {
    auto o = ParseCommandLine({flag, "4", "prog"});
    EXPECT_EQ(o.nproc, 4) << flag;
  }
  EXPECT_EQ(ParseCommandLine({"--nproc_per_node=3", "prog"}).nproc, 3);
  EXPECT_EQ(ParseCommandLine({"--max_restarts", "2", "prog"}).max_restarts, 2);
  EXPECT_EQ(ParseCommandLine({"--log_dir", "x", "prog"}).log_dir, "x");
}

TEST(OptionsTest, EverythingAfterTheProgramBelongsToIt) {
  auto o = ParseCommandLine({"--nproc", "2", "./train.sh", "--nproc", "9", "-x"});
  EXPECT_EQ(o.command, Command::kProgram);
  EXPECT_EQ(o.nproc, 2);
  EXPECT_EQ(o.program, (std::vector<std::string>{"./train.sh", "--nproc", "9", "-x"}));
  auto d = ParseCommandLine({"--quiet", "--", "--looks-like-a-flag", "a"});
  EXPECT_TRUE(d.quiet);
  EXPECT_EQ(d.program, (std::vector<std::string>{"--looks-like-a-flag", "a"}));
}

TEST(OptionsTest, BuiltinsTakeTheirOwnArguments) {
  auto o = ParseCommandLine({"--nproc", "4", "train", "--steps", "10"});
  EXPECT_EQ(o.command, Command::kTrain);
  EXPECT_EQ(o.program, (std::vector<std::string>{"--steps", "10"}));
  EXPECT_EQ(ParseCommandLine({"preflight"}).command, Command::kPreflight);
  EXPECT_EQ(ParseCommandLine({"doctor", "--json"}).command, Command::kDoctor);
  EXPECT_EQ(ParseCommandLine({"diagnose", "dir"}).program, std::vector<std::string>{"dir"});
  auto report = ParseCommandLine({"report", "dir", "-o", "x.html"});
  EXPECT_EQ(report.command, Command::kReport);
  EXPECT_EQ(report.program, (std::vector<std::string>{"dir", "-o", "x.html"}));
}

TEST(OptionsTest, EnvAndNcclSettings) {
  auto o = ParseCommandLine({"--env", "A=1", "--env", "B=x=y", "--nccl-debug", "WARN",
                             "--nccl-socket-ifname", "eth0", "prog"});
  ASSERT_EQ(o.env.size(), 2u);
  EXPECT_EQ(o.env[1], (std::pair<std::string, std::string>{"B", "x=y"}));
  EXPECT_EQ(o.nccl_debug, "WARN");
  EXPECT_EQ(o.nccl_socket_ifname, "eth0");
}

TEST(OptionsTest, BadInputIsAUsageError) {
  for (std::vector<std::string> bad :
       std::vector<std::vector<std::string>>{{"--nproc", "0", "p"},
                                             {"--nproc", "two", "p"},
                                             {"--unknown", "p"},
                                             {"--nproc"},
                                             {"--nccl-debug", "LOUD", "p"},
                                             {"--on-hang", "shrug", "p"},
                                             {"--grace-period", "-1", "p"},
                                             {"--heartbeat-interval", "1e-9", "p"},  // #30
                                             {"--nnodes", "2", "--node-rank", "2", "p"},
                                             {"--npro", "2", "p"},  // no guessing of abbreviations
                                             {}}) {
    EXPECT_THROW(ParseCommandLine(bad), UsageError) << (bad.empty() ? "" : bad[0]);
  }
}

TEST(OptionsTest, StragglerSettings) {
  auto o = ParseCommandLine({"--straggler-threshold", "1.5", "--straggler-window", "50", "p"});
  EXPECT_DOUBLE_EQ(o.straggler_threshold, 1.5);
  EXPECT_EQ(o.straggler_window, 50);
  EXPECT_EQ(ParseCommandLine({"--straggler-threshold", "0", "p"}).straggler_threshold, 0);
  EXPECT_EQ(ParseCommandLine({"p"}).straggler_window, 200);
  for (const char* v : {"-1", "1", "0.5", "100.5", "nan", "inf", "abc", "", "1.2x"}) {
    EXPECT_THROW(ParseCommandLine({"--straggler-threshold", v, "p"}), UsageError) << v;
  }
  for (const char* v : {"0", "-5", "19", "100001", "1.5", "abc", "", "99999999999999999999"}) {
    EXPECT_THROW(ParseCommandLine({"--straggler-window", v, "p"}), UsageError) << v;
  }
}

TEST(OptionsTest, RankLists) {
  EXPECT_EQ(ParseRankList("0,2-4,7"), (std::vector<int>{0, 2, 3, 4, 7}));
  EXPECT_THROW(ParseRankList("a"), UsageError);
  EXPECT_THROW(ParseRankList("3-1"), UsageError);
  EXPECT_THROW(ParseRankList("1,"), UsageError);
}

// torchrun's --rdzv-conf keys: timeout is the join timeout; the keys without a meaning here are
// accepted with a note saying why; others stay refused, naming every key dlaunch takes.
TEST(OptionsTest, RdzvConfTakesTorchrunsKeys) {
  auto o = ParseCommandLine({"--rdzv_conf", "timeout=60,last_call_timeout=5", "prog"}, {});
  EXPECT_EQ(o.join_timeout, std::chrono::seconds(60));
  EXPECT_EQ(o.last_call_timeout, std::chrono::seconds(5));
  EXPECT_TRUE(o.notes.empty());
  EXPECT_EQ(ParseCommandLine({"--rdzv-conf", "join_timeout=7", "prog"}, {}).join_timeout,
            std::chrono::seconds(7));
  auto noted = ParseCommandLine(
      {"--rdzv-conf", "read_timeout=30,is_host=true,keep_alive_interval=5,keep_alive_max_attempt=3",
       "prog"},
      {});
  ASSERT_EQ(noted.notes.size(), 4u);
  EXPECT_NE(noted.notes[0].find("read_timeout has no effect under dlaunch: "), std::string::npos)
      << noted.notes[0];
  EXPECT_NE(noted.notes[2].find("--heartbeat-interval"), std::string::npos) << noted.notes[2];
  for (const char* bad : {"timeout=abc", "timeout=-1", "read_timeout", "bogus=1"}) {
    EXPECT_THROW(ParseCommandLine({"--rdzv-conf", bad, "prog"}, {}), UsageError) << bad;
  }
  try {
    ParseCommandLine({"--rdzv-conf", "bogus=1", "prog"}, {});
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("timeout (or join_timeout)"), std::string::npos);
  }
}

// --role and --start-method (both spellings): the role is the ranks'; every start method is
// accepted, fork and forkserver with a note of what dlaunch does instead.
TEST(OptionsTest, RoleAndStartMethod) {
  auto d = ParseCommandLine({"prog"}, {});
  EXPECT_EQ(d.role, "default");
  EXPECT_FALSE(d.role_given);
  auto o = ParseCommandLine({"--role", "trainer", "--start_method", "spawn", "prog"}, {});
  EXPECT_EQ(o.role, "trainer");
  EXPECT_TRUE(o.role_given);
  EXPECT_TRUE(o.notes.empty());
  auto f = ParseCommandLine({"--start-method", "fork", "prog"}, {});
  ASSERT_EQ(f.notes.size(), 1u);
  EXPECT_NE(f.notes[0].find("fresh process"), std::string::npos) << f.notes[0];
  EXPECT_EQ(ParseCommandLine({"--start-method=forkserver", "prog"}, {}).notes.size(), 1u);
  EXPECT_THROW(ParseCommandLine({"--start-method", "thread", "prog"}, {}), UsageError);
  EXPECT_THROW(ParseCommandLine({"--role", "", "prog"}, {}), UsageError);
  EXPECT_THROW(ParseCommandLine({"--role", "a b", "prog"}, {}), UsageError);
}

// torchrun's --standalone: one node meeting on a free port; the rendezvous flags it ignores are
// ignored here too, with a note, and more than one node is refused.
TEST(OptionsTest, StandaloneIsOneNodeOnAFreePort) {
  auto o = ParseCommandLine({"--standalone", "--rdzv-endpoint", "h:29400", "--rdzv_id", "x",
                             "--rdzv-backend", "c10d", "prog"},
                            {});
  EXPECT_EQ(o.rdzv_endpoint, "");
  EXPECT_EQ(o.run_id, "");  // generated, as torchrun's random rdzv id
  EXPECT_TRUE(o.nnodes_given);
  ASSERT_EQ(o.notes.size(), 1u);
  EXPECT_NE(o.notes[0].find("--rdzv-backend, --rdzv-endpoint, --rdzv-id ignored"),
            std::string::npos)
      << o.notes[0];
  EXPECT_EQ(ParseCommandLine({"--standalone", "--run-id", "mine", "prog"}, {}).run_id, "mine");
  EXPECT_TRUE(ParseCommandLine({"--standalone", "prog"}, {}).notes.empty());
  EXPECT_THROW(ParseCommandLine({"--standalone", "--nnodes", "1:2", "prog"}, {}), UsageError);
}

// --local-addr is node 0's address: the ranks' MASTER_ADDR unless --master-addr says otherwise.
TEST(OptionsTest, LocalAddrIsMasterAddrUnlessGiven) {
  auto o = ParseCommandLine({"--local-addr", "10.0.0.7", "prog"}, {});
  EXPECT_EQ(o.local_addr, "10.0.0.7");
  EXPECT_EQ(o.master_addr, "10.0.0.7");
  EXPECT_FALSE(o.master_addr_given);
  EXPECT_EQ(ParseCommandLine({"--local_addr", "a", "--master-addr", "b", "prog"}, {}).master_addr,
            "b");
  EXPECT_THROW(ParseCommandLine({"--local-addr=", "prog"}, {}), UsageError);
}

// --shutdown-timeout is --grace-period by torchrun's name, TORCH_ELASTIC_SHUTDOWN_TIMEOUT its
// default; --grace-period wins over both, and 0 is SIGKILL at once.
TEST(OptionsTest, ShutdownTimeoutIsTheGracePeriod) {
  using std::chrono::milliseconds;
  EXPECT_EQ(ParseCommandLine({"--shutdown-timeout", "5", "prog"}, {}).grace_period,
            milliseconds(5000));
  EXPECT_EQ(ParseCommandLine({"--shutdown_timeout=0", "prog"}, {}).grace_period, milliseconds(1));
  const std::map<std::string, std::string> env = {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7"}};
  EXPECT_EQ(ParseCommandLine({"prog"}, env).grace_period, milliseconds(7000));
  EXPECT_EQ(ParseCommandLine({"--shutdown-timeout", "5", "prog"}, env).grace_period,
            milliseconds(5000));
  EXPECT_EQ(ParseCommandLine({"--grace-period", "2", "--shutdown-timeout", "5", "prog"}, env)
                .grace_period,
            milliseconds(2000));
  EXPECT_EQ(ParseCommandLine({"prog"}, {}).grace_period, milliseconds(30000));
  EXPECT_THROW(ParseCommandLine({"prog"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "soon"}}),
               UsageError);
}

// -r/--redirects and -t/--tee in torchrun's forms; --local-ranks-filter is by local rank, apart
// from dlaunch's --ranks-filter (global ranks).
TEST(OptionsTest, RedirectsTeeAndTheConsoleFilters) {
  auto o = ParseCommandLine({"-r", "3", "-t0:1,2:2", "--local-ranks-filter", "0,1", "prog"}, {});
  EXPECT_EQ(o.redirects.For(0), 3);
  EXPECT_EQ(o.redirects.For(5), 3);
  EXPECT_EQ(o.tee.For(0), 1);
  EXPECT_EQ(o.tee.For(1), 0);  // not in the mapping: nothing
  EXPECT_EQ(o.tee.For(2), 2);
  EXPECT_EQ(o.local_ranks_filter, (std::vector<int>{0, 1}));
  EXPECT_TRUE(o.ranks_filter.empty());
  EXPECT_EQ(ParseCommandLine({"--ranks-filter", "3", "prog"}, {}).ranks_filter,
            std::vector<int>{3});
  EXPECT_EQ(ParseCommandLine({"--redirects=0", "prog"}, {}).redirects.For(0), 0);
  for (const char* bad : {"", "4", "-1", "a", "0:", ":1", "0:1,", "0:1;1:2", "0:4", "x:1"}) {
    EXPECT_THROW(ParseCommandLine({"-r", bad, "prog"}, {}), UsageError) << bad;
  }
}

// torchrun's --duplicate-*-filters: ",," is a comma inside a filter, empty ones are dropped.
TEST(OptionsTest, DuplicateFilters) {
  auto o = ParseCommandLine(
      {"--duplicate-stdout-filters", "apple,or,,ange,", "--duplicate_stderr_filters=x", "prog"},
      {});
  EXPECT_EQ(o.stdout_filters, (std::vector<std::string>{"apple", "or,ange"}));
  EXPECT_EQ(o.stderr_filters, std::vector<std::string>{"x"});
  EXPECT_TRUE(
      ParseCommandLine({"--duplicate-stdout-filters", "", "prog"}, {}).stdout_filters.empty());
}

// torchrun's flags with no counterpart here that change nothing: accepted as they are.
TEST(OptionsTest, TorchrunNoOpsAreAccepted) {
  for (std::vector<std::string> argv :
       std::vector<std::vector<std::string>>{{"--event-log-handler", "null", "prog"},
                                             {"--event_log_handler=dynamic_rendezvous", "prog"},
                                             {"--monitor-interval", "0.1", "prog"},
                                             {"--monitor_interval=5", "prog"}}) {
    EXPECT_TRUE(ParseCommandLine(argv, {}).notes.empty()) << argv[0];
  }
}

// --run-path takes precedence over --no-python, as torchrun's help says (with a note); -m with
// --no-python is refused, as torchrun refuses it.
TEST(OptionsTest, RunPathWinsOverNoPython) {
  auto o = ParseCommandLine({"--run-path", "--no_python", "/abs/train.py"}, {});
  EXPECT_TRUE(o.run_path);
  EXPECT_FALSE(o.no_python);
  ASSERT_EQ(o.notes.size(), 1u);
  EXPECT_NE(o.notes[0].find("--no-python has no effect with --run-path"), std::string::npos);
  EXPECT_THROW(ParseCommandLine({"-m", "--no-python", "pkg.train"}, {}), UsageError);
}

// --virtual-local-rank, --log-line-prefix-template and --numa-binding core-complex are kept.
TEST(OptionsTest, VirtualLocalRankPrefixTemplateAndCoreComplex) {
  auto o = ParseCommandLine({"--virtual_local_rank", "--log-line-prefix-template",
                             "${rank}: ", "--numa-binding", "core-complex", "prog"},
                            {});
  EXPECT_TRUE(o.virtual_local_rank);
  EXPECT_EQ(o.log_line_prefix_template, "${rank}: ");
  EXPECT_EQ(o.numa_binding, NumaBinding::kCoreComplex);
  EXPECT_TRUE(ParseCommandLine({"--virtual-local-rank", "--gpu-binding", "isolate", "prog"}, {})
                  .virtual_local_rank);
  EXPECT_THROW(
      ParseCommandLine({"--virtual-local-rank", "--gpu-binding", "local-rank", "prog"}, {}),
      UsageError);
}

}  // namespace
}  // namespace dlaunch::launcher
