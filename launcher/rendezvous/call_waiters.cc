#include "launcher/rendezvous/call_waiters.h"

#include <algorithm>

namespace dlaunch::launcher {

bool CallWaiters::Waiter::Finish(End end) {
  if (ended_.exchange(true)) return false;
  done_(end);
  return true;
}

CallWaiters::CallWaiters() : deadlines_([this] { DeadlineLoop(); }) {}

CallWaiters::~CallWaiters() {
  EndAll();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  deadlines_.join();
}

bool CallWaiters::Add(const std::shared_ptr<Waiter>& waiter) {
  if (waiter->ready_()) return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_.push_back(waiter);
  }
  cv_.notify_all();  // a nearer deadline
  // A Poke between the check above and the push found nothing to end: look again.
  if (waiter->ready_() && waiter->Finish(End::kReady)) {
    TakeIf([&](const Waiter& w) { return &w == waiter.get(); });
  }
  return true;
}

std::list<std::shared_ptr<CallWaiters::Waiter>> CallWaiters::TakeIf(
    const std::function<bool(const Waiter&)>& pred) {
  std::list<std::shared_ptr<Waiter>> taken;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->ended_ || pred(**it)) {
      taken.splice(taken.end(), waiting_, it++);
    } else {
      ++it;
    }
  }
  return taken;
}

void CallWaiters::Poke() {
  std::list<std::shared_ptr<Waiter>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all = waiting_;
  }
  bool any = false;
  for (auto& w : all) {
    if (!w->ended_ && w->ready_()) any |= w->Finish(End::kReady);
  }
  if (any) TakeIf([](const Waiter&) { return false; });  // drops the ended
}

void CallWaiters::Cancel(const std::shared_ptr<Waiter>& waiter) {
  waiter->Finish(End::kGone);
  TakeIf([&](const Waiter& w) { return &w == waiter.get(); });
}

void CallWaiters::EndAll() {
  for (auto& w : TakeIf([](const Waiter&) { return true; })) w->Finish(End::kGone);
}

size_t CallWaiters::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_.size();
}

void CallWaiters::DeadlineLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    Clock::time_point next = Clock::time_point::max();
    for (const auto& w : waiting_) next = std::min(next, w->deadline_);
    if (next == Clock::time_point::max()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, next);
    }
    if (stopping_) break;
    lock.unlock();
    const Clock::time_point now = Clock::now();
    for (auto& w : TakeIf([&](const Waiter& w) { return w.deadline_ <= now; })) {
      // A Poke may have found it ready meanwhile; a wait that came true at its deadline is ready.
      w->Finish(w->ready_() ? End::kReady : End::kTimeout);
    }
    lock.lock();
  }
}

}  // namespace dlaunch::launcher
