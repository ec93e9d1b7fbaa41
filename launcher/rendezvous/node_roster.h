// The nodes of a multi-node job as node 0 sees them: who joined, what each last said, and the one
// place that decides a node failed or is lost. Plain logic with the time passed in; the
// coordinator holds it under its lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch.pb.h"

namespace dlaunch::launcher {

// What the coordinator knows of one node (node 0 is the coordinator's own).
struct NodeView {
  int node_rank = -1;
  std::string host;
  std::string doctor_json;
  bool streaming = false;
  bool lost = false;  // it went away (stream ended, or silent) before it said it was done
  int64_t last_heartbeat_unix_ms = 0;
  std::optional<v1::NodeStatus> status;
};

enum class NodeFaultKind {
  kFailed,       // it said it is done, with a failure
  kStreamEnded,  // its agent's stream ended before it was done
  kSilent,       // no heartbeat for longer than the heartbeat timeout
};

// Why a node ended the job, with the one-line message the console and summary.json show.
struct NodeFault {
  int node_rank = -1;
  std::string host;
  NodeFaultKind kind = NodeFaultKind::kFailed;
  std::string message;  // "node 1 (host) lost: its agent's stream ended"
};

class NodeRoster {
 public:
  NodeRoster(int nnodes, std::chrono::milliseconds heartbeat_timeout);

  void Join(int node_rank, const std::string& host, const std::string& doctor_json, int64_t now);
  // Node ranks in [0, nnodes) that have not joined.
  std::vector<int> Absent() const;
  bool AllJoined() const { return Absent().empty(); }

  // Each returns the node's fault when this message makes it one, once per node. Only agent
  // nodes (1..nnodes-1) have statuses and streams: anything about another rank is ignored.
  std::optional<NodeFault> OnStatus(const v1::NodeStatus& status, int64_t now);
  // A sign of life that says nothing about the attempt.
  void Heard(int node_rank, int64_t now);
  void OnStreamOpened(int node_rank);
  std::optional<NodeFault> OnStreamClosed(int node_rank);
  // Nodes silent for longer than the heartbeat timeout, newly so.
  std::vector<NodeFault> CheckHeartbeats(int64_t now);

  // The first agent node (by rank) that failed or is lost by now; nullopt when none.
  std::optional<NodeFault> FirstFault(int64_t now) const;
  // Every agent node said it is done.
  bool AllDone() const;

  std::vector<NodeView> Nodes() const;

 private:
  std::optional<NodeFault> FaultOf(const NodeView& node, int64_t now) const;
  // Records `fault` as the node's (the first one stays); returns it when it is new.
  std::optional<NodeFault> Decide(NodeView& node, NodeFault fault);

  int nnodes_;
  std::chrono::milliseconds heartbeat_timeout_;
  std::map<int, NodeView> nodes_;
  std::map<int, NodeFault> faults_;  // decided: a node stays failed or lost until it rejoins
};

}  // namespace dlaunch::launcher
