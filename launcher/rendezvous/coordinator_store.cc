// CoordinatorHandler's store: the store calls' writes, each rank's within its StoreQuota, and the
// waits for keys. The rest of the rank side is in coordinator.cc.
#include <string>

#include "core/error.h"
#include "launcher/rendezvous/coordinator.h"

namespace dlaunch::launcher {

std::shared_ptr<CallWaiters::Waiter> CoordinatorHandler::StartStoreWait(
    std::vector<std::string> keys, std::chrono::milliseconds timeout, StoreDone done) {
  std::shared_ptr<core::Store> store;
  {
    std::lock_guard<std::mutex> lock(mu_);
    store = store_;  // a wait of an attempt that a Reset ended reads that attempt's store
  }
  auto present = [store, keys] {
    for (const auto& k : keys)
      if (!store->Check(k)) return false;
    return true;
  };
  auto finish = [store, keys, timeout, done](CallWaiters::End end) {
    if (end == CallWaiters::End::kReady) return done(nullptr);
    if (end == CallWaiters::End::kGone) {
      const Error gone(ErrorKind::kPeerGone, "the store call was cancelled");
      return done(&gone);
    }
    std::string missing;
    for (const auto& k : keys)
      if (!store->Check(k)) missing += (missing.empty() ? "" : ", ") + k;
    const Error late(ErrorKind::kTimeout, "store wait timed out after " +
                                              std::to_string(timeout.count()) +
                                              " ms; missing keys: " + missing);
    done(&late);
  };
  auto waiter =
      std::make_shared<CallWaiters::Waiter>(present, CallWaiters::Clock::now() + timeout, finish);
  if (waiters_.Add(waiter)) return waiter;
  finish(CallWaiters::End::kReady);
  return nullptr;
}

int CoordinatorHandler::WriterOf(const Caller& caller) {
  switch (caller.role) {
    case CallerRole::kNode:
      return StoreQuota::kLauncher;
    case CallerRole::kRank:
      return caller.rank;
    default:
      throw Error(ErrorKind::kUnauthenticated, "a store write without a job or rank token");
  }
}

std::shared_ptr<core::Store> CoordinatorHandler::CurrentStore() const {
  std::lock_guard<std::mutex> lock(mu_);
  return store_;
}

std::string CoordinatorHandler::StoreSet(const Caller& caller, const std::string& key,
                                         const std::string& value) {
  const int writer = WriterOf(caller);
  const auto bytes = static_cast<int64_t>(value.size());
  {
    std::lock_guard<std::mutex> lock(store_mu_);
    std::string refused = store_quota_.Check(writer, key, bytes);
    if (!refused.empty()) return refused;
    CurrentStore()->Set(key, value);
    store_quota_.Record(writer, key, bytes);
  }
  StoreChanged();
  return "";
}

std::string CoordinatorHandler::StoreAdd(const Caller& caller, const std::string& key,
                                         int64_t delta, int64_t* value) {
  const int writer = WriterOf(caller);
  {
    std::lock_guard<std::mutex> lock(store_mu_);
    // Checked at a counter's widest, so the check needs no value not yet added.
    std::string refused = store_quota_.Check(writer, key, StoreQuota::kCounterBytes);
    if (!refused.empty()) return refused;
    *value = CurrentStore()->Add(key, delta);
    store_quota_.Record(writer, key, static_cast<int64_t>(std::to_string(*value).size()));
  }
  StoreChanged();
  return "";
}

}  // namespace dlaunch::launcher
