#include "launcher/rendezvous/coordinator.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iostream>

#include "core/coordinator_client.h"
#include "core/error.h"
#include "core/telemetry.h"
#include "launcher/rendezvous/request_checks.h"

namespace dlaunch::launcher {

namespace {

std::string JoinRanks(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

}  // namespace

CoordinatorHandler::CoordinatorHandler(CoordinatorConfig config)
    : config_(std::move(config)),
      attempt_start_(std::chrono::steady_clock::now()),
      store_(core::MakeMemoryStore()),
      nodes_(config_.nnodes, config_.node_heartbeat_timeout) {}

bool CoordinatorHandler::Authorize(const std::string& token, const std::string& peer,
                                   const char* method) {
  if (!config_.token.empty() && token == config_.token) return true;
  std::cerr << "dlaunch: refused " << method << " from " << peer
            << (token.empty() ? ": no job token" : ": wrong job token") << std::endl;
  return false;
}

v1::RegisterResponse CoordinatorHandler::Register(const v1::RegisterRequest& req) {
  std::unique_lock<std::mutex> lock(mu_);
  if (req.rank() < 0 || req.rank() >= config_.world_size) {
    throw Error(ErrorKind::kInvalidArgument, "rank " + std::to_string(req.rank()) +
                                                 " is outside the world of " +
                                                 std::to_string(config_.world_size));
  }
  registered_[req.rank()] = req;
  ranks_[req.rank()].rank = req.rank();
  ranks_[req.rank()].registered = true;
  registered_cv_.notify_all();
  const auto deadline = attempt_start_ + config_.rdzv_timeout;
  const bool complete = registered_cv_.wait_until(
      lock, deadline, [&] { return static_cast<int>(registered_.size()) >= config_.world_size; });
  if (!complete) {
    std::vector<int> absent;
    for (int r = 0; r < config_.world_size; ++r)
      if (!registered_.count(r)) absent.push_back(r);
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(config_.rdzv_timeout);
    std::string message = "rendezvous timed out after " + std::to_string(secs.count()) +
                          " s: rank" + (absent.size() > 1 ? "s " : " ") + JoinRanks(absent) +
                          " never registered";
    CoordinatorListener* listener = rdzv_failure_reported_ ? nullptr : listener_;
    rdzv_failure_reported_ = true;
    lock.unlock();
    if (listener) listener->OnRendezvousTimeout(message);
    throw Error(ErrorKind::kTimeout, message);
  }
  v1::RegisterResponse resp;
  resp.set_rank(req.rank());
  resp.set_world_size(config_.world_size);
  resp.set_local_world_size(config_.nproc_per_node);
  resp.set_local_rank(req.rank() % config_.nproc_per_node);
  resp.set_run_id(config_.run_id);
  resp.set_run_dir(config_.run_dir);
  return resp;
}

void CoordinatorHandler::AddLocalNode(const std::string& host, const std::string& doctor_json) {
  std::lock_guard<std::mutex> lock(mu_);
  nodes_.Join(0, host, doctor_json, core::UnixMillis());
  nodes_cv_.notify_all();
}

std::vector<int> CoordinatorHandler::WaitForNodes() {
  std::unique_lock<std::mutex> lock(mu_);
  nodes_cv_.wait_until(lock, attempt_start_ + config_.rdzv_timeout,
                       [&] { return nodes_.AllJoined(); });
  return nodes_.Absent();
}

v1::NodeResponse CoordinatorHandler::RegisterNode(const v1::NodeRequest& req) {
  if (req.node_rank() <= 0 || req.node_rank() >= config_.nnodes) {
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    nodes_.Join(req.node_rank(), req.host(), req.doctor_json(), core::UnixMillis());
    nodes_cv_.notify_all();
  }
  std::vector<int> absent = WaitForNodes();
  if (!absent.empty()) {
    throw Error(ErrorKind::kTimeout, "node rendezvous timed out: node" +
                                         std::string(absent.size() > 1 ? "s " : " ") +
                                         JoinRanks(absent) + " never joined");
  }
  v1::NodeResponse resp;
  resp.set_run_id(config_.run_id);
  resp.set_world_size(config_.world_size);
  resp.set_nnodes(config_.nnodes);
  resp.set_master_addr(config_.master_addr);
  resp.set_master_port(config_.master_port);
  return resp;
}

void CoordinatorHandler::OnNodeStatus(const v1::NodeStatus& status) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!AcceptsNodeNotice(status.node_rank(), config_, nodes_)) return;
  auto fault = nodes_.OnStatus(status, core::UnixMillis());
  nodes_cv_.notify_all();
  Notify(lock, fault ? std::vector<NodeFault>{*fault} : std::vector<NodeFault>{});
}

void CoordinatorHandler::OnNodeStreamOpened(int node,
                                            std::function<bool(const v1::Command&)> send) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!AcceptsNodeNotice(node, config_, nodes_)) return;
  node_senders_[node] = std::move(send);
  nodes_.OnStreamOpened(node);
}

void CoordinatorHandler::OnNodeStreamClosed(int node) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!AcceptsNodeNotice(node, config_, nodes_)) return;
  node_senders_.erase(node);
  auto fault = nodes_.OnStreamClosed(node);
  nodes_cv_.notify_all();
  Notify(lock, fault ? std::vector<NodeFault>{*fault} : std::vector<NodeFault>{});
}

void CoordinatorHandler::CheckNodes() {
  std::unique_lock<std::mutex> lock(mu_);
  Notify(lock, nodes_.CheckHeartbeats(core::UnixMillis()));
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
    if (auto fault = nodes_.FirstFault(core::UnixMillis())) return fault;
    if (nodes_.AllDone()) return std::nullopt;
    // Woken by every status and stream end; the timeout only paces the heartbeat check.
    nodes_cv_.wait_for(lock, std::chrono::milliseconds(250));
  }
}

std::vector<NodeView> CoordinatorHandler::Nodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return nodes_.Nodes();
}

void CoordinatorHandler::WriteFileChunk(const v1::FileChunk& chunk) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    CheckFileChunk(chunk, config_, nodes_);
  }
  std::lock_guard<std::mutex> lock(files_mu_);
  WritePushedChunk(chunk, config_.run_dir);
}

void CoordinatorHandler::OnHeartbeat(const v1::RankStatus& status) {
  if (!RankInWorld(status.rank(), config_)) return;
  std::lock_guard<std::mutex> lock(mu_);
  RankView& view = ranks_[status.rank()];
  const int64_t now = core::UnixMillis();
  if (!view.status || view.status->step() != status.step() ||
      view.status->last_completed_seq() != status.last_completed_seq() ||
      view.status->phase() != status.phase()) {
    view.last_progress_unix_ms = now;
  }
  view.rank = status.rank();
  view.status = status;
  view.last_heartbeat_unix_ms = now;
  status_cv_.notify_all();
}

bool CoordinatorHandler::WaitForStatus(int rank,
                                       const std::function<bool(const v1::RankStatus&)>& pred,
                                       std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return status_cv_.wait_for(lock, timeout, [&] {
    auto it = ranks_.find(rank);
    return it != ranks_.end() && it->second.status && pred(*it->second.status);
  });
}

void CoordinatorHandler::OnStreamOpened(int rank, std::function<bool(const v1::Command&)> send) {
  if (!RankInWorld(rank, config_)) return;
  std::lock_guard<std::mutex> lock(mu_);
  senders_[rank] = std::move(send);
  ranks_[rank].rank = rank;
  ranks_[rank].streaming = true;
}

void CoordinatorHandler::OnStreamClosed(int rank) {
  if (!RankInWorld(rank, config_)) return;
  std::lock_guard<std::mutex> lock(mu_);
  senders_.erase(rank);
  ranks_[rank].streaming = false;
}

void CoordinatorHandler::OnEvent(const v1::Event& event) {
  CheckRankInWorld(event.rank(), config_, "event");
  CoordinatorListener* listener;
  {
    std::lock_guard<std::mutex> lock(mu_);
    listener = listener_;
  }
  if (listener) listener->OnRankEvent(event);
}

int CoordinatorHandler::Broadcast(const v1::Command& command) {
  return SendToAll(&CoordinatorHandler::senders_, command);
}

void CoordinatorHandler::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  attempt_start_ = std::chrono::steady_clock::now();
  registered_.clear();
  ranks_.clear();
  senders_.clear();
  store_ = core::MakeMemoryStore();
  rdzv_failure_reported_ = false;
}

std::vector<RankView> CoordinatorHandler::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RankView> out;
  for (const auto& [rank, view] : ranks_) out.push_back(view);
  return out;
}

void CoordinatorHandler::SetListener(CoordinatorListener* listener) {
  std::lock_guard<std::mutex> lock(mu_);
  listener_ = listener;
}

}  // namespace dlaunch::launcher
