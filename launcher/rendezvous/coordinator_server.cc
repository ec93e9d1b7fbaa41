// The gRPC glue in front of CoordinatorHandler: authorisation, error mapping, streams.
#include <grpcpp/grpcpp.h>

#include "core/coordinator_client.h"
#include "core/error.h"
#include "dlaunch.grpc.pb.h"
#include "launcher/rendezvous/coordinator.h"

namespace dlaunch::launcher {

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
        stream, [](const v1::NodeStatus& s) { return s.member_id(); },
        [this](int member, auto send) { handler_->OnNodeStreamOpened(member, std::move(send)); },
        [this](const v1::NodeStatus& s) { handler_->OnNodeStatus(s); },
        [this](int member) { handler_->OnNodeStreamClosed(member); });
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
      if (id(message) == who) received(message);  // a stream speaks for one rank or node only
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
  using base::ReadWholeFile;
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
