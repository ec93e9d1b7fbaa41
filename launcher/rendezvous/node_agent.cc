#include "launcher/rendezvous/node_agent.h"

#include <grpcpp/grpcpp.h>

#include "core/error.h"

namespace dlaunch::launcher {

namespace {
constexpr std::chrono::milliseconds kRpcTimeout{5000};
}  // namespace

NodeAgent::NodeAgent(std::shared_ptr<core::CoordinatorClient> client, int node_rank)
    : client_(std::move(client)), node_rank_(node_rank), files_([this](const v1::FileChunk& c) {
        // Node 0 answered this node's join: a refused push means it is gone, and waiting for it
        // would hold this node's exit for the whole deadline.
        v1::FileAck ack;
        auto ctx = client_->NewContext(kRpcTimeout, core::CoordinatorClient::Readiness::kFailFast);
        return client_->stub().PushFile(ctx.get(), c, &ack).ok();
      }) {}

NodeAgent::~NodeAgent() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    finishing_ = true;
    if (ctx_) ctx_->TryCancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

v1::NodeResponse NodeAgent::Join(const v1::NodeRequest& request,
                                 std::chrono::milliseconds timeout) {
  v1::NodeResponse resp;
  // The first join may come before node 0 listens; a later one (the next attempt) finds it
  // gone when the job is over, and then this node's own verdict stands at once.
  auto ctx = client_->NewContext(timeout + kRpcTimeout,
                                 joined_ ? core::CoordinatorClient::Readiness::kFailFast
                                         : core::CoordinatorClient::Readiness::kWait);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (join_cancelled_)
      throw Error(ErrorKind::kPeerGone, "joining node 0's coordinator: cancelled");
    join_ctx_ = ctx.get();
  }
  auto status = client_->stub().RegisterNode(ctx.get(), request, &resp);
  {
    std::lock_guard<std::mutex> lock(mu_);
    join_ctx_ = nullptr;
  }
  if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
    // Another job's coordinator: a setup error, not a failure of this job.
    throw Error(ErrorKind::kInvalidArgument,
                "the coordinator refused this node: " + status.error_message());
  }
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED && request.member_id() <= 0) {
    // A first join brings no node credential: its job token was refused. Node 0 tells a caller
    // without its token nothing more, not even which job it runs, so the port may be another
    // job's too.
    core::ThrowRpcError(
        grpc::Status(status.error_code(), status.error_message() +
                                              " (a job token other than node 0's, or another "
                                              "job's coordinator on this port)"),
        "joining node 0's coordinator");
  }
  if (!status.ok()) core::ThrowRpcError(status, "joining node 0's coordinator");
  joined_ = true;
  return resp;
}

void NodeAgent::CancelJoin() {
  std::lock_guard<std::mutex> lock(mu_);
  join_cancelled_ = true;
  if (join_ctx_) join_ctx_->TryCancel();
}

void NodeAgent::Start(std::function<v1::NodeStatus()> status, std::chrono::milliseconds interval,
                      AbortHandler on_abort, CommandHandler on_command) {
  status_ = std::move(status);
  interval_ = interval;
  on_abort_ = std::move(on_abort);
  on_command_ = std::move(on_command);
  thread_ = std::thread([this] { StreamLoop(); });
}

void NodeAgent::StreamLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  ctx_ = client_->NewContext(std::chrono::hours(24 * 365));
  auto stream = client_->stub().NodeStream(ctx_.get());
  lock.unlock();
  std::thread reader([&] {
    v1::Command cmd;
    while (stream->Read(&cmd)) {
      if (cmd.kind() == v1::Command::ABORT) {
        on_abort_("aborted by node 0: " + cmd.reason(), cmd.attempt());
      } else if (on_command_) {
        on_command_(cmd);
      }
    }
  });
  lock.lock();
  bool lost = false;
  while (!finishing_) {
    lock.unlock();
    bool ok = stream->Write(status_());
    lock.lock();
    if (!ok) {
      lost = true;
      break;
    }
    cv_.wait_for(lock, interval_, [&] { return finishing_ || wake_; });
    wake_ = false;
  }
  if (final_ && !lost) {
    lock.unlock();
    stream->Write(*final_);
    stream->WritesDone();
    lock.lock();
  }
  lock.unlock();
  reader.join();  // when not lost, the coordinator ends the stream once it has our final status
  if (lost) on_abort_("lost node 0's coordinator", -1);
  stream->Finish();
}

void NodeAgent::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = true;
  }
  cv_.notify_all();
}

void NodeAgent::Finish(const v1::NodeStatus& final_status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    final_ = final_status;
    finishing_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void NodeAgent::PushFiles(const std::map<int, std::string>& rank_dirs,
                          RankFilePusher::Check check) {
  files_.Push(rank_dirs, check);
}

}  // namespace dlaunch::launcher
