#include "launcher/rendezvous/node_roster.h"

namespace dlaunch::launcher {
namespace {

std::string Who(const NodeView& n) {
  return "node " + std::to_string(n.node_rank) + " (" + n.host + ")";
}

NodeFault Fault(const NodeView& n, NodeFaultKind kind, std::string what) {
  return NodeFault{n.node_rank, n.host, kind, Who(n) + " " + what};
}

bool Done(const NodeView& n) { return n.status && n.status->done(); }

}  // namespace

NodeRoster::NodeRoster(int nnodes, std::chrono::milliseconds heartbeat_timeout)
    : nnodes_(nnodes), heartbeat_timeout_(heartbeat_timeout) {}

void NodeRoster::Join(int node_rank, const std::string& host, const std::string& doctor_json,
                      int64_t now) {
  NodeView& n = nodes_[node_rank];
  n.node_rank = node_rank;
  n.host = host;
  n.doctor_json = doctor_json;
  n.lost = false;
  n.last_heartbeat_unix_ms = now;
  faults_.erase(node_rank);
}

std::vector<int> NodeRoster::Absent() const {
  std::vector<int> absent;
  for (int n = 0; n < nnodes_; ++n)
    if (!nodes_.count(n)) absent.push_back(n);
  return absent;
}

std::optional<NodeFault> NodeRoster::OnStatus(const v1::NodeStatus& status, int64_t now) {
  // Node 0 is the coordinator's own: no stream speaks for it, and no status makes it a fault.
  if (status.node_rank() <= 0 || status.node_rank() >= nnodes_) return std::nullopt;
  NodeView& n = nodes_[status.node_rank()];
  n.node_rank = status.node_rank();
  const bool was_done = Done(n);
  n.status = status;
  n.last_heartbeat_unix_ms = now;
  if (!status.done() || was_done || status.exit_code() == 0) return std::nullopt;
  auto fault = FaultOf(n, now);
  if (!fault) return std::nullopt;
  return Decide(n, *fault);
}

void NodeRoster::Heard(int node_rank, int64_t now) {
  if (auto it = nodes_.find(node_rank); it != nodes_.end()) it->second.last_heartbeat_unix_ms = now;
}

void NodeRoster::OnStreamOpened(int node_rank) {
  if (node_rank <= 0 || node_rank >= nnodes_) return;
  NodeView& n = nodes_[node_rank];
  n.node_rank = node_rank;
  n.streaming = true;
}

std::optional<NodeFault> NodeRoster::OnStreamClosed(int node_rank) {
  if (node_rank <= 0 || node_rank >= nnodes_) return std::nullopt;
  NodeView& n = nodes_[node_rank];
  n.node_rank = node_rank;
  n.streaming = false;
  if (Done(n)) return std::nullopt;
  return Decide(n, Fault(n, NodeFaultKind::kStreamEnded, "lost: its agent's stream ended"));
}

std::vector<NodeFault> NodeRoster::CheckHeartbeats(int64_t now) {
  std::vector<NodeFault> fresh;
  for (auto& [rank, n] : nodes_) {
    if (rank == 0 || Done(n)) continue;
    if (auto f = FaultOf(n, now); f && f->kind == NodeFaultKind::kSilent) {
      if (auto d = Decide(n, *f)) fresh.push_back(*d);
    }
  }
  return fresh;
}

std::optional<NodeFault> NodeRoster::FaultOf(const NodeView& n, int64_t now) const {
  if (n.node_rank == 0) return std::nullopt;
  if (auto it = faults_.find(n.node_rank); it != faults_.end()) return it->second;
  if (Done(n)) {
    if (n.status->exit_code() == 0) return std::nullopt;
    return Fault(n, NodeFaultKind::kFailed,
                 "failed: " + (n.status->message().empty()
                                   ? "exit code " + std::to_string(n.status->exit_code())
                                   : n.status->message()));
  }
  const int64_t silent_ms = now - n.last_heartbeat_unix_ms;
  if (silent_ms > heartbeat_timeout_.count()) {
    return Fault(n, NodeFaultKind::kSilent,
                 "lost: no heartbeat for " + std::to_string(silent_ms / 1000) + " s");
  }
  return std::nullopt;
}

std::optional<NodeFault> NodeRoster::Decide(NodeView& n, NodeFault fault) {
  if (faults_.count(n.node_rank)) return std::nullopt;
  if (fault.kind != NodeFaultKind::kFailed) n.lost = true;
  faults_[n.node_rank] = fault;
  return fault;
}

std::optional<NodeFault> NodeRoster::FirstFault(int64_t now) const {
  for (const auto& [rank, n] : nodes_)
    if (auto f = FaultOf(n, now)) return f;
  return std::nullopt;
}

bool NodeRoster::AllDone() const {
  for (const auto& [rank, n] : nodes_)
    if (rank != 0 && !Done(n)) return false;
  return true;
}

std::vector<NodeView> NodeRoster::Nodes() const {
  std::vector<NodeView> out;
  for (const auto& [rank, view] : nodes_) out.push_back(view);
  return out;
}

}  // namespace dlaunch::launcher
