// The new detectors against today's code path: for every fixture and a few command lines, the
// options today's ParseCommandLine + ApplySchedulerEnv (+ AgentShareOfNode) leave are those that
// DetectCluster's place gives when applied by today's rules (ApplyPlace below, which step 2's
// ResolveLaunch will own), the same one-line error included.
#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "launcher/cluster/detect_cluster.h"
#include "launcher/cluster/slurm.h"
#include "launcher/cluster/slurm_lists.h"
#include "launcher/job/cluster_env.h"
#include "launcher/job/node_env.h"
#include "launcher/launch_checks.h"
#include "launcher/options.h"
#include "tests/cluster/cluster_fixtures.h"

namespace dlaunch::launcher {
namespace {

using cluster::ClusterPlace;
using cluster::Engine;

// What a place leaves in the options, one line; an error instead where there is one. A Slurm run
// id's time and random part (NewRunId, 21 characters) reads "*".
std::string Outcome(const LaunchOptions& o, const std::string& engine, NodeShare share) {
  std::string run_id = o.run_id;
  if (run_id.rfind("slurm-", 0) == 0 && run_id.size() > 21 && run_id.back() != '*') {
    run_id = run_id.substr(0, run_id.size() - 21) + "-*";
  }
  return "engine=" + engine + " nnodes=" + std::to_string(o.min_nodes) + ":" +
         std::to_string(o.nnodes) + " node_rank=" + std::to_string(o.node_rank) +
         (o.node_rank_given ? "(given)" : "") + " endpoint=" + o.rdzv_endpoint +
         " run_id=" + run_id + " job=" + o.job_id + " nproc=" + std::to_string(o.nproc) +
         " share=" + std::to_string(share.index) + "/" + std::to_string(share.count);
}

std::vector<std::string> Argv(std::vector<std::string> args) {
  args.push_back("prog");
  return args;
}

std::string Old(const cluster::EnvMap& env, const std::vector<std::string>& args) {
  try {
    LaunchOptions o = ParseCommandLine(Argv(args), env);
    const std::string engine = ApplySchedulerEnv(env, &o);
    return Outcome(o, engine, AgentShareOfNode(env));
  } catch (const UsageError& e) {
    return std::string("error: ") + e.what();
  }
}

// A PyTorchJob's place stands for the command line's options where the command line has none.
void ApplyKubeflow(const ClusterPlace& p, LaunchOptions* o) {
  if (!o->nnodes_given && p.nnodes.given()) {
    o->nnodes = p.nnodes.Get();
    o->min_nodes = p.min_nodes;
    o->nnodes_given = true;
  }
  if (!o->node_rank_given && p.node_rank.given()) {
    o->node_rank = p.node_rank.Get();
    o->node_rank_given = true;
  }
  auto checked = [](const cluster::Sourced<std::string>& field, auto check) {
    try {
      check(field.Get());
    } catch (const UsageError& e) {
      throw UsageError(field.source + ": " + e.what());
    }
    return field.Get();
  };
  if (o->rdzv_endpoint.empty() && p.endpoint.given()) {
    o->rdzv_endpoint = checked(p.endpoint, [](const std::string& e) { SplitEndpoint(e); });
  }
  if (o->run_id.empty() && p.run_id.given()) o->run_id = checked(p.run_id, CheckRunId);
  if (o->node_rank < 0 || o->node_rank >= o->nnodes) {
    throw UsageError("--node-rank must be in [0, " + std::to_string(o->nnodes) + ")");
  }
}

// Today's rules for the other engines (ApplySchedulerEnv): a step even against --nnodes, the
// others only without it.
std::string ApplyPlace(const ClusterPlace& p, LaunchOptions* o) {
  if (!o->nproc_given && p.nproc.given()) o->nproc = p.nproc.Get();
  if (p.engine == Engine::kKubeflow) ApplyKubeflow(p, o);
  if (p.engine == Engine::kSlurmStep) {
    const int tasks = p.nnodes.Get();
    const int rank = p.node_rank.Get();
    if (tasks == 1 && o->nnodes_given) return "";
    if (o->nnodes_given && o->nnodes != tasks) {
      throw UsageError("--nnodes " + std::to_string(o->nnodes) + " but this Slurm step runs " +
                       std::to_string(tasks) + " dlaunch task" + (tasks == 1 ? "" : "s") +
                       ", each one node of the job: drop --nnodes (or give " +
                       std::to_string(tasks) +
                       "), or start one task per node (srun --ntasks-per-node=1)");
    }
    o->nnodes = tasks;
    o->node_rank = rank;
    if (o->rdzv_endpoint.empty()) o->rdzv_endpoint = p.endpoint.Get();
  } else if (o->nnodes_given || p.engine == Engine::kNone || p.engine == Engine::kKubeflow) {
    return "";
  } else {
    o->nnodes = p.nnodes.Get();
    o->node_rank = p.node_rank.Get();
  }
  if (!p.job_id.empty()) o->job_id = p.job_id;
  if (o->run_id.empty() && p.run_id.given()) o->run_id = p.run_id.Get() + "-*";
  return cluster::EngineName(p.engine);
}

std::string New(const cluster::EnvMap& env, const std::vector<std::string>& args) {
  try {
    const ClusterPlace place = cluster::DetectCluster(env);
    // The parser no longer sees what the place carries.
    cluster::EnvMap rest = env;
    if (env.count("PET_NNODES")) {
      for (const char* key : {"PET_NNODES", "PET_NODE_RANK", "PET_RDZV_ENDPOINT", "PET_RDZV_ID",
                              "PET_MASTER_ADDR", "PET_MASTER_PORT"}) {
        rest.erase(key);
      }
    }
    LaunchOptions o = ParseCommandLine(Argv(args), rest);
    const std::string engine = ApplyPlace(place, &o);
    const NodeShare share = place.share.given()
                                ? NodeShare{place.share.Get().index, place.share.Get().count}
                                : NodeShare{};
    return Outcome(o, engine, share);
  } catch (const UsageError& e) {
    return std::string("error: ") + e.what();
  }
}

TEST(ClusterCrossCheckTest, EveryFixtureAgreesWithTodaysCodePath) {
  const std::vector<std::vector<std::string>> command_lines = {{},
                                                               {"--nproc", "3"},
                                                               {"--nnodes", "2"},
                                                               {"--rdzv-endpoint", "n9:1234"},
                                                               {"--rdzv-id", "mine"}};
  int compared = 0, errors = 0;
  std::set<std::string> engines;
  for (const cluster::EnvFixture& f : cluster::EnvFixtures()) {
    if (!f.cross_check) continue;
    for (const auto& args : command_lines) {
      std::string line;
      for (const auto& a : args) line += " " + a;
      const std::string old_outcome = Old(f.env, args);
      EXPECT_EQ(New(f.env, args), old_outcome) << f.name << " with" << line;
      ++compared;
      if (old_outcome.rfind("error: ", 0) == 0) {
        ++errors;
      } else {
        engines.insert(old_outcome.substr(0, old_outcome.find(' ')));
      }
    }
  }
  // Not vacuous: many comparisons, a good share of them errors, every engine string of today's.
  EXPECT_GE(compared, 150);
  EXPECT_GE(errors, 40);
  EXPECT_EQ(engines, (std::set<std::string>{"engine=", "engine=openmpi", "engine=slurm"}));
}

TEST(ClusterCrossCheckTest, SlurmListsAndPortsAgreeWithTodays) {
  for (const char* list : {"gpu[01-04,07],cpu9", "node1", "a[08-11]-ib", "x[1,3],y[2-3]", "n[1-2]",
                           "gpu[3-1]", "", "a,,b", "gpu]", "a[1]b[2]"}) {
    std::string old_text, new_text;
    try {
      for (const auto& h : ExpandSlurmNodelist(list)) old_text += h + " ";
    } catch (const UsageError& e) {
      old_text = e.what();
    }
    try {
      for (const auto& h : cluster::ExpandSlurmNodelist(list)) new_text += h + " ";
    } catch (const UsageError& e) {
      new_text = e.what();
    }
    EXPECT_EQ(new_text, old_text) << list;
  }
  for (uint64_t job : {0ull, 7ull, 1234ull, 99999999ull}) {
    for (uint64_t step : {0ull, 2ull, 9ull}) {
      EXPECT_EQ(cluster::SlurmStepPort(job, step), SlurmStepPort(job, step));
    }
  }
}

}  // namespace
}  // namespace dlaunch::launcher
