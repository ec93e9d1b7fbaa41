// Gives gloo's rendezvous our Store (the coordinator's key/value store), the way c10d's
// GlooStore wraps its c10d::Store: no second rendezvous service.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/store.h"

namespace dlaunch::core {

class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  // `timeout` bounds get() and the timeout-less wait(), which gloo calls during connectFullMesh.
  GlooStoreAdapter(std::shared_ptr<core::Store> store, std::chrono::milliseconds timeout);

  // Block for at most one store round trip (set) or `timeout` (get, wait); throw dlaunch::Error.
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::shared_ptr<core::Store> store_;
  std::chrono::milliseconds timeout_;
};

}  // namespace dlaunch::core
