#include "launcher/job/joining_node_role.h"

#include <iostream>
#include <set>

#include "core/error.h"
#include "core/exit_codes.h"
#include "core/run_dir/heartbeat_file.h"
#include "core/run_dir/paths.h"
#include "launcher/diagnose/hang_monitor.h"
#include "launcher/diagnose/stack_capture.h"
#include "launcher/doctor/doctor.h"
#include "launcher/live/live_job.h"

namespace dlaunch::launcher {

JoiningNodeRole::JoiningNodeRole(const LaunchOptions& o, NodeSetup setup, std::string host)
    : options_(o),
      setup_(std::move(setup)),
      host_(std::move(host)),
      client_(std::make_shared<core::CoordinatorClient>(setup_.endpoint, setup_.token, setup_.tls)),
      agent_(std::make_unique<NodeAgent>(client_, options_.node_rank)) {}

void JoiningNodeRole::Interrupt(int signal) {
  interrupted_ = signal;
  agent_->CancelJoin();
}

JobIdentity JoiningNodeRole::Prepare() {
  std::cerr << "dlaunch: joining " << setup_.endpoint << std::endl;
  v1::NodeResponse resp;
  try {
    resp = agent_->Join(Request(0), JoinWait());
  } catch (const Error& e) {
    if (const int signal = interrupted_.load()) {
      AttemptReport interrupted;
      MarkInterrupted(&interrupted, signal, "while joining " + setup_.endpoint);
      std::cerr << "dlaunch: " << interrupted.error << "; no rank started" << std::endl;
      ended_ = interrupted;
      // Its summary goes where it would have, when the run and the node rank are known.
      Membership unjoined;
      unjoined.node_rank = options_.node_rank_given ? options_.node_rank : -1;
      return {options_.run_id, "", 0, setup_.endpoint, unjoined, false};
    }
    if (e.kind() == ErrorKind::kInvalidArgument) throw UsageError(e.what());
    if (e.kind() == ErrorKind::kUnauthenticated && !setup_.token_origin.empty()) {
      throw Error(e.kind(), std::string(e.what()) + " (" + setup_.token_origin + ")");
    }
    throw;
  }
  if (resp.finished()) {
    // A late node of an elastic job: the job it came for is over, and its verdict is this
    // node's (no summary: the node ran nothing, and node 0's says it all).
    AttemptReport over;
    over.exit_code = resp.exit_code();
    over.error = "the job ended before this node could join: " +
                 (resp.reason().empty() ? "it succeeded" : resp.reason()) + " (exit code " +
                 std::to_string(resp.exit_code()) + ")";
    std::cerr << "dlaunch: " << over.error << std::endl;
    ended_ = over;
    Membership unjoined;
    unjoined.node_rank = -1;
    return {resp.run_id(), "", 0, setup_.endpoint, unjoined, false};
  }
  joined_ = true;
  member_id_ = resp.member_id();
  // From now on this node's stream, pushes and rejoins speak for it, and nothing else can.
  client_->SetNodeCredential(resp.node_credential());
  relay_ = std::make_unique<RankRelay>(setup_.token, client_);
  return {resp.run_id(),      resp.master_addr(), resp.master_port(),
          relay_->endpoint(), MembershipOf(resp), true};
}

bool JoiningNodeRole::Open(JobPlan* plan, Supervisor* supervisor) {
  Started(*plan);
  agent_->Start([this, supervisor] { return Status(supervisor); }, options_.heartbeat_interval,
                [this, supervisor](const std::string& reason, int attempt) {
                  // Node 0 gone: nothing more to send it or to ask it.
                  if (attempt < 0) coordinator_lost_ = true;
                  // An ABORT of an attempt that is over must not end the next one.
                  if (attempt < 0 || attempt == attempt_.load()) {
                    supervisor->RequestStop(kExitRankFailed, reason);
                  }
                },
                [this, supervisor](const v1::Command& cmd) { OnCommand(cmd, supervisor); });
  return true;
}

JoiningNodeRole::~JoiningNodeRole() {
  if (stacks_.joinable()) stacks_.join();
}

void JoiningNodeRole::OnTick() {
  if (!coordinator_lost_) agent_->PushFiles(RankDirs());
}

void JoiningNodeRole::Conclude(AttemptReport* report, SummaryInfo*) {
  if (!coordinator_lost_) agent_->PushFiles(RankDirs(), RankFilePusher::Check::kThorough);
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = FinalStatus(*report);
  }
  agent_->Wake();
}

bool JoiningNodeRole::Next(AttemptReport* report, JobPlan* plan, std::string* how,
                           const std::function<void()>& put_away) {
  if (coordinator_lost_) return false;
  v1::NodeResponse resp;
  try {
    resp = agent_->Join(Request(attempt_.load() + 1), JoinWait());
  } catch (const Error& e) {
    if (const int signal = interrupted_.load()) {
      MarkInterrupted(report, signal, "while joining the next attempt");
      std::cerr << "dlaunch: " << report->error << std::endl;
      return false;
    }
    // Node 0 ended the job, or is gone: this node's own verdict stands.
    if (report->exit_code == 0) return false;
    report->error +=
        std::string(report->error.empty() ? "" : "; ") + "no next attempt: " + e.what();
    return false;
  }
  if (resp.finished()) {
    report->exit_code = resp.exit_code();
    report->error = resp.reason();
    return false;
  }
  *how = resp.restart_count() > plan->membership().restart_count ? "restart" : "rejoin";
  put_away();
  agent_->ForgetSentFiles();
  plan->SetMembership(MembershipOf(resp));
  Started(*plan);
  return true;
}

void JoiningNodeRole::Close(const AttemptReport& last) {
  if (!joined_) return;  // node 0 never knew it
  if (stacks_.joinable()) stacks_.join();
  if (!coordinator_lost_) agent_->PushFiles(RankDirs(), RankFilePusher::Check::kThorough);
  agent_->Finish(FinalStatus(last));
}

v1::NodeRequest JoiningNodeRole::Request(int attempt) const {
  v1::NodeRequest req;
  req.set_node_rank(options_.node_rank_given ? options_.node_rank : -1);
  req.set_host(host_);
  req.set_nproc(options_.nproc);
  req.set_doctor_json(DoctorFingerprintJson());
  req.set_member_id(member_id_);
  req.set_attempt(attempt);
  req.set_job_id(JobIdOf(options_));
  return req;
}

std::chrono::milliseconds JoiningNodeRole::JoinWait() const {
  const bool elastic = options_.min_nodes > 0 && options_.min_nodes < options_.nnodes;
  return JoinTimeout(options_) +
         (elastic ? options_.last_call_timeout : std::chrono::milliseconds(0));
}

Membership JoiningNodeRole::MembershipOf(const v1::NodeResponse& resp) {
  return Membership{resp.attempt(), resp.restart_count(), resp.node_rank(), resp.nnodes(),
                    resp.attempt_folder()};
}

void JoiningNodeRole::Started(const JobPlan& plan) {
  const Membership& m = plan.membership();
  std::cerr << "dlaunch: node " << m.node_rank << " of " << m.nnodes << " in attempt " << m.attempt
            << std::endl;
  std::lock_guard<std::mutex> lock(mu_);
  rank_dirs_.clear();
  std::set<int> ranks;
  for (const auto& slot : plan.ranks()) {
    rank_dirs_[slot.rank] = slot.dir;
    ranks.insert(slot.rank);
  }
  if (relay_) relay_->SetRanks(ranks);
  done_.reset();
  node_rank_ = m.node_rank;
  attempt_ = m.attempt;
}

std::map<int, std::string> JoiningNodeRole::RankDirs() {
  std::lock_guard<std::mutex> lock(mu_);
  return rank_dirs_;
}

void JoiningNodeRole::OnCommand(const v1::Command& cmd, Supervisor* supervisor) {
  if (cmd.kind() == v1::Command::DUMP) {
    if (relay_) relay_->Broadcast(cmd);
    const std::map<int, std::string> dirs = RankDirs();
    RequestRunningRankDumps(
        *supervisor,
        [&dirs](int rank) {
          auto it = dirs.find(rank);
          return it == dirs.end() ? std::string() : it->second;
        },
        cmd.reason());
    return;
  }
  if (cmd.kind() != v1::Command::STACKS) return;
  if (stacks_.joinable()) stacks_.join();  // node 0 asks once per diagnosis
  stacks_ = std::thread([this, cmd, supervisor] {
    const std::set<int> wanted(cmd.ranks().begin(), cmd.ranks().end());
    const std::map<int, std::string> dirs = RankDirs();
    std::vector<StackTarget> targets;
    for (const auto& live : supervisor->Live()) {
      auto dir = dirs.find(live.rank);
      if (live.exited || !wanted.count(live.rank) || dir == dirs.end()) continue;
      targets.push_back({live.rank, live.pid, rundir::RankDir(dir->second).stacks()});
    }
    const HangMonitor::Options defaults;
    std::vector<v1::RankProcess> processes;
    for (const StackResult& r :
         CaptureStacksInto(targets, defaults.stack_timeout, defaults.stack_tool)) {
      v1::RankProcess p;
      p.set_rank(r.rank);
      p.set_state(r.process_state);
      processes.push_back(std::move(p));
    }
    if (!coordinator_lost_) agent_->PushFiles(dirs, RankFilePusher::Check::kThorough);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stacks_answered_ = cmd.id();
      processes_ = std::move(processes);
    }
    agent_->Wake();
  });
}

v1::NodeStatus JoiningNodeRole::Status(Supervisor* supervisor) {
  std::lock_guard<std::mutex> lock(mu_);
  if (done_) return WithStacks(*done_);
  v1::NodeStatus s;
  s.set_node_rank(node_rank_);
  s.set_member_id(member_id_);
  s.set_attempt(attempt_);
  if (relay_)
    for (v1::RankStatus& beat : relay_->TakeFresh()) *s.add_heartbeats() = std::move(beat);
  for (const auto& live : supervisor->Live()) {
    auto* r = s.add_ranks();
    r->set_rank(live.rank);
    r->set_pid(live.pid);
    r->set_exited(live.exited);
    // Liveness that node 0 cannot read from this node's files (python/agent_files.h); no
    // agent sends longer lines.
    if (live.agent_line.size() <= rundir::kMaxPipedHeartbeat)
      r->set_agent_heartbeat(live.agent_line);
  }
  return WithStacks(s);
}

v1::NodeStatus JoiningNodeRole::WithStacks(v1::NodeStatus s) const {
  s.set_stacks_answered(stacks_answered_);
  for (const v1::RankProcess& p : processes_) *s.add_processes() = p;
  return s;
}

v1::NodeStatus JoiningNodeRole::FinalStatus(const AttemptReport& report) {
  v1::NodeStatus status;
  status.set_node_rank(node_rank_);
  status.set_member_id(member_id_);
  status.set_attempt(attempt_);
  status.set_done(true);
  status.set_exit_code(report.exit_code);
  status.set_message(report.error);
  for (const auto& r : report.result.ranks) {
    auto* x = status.add_ranks();
    x->set_rank(r.rank);
    x->set_pid(r.pid);
    x->set_exited(r.exited);
    x->set_exit_code(r.exit_code);
    x->set_signal(r.signal);
    x->set_torn_down(r.torn_down);
    x->set_end_unix_ms(r.end_unix_ms);
    x->set_cause(r.cause);
    x->set_stopped_at_teardown(r.stopped_at_teardown);
  }
  return status;
}

}  // namespace dlaunch::launcher
