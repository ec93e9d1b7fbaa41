#include "core/comm/gloo_store_adapter.h"

#include <algorithm>

namespace dlaunch::core {

GlooStoreAdapter::GlooStoreAdapter(std::shared_ptr<core::Store> store,
                                   std::chrono::milliseconds timeout)
    : store_(std::move(store)), timeout_(timeout) {}

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  store_->Set(key, std::string(data.begin(), data.end()));
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  std::string value = store_->Get(key, timeout_);
  return std::vector<char>(value.begin(), value.end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) { store_->Wait(keys, timeout_); }

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  // gloo passes its context timeout here; never wait longer than we were told to.
  // (zero means "no timeout" to gloo).
  store_->Wait(keys, timeout.count() > 0 ? std::min(timeout, timeout_) : timeout_);
}

}  // namespace dlaunch::core
