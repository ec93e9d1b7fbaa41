// Client side of the coordinator service, used by ranks (through Runtime) and by node agents.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "core/base/files.h"
#include "core/store.h"
#include "dlaunch.grpc.pb.h"

namespace dlaunch::core {

inline constexpr char kTokenMetadataKey[] = "x-dlaunch-token";
// A node agent's credential (NodeResponse.node_credential) on its node calls.
inline constexpr char kNodeMetadataKey[] = "x-dlaunch-node";

// TLS material for the coordinator and its clients (PEM file paths). All empty: plaintext, which
// dlaunch uses on loopback and, unless told otherwise, between nodes.
struct TlsFiles {
  std::string ca, cert, key;
  bool enabled() const { return !ca.empty() || !cert.empty() || !key.empty(); }
  // DLAUNCH_TLS_CA, DLAUNCH_TLS_CERT, DLAUNCH_TLS_KEY: how the launcher passes them to ranks.
  static TlsFiles FromEnv();
};

class CoordinatorClient {
 public:
  // Does not block: the channel connects lazily. Throws UsageError for incomplete TLS material.
  CoordinatorClient(const std::string& address, std::string token, const TlsFiles& tls = {});

  // Blocks until every rank registered, at most `timeout`. Throws Error(kTimeout) with the
  // coordinator's message naming absent ranks, Error(kUnauthenticated) for a wrong token,
  // Error(kPeerGone) when the coordinator cannot be reached.
  v1::RegisterResponse Register(const v1::RegisterRequest& request,
                                std::chrono::milliseconds timeout);

  // One round trip, at most `timeout`.
  void ReportEvent(const v1::Event& event, std::chrono::milliseconds timeout);

  // Whether a call waits, up to its deadline, for a coordinator that does not answer yet (a rank
  // or a node that may start before node 0 listens), or fails at once (node 0 answered before,
  // so a refused connection means it is gone).
  enum class Readiness { kWait, kFailFast };
  // A context carrying the token (and the node credential, once set), with a deadline `timeout`
  // from now.
  std::unique_ptr<grpc::ClientContext> NewContext(std::chrono::milliseconds timeout,
                                                  Readiness readiness = Readiness::kWait) const;
  // A node agent: every later call carries `credential`, which node 0 gave it at its first
  // RegisterNode. Does not block; safe beside calls on other threads.
  void SetNodeCredential(const std::string& credential);

  v1::Coordinator::Stub& stub() { return *stub_; }

 private:
  std::string token_;
  mutable std::mutex mu_;
  std::string node_credential_;  // under mu_
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

// A Store backed by the coordinator's key/value service.
std::shared_ptr<Store> MakeCoordinatorStore(std::shared_ptr<CoordinatorClient> client);

// Turns a failed gRPC status into dlaunch's Error, keeping the server's message. Does not return.
[[noreturn]] void ThrowRpcError(const grpc::Status& status, const std::string& what);

}  // namespace dlaunch::core
