// The calls the coordinator holds until something happens (a rank's Register until every rank
// registered, a store wait until its keys exist), held without a thread each: at a thousand
// ranks, a thread per waiting call costs node 0 a thousand stacks and wake-ups at every barrier.
// One thread ends the waits whose deadline passed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

namespace dlaunch::launcher {

class CallWaiters {
 public:
  enum class End { kReady, kTimeout, kGone };
  using Clock = std::chrono::steady_clock;

  // One waiting call. `ready` must not block, and may run on any thread that calls Poke or
  // Add; `done` runs exactly once, outside CallWaiters' lock.
  class Waiter {
   public:
    Waiter(std::function<bool()> ready, Clock::time_point deadline, std::function<void(End)> done)
        : ready_(std::move(ready)), deadline_(deadline), done_(std::move(done)) {}

   private:
    friend class CallWaiters;
    bool Finish(End end);  // false when it ended already

    std::function<bool()> ready_;
    Clock::time_point deadline_;
    std::function<void(End)> done_;
    std::atomic<bool> ended_{false};
  };

  CallWaiters();
  // Ends every waiter (kGone) and the deadline thread.
  ~CallWaiters();

  // Holds `waiter` until it is ready at a Poke, its deadline passes, or it is cancelled; false
  // (and `waiter` not held, its `done` not run) when it is ready now. Once it returned true,
  // `done` may have run already. Does not block.
  bool Add(const std::shared_ptr<Waiter>& waiter);
  // Something a waiter may wait for changed: every ready waiter ends (kReady). Does not block
  // beyond the waiters' `ready`.
  void Poke();
  // The call went away: `waiter` ends (kGone) unless it ended already. Does not block.
  void Cancel(const std::shared_ptr<Waiter>& waiter);
  // Every waiter ends (kGone): the server goes. Does not block.
  void EndAll();

  size_t size() const;

 private:
  void DeadlineLoop();
  std::list<std::shared_ptr<Waiter>> TakeIf(const std::function<bool(const Waiter&)>& pred);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::list<std::shared_ptr<Waiter>> waiting_;
  bool stopping_ = false;
  std::thread deadlines_;
};

}  // namespace dlaunch::launcher
