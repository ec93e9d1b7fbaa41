// One rank's or node's stream to the coordinator, served on gRPC's callback threads: no thread
// of the coordinator waits on a stream, so a job of thousands of ranks costs no thread (nor its
// stack and wake-ups) per rank.
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "dlaunch.pb.h"

namespace dlaunch::launcher {

// What a stream does with its messages. Each hook runs on a gRPC thread and must not block.
template <typename Message>
struct StreamHooks {
  std::function<int(const Message&)> id;      // whom a message speaks for
  std::function<bool(const Message&)> admit;  // the first message: false refuses the stream
  // The stream is named by its first message; `send` queues a command down it, from any thread,
  // and is false once the stream is gone or its queue full.
  std::function<void(int, std::function<bool(const v1::Command&)>)> opened;
  std::function<void(const Message&)> received;  // every message that speaks for the stream's id
  std::function<void(int)> closed;               // after the last message, once opened
};

template <typename Message>
class CommandStream final : public grpc::ServerBidiReactor<Message, v1::Command> {
 public:
  // A caller refused `at_once` (by its credential) gets `refused` before any message is read.
  CommandStream(StreamHooks<Message> hooks, grpc::Status refused, bool at_once = false)
      : hooks_(std::move(hooks)), refused_(std::move(refused)), out_(std::make_shared<Outbox>()) {
    out_->stream = this;
    if (at_once) {
      out_->Close(refused_);
    } else {
      this->StartRead(&message_);
    }
  }

  void OnReadDone(bool ok) override {
    if (!ok) return End(grpc::Status::OK);
    if (!opened_) {
      if (!hooks_.admit(message_)) return End(refused_);
      opened_ = true;
      who_ = hooks_.id(message_);
      hooks_.opened(who_, [out = out_](const v1::Command& cmd) { return out->Send(cmd); });
    }
    if (hooks_.id(message_) == who_) hooks_.received(message_);  // it speaks for one id only
    this->StartRead(&message_);
  }

  void OnWriteDone(bool ok) override { out_->WriteDone(ok); }
  void OnDone() override { delete this; }

 private:
  // The commands waiting to go down the stream. It outlives the stream: a `send` kept by the
  // coordinator after the stream ended finds it closed.
  struct Outbox {
    static constexpr size_t kMaxQueued = 64;  // a peer that reads nothing holds no more
    std::mutex mu;
    CommandStream* stream = nullptr;
    std::deque<v1::Command> queue;  // the front is being written while `writing`
    bool writing = false;
    bool closed = false;
    std::optional<grpc::Status> finish;  // to send once the write under way is done

    bool Send(const v1::Command& cmd) {
      std::lock_guard<std::mutex> lock(mu);
      if (closed || queue.size() >= kMaxQueued) return false;
      queue.push_back(cmd);
      if (!writing) {
        writing = true;
        stream->StartWrite(&queue.front());
      }
      return true;
    }

    void WriteDone(bool ok) {
      std::lock_guard<std::mutex> lock(mu);
      queue.pop_front();
      if (!ok) queue.clear();  // the peer is gone: its read side ends the stream
      if (!queue.empty() && !closed) {
        stream->StartWrite(&queue.front());
        return;
      }
      writing = false;
      if (finish) stream->Finish(*finish);
    }

    // No write may be under way when the stream finishes: then it finishes after it.
    void Close(const grpc::Status& status) {
      std::lock_guard<std::mutex> lock(mu);
      closed = true;
      if (writing) {
        finish = status;
      } else {
        stream->Finish(status);
      }
    }
  };

  void End(const grpc::Status& status) {
    if (opened_) hooks_.closed(who_);
    out_->Close(status);
  }

  StreamHooks<Message> hooks_;
  grpc::Status refused_;
  std::shared_ptr<Outbox> out_;
  Message message_;
  bool opened_ = false;
  int who_ = -1;
};

}  // namespace dlaunch::launcher
