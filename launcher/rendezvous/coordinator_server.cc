// The gRPC glue in front of CoordinatorHandler: authorisation, error mapping, streams.
#include <grpcpp/grpcpp.h>

#include <type_traits>

#include "core/coordinator_client.h"
#include "core/error.h"
#include "dlaunch.grpc.pb.h"
#include "launcher/rendezvous/command_stream.h"
#include "launcher/rendezvous/coordinator.h"

namespace dlaunch::launcher {

// The ranks' calls are served by callbacks: the streams (command_stream.h), and Register and the
// store waits, which wait without a thread (call_waiters.h). The node calls and the rest use the
// synchronous server's threads.
using MixedService = v1::Coordinator::WithCallbackMethod_Register<
    v1::Coordinator::WithCallbackMethod_StoreSet<v1::Coordinator::WithCallbackMethod_StoreGet<
        v1::Coordinator::WithCallbackMethod_StoreAdd<v1::Coordinator::WithCallbackMethod_StoreWait<
            v1::Coordinator::WithCallbackMethod_Heartbeat<
                v1::Coordinator::WithCallbackMethod_NodeStream<v1::Coordinator::Service>>>>>>>;

class CoordinatorServer::Service final : public MixedService {
 public:
  explicit Service(CoordinatorHandler* handler) : handler_(handler) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx,
                                     const v1::RegisterRequest* req,
                                     v1::RegisterResponse* resp) override {
    auto* call = new WaitingCall(handler_);
    if (!AuthorizedRank(ctx, "Register", req->rank())) return call->Done(Refused());
    call->Start(ctx, [&, call] {
      return handler_->StartRegister(
          *req, [this, call, resp](const v1::RegisterResponse* r, const Error* e) {
            if (r) *resp = *r;
            call->Done(e ? StatusOf(call->peer(), "Register", *e) : grpc::Status::OK);
          });
    });
    return call;
  }

  grpc::ServerUnaryReactor* StoreSet(grpc::CallbackServerContext* ctx,
                                     const v1::StoreSetRequest* req,
                                     v1::StoreSetResponse*) override {
    return Unary(ctx, "StoreSet", [&] {
      return Within(ctx, "StoreSet", handler_->StoreSet(CallerOf(ctx), req->key(), req->value()));
    });
  }

  grpc::ServerUnaryReactor* StoreGet(grpc::CallbackServerContext* ctx,
                                     const v1::StoreGetRequest* req,
                                     v1::StoreGetResponse* resp) override {
    auto* call = new WaitingCall(handler_);
    if (!Authorized(ctx, "StoreGet")) return call->Done(Refused());
    const std::string key = req->key();
    call->Start(ctx, [&, call] {
      return handler_->StartStoreWait(
          {key}, Bounded(ctx, req->timeout_ms()), [this, call, resp, key](const Error* e) {
            if (e) {
              call->Done(StatusOf(call->peer(), "StoreGet", *e));
              return;
            }
            try {
              resp->set_value(handler_->store().Get(key, std::chrono::milliseconds(0)));
              call->Done(grpc::Status::OK);
            } catch (const Error& late) {
              call->Done(StatusOf(call->peer(), "StoreGet", late));
            }
          });
    });
    return call;
  }

  grpc::ServerUnaryReactor* StoreAdd(grpc::CallbackServerContext* ctx,
                                     const v1::StoreAddRequest* req,
                                     v1::StoreAddResponse* resp) override {
    return Unary(ctx, "StoreAdd", [&] {
      int64_t value = 0;
      const std::string refused =
          handler_->StoreAdd(CallerOf(ctx), req->key(), req->delta(), &value);
      resp->set_value(value);
      return Within(ctx, "StoreAdd", refused);
    });
  }

  grpc::ServerUnaryReactor* StoreWait(grpc::CallbackServerContext* ctx,
                                      const v1::StoreWaitRequest* req,
                                      v1::StoreWaitResponse*) override {
    auto* call = new WaitingCall(handler_);
    if (!Authorized(ctx, "StoreWait")) return call->Done(Refused());
    std::vector<std::string> keys(req->keys().begin(), req->keys().end());
    call->Start(ctx, [&, call] {
      return handler_->StartStoreWait(
          std::move(keys), Bounded(ctx, req->timeout_ms()), [this, call](const Error* e) {
            call->Done(e ? StatusOf(call->peer(), "StoreWait", *e) : grpc::Status::OK);
          });
    });
    return call;
  }

  grpc::ServerBidiReactor<v1::RankStatus, v1::Command>* Heartbeat(
      grpc::CallbackServerContext* ctx) override {
    // A rank's token speaks for its own rank only: a stream it opens for another is refused.
    const Caller caller = handler_->CallerOf(Metadata(ctx, core::kTokenMetadataKey));
    const bool rank_token = caller.role == CallerRole::kRank;
    const bool refused = !rank_token && !Authorized(ctx, "Heartbeat");
    StreamHooks<v1::RankStatus> hooks;
    hooks.id = [](const v1::RankStatus& s) { return s.rank(); };
    hooks.admit = [this, ctx, caller, rank_token](const v1::RankStatus& first) {
      // Another rank's stream is refused, and logged, as AuthorizeRank refuses it.
      return !rank_token || caller.rank == first.rank() ||
             AuthorizedRank(ctx, "Heartbeat", first.rank());
    };
    hooks.opened = [this](int rank, auto send) { handler_->OnStreamOpened(rank, std::move(send)); };
    hooks.received = [this](const v1::RankStatus& s) { handler_->OnHeartbeat(s); };
    hooks.closed = [this](int rank) { handler_->OnStreamClosed(rank); };
    return new CommandStream<v1::RankStatus>(std::move(hooks), Refused(), refused);
  }

  grpc::Status ReportEvent(grpc::ServerContext* ctx, const v1::Event* event,
                           v1::EventAck*) override {
    if (!AuthorizedRank(ctx, "ReportEvent", event->rank())) return Refused();
    return Run(ctx, "ReportEvent", [&] { handler_->OnEvent(*event); });
  }

  grpc::Status RegisterNode(grpc::ServerContext* ctx, const v1::NodeRequest* req,
                            v1::NodeResponse* resp) override {
    // The token first: a caller without it gets the refusal every call gets, whatever job id it
    // names, so it learns neither the run id nor whether it guessed the job. A node of another
    // job that holds this job's token (one token for all of a user's jobs) hears which it reached.
    if (!Authorized(ctx, "RegisterNode", CallerRole::kNode)) return Refused();
    const std::string token = Metadata(ctx, core::kTokenMetadataKey);
    if (std::string other = handler_->OtherJob(token, *req); !other.empty()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, Said(other));
    }
    return Run(ctx, "RegisterNode", [&] {
      *resp = handler_->RegisterNode(*req, Metadata(ctx, core::kNodeMetadataKey));
    });
  }

  // The stream speaks for the node whose credential opened it, whatever its messages say.
  grpc::ServerBidiReactor<v1::NodeStatus, v1::Command>* NodeStream(
      grpc::CallbackServerContext* ctx) override {
    const std::optional<int> member = AuthorizedNode(ctx, "NodeStream");
    const int m = member.value_or(-1);
    StreamHooks<v1::NodeStatus> hooks;
    hooks.id = [m](const v1::NodeStatus&) { return m; };
    hooks.admit = [](const v1::NodeStatus&) { return true; };
    hooks.opened = [this](int id, auto send) { handler_->OnNodeStreamOpened(id, std::move(send)); };
    hooks.received = [this, m](const v1::NodeStatus& s) {
      v1::NodeStatus mine = s;
      mine.set_member_id(m);
      handler_->OnNodeStatus(mine);
    };
    hooks.closed = [this](int id) { handler_->OnNodeStreamClosed(id); };
    return new CommandStream<v1::NodeStatus>(std::move(hooks), Refused(), !member);
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
  // A store wait as long as the caller asked, but never past its call's deadline (nobody would
  // take the answer) nor a day, so a hostile timeout (-1, INT64_MAX) neither overflows the
  // clock nor holds a thread.
  static std::chrono::milliseconds Bounded(grpc::ServerContextBase* ctx, int64_t timeout_ms) {
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

  static std::string Metadata(grpc::ServerContextBase* ctx, const char* key) {
    const auto& md = ctx->client_metadata();
    auto it = md.find(key);
    return it == md.end() ? "" : std::string(it->second.data(), it->second.size());
  }

  Caller CallerOf(grpc::ServerContextBase* ctx) const {
    return handler_->CallerOf(Metadata(ctx, core::kTokenMetadataKey));
  }

  // A store write past the caller's StoreQuota (`refused` names the bound; "": none) is refused
  // as RESOURCE_EXHAUSTED, and logged as refused calls are.
  grpc::Status Within(grpc::ServerContextBase* ctx, const char* method,
                      const std::string& refused) {
    if (refused.empty()) return grpc::Status::OK;
    handler_->Refuse(ctx->peer(), method, refused);
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, Said(refused));
  }

  bool Authorized(grpc::ServerContextBase* ctx, const char* method,
                  CallerRole needed = CallerRole::kRank) {
    return handler_->Authorize(Metadata(ctx, core::kTokenMetadataKey), ctx->peer(), method, needed);
  }

  bool AuthorizedRank(grpc::ServerContextBase* ctx, const char* method, int rank) {
    return handler_->AuthorizeRank(Metadata(ctx, core::kTokenMetadataKey), ctx->peer(), method,
                                   rank);
  }

  std::optional<int> AuthorizedNode(grpc::ServerContextBase* ctx, const char* method) {
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
  grpc::Status Guarded(grpc::ServerContextBase* ctx, const char* method, F&& body,
                       CallerRole needed = CallerRole::kRank) {
    if (!Authorized(ctx, method, needed)) return Refused();
    return Run(ctx, method, std::forward<F>(body));
  }

  // The body of an authorised call, its errors as gRPC statuses; a body that returns a status
  // answers with it.
  template <typename F>
  grpc::Status Run(grpc::ServerContextBase* ctx, const char* method, F&& body) {
    try {
      if constexpr (std::is_same_v<decltype(body()), grpc::Status>) {
        return body();
      } else {
        body();
        return grpc::Status::OK;
      }
    } catch (const Error& e) {
      return StatusOf(ctx->peer(), method, e);
    } catch (const std::exception& e) {
      return grpc::Status(grpc::StatusCode::INTERNAL, Said(e.what()));
    }
  }

  grpc::Status StatusOf(const std::string& peer, const char* method, const Error& e) {
    switch (e.kind()) {
      case ErrorKind::kUnauthenticated:
        handler_->Refuse(peer, method, Said(e.what()));
        return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, Said(e.what()));
      case ErrorKind::kTimeout:
        return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, Said(e.what()));
      case ErrorKind::kInvalidArgument:
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, Said(e.what()));
      default:
        return grpc::Status(grpc::StatusCode::INTERNAL, Said(e.what()));
    }
  }

  // A call that does not wait, answered on the callback thread.
  template <typename F>
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* ctx, const char* method, F&& body) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(Guarded(ctx, method, std::forward<F>(body)));
    return reactor;
  }

  // A call the coordinator holds (Register, a store wait) without a thread: it ends when its
  // waiter does, or when its caller goes away.
  class WaitingCall final : public grpc::ServerUnaryReactor {
   public:
    explicit WaitingCall(CoordinatorHandler* handler) : handler_(handler) {}
    // Starts the wait `start` returns (nullptr: it ended already); its errors end the call.
    template <typename F>
    void Start(grpc::CallbackServerContext* ctx, F&& start) {
      peer_ = ctx->peer();
      try {
        std::shared_ptr<CallWaiters::Waiter> waiter = start();
        std::lock_guard<std::mutex> lock(mu_);
        waiter_ = std::move(waiter);
      } catch (const Error& e) {
        Done(grpc::Status(e.kind() == ErrorKind::kInvalidArgument
                              ? grpc::StatusCode::INVALID_ARGUMENT
                              : grpc::StatusCode::INTERNAL,
                          Said(e.what())));
      }
    }
    // Exactly once.
    WaitingCall* Done(const grpc::Status& status) {
      Finish(status);
      return this;
    }
    const std::string& peer() const { return peer_; }
    void OnCancel() override {
      std::shared_ptr<CallWaiters::Waiter> waiter;
      {
        std::lock_guard<std::mutex> lock(mu_);
        waiter = waiter_;
      }
      if (waiter) handler_->CancelWait(waiter);
    }
    void OnDone() override { delete this; }

   private:
    CoordinatorHandler* handler_;
    std::string peer_;
    std::mutex mu_;
    std::shared_ptr<CallWaiters::Waiter> waiter_;
  };

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
