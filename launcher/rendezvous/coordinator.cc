// CoordinatorHandler's rank side: who may call, registration, heartbeats and events. The store is
// in coordinator_store.cc, the node side in coordinator_nodes.cc.
#include "launcher/rendezvous/coordinator.h"

#include <iostream>

#include "core/base/clock.h"
#include "core/base/files.h"
#include "core/base/format.h"
#include "core/coordinator_client.h"
#include "core/error.h"
#include "launcher/rendezvous/request_checks.h"

namespace dlaunch::launcher {

namespace {

RoundConfig RoundsOf(const CoordinatorConfig& c) {
  RoundConfig r;
  r.max_nodes = c.nnodes;
  r.min_nodes = c.min_nodes > 0 ? c.min_nodes : c.nnodes;
  r.join_timeout = c.join_timeout.count() > 0 ? c.join_timeout : c.rdzv_timeout;
  r.last_call_timeout = c.last_call_timeout;
  return r;
}

}  // namespace

CoordinatorHandler::CoordinatorHandler(CoordinatorConfig config)
    : config_(std::move(config)),
      attempt_start_(std::chrono::steady_clock::now()),
      store_(core::MakeMemoryStore()),
      store_quota_(config_.store_limits),
      nodes_(config_.nnodes, config_.node_heartbeat_timeout),
      rounds_(RoundsOf(config_), base::UnixMillis()),
      world_size_(config_.world_size),
      refusals_(&std::cerr, std::chrono::seconds(10), 5) {}

CoordinatorHandler::~CoordinatorHandler() { refusals_.Flush(); }

void CoordinatorHandler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  registered_cv_.notify_all();
  nodes_cv_.notify_all();
  waiters_.EndAll();
}

Caller CoordinatorHandler::CallerOf(const std::string& token) const {
  if (config_.token.empty() || token.empty()) return {};
  if (SameSecret(token, config_.token)) return {CallerRole::kNode};
  if (const std::optional<int> rank = RankOfToken(config_.token, token)) {
    return {CallerRole::kRank, *rank};
  }
  return {};
}

bool CoordinatorHandler::AuthorizeRank(const std::string& token, const std::string& peer,
                                       const char* method, int rank) {
  const Caller caller = CallerOf(token);
  if (caller.role == CallerRole::kNode || (caller.role == CallerRole::kRank && caller.rank == rank))
    return true;
  if (caller.role != CallerRole::kRank) return Authorize(token, peer, method);
  Refuse(peer, method,
         "rank " + std::to_string(caller.rank) + "'s token does not speak for rank " +
             std::to_string(rank));
  return false;
}

bool CoordinatorHandler::Authorize(const std::string& token, const std::string& peer,
                                   const char* method, CallerRole needed) {
  const CallerRole role = CallerOf(token).role;
  if (role == CallerRole::kNode || role == needed) return true;
  Refuse(peer, method,
         token.empty()               ? "no job token"
         : role == CallerRole::kRank ? "a rank's token does not admit node calls"
                                     : "wrong job token");
  return false;
}

void CoordinatorHandler::SetStatusSource(std::string status_token,
                                         std::function<std::string()> source) {
  std::lock_guard<std::mutex> lock(mu_);
  status_token_ = std::move(status_token);
  status_source_ = std::move(source);
}

bool CoordinatorHandler::AuthorizeStatus(const std::string& token, const std::string& peer) {
  if (CallerOf(token).role == CallerRole::kNode) return true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!token.empty() && !status_token_.empty() && SameSecret(token, status_token_)) return true;
  }
  Refuse(peer, "GetStatus", token.empty() ? "no token" : "wrong job or status token");
  return false;
}

std::string CoordinatorHandler::StatusJson() const {
  std::function<std::string()> source;
  {
    std::lock_guard<std::mutex> lock(mu_);
    source = status_source_;
  }
  return source ? source() : "";
}

std::optional<int> CoordinatorHandler::AuthorizeNode(const std::string& token,
                                                     const std::string& node_credential,
                                                     const std::string& peer, const char* method) {
  if (!Authorize(token, peer, method, CallerRole::kNode)) return std::nullopt;
  if (!node_credential.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [member, credential] : node_credentials_)
      if (SameSecret(node_credential, credential)) return member;
  }
  Refuse(peer, method, node_credential.empty() ? "no node credential" : "wrong node credential");
  return std::nullopt;
}

void CoordinatorHandler::Refuse(const std::string& peer, const char* method,
                                const std::string& why) {
  refusals_.Refused("refused " + std::string(method) + " from " + peer + ": " + why,
                    base::UnixMillis());
}

void CoordinatorHandler::RecordLocked(const v1::RegisterRequest& req) {
  if (req.rank() < 0 || req.rank() >= world_size_) {
    throw Error(ErrorKind::kInvalidArgument, "rank " + std::to_string(req.rank()) +
                                                 " is outside the world of " +
                                                 std::to_string(world_size_));
  }
  registered_[req.rank()] = req;
  ranks_[req.rank()].rank = req.rank();
  ranks_[req.rank()].registered = true;
}

bool CoordinatorHandler::RendezvousOverLocked() const {
  return stopping_ || static_cast<int>(registered_.size()) >= world_size_;
}

v1::RegisterResponse CoordinatorHandler::Outcome(std::unique_lock<std::mutex>& lock, int rank) {
  if (stopping_) throw Error(ErrorKind::kPeerGone, "the coordinator is shutting down");
  if (static_cast<int>(registered_.size()) < world_size_) {
    std::vector<int> absent;
    for (int r = 0; r < world_size_; ++r)
      if (!registered_.count(r)) absent.push_back(r);
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(config_.rdzv_timeout);
    std::string message = "rendezvous timed out after " + std::to_string(secs.count()) +
                          " s: " + base::NameRanks(absent) + " never registered";
    CoordinatorListener* listener = rdzv_failure_reported_ ? nullptr : listener_;
    rdzv_failure_reported_ = true;
    lock.unlock();
    if (listener) listener->OnRendezvousTimeout(message);
    throw Error(ErrorKind::kTimeout, message);
  }
  v1::RegisterResponse resp;
  resp.set_rank(rank);
  resp.set_world_size(world_size_);
  resp.set_local_world_size(config_.nproc_per_node);
  resp.set_local_rank(rank % config_.nproc_per_node);
  resp.set_run_id(config_.run_id);
  resp.set_run_dir(config_.run_dir);
  return resp;
}

v1::RegisterResponse CoordinatorHandler::Register(const v1::RegisterRequest& req) {
  std::unique_lock<std::mutex> lock(mu_);
  RecordLocked(req);
  registered_cv_.notify_all();
  const auto deadline = attempt_start_ + config_.rdzv_timeout;
  registered_cv_.wait_until(lock, deadline, [&] { return RendezvousOverLocked(); });
  v1::RegisterResponse resp = Outcome(lock, req.rank());
  lock.unlock();
  waiters_.Poke();
  return resp;
}

std::shared_ptr<CallWaiters::Waiter> CoordinatorHandler::StartRegister(
    const v1::RegisterRequest& req, RegisterDone done) {
  CallWaiters::Clock::time_point deadline;
  {
    std::lock_guard<std::mutex> lock(mu_);
    RecordLocked(req);
    deadline = attempt_start_ + config_.rdzv_timeout;
  }
  registered_cv_.notify_all();
  waiters_.Poke();
  const int rank = req.rank();
  auto finish = [this, rank, done](CallWaiters::End end) {
    if (end == CallWaiters::End::kGone) {
      // The caller went away, or the server goes: no verdict on the rendezvous.
      bool stopping;
      {
        std::lock_guard<std::mutex> lock(mu_);
        stopping = stopping_;
      }
      const Error gone(ErrorKind::kPeerGone, stopping ? "the coordinator is shutting down"
                                                      : "the registration was cancelled");
      return done(nullptr, &gone);
    }
    std::unique_lock<std::mutex> lock(mu_);
    try {
      const v1::RegisterResponse resp = Outcome(lock, rank);
      if (lock.owns_lock()) lock.unlock();
      done(&resp, nullptr);
    } catch (const Error& e) {
      if (lock.owns_lock()) lock.unlock();
      done(nullptr, &e);
    }
  };
  auto waiter = std::make_shared<CallWaiters::Waiter>(
      [this] {
        std::lock_guard<std::mutex> lock(mu_);
        return RendezvousOverLocked();
      },
      deadline, finish);
  if (waiters_.Add(waiter)) return waiter;
  finish(CallWaiters::End::kReady);
  return nullptr;
}

bool CoordinatorHandler::AllRegistered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return world_size_ > 0 && static_cast<int>(registered_.size()) >= world_size_;
}

void CoordinatorHandler::OnHeartbeat(const v1::RankStatus& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!RankInWorld(status.rank(), ShapeLocked())) return;
  HeardLocked(status, base::UnixMillis());
  status_cv_.notify_all();
}

void CoordinatorHandler::HeardLocked(const v1::RankStatus& status, int64_t now) {
  RankView& view = ranks_[status.rank()];
  if (!view.status || view.status->step() != status.step() ||
      view.status->last_completed_seq() != status.last_completed_seq() ||
      view.status->phase() != status.phase()) {
    view.last_progress_unix_ms = now;
  }
  view.rank = status.rank();
  view.status = status;
  view.last_heartbeat_unix_ms = now;
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
  std::lock_guard<std::mutex> lock(mu_);
  if (!RankInWorld(rank, ShapeLocked())) return;
  senders_[rank] = std::move(send);
  ranks_[rank].rank = rank;
  ranks_[rank].streaming = true;
}

void CoordinatorHandler::OnStreamClosed(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!RankInWorld(rank, ShapeLocked())) return;
  senders_.erase(rank);
  ranks_[rank].streaming = false;
}

void CoordinatorHandler::OnEvent(const v1::Event& event) {
  CheckRankInWorld(event.rank(), Shape(), "event");
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
  std::lock_guard<std::mutex> store_lock(store_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  attempt_start_ = std::chrono::steady_clock::now();
  registered_.clear();
  ranks_.clear();
  senders_.clear();
  store_ = core::MakeMemoryStore();
  store_quota_.Clear();
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
