// Longer than the house's 600 lines: the three roles (single node, node 0 of several, a joining
// node) share their helpers here. The split into one file per role goes with the rank-program
// reshaping of the job (issue #24, part 1), which changes these classes' interface too.
#include "launcher/job/node_roles.h"

#include <atomic>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include "core/base/format.h"
#include "core/error.h"
#include "core/exit_codes.h"
#include "core/run_dir/heartbeat_file.h"
#include "core/run_dir/paths.h"
#include "launcher/diagnose/diagnose.h"
#include "launcher/diagnose/hang_monitor.h"
#include "launcher/diagnose/stack_capture.h"
#include "launcher/doctor/doctor.h"
#include "launcher/job/hosted_coordinator.h"
#include "launcher/job/node_env.h"
#include "launcher/launch_checks.h"
#include "launcher/python/agent_files.h"
#include "launcher/rendezvous/node_agent.h"
#include "launcher/rendezvous/ports.h"
#include "launcher/rendezvous/rank_relay.h"

namespace dlaunch::launcher {
namespace {

// --master-port, or a free one: node 0 decides it for every node.
int ChooseMasterPort(const LaunchOptions& o, const std::string& bind_host) {
  if (o.master_port == 0) return PickFreePort(bind_host);
  if (!PortIsFree(bind_host, o.master_port)) {
    throw UsageError("--master-port " + std::to_string(o.master_port) +
                     " is already in use on this machine (leave it out and dlaunch picks a free "
                     "one)");
  }
  return o.master_port;
}

// The job the nodes must agree on: the scheduler's (a Slurm step), else the run id the user
// gave (torchrun's --rdzv-id); "" when neither is known, and then nothing is checked.
std::string JobIdOf(const LaunchOptions& o) {
  if (!o.job_id.empty()) return o.job_id;
  return o.run_id.empty() ? "" : "run id '" + o.run_id + "'";
}

// The ranks' MASTER_ADDR on one node: the endpoint's host when it names this machine, else
// --master-addr's.
std::string MasterAddr(const LaunchOptions& o, const NodeSetup& setup) {
  return setup.master_addr.empty() ? o.master_addr : setup.master_addr;
}

// The join timeout of the node rendezvous: --rdzv-conf join_timeout, else --rdzv-timeout.
std::chrono::milliseconds JoinTimeout(const LaunchOptions& o) {
  return o.join_timeout.count() > 0 ? o.join_timeout : o.rdzv_timeout;
}

// The folder attempt<N+1> after attempt<N>.
std::string FolderAfter(const std::string& folder) {
  return rundir::RunDir::AttemptDirName(rundir::RunDir::ParseAttemptDirName(folder).value_or(-1) +
                                        1);
}

std::string Plural(int n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// Node 0, alone or with other nodes: it hosts the coordinator and diagnoses the job.
class NodeZero : public NodeRole {
 public:
  NodeZero(const LaunchOptions& o, NodeSetup setup, const std::string& bind_host)
      : options_(o),
        setup_(std::move(setup)),
        master_port_(ChooseMasterPort(o, bind_host)),
        run_id_(o.run_id.empty() ? NewRunId() : o.run_id) {}

  void OnTick() override { coordinator_->Tick(); }
  void OnRankChange() override { coordinator_->RefreshLive(); }
  void SetEventLog(JobEventLog* log) override {
    if (coordinator_) coordinator_->SetEventLog(log);
  }
  std::vector<rundir::StragglerVerdict> Stragglers() const override {
    return coordinator_ ? coordinator_->Stragglers() : std::vector<rundir::StragglerVerdict>{};
  }
  int straggler_generation() const override {
    return coordinator_ ? coordinator_->straggler_generation() : 0;
  }
  std::string RankError(int rank) override { return coordinator_->RankError(rank); }
  std::optional<size_t> RootCause(const AttemptResult& result, std::string* elsewhere) override {
    return coordinator_->RootCause(result, elsewhere);
  }

  void Explain(const AttemptReport& report) override {
    if (report.exit_code == 0 || coordinator_->hang_diagnosed() || report.result.interrupted_by ||
        report.verdict) {
      return;
    }
    // The failure's picture across ranks: each one's last collective, phase and memory. The
    // agent's Judge printed the root-cause block of a rank of this node; when another node's rank
    // failed it printed only a line, so the diagnosis' block names that rank here.
    const Diagnosis d = AnalyzeRunDir(run_dir_, world_size_, report.summary_path);
    std::cerr << (report.root_cause_printed ? FormatDiagnosisAfterRootCause(d) : FormatDiagnosis(d))
              << std::flush;
  }

  bool Next(AttemptReport* report, JobPlan* plan, std::string* how,
            const std::function<void()>& put_away) override {
    const int lost = LostNodes();
    // A stop for a hang restarts only under --on-hang restart; a stop for a failure elsewhere
    // (another node's rank, a lost node) is a failure like any other.
    const auto& stop = report->result.stop_code;
    const NextAttempt step = plan->Decide(report->exit_code, report->result.interrupted_by != 0,
                                          stop && *stop == kExitHang, lost);
    if (step == NextAttempt::kNone) return false;
    Membership next = plan->membership();
    ++next.attempt;
    if (step == NextAttempt::kRestart) ++next.restart_count;
    next.attempt_folder = FolderAfter(next.attempt_folder);
    *how = step == NextAttempt::kRestart ? "restart" : "rejoin";
    if (step == NextAttempt::kRestart) {
      std::cerr << "dlaunch: restarting all ranks (restart " << next.restart_count << " of "
                << options_.max_restarts << ")" << std::endl;
    } else {
      std::cerr << "dlaunch: " << Plural(lost, "node") << " lost; "
                << Plural(plan->membership().nnodes - lost, "node") << " left (at least "
                << plan->min_nodes() << " needed): going on as attempt " << next.attempt
                << std::endl;
    }
    put_away();
    // Before any node can start the next attempt's ranks: they register afresh.
    coordinator_->Reset();
    if (!Rejoin(&next, report)) return false;
    plan->SetMembership(next);
    world_size_ = plan->world_size();
    coordinator_->Watch(*plan, supervisor_);
    return true;
  }

  void Close(const AttemptReport&) override { coordinator_->Shutdown(); }

  // Every node waiting in this coordinator's rendezvous, and node 0's own wait, end with the
  // signal's exit code.
  void Interrupt(int signal) override {
    interrupted_ = signal;
    if (CoordinatorHandler* h = interruptible_.load()) {
      h->Finish(128 + signal, "node 0 was interrupted by " + SignalName(signal));
    }
  }

 protected:
  // The nodes of the attempt that were lost.
  virtual int LostNodes() { return 0; }
  // The next attempt's node rendezvous; false (report set) when it failed.
  virtual bool Rejoin(Membership*, AttemptReport*) { return true; }

  // Starts the coordinator for the job this node names.
  void Serve(const std::string& listen) {
    run_dir_ = options_.log_dir + "/" + run_id_;
    CoordinatorConfig cc;
    cc.world_size = options_.nproc * options_.nnodes;
    cc.nproc_per_node = options_.nproc;
    cc.nnodes = options_.nnodes;
    cc.min_nodes = options_.min_nodes;
    cc.join_timeout = JoinTimeout(options_);
    cc.last_call_timeout = options_.last_call_timeout;
    cc.master_addr = master_addr_;
    cc.master_port = master_port_;
    cc.token = setup_.token;
    cc.run_id = run_id_;
    cc.run_dir = run_dir_;
    cc.job_id = JobIdOf(options_);
    cc.rdzv_timeout = options_.rdzv_timeout;
    cc.node_heartbeat_timeout = options_.heartbeat_timeout;
    coordinator_ = std::make_unique<HostedCoordinator>(cc, listen, setup_.tls);
    if (options_.metrics_port >= 0) {
      coordinator_->ServeMetrics(options_.metrics_addr, options_.metrics_port);
    }
    // A signal that came before there was a coordinator to tell.
    interruptible_ = &coordinator_->handler();
    if (const int signal = interrupted_.load()) Interrupt(signal);
  }

  LaunchOptions options_;
  NodeSetup setup_;
  int master_port_;
  std::string master_addr_;
  std::string run_id_;
  std::string run_dir_;
  int world_size_ = 0;
  Supervisor* supervisor_ = nullptr;
  std::unique_ptr<HostedCoordinator> coordinator_;
  std::atomic<int> interrupted_{0};  // the signal Interrupt was given
  std::atomic<CoordinatorHandler*> interruptible_{nullptr};
};

// The whole job on this machine; the coordinator listens on loopback only.
class SingleNode : public NodeZero {
 public:
  SingleNode(const LaunchOptions& o, const NodeSetup& setup)
      : NodeZero(o, setup, MasterAddr(o, setup)) {
    master_addr_ = MasterAddr(o, setup);
  }

  JobIdentity Prepare() override {
    Serve("127.0.0.1:0");
    return {run_id_,      master_addr_,
            master_port_, "127.0.0.1:" + std::to_string(coordinator_->port()),
            Membership{}, false};
  }

  bool Open(JobPlan* plan, Supervisor* supervisor) override {
    supervisor_ = supervisor;
    world_size_ = plan->world_size();
    coordinator_->Watch(*plan, supervisor);
    return true;
  }

  void Conclude(AttemptReport*, SummaryInfo*) override {}
};

// Node 0 of several: its coordinator is the job's, reachable at --rdzv-endpoint.
class CoordinatorHost : public NodeZero {
 public:
  CoordinatorHost(const LaunchOptions& o, NodeSetup setup, std::string host)
      : NodeZero(o, std::move(setup), "0.0.0.0"), host_(std::move(host)) {
    master_addr_ =
        o.master_addr == "127.0.0.1" ? SplitEndpoint(setup_.endpoint).first : o.master_addr;
  }

  // Listens on the endpoint's port (beyond loopback: the other nodes must reach it). Throws
  // UsageError when another process listens there.
  void Listen() {
    if (!coordinator_) Serve("0.0.0.0:" + std::to_string(SplitEndpoint(setup_.endpoint).second));
  }

  JobIdentity Prepare() override {
    Listen();
    return {run_id_, master_addr_, master_port_, setup_.endpoint, Membership{}, false};
  }

  bool Open(JobPlan* plan, Supervisor* supervisor) override {
    supervisor_ = supervisor;
    coordinator_->Watch(*plan, supervisor);
    std::cerr << "dlaunch: node 0, coordinator on " << setup_.endpoint << ", waiting for "
              << NodeCount() << " nodes" << std::endl;
    Membership first = plan->membership();
    AttemptReport failed;
    if (!Rejoin(&first, &failed)) {
      coordinator_->handler().Finish(failed.exit_code, failed.error);
      ended_ = failed;
      return false;
    }
    plan->SetMembership(first);
    world_size_ = plan->world_size();
    coordinator_->Watch(*plan, supervisor);
    std::vector<std::string> fingerprints;
    for (const auto& n : coordinator_->handler().Nodes()) fingerprints.push_back(n.doctor_json);
    for (const auto& w : CompareFingerprints(fingerprints)) {
      std::cerr << "dlaunch: warning: " << w << std::endl;
    }
    return true;
  }

  void OnTick() override {
    NodeZero::OnTick();
    coordinator_->handler().CheckNodes();  // a silent node stops the attempt through OnNodeFault
  }

  // A rank of this node failed: but one of another node may have failed first, and its fallout
  // (a peer gone) reached this node's ranks before its node's notice did. The other nodes stop,
  // and say how their ranks ended, before the choice.
  std::optional<size_t> RootCause(const AttemptResult& result, std::string* elsewhere) override {
    const RankOutcome& first = result.ranks[*result.first_failure];
    Abort(coordinator_->attempt(),
          "rank " + std::to_string(first.rank) + " failed: " + DescribeExit(first));
    coordinator_->handler().WaitForNodesDone();
    return NodeZero::RootCause(result, elsewhere);
  }

  void Conclude(AttemptReport* report, SummaryInfo* summary) override {
    CoordinatorHandler& h = coordinator_->handler();
    if (report->exit_code != 0) Abort(report->attempt, report->error);
    // Node 0's ranks are done; the attempt is done when every node says so.
    auto fault = h.WaitForNodesDone();
    if (fault && report->exit_code == 0) {
      report->exit_code = kExitRankFailed;
      report->error = fault->message;
      std::cerr << "dlaunch: " << fault->message << std::endl;
    }
    summary->nodes = h.Nodes();
  }

  void Close(const AttemptReport& last) override {
    CoordinatorHandler& h = coordinator_->handler();
    h.Finish(last.exit_code, last.error);
    // The other nodes take the verdict before the coordinator goes away.
    h.WaitForNodesToLeave(options_.close_timeout);
    NodeZero::Close(last);
  }

 protected:
  int LostNodes() override { return static_cast<int>(coordinator_->handler().LostNodes().size()); }

  bool Rejoin(Membership* next, AttemptReport* report) override {
    CoordinatorHandler& h = coordinator_->handler();
    if (next->attempt > 0) h.OpenRound();
    auto round =
        h.JoinRound(host_, DoctorFingerprintJson(), next->restart_count, next->attempt_folder);
    if (const int signal = interrupted_.load()) {
      MarkInterrupted(report, signal, "while waiting for nodes");
      std::cerr << "dlaunch: " << report->error << "; no rank of attempt " << next->attempt
                << " started" << std::endl;
      return false;
    }
    if (!round.error.empty()) {
      std::cerr << "dlaunch: " << round.error << std::endl;
      report->exit_code = kExitRankFailed;
      report->error = round.error;
      return false;
    }
    next->attempt = round.attempt;
    next->node_rank = 0;
    next->nnodes = round.nnodes;
    std::cerr << "dlaunch: node rendezvous of attempt " << round.attempt << ": "
              << Plural(round.nnodes, "node") << std::endl;
    return true;
  }

 private:
  // Tells every other node to stop the attempt, once per attempt.
  void Abort(int attempt, const std::string& reason) {
    if (aborted_attempt_ == attempt) return;
    aborted_attempt_ = attempt;
    v1::Command abort;
    abort.set_kind(v1::Command::ABORT);
    abort.set_reason(reason);
    abort.set_attempt(attempt);
    coordinator_->handler().BroadcastToNodes(abort);
  }

  std::string NodeCount() const {
    const int min = options_.min_nodes > 0 ? options_.min_nodes : options_.nnodes;
    if (min == options_.nnodes) return std::to_string(min);
    return std::to_string(min) + " to " + std::to_string(options_.nnodes);
  }

  std::string host_;
  int aborted_attempt_ = -1;
};

// Node 1..N-1: joins node 0's coordinator once per attempt, reports its ranks over one stream,
// obeys ABORT, and copies its ranks' files into node 0's run directory.
class JoiningNode : public NodeRole {
 public:
  JoiningNode(const LaunchOptions& o, NodeSetup setup, std::string host)
      : options_(o),
        setup_(std::move(setup)),
        host_(std::move(host)),
        client_(
            std::make_shared<core::CoordinatorClient>(setup_.endpoint, setup_.token, setup_.tls)),
        agent_(std::make_unique<NodeAgent>(client_, options_.node_rank)) {}

  void Interrupt(int signal) override {
    interrupted_ = signal;
    agent_->CancelJoin();
  }

  JobIdentity Prepare() override {
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

  bool Open(JobPlan* plan, Supervisor* supervisor) override {
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

  ~JoiningNode() override {
    if (stacks_.joinable()) stacks_.join();
  }

  void OnTick() override {
    if (!coordinator_lost_) agent_->PushFiles(RankDirs());
  }
  // This node's ranks report to node 0's coordinator, which holds their errors.
  std::string RankError(int) override { return ""; }

  // Node 0 has every file of the attempt before it hears that this node is done.
  void Conclude(AttemptReport* report, SummaryInfo*) override {
    if (!coordinator_lost_) agent_->PushFiles(RankDirs(), RankFilePusher::Check::kThorough);
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = FinalStatus(*report);
    }
    agent_->Wake();
  }

  void Explain(const AttemptReport&) override {}  // node 0 explains the job

  bool Next(AttemptReport* report, JobPlan* plan, std::string* how,
            const std::function<void()>& put_away) override {
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

  void Close(const AttemptReport& last) override {
    if (!joined_) return;  // node 0 never knew it
    if (stacks_.joinable()) stacks_.join();
    if (!coordinator_lost_) agent_->PushFiles(RankDirs(), RankFilePusher::Check::kThorough);
    agent_->Finish(FinalStatus(last));
  }

 private:
  v1::NodeRequest Request(int attempt) const {
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

  // A join of an elastic job waits for the round's last call too.
  std::chrono::milliseconds JoinWait() const {
    const bool elastic = options_.min_nodes > 0 && options_.min_nodes < options_.nnodes;
    return JoinTimeout(options_) +
           (elastic ? options_.last_call_timeout : std::chrono::milliseconds(0));
  }

  static Membership MembershipOf(const v1::NodeResponse& resp) {
    return Membership{resp.attempt(), resp.restart_count(), resp.node_rank(), resp.nnodes(),
                      resp.attempt_folder()};
  }

  // The attempt in `plan` is about to run.
  void Started(const JobPlan& plan) {
    const Membership& m = plan.membership();
    std::cerr << "dlaunch: node " << m.node_rank << " of " << m.nnodes << " in attempt "
              << m.attempt << std::endl;
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

  std::map<int, std::string> RankDirs() {
    std::lock_guard<std::mutex> lock(mu_);
    return rank_dirs_;
  }

  // Node 0 diagnoses a hang. DUMP: this node's Python ranks get it through their agents' request
  // file, its native ranks down their heartbeat streams to this launcher. STACKS: the stacks of the
  // ranks it names that are this node's, then every file pushed, then the answer; on a thread of
  // its own, since gdb takes seconds and the stream must go on reading.
  void OnCommand(const v1::Command& cmd, Supervisor* supervisor) {
    if (cmd.kind() == v1::Command::DUMP) {
      if (relay_) relay_->Broadcast(cmd);
      const std::map<int, std::string> dirs = RankDirs();
      for (const auto& live : supervisor->Live()) {
        if (live.exited) continue;
        if (auto it = dirs.find(live.rank); it != dirs.end()) {
          python::RequestAgentDump(it->second, cmd.reason());
        }
      }
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

  v1::NodeStatus Status(Supervisor* supervisor) {
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

  // Under mu_: the status with the answer to node 0's last STACKS.
  v1::NodeStatus WithStacks(v1::NodeStatus s) const {
    s.set_stacks_answered(stacks_answered_);
    for (const v1::RankProcess& p : processes_) *s.add_processes() = p;
    return s;
  }

  v1::NodeStatus FinalStatus(const AttemptReport& report) {
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

  LaunchOptions options_;
  NodeSetup setup_;
  std::string host_;
  std::shared_ptr<core::CoordinatorClient> client_;
  std::unique_ptr<RankRelay> relay_;  // from the join on; outlives the agent's stream thread
  std::unique_ptr<NodeAgent> agent_;
  int member_id_ = 0;
  bool joined_ = false;
  std::atomic<int> interrupted_{0};  // the signal Interrupt was given
  std::atomic<int> attempt_{0};
  std::atomic<bool> coordinator_lost_{false};
  std::mutex mu_;
  int node_rank_ = 0;
  std::optional<v1::NodeStatus> done_;  // this node's verdict on the attempt, once it is over
  std::map<int, std::string> rank_dirs_;
  int stacks_answered_ = 0;  // node 0's last STACKS this node answered, and what it saw
  std::vector<v1::RankProcess> processes_;
  std::thread stacks_;
};

}  // namespace

void MarkInterrupted(AttemptReport* report, int signal, const std::string& where) {
  report->exit_code = 128 + signal;
  report->error = "interrupted by " + SignalName(signal) + " " + where;
  report->result.interrupted_by = signal;
}

std::unique_ptr<NodeRole> MakeNodeRole(const LaunchOptions& options, NodeSetup* setup,
                                       const std::string& host) {
  switch (setup->role) {
    case NodeRoleKind::kSingleNode:
      return std::make_unique<SingleNode>(options, *setup);
    case NodeRoleKind::kCoordinatorHost:
      return std::make_unique<CoordinatorHost>(options, *setup, host);
    case NodeRoleKind::kJoiningNode:
      return std::make_unique<JoiningNode>(options, *setup, host);
    case NodeRoleKind::kElected: {
      const auto [endpoint_host, port] = SplitEndpoint(setup->endpoint);
      // (A port already taken is the usual case for every launcher but the first.)
      if (IsLocalAddress(endpoint_host) && PortIsFree("0.0.0.0", port)) {
        try {
          auto zero = std::make_unique<CoordinatorHost>(options, *setup, host);
          zero->Listen();
          setup->role = NodeRoleKind::kCoordinatorHost;
          return zero;
        } catch (const UsageError&) {
          // Another launcher listens on the endpoint already: it is node 0, this one joins.
        }
      }
      setup->role = NodeRoleKind::kJoiningNode;
      return std::make_unique<JoiningNode>(options, *setup, host);
    }
  }
  throw Error(ErrorKind::kInternal, "unknown node role");
}

}  // namespace dlaunch::launcher
