#include "launcher/rendezvous/rank_relay.h"

#include <grpcpp/grpcpp.h>

#include "core/coordinator_client.h"
#include "core/error.h"
#include "dlaunch.grpc.pb.h"
#include "launcher/rendezvous/command_stream.h"
#include "launcher/rendezvous/credentials.h"

namespace dlaunch::launcher {

// Heartbeat ends here; Register, the store and ReportEvent go on to node 0. The node calls
// (RegisterNode, NodeStream, PushFile) and GetStatus answer UNIMPLEMENTED: they are node 0's.
class RankRelay::Service final
    : public v1::Coordinator::WithCallbackMethod_Heartbeat<v1::Coordinator::Service> {
 public:
  explicit Service(RankRelay* relay) : relay_(relay) {}

  grpc::ServerBidiReactor<v1::RankStatus, v1::Command>* Heartbeat(
      grpc::CallbackServerContext* ctx) override {
    StreamHooks<v1::RankStatus> hooks;
    hooks.id = [](const v1::RankStatus& s) { return s.rank(); };
    hooks.admit = [this, token = Token(*ctx)](const v1::RankStatus& first) {
      return relay_->Admit(token, first.rank());
    };
    hooks.opened = [this](int rank, auto send) { relay_->Opened(rank, std::move(send)); };
    hooks.received = [this](const v1::RankStatus& s) { relay_->Heard(s); };
    hooks.closed = [this](int rank) { relay_->Closed(rank); };
    return new CommandStream<v1::RankStatus>(
        std::move(hooks), grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                       "wrong or missing rank token, or a rank not of this node"));
  }

  grpc::Status Register(grpc::ServerContext* ctx, const v1::RegisterRequest* req,
                        v1::RegisterResponse* resp) override {
    return Forward(ctx, [&](auto* stub, auto* out) { return stub->Register(out, *req, resp); });
  }
  grpc::Status StoreSet(grpc::ServerContext* ctx, const v1::StoreSetRequest* req,
                        v1::StoreSetResponse* resp) override {
    return Forward(ctx, [&](auto* stub, auto* out) { return stub->StoreSet(out, *req, resp); });
  }
  grpc::Status StoreGet(grpc::ServerContext* ctx, const v1::StoreGetRequest* req,
                        v1::StoreGetResponse* resp) override {
    return Forward(ctx, [&](auto* stub, auto* out) { return stub->StoreGet(out, *req, resp); });
  }
  grpc::Status StoreAdd(grpc::ServerContext* ctx, const v1::StoreAddRequest* req,
                        v1::StoreAddResponse* resp) override {
    return Forward(ctx, [&](auto* stub, auto* out) { return stub->StoreAdd(out, *req, resp); });
  }
  grpc::Status StoreWait(grpc::ServerContext* ctx, const v1::StoreWaitRequest* req,
                         v1::StoreWaitResponse* resp) override {
    return Forward(ctx, [&](auto* stub, auto* out) { return stub->StoreWait(out, *req, resp); });
  }
  grpc::Status ReportEvent(grpc::ServerContext* ctx, const v1::Event* req,
                           v1::EventAck* resp) override {
    return Forward(ctx, [&](auto* stub, auto* out) { return stub->ReportEvent(out, *req, resp); });
  }

 private:
  static std::string Token(const grpc::ServerContextBase& ctx) {
    const auto& md = ctx.client_metadata();
    auto it = md.find(core::kTokenMetadataKey);
    return it == md.end() ? "" : std::string(it->second.data(), it->second.size());
  }

  // The call as the rank made it: its token (node 0 checks it, as if the rank had called it),
  // its deadline, and its cancellation, so a rank that goes away holds nothing on node 0.
  template <typename Call>
  grpc::Status Forward(grpc::ServerContext* ctx, Call call) {
    std::unique_ptr<grpc::ClientContext> out = grpc::ClientContext::FromServerContext(*ctx);
    out->AddMetadata(core::kTokenMetadataKey, Token(*ctx));
    return call(&relay_->node_zero_->stub(), out.get());
  }

 private:
  RankRelay* relay_;
};

RankRelay::RankRelay(std::string job_token, std::shared_ptr<core::CoordinatorClient> node_zero)
    : job_token_(std::move(job_token)),
      node_zero_(std::move(node_zero)),
      service_(std::make_unique<Service>(this)) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(service_.get());
  builder.SetMaxReceiveMessageSize(64 << 20);  // as node 0's coordinator takes
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    throw Error(ErrorKind::kInternal, "cannot listen on 127.0.0.1 for this node's ranks");
  }
}

RankRelay::~RankRelay() {
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  server_->Wait();
}

std::string RankRelay::endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

void RankRelay::SetRanks(const std::set<int>& ranks) {
  std::lock_guard<std::mutex> lock(mu_);
  ranks_ = ranks;
  fresh_.clear();
}

std::vector<v1::RankStatus> RankRelay::TakeFresh() {
  std::map<int, v1::RankStatus> fresh;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fresh.swap(fresh_);
  }
  std::vector<v1::RankStatus> out;
  out.reserve(fresh.size());
  for (auto& [rank, status] : fresh) out.push_back(std::move(status));
  return out;
}

int RankRelay::Broadcast(const v1::Command& command) {
  std::map<int, std::function<bool(const v1::Command&)>> senders;
  {
    std::lock_guard<std::mutex> lock(mu_);
    senders = senders_;
  }
  int sent = 0;
  for (auto& [rank, send] : senders) sent += send(command) ? 1 : 0;
  return sent;
}

int64_t RankRelay::refused_streams() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

bool RankRelay::Admit(const std::string& token, int rank) {
  const bool job = !token.empty() && SameSecret(token, job_token_);
  const std::optional<int> own = job ? std::optional<int>(rank) : RankOfToken(job_token_, token);
  std::lock_guard<std::mutex> lock(mu_);
  if (own == rank && ranks_.count(rank)) return true;
  ++refused_;
  return false;
}

void RankRelay::Opened(int rank, std::function<bool(const v1::Command&)> send) {
  std::lock_guard<std::mutex> lock(mu_);
  senders_[rank] = std::move(send);
}

void RankRelay::Heard(const v1::RankStatus& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ranks_.count(status.rank())) fresh_[status.rank()] = status;
}

void RankRelay::Closed(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  senders_.erase(rank);
}

}  // namespace dlaunch::launcher
