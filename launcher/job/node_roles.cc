#include "launcher/job/node_roles.h"

#include <iostream>

#include "core/error.h"
#include "core/exit_codes.h"
#include "launcher/builtins.h"
#include "launcher/diagnose/diagnose.h"
#include "launcher/job/hosted_coordinator.h"
#include "launcher/job/node_env.h"
#include "launcher/rendezvous/node_agent.h"
#include "launcher/rendezvous/ports.h"

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

// Node 0, alone or with other nodes: it hosts the coordinator and diagnoses the job.
class NodeZero : public NodeRole {
 public:
  NodeZero(const LaunchOptions& o, NodeSetup setup, const std::string& bind_host)
      : options_(o),
        setup_(std::move(setup)),
        master_port_(ChooseMasterPort(o, bind_host)),
        run_id_(o.run_id.empty() ? NewRunId() : o.run_id) {}

  void OnTick() override { coordinator_->Tick(); }
  std::string RankError(int rank) override { return coordinator_->RankError(rank); }
  size_t RootCause(const AttemptResult& result) override { return coordinator_->RootCause(result); }

  void Explain(const AttemptReport& report) override {
    if (report.exit_code == 0 || coordinator_->hang_diagnosed() || report.result.interrupted_by ||
        report.verdict) {
      return;
    }
    // The failure's picture across ranks: each one's last collective, phase and memory.
    std::cerr << FormatDiagnosis(AnalyzeRunDir(run_dir_, world_size())) << std::flush;
  }

  void Reset() override { coordinator_->Reset(); }
  void Close(const AttemptReport&) override { coordinator_->Shutdown(); }

 protected:
  int world_size() const { return options_.nproc * options_.nnodes; }

  // Starts the coordinator for the job this node names.
  void Serve(const std::string& listen) {
    run_dir_ = options_.log_dir + "/" + run_id_;
    CoordinatorConfig cc;
    cc.world_size = world_size();
    cc.nproc_per_node = options_.nproc;
    cc.nnodes = options_.nnodes;
    cc.master_addr = master_addr_;
    cc.master_port = master_port_;
    cc.token = setup_.token;
    cc.run_id = run_id_;
    cc.run_dir = run_dir_;
    cc.rdzv_timeout = options_.rdzv_timeout;
    cc.node_heartbeat_timeout = options_.heartbeat_timeout;
    coordinator_ = std::make_unique<HostedCoordinator>(cc, listen, setup_.tls);
  }

  LaunchOptions options_;
  NodeSetup setup_;
  int master_port_;
  std::string master_addr_;
  std::string run_id_;
  std::string run_dir_;
  std::unique_ptr<HostedCoordinator> coordinator_;
};

// The whole job on this machine; the coordinator listens on loopback only.
class SingleNode : public NodeZero {
 public:
  SingleNode(const LaunchOptions& o, NodeSetup setup)
      : NodeZero(o, std::move(setup), o.master_addr) {
    master_addr_ = o.master_addr;
  }

  JobIdentity Prepare() override {
    Serve("127.0.0.1:0");
    return {run_id_, master_addr_, master_port_,
            "127.0.0.1:" + std::to_string(coordinator_->port())};
  }

  bool Open(const JobPlan& plan, Supervisor* supervisor) override {
    coordinator_->Watch(plan, supervisor);
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

  JobIdentity Prepare() override {
    // Beyond loopback: the other nodes must reach it.
    Serve("0.0.0.0:" + std::to_string(SplitEndpoint(setup_.endpoint).second));
    return {run_id_, master_addr_, master_port_, setup_.endpoint};
  }

  bool Open(const JobPlan& plan, Supervisor* supervisor) override {
    coordinator_->Watch(plan, supervisor);
    CoordinatorHandler& h = coordinator_->handler();
    h.AddLocalNode(host_, DoctorFingerprint());
    std::cerr << "dlaunch: node 0 of " << options_.nnodes << ", coordinator on " << setup_.endpoint
              << ", waiting for the other nodes" << std::endl;
    auto absent = h.WaitForNodes();
    if (!absent.empty()) {
      std::string list;
      for (int n : absent) list += (list.empty() ? "" : ",") + std::to_string(n);
      std::cerr << "dlaunch: node rendezvous timed out: node" << (absent.size() > 1 ? "s " : " ")
                << list << " never joined" << std::endl;
      return false;
    }
    std::vector<std::string> fingerprints;
    for (const auto& n : h.Nodes()) fingerprints.push_back(n.doctor_json);
    for (const auto& w : CompareDoctorFingerprints(fingerprints)) {
      std::cerr << "dlaunch: warning: " << w << std::endl;
    }
    return true;
  }

  void OnTick() override {
    NodeZero::OnTick();
    coordinator_->handler().CheckNodes();  // a silent node stops the attempt through OnNodeFault
  }

  void Conclude(AttemptReport* report, SummaryInfo* summary) override {
    CoordinatorHandler& h = coordinator_->handler();
    if (report->exit_code != 0) {
      v1::Command abort;
      abort.set_kind(v1::Command::ABORT);
      abort.set_reason(report->error);
      h.BroadcastToNodes(abort);
    }
    // Node 0's ranks are done; the job is done when every node says so.
    auto fault = h.WaitForNodesDone();
    if (fault && report->exit_code == 0) {
      report->exit_code = kExitRankFailed;
      report->error = fault->message;
      std::cerr << "dlaunch: " << fault->message << std::endl;
    }
    summary->nodes = h.Nodes();
  }

 private:
  std::string host_;
};

// Node 1..N-1: joins node 0's coordinator, reports its ranks over one stream, obeys ABORT, and
// copies its ranks' files into node 0's run directory.
class JoiningNode : public NodeRole {
 public:
  JoiningNode(const LaunchOptions& o, NodeSetup setup, std::string host)
      : options_(o), setup_(std::move(setup)), host_(std::move(host)) {}

  JobIdentity Prepare() override {
    auto client =
        std::make_shared<core::CoordinatorClient>(setup_.endpoint, setup_.token, setup_.tls);
    agent_ = std::make_unique<NodeAgent>(client, options_.node_rank);
    v1::NodeRequest req;
    req.set_node_rank(options_.node_rank);
    req.set_host(host_);
    req.set_nproc(options_.nproc);
    req.set_doctor_json(DoctorFingerprint());
    std::cerr << "dlaunch: node " << options_.node_rank << " joining " << setup_.endpoint
              << std::endl;
    v1::NodeResponse resp;
    try {
      resp = agent_->Join(req, options_.rdzv_timeout);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kInvalidArgument) throw UsageError(e.what());
      throw;
    }
    return {resp.run_id(), resp.master_addr(), resp.master_port(), setup_.endpoint};
  }

  bool Open(const JobPlan& plan, Supervisor* supervisor) override {
    for (const auto& slot : plan.ranks()) rank_dirs_[slot.rank] = slot.dir;
    agent_->Start(
        [this, supervisor] {
          v1::NodeStatus s;
          s.set_node_rank(options_.node_rank);
          for (const auto& live : supervisor->Live()) {
            auto* r = s.add_ranks();
            r->set_rank(live.rank);
            r->set_pid(live.pid);
            r->set_exited(live.exited);
          }
          return s;
        },
        options_.heartbeat_interval,
        [supervisor](const std::string& reason) {
          supervisor->RequestStop(kExitRankFailed, reason);
        });
    return true;
  }

  void OnTick() override { agent_->PushFiles(rank_dirs_); }
  // This node's ranks report to node 0's coordinator, which holds their errors.
  std::string RankError(int) override { return ""; }
  void Conclude(AttemptReport*, SummaryInfo*) override {}
  void Explain(const AttemptReport&) override {}  // node 0 explains the job
  void Reset() override {}

  void Close(const AttemptReport& last) override {
    agent_->PushFiles(rank_dirs_);
    v1::NodeStatus status;
    status.set_node_rank(options_.node_rank);
    status.set_done(true);
    status.set_exit_code(last.exit_code);
    status.set_message(last.error);
    for (const auto& r : last.result.ranks) {
      auto* x = status.add_ranks();
      x->set_rank(r.rank);
      x->set_pid(r.pid);
      x->set_exited(r.exited);
      x->set_exit_code(r.exit_code);
      x->set_signal(r.signal);
    }
    agent_->Finish(status);
  }

 private:
  LaunchOptions options_;
  NodeSetup setup_;
  std::string host_;
  std::unique_ptr<NodeAgent> agent_;
  std::map<int, std::string> rank_dirs_;
};

}  // namespace

std::unique_ptr<NodeRole> MakeNodeRole(const LaunchOptions& options, const NodeSetup& setup,
                                       const std::string& host) {
  switch (setup.role) {
    case NodeRoleKind::kSingleNode:
      return std::make_unique<SingleNode>(options, setup);
    case NodeRoleKind::kCoordinatorHost:
      return std::make_unique<CoordinatorHost>(options, setup, host);
    case NodeRoleKind::kJoiningNode:
      return std::make_unique<JoiningNode>(options, setup, host);
  }
  throw Error(ErrorKind::kInternal, "unknown node role");
}

}  // namespace dlaunch::launcher
