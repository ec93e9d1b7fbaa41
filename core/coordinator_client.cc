#include "core/coordinator_client.h"

#include <grpcpp/grpcpp.h>

#include <cstdlib>

#include "core/error.h"

namespace dlaunch::core {

namespace {

// Headroom for the network round trip on top of the server-side wait.
constexpr std::chrono::milliseconds kRpcSlack{5000};

class GrpcStore : public Store {
 public:
  explicit GrpcStore(std::shared_ptr<CoordinatorClient> client) : client_(std::move(client)) {}

  void Set(const std::string& key, const std::string& value) override {
    v1::StoreSetRequest req;
    req.set_key(key);
    req.set_value(value);
    v1::StoreSetResponse resp;
    auto ctx = client_->NewContext(kRpcSlack);
    auto status = client_->stub().StoreSet(ctx.get(), req, &resp);
    if (!status.ok()) ThrowRpcError(status, "store set '" + key + "'");
  }

  std::string Get(const std::string& key, std::chrono::milliseconds timeout) override {
    v1::StoreGetRequest req;
    req.set_key(key);
    req.set_timeout_ms(timeout.count());
    v1::StoreGetResponse resp;
    auto ctx = client_->NewContext(timeout + kRpcSlack);
    auto status = client_->stub().StoreGet(ctx.get(), req, &resp);
    if (!status.ok()) ThrowRpcError(status, "store get '" + key + "'");
    return resp.value();
  }

  int64_t Add(const std::string& key, int64_t delta) override {
    v1::StoreAddRequest req;
    req.set_key(key);
    req.set_delta(delta);
    v1::StoreAddResponse resp;
    auto ctx = client_->NewContext(kRpcSlack);
    auto status = client_->stub().StoreAdd(ctx.get(), req, &resp);
    if (!status.ok()) ThrowRpcError(status, "store add '" + key + "'");
    return resp.value();
  }

  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    v1::StoreWaitRequest req;
    for (const auto& k : keys) req.add_keys(k);
    req.set_timeout_ms(timeout.count());
    v1::StoreWaitResponse resp;
    auto ctx = client_->NewContext(timeout + kRpcSlack);
    auto status = client_->stub().StoreWait(ctx.get(), req, &resp);
    if (!status.ok()) ThrowRpcError(status, "store wait");
  }

  bool Check(const std::string& key) override {
    try {
      Get(key, std::chrono::milliseconds(0));
      return true;
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kTimeout) return false;
      throw;
    }
  }

 private:
  std::shared_ptr<CoordinatorClient> client_;
};

}  // namespace

void ThrowRpcError(const grpc::Status& status, const std::string& what) {
  std::string message = what + ": " + status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      throw Error(ErrorKind::kTimeout, message);
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      throw Error(ErrorKind::kUnauthenticated, message);
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::CANCELLED:
      throw Error(ErrorKind::kPeerGone, message);
    case grpc::StatusCode::INVALID_ARGUMENT:
      throw Error(ErrorKind::kInvalidArgument, message);
    default:
      throw Error(ErrorKind::kInternal, message);
  }
}

TlsFiles TlsFiles::FromEnv() {
  auto get = [](const char* k) {
    const char* v = std::getenv(k);
    return std::string(v ? v : "");
  };
  return {get("DLAUNCH_TLS_CA"), get("DLAUNCH_TLS_CERT"), get("DLAUNCH_TLS_KEY")};
}

CoordinatorClient::CoordinatorClient(const std::string& address, std::string token,
                                     const TlsFiles& tls)
    : token_(std::move(token)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (tls.enabled()) {
    if (tls.ca.empty() || tls.cert.empty() || tls.key.empty()) {
      throw UsageError("TLS needs all of --tls-cert, --tls-key and --tls-ca");
    }
    grpc::SslCredentialsOptions opts;
    opts.pem_root_certs = base::ReadWholeFile(tls.ca, "--tls-ca");
    opts.pem_private_key = base::ReadWholeFile(tls.key, "--tls-key");
    opts.pem_cert_chain = base::ReadWholeFile(tls.cert, "--tls-cert");
    creds = grpc::SslCredentials(opts);
  }
  channel_ = grpc::CreateCustomChannel(address, creds, args);
  stub_ = v1::Coordinator::NewStub(channel_);
}

std::unique_ptr<grpc::ClientContext> CoordinatorClient::NewContext(
    std::chrono::milliseconds timeout, Readiness readiness) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata(kTokenMetadataKey, token_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!node_credential_.empty()) ctx->AddMetadata(kNodeMetadataKey, node_credential_);
  }
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
  // Ranks may start before the coordinator's port answers; wait for it instead of failing fast.
  ctx->set_wait_for_ready(readiness == Readiness::kWait);
  return ctx;
}

void CoordinatorClient::SetNodeCredential(const std::string& credential) {
  std::lock_guard<std::mutex> lock(mu_);
  node_credential_ = credential;
}

v1::RegisterResponse CoordinatorClient::Register(const v1::RegisterRequest& request,
                                                 std::chrono::milliseconds timeout) {
  v1::RegisterResponse resp;
  auto ctx = NewContext(timeout + kRpcSlack);
  auto status = stub_->Register(ctx.get(), request, &resp);
  if (!status.ok()) ThrowRpcError(status, "rendezvous");
  return resp;
}

void CoordinatorClient::ReportEvent(const v1::Event& event, std::chrono::milliseconds timeout) {
  v1::EventAck ack;
  auto ctx = NewContext(timeout);
  auto status = stub_->ReportEvent(ctx.get(), event, &ack);
  if (!status.ok())
    ThrowRpcError(status, "report event '" + v1::EventKind_Name(event.kind()) + "'");
}

std::shared_ptr<Store> MakeCoordinatorStore(std::shared_ptr<CoordinatorClient> client) {
  return std::make_shared<GrpcStore>(std::move(client));
}

}  // namespace dlaunch::core
