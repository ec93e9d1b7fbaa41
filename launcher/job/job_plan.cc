#include "launcher/job/job_plan.h"

#include <filesystem>

#include "core/run_dir/paths.h"
#include "launcher/nccl_log/nccl_debug_default.h"
#include "launcher/rendezvous/credentials.h"
#include "launcher/supervision/log_capture.h"

namespace dlaunch::launcher {

namespace fs = std::filesystem;

JobPlan::JobPlan(LaunchOptions options, NodeSetup node, JobIdentity identity,
                 std::vector<std::string> argv, std::map<std::string, std::string> launcher_env,
                 std::shared_ptr<const RankProgram> program)
    : options_(std::move(options)),
      node_(std::move(node)),
      identity_(std::move(identity)),
      argv_(std::move(argv)),
      launcher_env_(std::move(launcher_env)),
      program_(program ? std::move(program) : MakeRankProgram(options_, ProgramSite{})),
      run_dir_(options_.log_dir + "/" + identity_.run_id),
      membership_(identity_.membership) {
  PlanRanks();
}

void JobPlan::SetMembership(const Membership& membership) {
  membership_ = membership;
  PlanRanks();
}

void JobPlan::PlanRanks() {
  ranks_.clear();
  const rundir::RunDir dir(run_dir_);
  for (int local = 0; local < options_.nproc; ++local) {
    const int rank = membership_.node_rank * options_.nproc + local;
    ranks_.push_back(RankSlot{rank, local, dir.rank(rank).path()});
  }
  common_ = CommonVariables();
}

bool JobPlan::expects_agent() const { return program_->ExpectsAgent(common_, launcher_env_); }

std::string JobPlan::summary_path() const {
  if (node_.role == NodeRoleKind::kJoiningNode) {
    return rundir::RunDir(run_dir_).node_summary(membership_.node_rank);
  }
  return rundir::RunDir(run_dir_).summary();
}

std::map<std::string, std::string> JobPlan::CommonVariables() const {
  const LaunchOptions& o = options_;
  const int world = world_size();
  std::map<std::string, std::string> v = {
      {"WORLD_SIZE", std::to_string(world)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
      {"GROUP_RANK", std::to_string(membership_.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(membership_.nnodes)},
      {"ROLE_NAME", o.role},
      {"ROLE_WORLD_SIZE", std::to_string(world)},
      {"MASTER_ADDR", identity_.master_addr},
      {"MASTER_PORT", std::to_string(identity_.master_port)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(o.max_restarts)},
      {"TORCHELASTIC_RUN_ID", identity_.run_id},
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"DLAUNCH_COORDINATOR", identity_.coordinator},
      {"DLAUNCH_RUN_ID", identity_.run_id},
      {"DLAUNCH_RUN_DIR", run_dir_},
      {"DLAUNCH_RDZV_TIMEOUT", std::to_string(o.rdzv_timeout.count() / 1000)},
      {"DLAUNCH_HEARTBEAT_MS", std::to_string(o.heartbeat_interval.count())},
  };
  if (node_.tls.enabled() && !identity_.relayed) {
    // Ranks may change directory before they connect.
    v["DLAUNCH_TLS_CA"] = fs::absolute(node_.tls.ca).string();
    v["DLAUNCH_TLS_CERT"] = fs::absolute(node_.tls.cert).string();
    v["DLAUNCH_TLS_KEY"] = fs::absolute(node_.tls.key).string();
  }
  auto inherited = [&](const char* name) {
    auto it = launcher_env_.find(name);
    return it != launcher_env_.end() && !it->second.empty();
  };
  // OMP_NUM_THREADS comes with the rank's placement (placement.h): its share of the cores.
  if (!inherited("TORCH_NCCL_ASYNC_ERROR_HANDLING")) v["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1";
  if (!o.nccl_debug.empty()) v["NCCL_DEBUG"] = o.nccl_debug;
  if (o.nccl_debug == "INFO" && !inherited("NCCL_DEBUG_SUBSYS")) {
    v["NCCL_DEBUG_SUBSYS"] = nccl_log::kNcclDebugSubsys;  // what the NCCL analysis reads
  }
  if (!o.nccl_socket_ifname.empty()) {
    v["NCCL_SOCKET_IFNAME"] = o.nccl_socket_ifname;
    v["GLOO_SOCKET_IFNAME"] = o.nccl_socket_ifname;
  }
  program_->AddJobDefaults(launcher_env_, &v);
  for (const auto& [k, val] : o.env) v[k] = val;
  program_->AddJobOverrides(&v);
  return v;
}

std::map<std::string, std::string> JobPlan::JobVariables(const RankSlot& slot, int restarts) const {
  auto v = common_;
  v["RANK"] = v["ROLE_RANK"] = std::to_string(slot.rank);
  // --virtual-local-rank: the rank's one GPU is its device 0 (placement.h sets which).
  v["LOCAL_RANK"] = options_.virtual_local_rank ? "0" : std::to_string(slot.local_rank);
  // Each rank gets its own rank token: it admits that rank's calls, never another rank's nor a
  // node's (credentials.h).
  v["DLAUNCH_JOB_TOKEN"] = node_.token.empty() ? "" : RankToken(node_.token, slot.rank);
  v["TORCHELASTIC_RESTART_COUNT"] = std::to_string(restarts);
  // Absolute: the rank's own files (the agent's, `@record`'s) are found after an os.chdir().
  std::error_code ec;
  v["DLAUNCH_RANK_DIR"] = fs::absolute(slot.dir, ec).lexically_normal().string();
  program_->AddRankEnv(slot.dir, launcher_env_, &v);  // TORCHELASTIC_ERROR_FILE, torch's dumps
  if (!options_.nccl_debug.empty()) v["NCCL_DEBUG_FILE"] = rundir::RankDir(slot.dir).nccl_log();
  return v;
}

std::string JobPlan::ConsolePrefix(const RankSlot& slot, const std::string& host) const {
  std::string tmpl = options_.log_line_prefix_template;
  if (auto it = launcher_env_.find("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE");
      tmpl.empty() && it != launcher_env_.end()) {
    tmpl = it->second;
  }
  if (!tmpl.empty()) return ExpandLinePrefix(tmpl, options_.role, slot.rank, slot.local_rank, host);
  std::string prefix = "[";
  if (multi_node()) prefix += host + " ";
  if (options_.role_given) prefix += options_.role + " ";
  return prefix + "rank " + std::to_string(slot.rank) + "] ";
}

std::vector<std::string> JobPlan::RankEnvironment(const RankSlot& slot, int restarts) const {
  const auto job = JobVariables(slot, restarts);
  std::vector<std::string> env;
  for (const auto& [k, v] : launcher_env_)
    if (!job.count(k)) env.push_back(k + "=" + v);
  for (const auto& [k, v] : job) env.push_back(k + "=" + v);
  return env;
}

bool JobPlan::ShouldRestart(int attempt, int exit_code, bool interrupted, bool stopped) const {
  if (exit_code == 0 || interrupted) return false;
  if (stopped && options_.on_hang != OnHang::kRestart) return false;
  return attempt < options_.max_restarts;
}

NextAttempt JobPlan::Decide(int exit_code, bool interrupted, bool stopped, int nodes_lost) const {
  if (exit_code == 0 || interrupted) return NextAttempt::kNone;
  if (nodes_lost > 0 && elastic() && membership_.nnodes - nodes_lost >= min_nodes()) {
    return NextAttempt::kRejoin;
  }
  return ShouldRestart(membership_.restart_count, exit_code, interrupted, stopped)
             ? NextAttempt::kRestart
             : NextAttempt::kNone;
}

}  // namespace dlaunch::launcher
