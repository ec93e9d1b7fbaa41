// The job plan without processes: ranks, directories, environment and the restart rule.
#include "launcher/job/job_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "launcher/job/agent_watch.h"
#include "launcher/rendezvous/credentials.h"
#include "tests/common/test_dir.h"

namespace dlaunch::launcher {
namespace {

LaunchOptions Options(int nproc, int nnodes = 1, int node_rank = 0) {
  LaunchOptions o;
  o.nproc = nproc;
  o.nnodes = nnodes;
  o.node_rank = node_rank;
  o.log_dir = "/logs";
  return o;
}

// The program `o` runs, with the rank agent's folder at /opt/agent.
std::shared_ptr<const RankProgram> WithAgent(const LaunchOptions& o) {
  return MakeRankProgram(o, ProgramSite{"", "/opt/agent"});
}

JobPlan Plan(LaunchOptions o, NodeRoleKind role = NodeRoleKind::kSingleNode,
             std::map<std::string, std::string> env = {}) {
  NodeSetup setup;
  setup.role = role;
  setup.token = "0123456789abcdef";
  Membership first;
  first.node_rank = o.node_rank;
  first.nnodes = o.nnodes;
  JobIdentity id{"run", "10.0.0.1", 29500, "10.0.0.1:29400", first, false};
  return JobPlan(std::move(o), setup, id, {"/bin/prog", "arg"}, std::move(env));
}

TEST(JobPlanTest, RanksOfAJoiningNodeFollowItsNodeRank) {
  JobPlan plan = Plan(Options(2, 3, 1), NodeRoleKind::kJoiningNode);
  EXPECT_EQ(plan.world_size(), 6);
  EXPECT_TRUE(plan.multi_node());
  EXPECT_FALSE(plan.hosts_coordinator());
  ASSERT_EQ(plan.ranks().size(), 2u);
  EXPECT_EQ(plan.ranks()[0].rank, 2);
  EXPECT_EQ(plan.ranks()[1].rank, 3);
  EXPECT_EQ(plan.ranks()[1].local_rank, 1);
  EXPECT_EQ(plan.ranks()[1].dir, "/logs/run/rank3");
  EXPECT_EQ(plan.run_dir(), "/logs/run");
  EXPECT_EQ(plan.summary_path(), "/logs/run/summary.node1.json");
  EXPECT_EQ(Plan(Options(2)).summary_path(), "/logs/run/summary.json");
}

TEST(JobPlanTest, TorchrunAndDlaunchVariables) {
  LaunchOptions o = Options(2, 2, 1);
  o.nccl_debug = "INFO";
  o.env = {{"EXTRA", "1"}, {"WORLD_SIZE", "overridden by --env"}};
  JobPlan plan = Plan(o, NodeRoleKind::kJoiningNode);
  auto v = plan.JobVariables(plan.ranks()[1], 2);
  EXPECT_EQ(v["RANK"], "3");
  EXPECT_EQ(v["ROLE_RANK"], "3");
  EXPECT_EQ(v["LOCAL_RANK"], "1");
  EXPECT_EQ(v["GROUP_RANK"], "1");
  EXPECT_EQ(v["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(v["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(v["WORLD_SIZE"], "overridden by --env");
  EXPECT_EQ(v["MASTER_ADDR"], "10.0.0.1");
  EXPECT_EQ(v["MASTER_PORT"], "29500");
  EXPECT_EQ(v["TORCHELASTIC_RESTART_COUNT"], "2");
  EXPECT_EQ(v["TORCHELASTIC_RUN_ID"], "run");
  EXPECT_EQ(v["DLAUNCH_COORDINATOR"], "10.0.0.1:29400");
  // Each rank gets its own rank token, never the job token itself (#30).
  EXPECT_EQ(v["DLAUNCH_JOB_TOKEN"], RankToken("0123456789abcdef", 3));
  EXPECT_EQ(v["DLAUNCH_JOB_TOKEN"].size(), 34u);
  EXPECT_NE(plan.JobVariables(plan.ranks()[0], 2)["DLAUNCH_JOB_TOKEN"], v["DLAUNCH_JOB_TOKEN"]);
  EXPECT_EQ(v["DLAUNCH_RANK_DIR"], "/logs/run/rank3");
  EXPECT_EQ(v["NCCL_DEBUG_FILE"], "/logs/run/rank3/nccl.log");
  EXPECT_EQ(v.count("OMP_NUM_THREADS"), 0u);  // the rank's placement sets it (placement_test)
  EXPECT_EQ(v["EXTRA"], "1");
}

TEST(JobPlanTest, InheritedVariablesStayUnlessTheJobSetsThem) {
  JobPlan plan = Plan(Options(2), NodeRoleKind::kSingleNode,
                      {{"PATH", "/bin"}, {"RANK", "99"}, {"OMP_NUM_THREADS", "4"}});
  auto env = plan.RankEnvironment(plan.ranks()[0], 0);
  auto has = [&](const std::string& kv) { return std::count(env.begin(), env.end(), kv) == 1; };
  EXPECT_TRUE(has("PATH=/bin"));
  EXPECT_TRUE(has("RANK=0"));
  EXPECT_FALSE(has("RANK=99"));
  EXPECT_TRUE(has("OMP_NUM_THREADS=4"));  // the user's choice wins over dlaunch's default
  EXPECT_FALSE(has("OMP_NUM_THREADS=1"));
  EXPECT_EQ(Plan(Options(1)).JobVariables(Plan(Options(1)).ranks()[0], 0).count("OMP_NUM_THREADS"),
            0u);
}

TEST(JobPlanTest, NcclInfoLogsTheSubsystemsTheAnalysisReads) {
  LaunchOptions o = Options(1);
  o.nccl_debug = "INFO";
  auto v = Plan(o).JobVariables(Plan(o).ranks()[0], 0);
  EXPECT_EQ(v["NCCL_DEBUG"], "INFO");
  EXPECT_EQ(v["NCCL_DEBUG_SUBSYS"], "INIT,BOOTSTRAP,ENV,NET,GRAPH");
  // The user's own subsystems win; other levels leave NCCL's default.
  JobPlan inherited = Plan(o, NodeRoleKind::kSingleNode, {{"NCCL_DEBUG_SUBSYS", "COLL"}});
  EXPECT_EQ(inherited.JobVariables(inherited.ranks()[0], 0).count("NCCL_DEBUG_SUBSYS"), 0u);
  o.nccl_debug = "WARN";
  EXPECT_EQ(Plan(o).JobVariables(Plan(o).ranks()[0], 0).count("NCCL_DEBUG_SUBSYS"), 0u);
}

TEST(JobPlanTest, ProgramRanksGetThePythonAgentAndAbsoluteTorchFiles) {
  const NodeSetup setup;
  JobIdentity id;
  id.run_id = "run";
  id.master_addr = "127.0.0.1";
  id.master_port = 29500;
  id.coordinator = "127.0.0.1:29400";
  const std::map<std::string, std::string> env = {{"PYTHONPATH", "/mine"},
                                                  {"TORCH_NCCL_TRACE_BUFFER_SIZE", "50"}};
  LaunchOptions o = Options(1);
  JobPlan plan(o, setup, id, {"/usr/bin/python3", "-u", "t.py"}, env, WithAgent(o));
  auto v = plan.JobVariables(plan.ranks()[0], 0);
  EXPECT_EQ(v["PYTHONPATH"], "/opt/agent:/mine");
  EXPECT_EQ(v["PYTHONUNBUFFERED"], "1");
  EXPECT_EQ(v.count("TORCH_NCCL_TRACE_BUFFER_SIZE"), 0u);  // the user's stays
  EXPECT_EQ(v["TORCH_NCCL_DUMP_ON_TIMEOUT"], "1");
  EXPECT_EQ(v["TORCHELASTIC_ERROR_FILE"], "/logs/run/rank0/torch_error.json");
  EXPECT_EQ(v["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"], "/logs/run/rank0/torch_trace_");
  EXPECT_EQ(v.count("DLAUNCH_PYTHON_AGENT"), 0u);

  o.python_agent = false;  // --no-python-agent
  EXPECT_EQ(JobPlan(o, setup, id, {"x"}, env, WithAgent(o))
                .JobVariables(plan.ranks()[0], 0)["DLAUNCH_PYTHON_AGENT"],
            "0");
  o.command = Command::kTrain;  // built-in ranks are not Python
  EXPECT_EQ(JobPlan(o, setup, id, {"x"}, {}, WithAgent(o))
                .JobVariables(plan.ranks()[0], 0)
                .count("PYTHONPATH"),
            0u);
}

TEST(JobPlanTest, EnvPythonPathKeepsTheAgentFirst) {
  const NodeSetup setup;
  JobIdentity id;
  id.run_id = "run";
  id.master_addr = "127.0.0.1";
  id.master_port = 29500;
  id.coordinator = "127.0.0.1:29400";
  LaunchOptions o = Options(1);
  o.program = {"t.py"};
  o.env = {{"PYTHONPATH", "/theirs:/more"}};
  for (const auto& inherited :
       std::vector<std::map<std::string, std::string>>{{}, {{"PYTHONPATH", "/mine"}}}) {
    JobPlan plan(o, setup, id, {"/usr/bin/python3", "-u", "t.py"}, inherited, WithAgent(o));
    EXPECT_EQ(plan.JobVariables(plan.ranks()[0], 0)["PYTHONPATH"], "/opt/agent:/theirs:/more");
    EXPECT_TRUE(plan.expects_agent());
  }
  o.env = {{"PYTHONPATH", ""}};
  JobPlan empty(o, setup, id, {"x"}, {}, WithAgent(o));
  EXPECT_EQ(empty.JobVariables(empty.ranks()[0], 0)["PYTHONPATH"], "/opt/agent");
  // Already first (a job started from inside another): not twice.
  JobPlan nested(Options(1), setup, id, {"x"}, {{"PYTHONPATH", "/opt/agent:/mine"}},
                 WithAgent(Options(1)));
  EXPECT_EQ(nested.JobVariables(nested.ranks()[0], 0)["PYTHONPATH"], "/opt/agent:/mine");

  // No agent is expected of an opted-out job, a program that is not Python, or no agent folder.
  o.env = {{"DLAUNCH_PYTHON_AGENT", "0"}};
  EXPECT_FALSE(JobPlan(o, setup, id, {"x"}, {}, WithAgent(o)).expects_agent());
  o.env = {};
  EXPECT_FALSE(
      JobPlan(o, setup, id, {"x"}, {{"DLAUNCH_PYTHON_AGENT", "0"}}, WithAgent(o)).expects_agent());
  EXPECT_FALSE(JobPlan(o, setup, id, {"x"}, {}, MakeRankProgram(o, ProgramSite{})).expects_agent());
  o.program = {"./prog"};
  EXPECT_FALSE(JobPlan(o, setup, id, {"x"}, {}, WithAgent(o)).expects_agent());
}

TEST(AgentLoadWatchTest, SaysOnceForRanksWithoutAHeartbeat) {
  const testing::TestDir tmp("agent_watch");
  std::vector<RankSlot> slots;
  for (int r = 0; r < 3; ++r) {
    slots.push_back({r, r, (tmp.path() / ("rank" + std::to_string(r))).string()});
    std::filesystem::create_directories(slots.back().dir);
  }
  std::ofstream(slots[0].dir + "/heartbeat.json") << "{}";
  AttemptResult now;
  for (int r = 0; r < 3; ++r) {
    RankOutcome o;
    o.rank = o.local_rank = r;
    o.pid = 100 + r;
    o.start_unix_ms = 1000;
    now.ranks.push_back(o);
  }
  AgentLoadWatch watch(std::chrono::seconds(15));
  EXPECT_EQ(watch.Check(now, slots, 5000), "");  // still starting
  now.ranks[2].exited = true;  // torn down or killed before Python ran: no verdict
  now.ranks[2].torn_down = true;
  now.ranks[2].signal = 15;
  now.ranks[2].end_unix_ms = 1200;
  EXPECT_EQ(watch.Check(now, slots, 6000), "");
  EXPECT_EQ(watch.Check(now, slots, 16000),
            "dlaunch: the Python rank agent did not load in rank 1 (no heartbeat.json; python -S "
            "or -I?): its hangs, errors and flight recorder are seen only from outside\n");
  EXPECT_EQ(watch.Check(now, slots, 17000), "");  // once

  AgentLoadWatch failed;
  std::ofstream(slots[1].dir + "/agent_error.txt") << "ImportError: no module named dlaunch\n";
  EXPECT_EQ(failed.Check(now, slots, 1100),
            "dlaunch: the Python rank agent did not start in rank 1 (ImportError: no module named "
            "dlaunch): its hangs, errors and flight recorder are seen only from outside\n");
}

TEST(JobPlanTest, RestartsOnlyFailuresWithinTheBudget) {
  LaunchOptions o = Options(1);
  o.max_restarts = 2;
  JobPlan plan = Plan(o);
  EXPECT_FALSE(plan.ShouldRestart(0, 0, false, false));  // success
  EXPECT_TRUE(plan.ShouldRestart(0, 1, false, false));
  EXPECT_TRUE(plan.ShouldRestart(1, 1, false, false));
  EXPECT_FALSE(plan.ShouldRestart(2, 1, false, false));   // budget spent
  EXPECT_FALSE(plan.ShouldRestart(0, 130, true, false));  // interrupted
  EXPECT_FALSE(plan.ShouldRestart(0, 3, false, true));    // a hang, --on-hang exit
  o.on_hang = OnHang::kRestart;
  EXPECT_TRUE(Plan(o).ShouldRestart(0, 3, false, true));
}

// --role reaches ROLE_NAME; the console prefix follows torchrun's template when the launcher's
// environment sets one, else "[rank R] " with the role and, on many nodes, the host.
TEST(JobPlanTest, RoleNameAndConsolePrefix) {
  EXPECT_EQ(Plan(Options(1)).JobVariables(Plan(Options(1)).ranks()[0], 0)["ROLE_NAME"], "default");
  EXPECT_EQ(Plan(Options(1)).ConsolePrefix(Plan(Options(1)).ranks()[0], "h"), "[rank 0] ");

  LaunchOptions o = Options(2, 2, 1);
  o.role = "trainer";
  o.role_given = true;
  JobPlan multi = Plan(o, NodeRoleKind::kJoiningNode);
  EXPECT_EQ(multi.JobVariables(multi.ranks()[1], 0)["ROLE_NAME"], "trainer");
  EXPECT_EQ(multi.ConsolePrefix(multi.ranks()[1], "gpu07"), "[gpu07 trainer rank 3] ");

  JobPlan templated =
      Plan(o, NodeRoleKind::kJoiningNode,
           {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[${role_name}${local_rank}|${rank}]:"}});
  EXPECT_EQ(templated.ConsolePrefix(templated.ranks()[1], "gpu07"), "[trainer1|3]:");
  // An empty template is no template.
  JobPlan blank =
      Plan(Options(1), NodeRoleKind::kSingleNode, {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", ""}});
  EXPECT_EQ(blank.ConsolePrefix(blank.ranks()[0], "h"), "[rank 0] ");
  // --log-line-prefix-template wins over the variable, as torchrun's flag does.
  o.log_line_prefix_template = "${hostname}/${rank}: ";
  JobPlan flag = Plan(o, NodeRoleKind::kJoiningNode,
                      {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[${rank}]:"}});
  EXPECT_EQ(flag.ConsolePrefix(flag.ranks()[1], "gpu07"), "gpu07/3: ");
}

// --virtual-local-rank: every rank's LOCAL_RANK is 0 (its one GPU is device 0); the console
// prefix and the rank folders keep the real local rank.
TEST(JobPlanTest, VirtualLocalRankIsZeroForEveryRank) {
  LaunchOptions o = Options(3);
  o.virtual_local_rank = true;
  o.log_line_prefix_template = "${local_rank}: ";
  JobPlan plan = Plan(o);
  for (const auto& slot : plan.ranks()) {
    EXPECT_EQ(plan.JobVariables(slot, 0)["LOCAL_RANK"], "0");
    EXPECT_EQ(plan.ConsolePrefix(slot, "h"), std::to_string(slot.local_rank) + ": ");
  }
  EXPECT_EQ(Plan(Options(3)).JobVariables(Plan(Options(3)).ranks()[2], 0)["LOCAL_RANK"], "2");
}

}  // namespace
}  // namespace dlaunch::launcher
