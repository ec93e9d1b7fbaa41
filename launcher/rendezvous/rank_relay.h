// A joining node's ranks call their own launcher, not node 0. Their heartbeat streams end here:
// the launcher sends the fresh beats on in its node stream, once an interval, and passes node 0's
// commands down to them. Their other calls (registration, the store, events) go on to node 0 over
// the launcher's one connection, under the rank's own token. Node 0 then holds one connection per
// node instead of one per rank, and takes one status message per node and interval instead of
// one per rank, as torchelastic's agents watch their own workers.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/coordinator_client.h"
#include "dlaunch.pb.h"

namespace grpc {
class Server;
}

namespace dlaunch::launcher {

class RankRelay {
 public:
  // Serves the ranks' calls on 127.0.0.1 (a free port), in plaintext, for the ranks of
  // `job_token`'s job. A Heartbeat stream is admitted by a rank's token for its own rank, among
  // the ranks set by SetRanks; Register, the store calls and ReportEvent go on to `node_zero`
  // with the caller's token, its deadline and its cancellation, for node 0 to judge. Throws
  // Error(kInternal) when it cannot listen.
  RankRelay(std::string job_token, std::shared_ptr<core::CoordinatorClient> node_zero);
  ~RankRelay();

  // Where this node's ranks reach the coordinator (their DLAUNCH_COORDINATOR).
  std::string endpoint() const;

  // The ranks of the attempt that runs on this node; streams of others are refused, and what
  // was heard of an earlier attempt is forgotten. Does not block.
  void SetRanks(const std::set<int>& ranks);
  // The latest status of each rank heard from since the last call, by rank: a rank that went
  // silent is not in it, so node 0 sees its silence. Does not block.
  std::vector<v1::RankStatus> TakeFresh();
  // Sends `command` down every open rank stream; how many took it. Does not block.
  int Broadcast(const v1::Command& command);

  int64_t refused_streams() const;

 private:
  class Service;
  bool Admit(const std::string& token, int rank);
  void Opened(int rank, std::function<bool(const v1::Command&)> send);
  void Heard(const v1::RankStatus& status);
  void Closed(int rank);

  const std::string job_token_;
  std::shared_ptr<core::CoordinatorClient> node_zero_;
  mutable std::mutex mu_;
  std::set<int> ranks_;
  std::map<int, v1::RankStatus> fresh_;
  std::map<int, std::function<bool(const v1::Command&)>> senders_;
  int64_t refused_ = 0;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace dlaunch::launcher
