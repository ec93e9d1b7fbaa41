// Key/value store shared by all ranks of a job: backends exchange bootstrap data through it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dlaunch::core {

class Store {
 public:
  virtual ~Store() = default;

  // Does not block beyond one round trip.
  virtual void Set(const std::string& key, const std::string& value) = 0;
  // Blocks until the key exists; throws Error(kTimeout) after `timeout`.
  virtual std::string Get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Atomically adds delta (a missing key counts as 0) and returns the new value. One round trip.
  virtual int64_t Add(const std::string& key, int64_t delta) = 0;
  // Blocks until every key exists; throws Error(kTimeout) naming the missing keys after `timeout`.
  virtual void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // Does not block.
  virtual bool Check(const std::string& key) = 0;
};

// A thread-safe store in this process: the coordinator's backing store, and the store of
// single-process jobs and of tests that run ranks as threads.
std::shared_ptr<Store> MakeMemoryStore();

// Prefixes every key, so that independent users (a rebuilt communicator, say) never collide.
std::shared_ptr<Store> MakePrefixStore(std::string prefix, std::shared_ptr<Store> inner);

}  // namespace dlaunch::core
