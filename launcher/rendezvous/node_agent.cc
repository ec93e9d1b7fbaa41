#include "launcher/rendezvous/node_agent.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace dlaunch::launcher {

namespace fs = std::filesystem;

namespace {
constexpr std::chrono::milliseconds kRpcTimeout{5000};
constexpr int64_t kMaxChunk = 1 << 20;
}  // namespace

NodeAgent::NodeAgent(std::shared_ptr<core::CoordinatorClient> client, int node_rank)
    : client_(std::move(client)), node_rank_(node_rank) {}

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
  auto ctx = client_->NewContext(timeout + kRpcTimeout);
  auto status = client_->stub().RegisterNode(ctx.get(), request, &resp);
  if (!status.ok()) core::ThrowRpcError(status, "joining node 0's coordinator");
  return resp;
}

void NodeAgent::Start(std::function<v1::NodeStatus()> status, std::chrono::milliseconds interval,
                      AbortHandler on_abort) {
  status_ = std::move(status);
  interval_ = interval;
  on_abort_ = std::move(on_abort);
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

void NodeAgent::PushFiles(const std::map<int, std::string>& rank_dirs) {
  for (const auto& [rank, dir] : rank_dirs) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (!entry.is_regular_file(ec)) continue;
      const std::string path = entry.path().string();
      const std::string name = entry.path().filename().string();
      if (name.find(".tmp.") != std::string::npos) continue;  // half-written, renamed soon
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0) continue;
      Sent& sent = sent_[path];
      bool truncate = false;
      if (sent.inode != st.st_ino || st.st_size < sent.offset) {
        sent = Sent{st.st_ino, 0};
        truncate = true;
      }
      std::ifstream in(path, std::ios::binary);
      in.seekg(sent.offset);
      while (sent.offset < st.st_size) {
        std::string data(std::min<int64_t>(kMaxChunk, st.st_size - sent.offset), '\0');
        in.read(data.data(), static_cast<std::streamsize>(data.size()));
        data.resize(static_cast<size_t>(in.gcount()));
        if (data.empty()) break;
        v1::FileChunk chunk;
        chunk.set_rank(rank);
        chunk.set_name(name);
        chunk.set_offset(sent.offset);
        chunk.set_data(data);
        chunk.set_truncate(truncate);
        v1::FileAck ack;
        auto ctx = client_->NewContext(kRpcTimeout);
        if (!client_->stub().PushFile(ctx.get(), chunk, &ack).ok()) return;
        sent.offset += static_cast<int64_t>(data.size());
        truncate = false;
      }
    }
  }
}

}  // namespace dlaunch::launcher
