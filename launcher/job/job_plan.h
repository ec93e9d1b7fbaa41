// What one node of a job runs, decided before any rank starts: its role, its ranks, their
// directories and environment, and when a failed attempt is restarted. Pure: no files, processes
// or network, so it is tested on its own; the agent and the node roles carry it out.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/coordinator_client.h"
#include "launcher/cli/options.h"
#include "launcher/program/rank_program.h"

namespace dlaunch::launcher {

enum class NodeRoleKind {
  kSingleNode,       // the whole job on this machine: coordinator on loopback
  kCoordinatorHost,  // node 0 of several: hosts the coordinator every node reaches
  kJoiningNode,      // node 1..N-1: joins node 0's coordinator
  kElected,          // no node rank given: node 0 if it is first to listen on the endpoint
};

// Where this node stands, resolved from the command line and the scheduler's environment.
struct NodeSetup {
  NodeRoleKind role = NodeRoleKind::kSingleNode;
  std::string endpoint;  // node 0's coordinator, host:port (multi-node)
  std::string token;     // the job token every rank and node presents
  // Where a token no one gave came from, for the error when node 0 refuses it ("" when given).
  std::string token_origin;
  core::TlsFiles tls;
  // One node whose --rdzv-endpoint names this machine: its host is the ranks' MASTER_ADDR ("":
  // the options' --master-addr).
  std::string master_addr;
  // One-line console notes from the checks that needed I/O (a name that did not resolve now).
  std::vector<std::string> notes;
};

// What one attempt's node rendezvous gave this node.
struct Membership {
  int attempt = 0;        // 0, 1, ... every attempt of this launch
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT: the restarts --max-restarts allowed
  int node_rank = 0;
  int nnodes = 1;
  std::string attempt_folder;  // where its rank folders go once it is over ("attempt3")
};

// What the rendezvous fixed for the whole job: node 0 decides, the other nodes learn it.
struct JobIdentity {
  std::string run_id;
  std::string master_addr;
  int master_port = 0;
  std::string coordinator;  // host:port where ranks reach the coordinator
  Membership membership;    // of the first attempt, where known before it (a joining node)
  // `coordinator` is this node's own launcher on loopback, which relays the ranks' calls to node
  // 0 (a joining node: rank_relay.h), in plaintext.
  bool relayed = false;
};

// What follows an attempt.
enum class NextAttempt {
  kNone,     // the job is over
  kRestart,  // a failure within --max-restarts: every node restarts (restart_count + 1)
  kRejoin,   // an elastic job lost nodes but keeps MIN: the rest go on (restart_count kept)
};

// One rank this node runs.
struct RankSlot {
  int rank = 0;
  int local_rank = 0;
  std::string dir;  // <run_dir>/rank<R>
};

class JobPlan {
 public:
  // `argv`: what each rank runs (checked already: program->ResolveArgv()). `launcher_env`:
  // dlaunch's own environment, which ranks inherit under the job's variables. `program`: what
  // adds to each rank's environment and process; null: MakeRankProgram(options) with no agent
  // folder.
  JobPlan(LaunchOptions options, NodeSetup node, JobIdentity identity,
          std::vector<std::string> argv, std::map<std::string, std::string> launcher_env,
          std::shared_ptr<const RankProgram> program = nullptr);

  const LaunchOptions& options() const { return options_; }
  // What every rank runs; the agent asks it, not the command line, how to start and judge them.
  const RankProgram& program() const { return *program_; }
  const NodeSetup& node() const { return node_; }
  const JobIdentity& identity() const { return identity_; }
  bool multi_node() const { return node_.role != NodeRoleKind::kSingleNode; }
  bool hosts_coordinator() const { return node_.role != NodeRoleKind::kJoiningNode; }
  int world_size() const { return options_.nproc * membership_.nnodes; }
  bool elastic() const { return min_nodes() < options_.nnodes; }
  int min_nodes() const { return options_.min_nodes > 0 ? options_.min_nodes : options_.nnodes; }

  // The attempt about to run: this node's rank and the node count, from its node rendezvous.
  const Membership& membership() const { return membership_; }
  void SetMembership(const Membership& membership);

  const std::string& run_dir() const { return run_dir_; }
  // This node's ranks, by local rank.
  const std::vector<RankSlot>& ranks() const { return ranks_; }
  // Node 0 writes summary.json; the other nodes their own summary.node<N>.json.
  std::string summary_path() const;

  // The variables dlaunch sets for `slot` after `restarts` restarts (torchrun's and its own).
  std::map<std::string, std::string> JobVariables(const RankSlot& slot, int restarts) const;
  // The whole environment of that rank: launcher_env with JobVariables over it, KEY=VAL.
  std::vector<std::string> RankEnvironment(const RankSlot& slot, int restarts) const;
  const std::vector<std::string>& argv() const { return argv_; }
  // The console prefix of `slot`'s output lines: torchrun's --log-line-prefix-template, else its
  // TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE from launcher_env (${role_name}, ${rank},
  // ${local_rank}, ${hostname}: `host`), else "[rank R] ", with --role's name and, when the job
  // spans nodes, `host` in front: "[host trainer rank R] ".
  std::string ConsolePrefix(const RankSlot& slot, const std::string& host) const;
  // Whether every rank should load the Python rank agent, so that one that does not is worth a
  // warning: the program's say (RankProgram::ExpectsAgent) over the job's variables.
  bool expects_agent() const;

  // Whether attempt `attempt` (0-based), which ended with `exit_code`, is followed by another:
  // a failure, not an interrupt, a hang only under --on-hang restart, within --max-restarts.
  bool ShouldRestart(int attempt, int exit_code, bool interrupted, bool stopped) const;
  // What follows the membership's attempt, which ended with `exit_code` after `nodes_lost` of
  // its nodes were lost: a lost node of an elastic job is a change of membership, not a failure
  // of the program, so it does not use up --max-restarts while MIN nodes remain.
  NextAttempt Decide(int exit_code, bool interrupted, bool stopped, int nodes_lost) const;

 private:
  std::map<std::string, std::string> CommonVariables() const;
  void PlanRanks();

  LaunchOptions options_;
  NodeSetup node_;
  JobIdentity identity_;
  std::vector<std::string> argv_;
  std::map<std::string, std::string> launcher_env_;
  std::shared_ptr<const RankProgram> program_;
  std::string run_dir_;
  Membership membership_;
  std::vector<RankSlot> ranks_;
  std::map<std::string, std::string> common_;
};

}  // namespace dlaunch::launcher
