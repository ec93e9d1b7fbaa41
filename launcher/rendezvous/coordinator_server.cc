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
    if (!AuthorizedRank(ctx, "Register", req->rank())) return Refused();
    return Run(ctx, "Register", [&] { *resp = handler_->Register(*req); });
  }

  grpc::Status StoreSet(grpc::ServerContext* ctx, const v1::StoreSetRequest* req,
                        v1::StoreSetResponse*) override {
    return Guarded(ctx, "StoreSet", [&] { handler_->store().Set(req->key(), req->value()); });
  }

  grpc::Status StoreGet(grpc::ServerContext* ctx, const v1::StoreGetRequest* req,
                        v1::StoreGetResponse* resp) override {
    return Guarded(ctx, "StoreGet", [&] {
      Sliced(ctx, Bounded(ctx, req->timeout_ms()), [&](std::chrono::milliseconds slice) {
        resp->set_value(handler_->store().Get(req->key(), slice));
      });
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
      const std::vector<std::string> keys(req->keys().begin(), req->keys().end());
      Sliced(ctx, Bounded(ctx, req->timeout_ms()),
             [&](std::chrono::milliseconds slice) { handler_->store().Wait(keys, slice); });
    });
  }

  grpc::Status Heartbeat(grpc::ServerContext* ctx,
                         grpc::ServerReaderWriter<v1::Command, v1::RankStatus>* stream) override {
    // A rank's token speaks for its own rank only: a stream it opens for another is refused.
    const Caller caller = handler_->CallerOf(Metadata(ctx, core::kTokenMetadataKey));
    if (caller.role != CallerRole::kRank && !Authorized(ctx, "Heartbeat")) return Refused();
    return ServeStream(
        stream, [](const v1::RankStatus& s) { return s.rank(); },
        [&](const v1::RankStatus& first) {
          // Another rank's stream is refused, and logged, as AuthorizeRank refuses it.
          return caller.role != CallerRole::kRank || caller.rank == first.rank() ||
                 AuthorizedRank(ctx, "Heartbeat", first.rank());
        },
        [this](int rank, auto send) { handler_->OnStreamOpened(rank, std::move(send)); },
        [this](const v1::RankStatus& s) { handler_->OnHeartbeat(s); },
        [this](int rank) { handler_->OnStreamClosed(rank); });
  }

  grpc::Status ReportEvent(grpc::ServerContext* ctx, const v1::Event* event,
                           v1::EventAck*) override {
    if (!AuthorizedRank(ctx, "ReportEvent", event->rank())) return Refused();
    return Run(ctx, "ReportEvent", [&] { handler_->OnEvent(*event); });
  }

  grpc::Status RegisterNode(grpc::ServerContext* ctx, const v1::NodeRequest* req,
                            v1::NodeResponse* resp) override {
    // Before the token: a node of another job must hear that, not advice about its token.
    if (std::string other = handler_->OtherJob(*req); !other.empty()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, other);
    }
    return Guarded(
        ctx, "RegisterNode",
        [&] { *resp = handler_->RegisterNode(*req, Metadata(ctx, core::kNodeMetadataKey)); },
        CallerRole::kNode);
  }

  // The stream speaks for the node whose credential opened it, whatever its messages say.
  grpc::Status NodeStream(grpc::ServerContext* ctx,
                          grpc::ServerReaderWriter<v1::Command, v1::NodeStatus>* stream) override {
    const auto member = AuthorizedNode(ctx, "NodeStream");
    if (!member) return Refused();
    return ServeStream(
        stream, [m = *member](const v1::NodeStatus&) { return m; },
        [](const v1::NodeStatus&) { return true; },
        [this](int m, auto send) { handler_->OnNodeStreamOpened(m, std::move(send)); },
        [this, m = *member](const v1::NodeStatus& s) {
          v1::NodeStatus mine = s;
          mine.set_member_id(m);
          handler_->OnNodeStatus(mine);
        },
        [this](int m) { handler_->OnNodeStreamClosed(m); });
  }

  grpc::Status PushFile(grpc::ServerContext* ctx, const v1::FileChunk* chunk,
                        v1::FileAck*) override {
    const auto member = AuthorizedNode(ctx, "PushFile");
    if (!member) return Refused();
    return Guarded(
        ctx, "PushFile", [&] { handler_->WriteFileChunk(*member, *chunk); }, CallerRole::kNode);
  }

  // Reads the job only: the job token or the status token of live.json.
  grpc::Status GetStatus(grpc::ServerContext* ctx, const v1::StatusRequest*,
                         v1::StatusResponse* resp) override {
    if (!handler_->AuthorizeStatus(Metadata(ctx, core::kTokenMetadataKey), ctx->peer())) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "wrong or missing job or status token");
    }
    try {
      std::string json = handler_->StatusJson();
      if (json.empty()) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the job's ranks are not started yet");
      }
      resp->set_json(std::move(json));
      return grpc::Status::OK;
    } catch (const std::exception& e) {
      return grpc::Status(grpc::StatusCode::INTERNAL, Said(e.what()));
    }
  }

 private:
  // One stream per rank or node, named by its first message, which `admit` may refuse. Commands
  // are written from other threads through `send`, under a mutex the stream's end waits on, so no
  // write outlives it.
  template <typename Message, typename Id, typename Admit, typename Opened, typename Received,
            typename Closed>
  static grpc::Status ServeStream(grpc::ServerReaderWriter<v1::Command, Message>* stream, Id id,
                                  Admit admit, Opened opened, Received received, Closed closed) {
    Message message;
    if (!stream->Read(&message)) return grpc::Status::OK;
    if (!admit(message)) return Refused();
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

  // A store wait as long as the caller asked, but never past its call's deadline (nobody would
  // take the answer) nor a day, so a hostile timeout (-1, INT64_MAX) neither overflows the
  // clock nor holds a thread.
  static std::chrono::milliseconds Bounded(grpc::ServerContext* ctx, int64_t timeout_ms) {
    using std::chrono::milliseconds;
    milliseconds bound = std::chrono::hours(24);
    const auto deadline = ctx->deadline();
    if (deadline != std::chrono::system_clock::time_point::max()) {
      bound = std::min(bound, std::chrono::duration_cast<milliseconds>(
                                  deadline - std::chrono::system_clock::now()));
    }
    return std::max(milliseconds(0),
                    std::min(milliseconds(std::max<int64_t>(timeout_ms, 0)), bound));
  }

  // A blocking store call in slices of at most 250 ms, so that it ends once its caller is gone or
  // the server shuts down (gRPC cancels the call then) instead of holding a thread, and the
  // launcher's exit, for the whole timeout. The last slice's timeout names the whole wait.
  template <typename F>
  static void Sliced(grpc::ServerContext* ctx, std::chrono::milliseconds timeout, F&& call) {
    using std::chrono::milliseconds;
    constexpr milliseconds kSlice(250);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(
                                                      deadline - std::chrono::steady_clock::now()));
      try {
        call(std::min(left, kSlice));
        return;
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kTimeout) throw;
        if (ctx->IsCancelled()) throw Error(ErrorKind::kPeerGone, "the store call was cancelled");
        if (left > kSlice) continue;
        // "store wait timed out after 250 ms; missing keys: k" -> the whole wait's duration.
        const std::string what = e.what();
        const size_t rest = what.find(';');
        throw Error(ErrorKind::kTimeout, "store wait timed out after " +
                                             std::to_string(timeout.count()) + " ms" +
                                             (rest == std::string::npos ? "" : what.substr(rest)));
      }
    }
  }

  static std::string Metadata(grpc::ServerContext* ctx, const char* key) {
    const auto& md = ctx->client_metadata();
    auto it = md.find(key);
    return it == md.end() ? "" : std::string(it->second.data(), it->second.size());
  }

  bool Authorized(grpc::ServerContext* ctx, const char* method,
                  CallerRole needed = CallerRole::kRank) {
    return handler_->Authorize(Metadata(ctx, core::kTokenMetadataKey), ctx->peer(), method, needed);
  }

  bool AuthorizedRank(grpc::ServerContext* ctx, const char* method, int rank) {
    return handler_->AuthorizeRank(Metadata(ctx, core::kTokenMetadataKey), ctx->peer(), method,
                                   rank);
  }

  std::optional<int> AuthorizedNode(grpc::ServerContext* ctx, const char* method) {
    return handler_->AuthorizeNode(Metadata(ctx, core::kTokenMetadataKey),
                                   Metadata(ctx, core::kNodeMetadataKey), ctx->peer(), method);
  }

  // A status message travels in a trailer, which gRPC bounds (8 KiB by default): a longer one
  // (a store wait on 10000 missing keys names them all) breaks the caller's connection, and with
  // it every other call sharing it. Cut to 1 KiB.
  static std::string Said(const std::string& message) {
    constexpr size_t kMax = 1024;
    if (message.size() <= kMax) return message;
    return message.substr(0, kMax) + "... (" + std::to_string(message.size()) + " bytes)";
  }

  static grpc::Status Refused() {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "wrong or missing job token or node credential");
  }

  template <typename F>
  grpc::Status Guarded(grpc::ServerContext* ctx, const char* method, F&& body,
                       CallerRole needed = CallerRole::kRank) {
    if (!Authorized(ctx, method, needed)) return Refused();
    return Run(ctx, method, std::forward<F>(body));
  }

  // The body of an authorised call, its errors as gRPC statuses.
  template <typename F>
  grpc::Status Run(grpc::ServerContext* ctx, const char* method, F&& body) {
    try {
      body();
      return grpc::Status::OK;
    } catch (const Error& e) {
      switch (e.kind()) {
        case ErrorKind::kUnauthenticated:
          handler_->Refuse(ctx->peer(), method, Said(e.what()));
          return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, Said(e.what()));
        case ErrorKind::kTimeout:
          return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, Said(e.what()));
        case ErrorKind::kInvalidArgument:
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, Said(e.what()));
        default:
          return grpc::Status(grpc::StatusCode::INTERNAL, Said(e.what()));
      }
    } catch (const std::exception& e) {
      return grpc::Status(grpc::StatusCode::INTERNAL, Said(e.what()));
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
    : service_(std::make_unique<Service>(handler)), handler_(handler) {
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
  handler_->Stop();
  server_->Shutdown(std::chrono::system_clock::now() + deadline);
  server_->Wait();
  server_.reset();
}

}  // namespace dlaunch::launcher
