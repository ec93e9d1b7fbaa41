// The work handle both backends hand out: completed or failed by the backend's thread, waited on
// by the caller. A Wait() that expires hands the op to the watchdog (abort, dump, report).
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "core/comm/communicator.h"
#include "core/error.h"

namespace dlaunch::core {

class AsyncWork : public Work {
 public:
  // on_wait_timeout(seq, op) runs when Wait() expires and returns the message to throw with.
  using TimeoutHook = std::function<std::string(int64_t seq, const std::string& op)>;

  // progress, when given, is called repeatedly by Wait() to drive completion (the NCCL backend
  // queries its CUDA events there) instead of relying on another thread.
  AsyncWork(int rank, int64_t seq, std::string op, TimeoutHook on_wait_timeout,
            std::function<void()> progress = nullptr);

  // Called once at the start of Wait(), on the waiting thread, unless the work is done by then:
  // a backend may run the work right there rather than wake another thread for it and be woken
  // back. Set before the work is handed out.
  using RunHere = std::function<void(AsyncWork& work, std::chrono::milliseconds timeout)>;
  void SetRunHere(RunHere run_here) { run_here_ = std::move(run_here); }

  void Wait(std::chrono::milliseconds timeout) override;
  bool IsCompleted() override;

  // Do not block. The first of MarkCompleted/MarkFailed wins.
  void MarkCompleted();
  void MarkFailed(ErrorKind kind, const std::string& message);

  int64_t seq() const { return seq_; }
  const std::string& op() const { return op_; }

 private:
  const int rank_;
  const int64_t seq_;
  const std::string op_;
  const TimeoutHook on_wait_timeout_;
  const std::function<void()> progress_;
  RunHere run_here_;
  std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  bool failed_ = false;
  ErrorKind error_kind_ = ErrorKind::kInternal;
  std::string error_;
};

}  // namespace dlaunch::core
