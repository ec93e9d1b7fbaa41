#include "launcher/coordinator.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

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

void CoordinatorHandler::AddLocalNode(const std::string& host, const std::string& doctor_json) {
  std::lock_guard<std::mutex> lock(mu_);
  NodeView& n = nodes_[0];
  n.node_rank = 0;
  n.host = host;
  n.doctor_json = doctor_json;
  n.last_heartbeat_unix_ms = core::UnixMillis();
  nodes_cv_.notify_all();
}

std::vector<int> CoordinatorHandler::WaitForNodes() {
  std::unique_lock<std::mutex> lock(mu_);
  nodes_cv_.wait_until(lock, attempt_start_ + config_.rdzv_timeout,
                       [&] { return static_cast<int>(nodes_.size()) >= config_.nnodes; });
  std::vector<int> absent;
  for (int n = 0; n < config_.nnodes; ++n)
    if (!nodes_.count(n)) absent.push_back(n);
  return absent;
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
    NodeView& n = nodes_[req.node_rank()];
    n.node_rank = req.node_rank();
    n.host = req.host();
    n.doctor_json = req.doctor_json();
    n.lost = false;
    n.last_heartbeat_unix_ms = core::UnixMillis();
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
  std::function<void(const v1::Event&)> listener;
  v1::Event event;
  {
    std::lock_guard<std::mutex> lock(mu_);
    NodeView& n = nodes_[status.node_rank()];
    const bool was_done = n.status && n.status->done();
    n.status = status;
    n.last_heartbeat_unix_ms = core::UnixMillis();
    nodes_cv_.notify_all();
    if (!status.done() || was_done || status.exit_code() == 0) return;
    listener = listener_;
    event.set_rank(-1);
    event.set_kind("node_failed");
    event.set_json(nlohmann::json{{"node_rank", status.node_rank()},
                                  {"host", n.host},
                                  {"exit_code", status.exit_code()},
                                  {"message", status.message()}}
                       .dump());
  }
  if (listener) listener(event);
}

void CoordinatorHandler::OnNodeStreamOpened(int node,
                                            std::function<bool(const v1::Command&)> send) {
  std::lock_guard<std::mutex> lock(mu_);
  node_senders_[node] = std::move(send);
  nodes_[node].streaming = true;
}

void CoordinatorHandler::OnNodeStreamClosed(int node) {
  std::function<void(const v1::Event&)> listener;
  v1::Event event;
  {
    std::lock_guard<std::mutex> lock(mu_);
    node_senders_.erase(node);
    NodeView& n = nodes_[node];
    n.streaming = false;
    nodes_cv_.notify_all();
    if (n.status && n.status->done()) return;
    n.lost = true;
    listener = listener_;
    event.set_rank(-1);
    event.set_kind("node_lost");
    event.set_json(nlohmann::json{{"node_rank", node},
                                  {"host", n.host},
                                  {"message", "node " + std::to_string(node) + " (" + n.host +
                                                  ") lost: its agent's stream ended"}}
                       .dump());
  }
  if (listener) listener(event);
}

int CoordinatorHandler::BroadcastToNodes(const v1::Command& command) {
  std::map<int, std::function<bool(const v1::Command&)>> senders;
  {
    std::lock_guard<std::mutex> lock(mu_);
    senders = node_senders_;
  }
  int sent = 0;
  for (auto& [node, send] : senders) sent += send(command) ? 1 : 0;
  return sent;
}

std::string CoordinatorHandler::WaitForNodesDone(std::chrono::milliseconds heartbeat_timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    bool all_done = true;
    const int64_t now = core::UnixMillis();
    for (const auto& [rank, n] : nodes_) {
      if (rank == 0) continue;
      const std::string who = "node " + std::to_string(rank) + " (" + n.host + ")";
      if (n.status && n.status->done()) {
        if (n.status->exit_code() != 0) {
          return who + " failed: " +
                 (n.status->message().empty() ? "exit code " + std::to_string(n.status->exit_code())
                                              : n.status->message());
        }
        continue;
      }
      if (n.lost) return who + " lost: its agent's stream ended";
      if (now - n.last_heartbeat_unix_ms > heartbeat_timeout.count()) {
        return who + " lost: no heartbeat for " +
               std::to_string((now - n.last_heartbeat_unix_ms) / 1000) + " s";
      }
      all_done = false;
    }
    if (all_done) return "";
    // Woken by every status and stream end; the timeout only paces the heartbeat check.
    nodes_cv_.wait_for(lock, std::chrono::milliseconds(250));
  }
}

std::vector<NodeView> CoordinatorHandler::Nodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<NodeView> out;
  for (const auto& [n, view] : nodes_) out.push_back(view);
  return out;
}

void CoordinatorHandler::WriteFileChunk(const v1::FileChunk& chunk) {
  const std::string& name = chunk.name();
  if (chunk.rank() < 0 || chunk.rank() >= config_.world_size) {
    throw Error(ErrorKind::kInvalidArgument,
                "file for rank " + std::to_string(chunk.rank()) + " outside the world");
  }
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    throw Error(ErrorKind::kInvalidArgument, "bad file name '" + name + "'");
  }
  const std::string dir = config_.run_dir + "/rank" + std::to_string(chunk.rank());
  std::lock_guard<std::mutex> lock(files_mu_);
  ::mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/" + name;
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (chunk.truncate() ? O_TRUNC : 0);
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) throw Error(ErrorKind::kInternal, "cannot write " + path);
  const std::string& data = chunk.data();
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done, chunk.offset() + done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
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
    return ServeStream(
        stream, [](const v1::RankStatus& s) { return s.rank(); },
        [this](int rank, auto send) { handler_->OnStreamOpened(rank, std::move(send)); },
        [this](const v1::RankStatus& s) { handler_->OnHeartbeat(s); },
        [this](int rank) { handler_->OnStreamClosed(rank); });
  }

  grpc::Status ReportEvent(grpc::ServerContext* ctx, const v1::Event* event,
                           v1::EventAck*) override {
    return Guarded(ctx, "ReportEvent", [&] { handler_->OnEvent(*event); });
  }

  grpc::Status RegisterNode(grpc::ServerContext* ctx, const v1::NodeRequest* req,
                            v1::NodeResponse* resp) override {
    return Guarded(ctx, "RegisterNode", [&] { *resp = handler_->RegisterNode(*req); });
  }

  grpc::Status NodeStream(grpc::ServerContext* ctx,
                          grpc::ServerReaderWriter<v1::Command, v1::NodeStatus>* stream) override {
    if (!Authorized(ctx, "NodeStream")) return Refused();
    return ServeStream(
        stream, [](const v1::NodeStatus& s) { return s.node_rank(); },
        [this](int node, auto send) { handler_->OnNodeStreamOpened(node, std::move(send)); },
        [this](const v1::NodeStatus& s) { handler_->OnNodeStatus(s); },
        [this](int node) { handler_->OnNodeStreamClosed(node); });
  }

  grpc::Status PushFile(grpc::ServerContext* ctx, const v1::FileChunk* chunk,
                        v1::FileAck*) override {
    return Guarded(ctx, "PushFile", [&] { handler_->WriteFileChunk(*chunk); });
  }

 private:
  // One stream per rank or node, named by its first message. Commands are written from other
  // threads through `send`, under a mutex the stream's end waits on, so no write outlives it.
  template <typename Message, typename Id, typename Opened, typename Received, typename Closed>
  static grpc::Status ServeStream(grpc::ServerReaderWriter<v1::Command, Message>* stream, Id id,
                                  Opened opened, Received received, Closed closed) {
    Message message;
    if (!stream->Read(&message)) return grpc::Status::OK;
    const int who = id(message);
    auto write_mu = std::make_shared<std::mutex>();
    opened(who, std::function<bool(const v1::Command&)>([stream, write_mu](const v1::Command& cmd) {
             std::lock_guard<std::mutex> lock(*write_mu);
             return stream->Write(cmd);
           }));
    do {
      received(message);
    } while (stream->Read(&message));
    closed(who);
    std::lock_guard<std::mutex> lock(*write_mu);
    return grpc::Status::OK;
  }

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

namespace {

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const core::TlsFiles& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  using core::ReadWholeFile;
  grpc::SslServerCredentialsOptions opts(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  opts.pem_root_certs = ReadWholeFile(tls.ca, "--tls-ca");
  opts.pem_key_cert_pairs.push_back(
      {ReadWholeFile(tls.key, "--tls-key"), ReadWholeFile(tls.cert, "--tls-cert")});
  return grpc::SslServerCredentials(opts);
}

}  // namespace

CoordinatorServer::CoordinatorServer(CoordinatorHandler* handler, const std::string& address,
                                     const core::TlsFiles& tls)
    : service_(std::make_unique<Service>(handler)) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, MakeServerCredentials(tls), &port_);
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
