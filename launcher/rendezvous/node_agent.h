// The launcher of a node other than node 0: it joins node 0's coordinator, reports its ranks'
// state over one stream, obeys ABORT, and copies its ranks' run-directory files to node 0.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/coordinator_client.h"
#include "dlaunch.grpc.pb.h"

namespace dlaunch::launcher {

class NodeAgent {
 public:
  NodeAgent(std::shared_ptr<core::CoordinatorClient> client, int node_rank);
  ~NodeAgent();

  // Joins a node rendezvous round: blocks until it closed (or the job finished), at most
  // `timeout`; throws Error naming why not.
  v1::NodeResponse Join(const v1::NodeRequest& request, std::chrono::milliseconds timeout);

  // Opens the node stream: `status` is sampled every `interval` (and at Wake); `on_abort` runs
  // (on the stream's thread) when node 0 sends ABORT for an attempt, or with attempt -1 when the
  // coordinator is lost. Does not block.
  using AbortHandler = std::function<void(const std::string& reason, int attempt)>;
  void Start(std::function<v1::NodeStatus()> status, std::chrono::milliseconds interval,
             AbortHandler on_abort);
  // Sends the status now instead of at the next interval. Does not block.
  void Wake();
  // The next PushFiles sends every file whole: the rank folders were put away for an attempt.
  void ForgetSentFiles() { sent_.clear(); }

  // Sends what the files in each rank folder gained since the last call (a replaced file is
  // sent whole). Blocks for the RPCs, each at most 5 s.
  void PushFiles(const std::map<int, std::string>& rank_dirs);

  // Sends the final status and closes the stream. Blocks at most a few seconds.
  void Finish(const v1::NodeStatus& final_status);

 private:
  void StreamLoop();

  std::shared_ptr<core::CoordinatorClient> client_;
  int node_rank_;
  std::function<v1::NodeStatus()> status_;
  AbortHandler on_abort_;
  bool wake_ = false;
  std::chrono::milliseconds interval_{1000};
  std::mutex mu_;
  std::condition_variable cv_;
  bool finishing_ = false;
  std::optional<v1::NodeStatus> final_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::thread thread_;
  struct Sent {
    ino_t inode = 0;
    int64_t offset = 0;
  };
  std::map<std::string, Sent> sent_;
};

}  // namespace dlaunch::launcher
