// CoordinatorHandler's node side: the node rendezvous rounds, the node streams and their
// statuses (with the heartbeats a node relays for its ranks), and the files nodes push. The rank
// side (registration, store waits, heartbeats) is in coordinator.cc.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iostream>

#include "core/base/clock.h"
#include "core/base/files.h"
#include "core/base/format.h"
#include "core/error.h"
#include "launcher/rendezvous/coordinator.h"
#include "launcher/rendezvous/request_checks.h"

namespace dlaunch::launcher {

CoordinatorHandler::Round CoordinatorHandler::JoinRound(const std::string& host,
                                                        const std::string& doctor_json,
                                                        int restart_count,
                                                        const std::string& attempt_folder) {
  std::unique_lock<std::mutex> lock(mu_);
  restart_count_ = restart_count;
  attempt_folder_ = attempt_folder;
  Round round;
  try {
    if (WaitInRound(lock, RoundMember{0, host, doctor_json, 0}, rounds_.round())) {
      round.nnodes = static_cast<int>(rounds_.members().size());
    } else {
      round.error = finished_->second;  // the job ended meanwhile (node 0 was interrupted)
    }
  } catch (const Error& e) {
    round.error = e.what();
  }
  round.attempt = rounds_.round();
  return round;
}

v1::NodeResponse CoordinatorHandler::RegisterNode(const v1::NodeRequest& req,
                                                  const std::string& node_credential) {
  if (req.node_rank() == 0 || req.node_rank() >= config_.nnodes) {
    throw Error(ErrorKind::kInvalidArgument, "node rank " + std::to_string(req.node_rank()) +
                                                 " is not an agent of a job of " +
                                                 std::to_string(config_.nnodes) + " nodes");
  }
  if (req.nproc() != config_.nproc_per_node) {
    throw Error(ErrorKind::kInvalidArgument,
                "node " + std::to_string(req.node_rank()) + " asks for --nproc " +
                    std::to_string(req.nproc()) + " but node 0 runs " +
                    std::to_string(config_.nproc_per_node) + " per node");
  }
  std::unique_lock<std::mutex> lock(mu_);
  // Counted while it waits, so that the verdict reaches it before the coordinator goes.
  ++registering_;
  struct Done {
    CoordinatorHandler* h;
    ~Done() {
      --h->registering_;
      h->nodes_cv_.notify_all();
    }
  } done{this};
  int member_id = req.member_id();
  if (member_id <= 0) {
    member_id = rounds_.NewMemberId();
    node_credentials_[member_id] = NewNodeCredential();
  } else {
    // Only the node the id was given to comes back with it.
    auto it = node_credentials_.find(member_id);
    if (it == node_credentials_.end() || !SameSecret(node_credential, it->second)) {
      throw Error(ErrorKind::kUnauthenticated,
                  "member id " + std::to_string(member_id) + " without its node credential");
    }
  }
  v1::NodeResponse resp;
  resp.set_node_credential(node_credentials_[member_id]);
  resp.set_run_id(config_.run_id);
  resp.set_member_id(member_id);
  resp.set_master_addr(config_.master_addr);
  resp.set_master_port(config_.master_port);
  auto rank = WaitInRound(lock,
                          RoundMember{member_id, req.host(), req.doctor_json(),
                                      req.node_rank() > 0 ? req.node_rank() : -1},
                          req.attempt());
  if (!rank) {
    resp.set_finished(true);
    resp.set_exit_code(finished_->first);
    resp.set_reason(finished_->second);
    answered_.insert(member_id);
    nodes_cv_.notify_all();
    return resp;
  }
  resp.set_node_rank(*rank);
  resp.set_nnodes(static_cast<int>(rounds_.members().size()));
  resp.set_world_size(world_size_);
  resp.set_attempt(rounds_.round());
  resp.set_restart_count(restart_count_);
  resp.set_attempt_folder(attempt_folder_);
  return resp;
}

std::string CoordinatorHandler::OtherJob(const std::string& token,
                                         const v1::NodeRequest& req) const {
  if (CallerOf(token).role != CallerRole::kNode) return "";
  if (req.job_id().empty() || config_.job_id.empty() || req.job_id() == config_.job_id) return "";
  return "this is the coordinator of " + config_.job_id + ", not of this node's " + req.job_id() +
         " (another job's node 0 listens on this port; give each job a port of its own)";
}

std::optional<int> CoordinatorHandler::WaitInRound(std::unique_lock<std::mutex>& lock,
                                                   const RoundMember& member, int attempt) {
  const int64_t give_up = base::UnixMillis() + rounds_.config().join_timeout.count();
  bool told_waiting = false;
  for (;;) {
    // The job's verdict first: a shutdown right after Finish must not hide it from a waiter.
    if (finished_ || !round_failure_.empty()) waiting_.erase(member.member_id);
    if (finished_) return std::nullopt;
    if (stopping_) throw Error(ErrorKind::kPeerGone, "the coordinator is shutting down");
    if (!round_failure_.empty()) throw Error(ErrorKind::kTimeout, round_failure_);
    const int64_t now = base::UnixMillis();
    if (!rounds_.forming()) {
      if (auto rank = rounds_.RankOf(member.member_id); rank && rounds_.round() >= attempt) {
        return rank;
      }
      // This attempt runs without it: it is in the next round as soon as that opens.
      waiting_[member.member_id] = member;
      if (!rounds_.RankOf(member.member_id) && !told_waiting) {
        std::cerr << "dlaunch: a node on " << member.host << " waits to join the next attempt"
                  << std::endl;
        told_waiting = true;
      }
    } else {
      waiting_.erase(member.member_id);
      if (!rounds_.Joined(member.member_id)) {
        const std::string refused = rounds_.Join(member, now);
        if (!refused.empty()) throw Error(ErrorKind::kInvalidArgument, refused);
        nodes_cv_.notify_all();
        const RoundConfig& c = rounds_.config();
        if (rounds_.joined() == c.min_nodes && c.min_nodes < c.max_nodes &&
            c.last_call_timeout.count() > 0) {
          std::cerr << "dlaunch: " << c.min_nodes << " of " << c.min_nodes << " to " << c.max_nodes
                    << " nodes joined; last call for more, at most "
                    << c.last_call_timeout.count() / 1000.0 << " s" << std::endl;
        }
      }
      if (rounds_.ReadyToClose(now, ConnectedMembers())) {
        CloseRound();
        continue;
      }
      if (std::string failure = rounds_.Failure(now); !failure.empty()) {
        round_failure_ = failure;
        nodes_cv_.notify_all();
        continue;
      }
    }
    if (now >= give_up) {
      waiting_.erase(member.member_id);
      throw Error(ErrorKind::kTimeout,
                  "no node rendezvous round took this node within " +
                      std::to_string(rounds_.config().join_timeout.count() / 1000) + " s");
    }
    int64_t until = give_up;
    if (rounds_.forming()) until = std::min(until, rounds_.NextDeadline());
    nodes_cv_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(until - now, 1)));
  }
}

void CoordinatorHandler::CloseRound() {
  rounds_.Close();
  const auto& members = rounds_.members();
  world_size_ = config_.nproc_per_node * static_cast<int>(members.size());
  nodes_ = NodeRoster(static_cast<int>(members.size()), config_.node_heartbeat_timeout);
  const int64_t now = base::UnixMillis();
  for (size_t rank = 0; rank < members.size(); ++rank) {
    const RoundMember& m = members[rank];
    nodes_.Join(static_cast<int>(rank), m.host, m.doctor_json, now);
    if (connected_.count(m.member_id)) nodes_.OnStreamOpened(static_cast<int>(rank));
  }
  // The attempt's rank folders start empty on node 0 and are pushed anew.
  pushed_.Clear();
  told_dropped_.clear();
  // The ranks' rendezvous deadline counts from the attempt's start, not the round's wait.
  attempt_start_ = std::chrono::steady_clock::now();
  nodes_cv_.notify_all();
}

std::set<int> CoordinatorHandler::ConnectedMembers() const {
  std::set<int> connected;
  for (const auto& m : rounds_.members())
    if (m.member_id != 0 && connected_.count(m.member_id)) connected.insert(m.member_id);
  return connected;
}

void CoordinatorHandler::OpenRound() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = base::UnixMillis();
  rounds_.Open(now);
  // Those waiting for it are in before node 0 joins, so the round does not close without them.
  for (const auto& [id, member] : waiting_) rounds_.Join(member, now);
  waiting_.clear();
  nodes_cv_.notify_all();
}

void CoordinatorHandler::Finish(int exit_code, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  finished_ = {exit_code, reason};
  nodes_cv_.notify_all();
}

void CoordinatorHandler::WaitForNodesToLeave(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  nodes_cv_.wait_for(lock, timeout, [&] {
    if (registering_ > 0) return false;  // a node in RegisterNode, about to take the verdict
    for (const auto& m : rounds_.members()) {
      if (m.member_id != 0 && connected_.count(m.member_id) && !answered_.count(m.member_id)) {
        return false;
      }
    }
    return true;
  });
}

std::vector<int> CoordinatorHandler::LostNodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> lost;
  for (const auto& n : nodes_.Nodes())
    if (n.lost) lost.push_back(n.node_rank);
  return lost;
}

void CoordinatorHandler::OnNodeStatus(const v1::NodeStatus& status) {
  std::unique_lock<std::mutex> lock(mu_);
  if (status.member_id() <= 0) return;  // node 0 is this launcher, and speaks for itself
  // Only what a node says about the attempt that runs counts; between attempts it only lives.
  auto rank = rounds_.RankOf(status.member_id());
  if (!rank || rounds_.forming()) return;
  if (status.attempt() != rounds_.round()) {
    nodes_.Heard(*rank, base::UnixMillis());  // alive, on its way into the attempt
    return;
  }
  v1::NodeStatus mine = status;
  mine.set_node_rank(*rank);
  // A node speaks for the heartbeats of its own ranks only.
  const JobShape shape = ShapeLocked();
  const int64_t now = base::UnixMillis();
  for (const v1::RankStatus& beat : mine.heartbeats())
    if (RankOfNode(beat.rank(), shape, *rank)) HeardLocked(beat, now);
  if (mine.heartbeats_size() > 0) status_cv_.notify_all();
  mine.clear_heartbeats();
  auto fault = nodes_.OnStatus(mine, now);
  nodes_cv_.notify_all();
  Notify(lock, fault ? std::vector<NodeFault>{*fault} : std::vector<NodeFault>{});
}

void CoordinatorHandler::OnNodeStreamOpened(int member_id,
                                            std::function<bool(const v1::Command&)> send) {
  if (member_id <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  node_senders_[member_id] = std::move(send);
  connected_.insert(member_id);
  if (auto rank = rounds_.RankOf(member_id)) nodes_.OnStreamOpened(*rank);
}

void CoordinatorHandler::OnNodeStreamClosed(int member_id) {
  if (member_id <= 0) return;
  std::unique_lock<std::mutex> lock(mu_);
  node_senders_.erase(member_id);
  connected_.erase(member_id);
  std::optional<NodeFault> fault;
  if (auto rank = rounds_.RankOf(member_id); rank && !rounds_.forming() && !finished_) {
    fault = nodes_.OnStreamClosed(*rank);
  }
  nodes_cv_.notify_all();  // a forming round may have nobody left to wait for
  Notify(lock, fault ? std::vector<NodeFault>{*fault} : std::vector<NodeFault>{});
}

void CoordinatorHandler::CheckNodes() {
  std::unique_lock<std::mutex> lock(mu_);
  Notify(lock, nodes_.CheckHeartbeats(base::UnixMillis()));
}

void CoordinatorHandler::Notify(std::unique_lock<std::mutex>& lock,
                                const std::vector<NodeFault>& faults) {
  CoordinatorListener* listener = listener_;
  lock.unlock();
  if (!listener) return;
  for (const auto& f : faults) listener->OnNodeFault(f);
}

int CoordinatorHandler::BroadcastToNodes(const v1::Command& command) {
  return SendToAll(&CoordinatorHandler::node_senders_, command);
}

int CoordinatorHandler::SendToAll(Senders CoordinatorHandler::*which, const v1::Command& command) {
  Senders senders;
  {
    std::lock_guard<std::mutex> lock(mu_);
    senders = this->*which;
  }
  int sent = 0;
  for (auto& [id, send] : senders) sent += send(command) ? 1 : 0;
  return sent;
}

std::optional<NodeFault> CoordinatorHandler::WaitForNodesDone() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (auto fault = nodes_.FirstFault(base::UnixMillis())) return fault;
    if (nodes_.AllDone()) return std::nullopt;
    // Woken by every status and stream end; the timeout only paces the heartbeat check.
    nodes_cv_.wait_for(lock, std::chrono::milliseconds(250));
  }
}

std::vector<NodeView> CoordinatorHandler::Nodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return nodes_.Nodes();
}

bool CoordinatorHandler::WaitForNodes(const std::function<bool(const std::vector<NodeView>&)>& done,
                                      std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return nodes_cv_.wait_for(lock, timeout, [&] { return done(nodes_.Nodes()); });
}

JobShape CoordinatorHandler::ShapeLocked() const {
  const int per_node = config_.nproc_per_node;
  return JobShape{world_size_, per_node, per_node > 0 ? world_size_ / per_node : 1};
}

JobShape CoordinatorHandler::Shape() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ShapeLocked();
}

bool CoordinatorHandler::WriteFileChunk(int member_id, const v1::FileChunk& chunk) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto node = member_id > 0 ? rounds_.RankOf(member_id) : std::nullopt;
    // Throws for -1: past it, node_rank is an agent node's.
    const int node_rank = node.value_or(-1);
    CheckFileChunk(chunk, ShapeLocked(), node_rank);
    if (const std::string cut = pushed_.Admit(node_rank, chunk); !cut.empty()) {
      // Dropped, not refused: the agent goes on with its other files, and nothing it sends
      // later makes the folder bigger.
      if (told_dropped_.insert(node_rank).second) {
        std::cerr << "dlaunch: node " << node_rank << ": " << cut << "; not keeping "
                  << "rank" << chunk.rank() << "/" << chunk.name() << " and whatever else passes it"
                  << std::endl;
      }
      return false;
    }
  }
  std::lock_guard<std::mutex> lock(files_mu_);
  WritePushedChunk(chunk, config_.run_dir);
  return true;
}

}  // namespace dlaunch::launcher
