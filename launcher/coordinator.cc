#include "launcher/coordinator.h"

#include <grpcpp/grpcpp.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "core/coordinator_client.h"
#include "core/error.h"
#include "core/telemetry.h"
#include "dlaunch.grpc.pb.h"

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
      store_(core::MakeMemoryStore()) {}

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
    if (!rdzv_failure_reported_ && listener_) {
      rdzv_failure_reported_ = true;
      v1::Event event;
      event.set_rank(-1);
      event.set_kind("rendezvous_timeout");
      event.set_json(nlohmann::json{{"message", message}, {"absent", absent}}.dump());
      event.set_unix_ms(core::UnixMillis());
      listener_(event);
    }
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

void CoordinatorHandler::OnHeartbeat(const v1::RankStatus& status) {
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
}

void CoordinatorHandler::OnStreamOpened(int rank, std::function<bool(const v1::Command&)> send) {
  std::lock_guard<std::mutex> lock(mu_);
  senders_[rank] = std::move(send);
  ranks_[rank].rank = rank;
  ranks_[rank].streaming = true;
}

void CoordinatorHandler::OnStreamClosed(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  senders_.erase(rank);
  ranks_[rank].streaming = false;
}

void CoordinatorHandler::OnEvent(const v1::Event& event) {
  std::function<void(const v1::Event&)> listener;
  {
    std::lock_guard<std::mutex> lock(mu_);
    listener = listener_;
  }
  if (listener) listener(event);
}

int CoordinatorHandler::Broadcast(const v1::Command& command) {
  std::map<int, std::function<bool(const v1::Command&)>> senders;
  {
    std::lock_guard<std::mutex> lock(mu_);
    senders = senders_;
  }
  int sent = 0;
  for (auto& [rank, send] : senders) sent += send(command) ? 1 : 0;
  return sent;
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

void CoordinatorHandler::SetEventListener(std::function<void(const v1::Event&)> listener) {
  std::lock_guard<std::mutex> lock(mu_);
  listener_ = std::move(listener);
}

// ---- gRPC glue -------------------------------------------------------------------------------

class CoordinatorServer::Service final : public v1::Coordinator::Service {
 public:
  explicit Service(CoordinatorHandler* handler) : handler_(handler) {}

  grpc::Status Register(grpc::ServerContext* ctx, const v1::RegisterRequest* req,
                        v1::RegisterResponse* resp) override {
    return Guarded(ctx, "Register", [&] { *resp = handler_->Register(*req); });
  }

  grpc::Status StoreSet(grpc::ServerContext* ctx, const v1::StoreSetRequest* req,
                        v1::StoreSetResponse*) override {
    return Guarded(ctx, "StoreSet", [&] { handler_->store().Set(req->key(), req->value()); });
  }

  grpc::Status StoreGet(grpc::ServerContext* ctx, const v1::StoreGetRequest* req,
                        v1::StoreGetResponse* resp) override {
    return Guarded(ctx, "StoreGet", [&] {
      resp->set_value(
          handler_->store().Get(req->key(), std::chrono::milliseconds(req->timeout_ms())));
    });
  }

  grpc::Status StoreAdd(grpc::ServerContext* ctx, const v1::StoreAddRequest* req,
                        v1::StoreAddResponse* resp) override {
    return Guarded(ctx, "StoreAdd",
                   [&] { resp->set_value(handler_->store().Add(req->key(), req->delta())); });
  }

  grpc::Status StoreWait(grpc::ServerContext* ctx, const v1::StoreWaitRequest* req,
                         v1::StoreWaitResponse*) override {
    return Guarded(ctx, "StoreWait", [&] {
      handler_->store().Wait({req->keys().begin(), req->keys().end()},
                             std::chrono::milliseconds(req->timeout_ms()));
    });
  }

  grpc::Status Heartbeat(grpc::ServerContext* ctx,
                         grpc::ServerReaderWriter<v1::Command, v1::RankStatus>* stream) override {
    if (!Authorized(ctx, "Heartbeat")) return Refused();
    v1::RankStatus status;
    if (!stream->Read(&status)) return grpc::Status::OK;
    const int rank = status.rank();
    auto write_mu = std::make_shared<std::mutex>();
    handler_->OnStreamOpened(rank, [stream, write_mu](const v1::Command& cmd) {
      std::lock_guard<std::mutex> lock(*write_mu);
      return stream->Write(cmd);
    });
    do {
      handler_->OnHeartbeat(status);
    } while (stream->Read(&status));
    handler_->OnStreamClosed(rank);
    // Wait out a command being written on another thread before the stream goes away.
    std::lock_guard<std::mutex> lock(*write_mu);
    return grpc::Status::OK;
  }

  grpc::Status ReportEvent(grpc::ServerContext* ctx, const v1::Event* event,
                           v1::EventAck*) override {
    return Guarded(ctx, "ReportEvent", [&] { handler_->OnEvent(*event); });
  }

 private:
  bool Authorized(grpc::ServerContext* ctx, const char* method) {
    const auto& md = ctx->client_metadata();
    auto it = md.find(core::kTokenMetadataKey);
    std::string token = it == md.end() ? "" : std::string(it->second.data(), it->second.size());
    return handler_->Authorize(token, ctx->peer(), method);
  }

  static grpc::Status Refused() {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong or missing job token");
  }

  template <typename F>
  grpc::Status Guarded(grpc::ServerContext* ctx, const char* method, F&& body) {
    if (!Authorized(ctx, method)) return Refused();
    try {
      body();
      return grpc::Status::OK;
    } catch (const Error& e) {
      switch (e.kind()) {
        case ErrorKind::kTimeout:
          return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, e.what());
        case ErrorKind::kInvalidArgument:
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e.what());
        default:
          return grpc::Status(grpc::StatusCode::INTERNAL, e.what());
      }
    } catch (const std::exception& e) {
      return grpc::Status(grpc::StatusCode::INTERNAL, e.what());
    }
  }

  CoordinatorHandler* handler_;
};

CoordinatorServer::CoordinatorServer(CoordinatorHandler* handler, const std::string& address)
    : service_(std::make_unique<Service>(handler)) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(service_.get());
  builder.SetMaxReceiveMessageSize(64 << 20);
  // A port held by another process must fail the bind instead of being shared.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    throw UsageError("cannot listen on " + address + ": the address is in use or not local");
  }
}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

void CoordinatorServer::Shutdown(std::chrono::milliseconds deadline) {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + deadline);
  server_->Wait();
  server_.reset();
}

}  // namespace dlaunch::launcher
