#include "core/comm/async_work.h"

namespace dlaunch::core {

AsyncWork::AsyncWork(int rank, int64_t seq, std::string op, TimeoutHook on_wait_timeout,
                     std::function<void()> progress)
    : rank_(rank),
      seq_(seq),
      op_(std::move(op)),
      on_wait_timeout_(std::move(on_wait_timeout)),
      progress_(std::move(progress)) {}

void AsyncWork::Wait(std::chrono::milliseconds timeout) {
  if (run_here_ && !IsCompleted()) run_here_(*this, timeout);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  if (progress_) {
    // Poll with a short sleep: completion is only noticed by calling progress_.
    while (std::chrono::steady_clock::now() < deadline) {
      progress_();
      std::unique_lock<std::mutex> lock(mu_);
      if (done_cv_.wait_for(lock, std::chrono::microseconds(20), [&] { return done_; })) break;
    }
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (done_cv_.wait_until(lock, deadline, [&] { return done_; })) {
      if (!failed_) return;
      throw Error(error_kind_, error_);
    }
  }
  // Expired: the op is declared hung. The hook aborts the communicator and reports, outside our
  // lock because the abort fails this very work.
  std::string message = on_wait_timeout_ ? on_wait_timeout_(seq_, op_)
                                         : "rank " + std::to_string(rank_) + ": " + op_ + " seq " +
                                               std::to_string(seq_) + " timed out after " +
                                               std::to_string(timeout.count()) + " ms";
  throw Error(ErrorKind::kTimeout, message);
}

bool AsyncWork::IsCompleted() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void AsyncWork::MarkCompleted() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
  }
  done_cv_.notify_all();
}

void AsyncWork::MarkFailed(ErrorKind kind, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    failed_ = true;
    error_kind_ = kind;
    error_ = message;
  }
  done_cv_.notify_all();
}

}  // namespace dlaunch::core
