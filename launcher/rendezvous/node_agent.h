// The launcher of a node other than node 0: it joins node 0's coordinator, reports its ranks'
// state over one stream, obeys ABORT, answers DUMP and STACKS, and keeps node 0's copies of its
// ranks' run-directory files current.
#pragma once

#include <atomic>
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
#include "launcher/rendezvous/file_push.h"

namespace dlaunch::launcher {

class NodeAgent {
 public:
  NodeAgent(std::shared_ptr<core::CoordinatorClient> client, int node_rank);
  ~NodeAgent();

  // Joins a node rendezvous round: blocks until it closed (or the job finished), at most
  // `timeout`; throws Error naming why not.
  v1::NodeResponse Join(const v1::NodeRequest& request, std::chrono::milliseconds timeout);
  // Thread-safe, does not block: the Join under way ends now (Error kPeerGone), and every later
  // one at once. For a signal that ends the job while this node waits for node 0.
  void CancelJoin();

  // Opens the node stream: `status` is sampled every `interval` (and at Wake); `on_abort` runs
  // (on the stream's thread) when node 0 sends ABORT for an attempt, or with attempt -1 when the
  // coordinator is lost; `on_command` gets node 0's other commands (DUMP, STACKS) on the same
  // thread, and must not block for long. Does not block.
  using AbortHandler = std::function<void(const std::string& reason, int attempt)>;
  using CommandHandler = std::function<void(const v1::Command& command)>;
  void Start(std::function<v1::NodeStatus()> status, std::chrono::milliseconds interval,
             AbortHandler on_abort, CommandHandler on_command = nullptr);
  // Sends the status now instead of at the next interval. Does not block.
  void Wake();
  // The next PushFiles sends every file whole: the rank folders were put away for an attempt.
  void ForgetSentFiles() { files_.Forget(); }

  // Brings node 0's copies of the files in each rank folder up to date (file_push.h). Blocks for
  // the RPCs, each at most 5 s. Thread-safe.
  void PushFiles(const std::map<int, std::string>& rank_dirs,
                 RankFilePusher::Check check = RankFilePusher::Check::kQuick);

  // Sends the final status and closes the stream. Blocks at most a few seconds.
  void Finish(const v1::NodeStatus& final_status);

 private:
  void StreamLoop();

  std::shared_ptr<core::CoordinatorClient> client_;
  int node_rank_;
  std::function<v1::NodeStatus()> status_;
  AbortHandler on_abort_;
  CommandHandler on_command_;
  bool wake_ = false;
  std::chrono::milliseconds interval_{1000};
  std::mutex mu_;
  std::condition_variable cv_;
  bool finishing_ = false;
  std::optional<v1::NodeStatus> final_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  grpc::ClientContext* join_ctx_ = nullptr;  // the Join under way, under mu_
  bool join_cancelled_ = false;
  std::atomic<bool> joined_{false};  // a Join succeeded: node 0 was there
  std::thread thread_;
  RankFilePusher files_;
};

}  // namespace dlaunch::launcher
