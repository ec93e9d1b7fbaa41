#include <condition_variable>
#include <map>
#include <mutex>

#include "core/error.h"
#include "core/store.h"

namespace dlaunch::core {
namespace {

class MemoryStore : public Store {
 public:
  void Set(const std::string& key, const std::string& value) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      data_[key] = value;
    }
    changed_.notify_all();
  }

  std::string Get(const std::string& key, std::chrono::milliseconds timeout) override {
    Wait({key}, timeout);
    std::lock_guard<std::mutex> lock(mu_);
    return data_.at(key);
  }

  int64_t Add(const std::string& key, int64_t delta) override {
    int64_t value = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = data_.find(key);
      if (it != data_.end()) value = std::stoll(it->second);
      // A counter past int64 would wrap into a value nobody added (and is undefined behaviour).
      if (__builtin_add_overflow(value, delta, &value)) {
        throw Error(ErrorKind::kInvalidArgument,
                    "store add '" + key.substr(0, 64) + "' overflows a 64-bit counter");
      }
      data_[key] = std::to_string(value);
    }
    changed_.notify_all();
    return value;
  }

  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    auto all_present = [&] {
      for (const auto& k : keys)
        if (!data_.count(k)) return false;
      return true;
    };
    if (changed_.wait_for(lock, timeout, all_present)) return;
    std::string missing;
    for (const auto& k : keys)
      if (!data_.count(k)) missing += (missing.empty() ? "" : ", ") + k;
    throw Error(ErrorKind::kTimeout, "store wait timed out after " +
                                         std::to_string(timeout.count()) +
                                         " ms; missing keys: " + missing);
  }

  bool Check(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    return data_.count(key) > 0;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string> data_;
};

class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner)
      : prefix_(std::move(prefix)), inner_(std::move(inner)) {}
  void Set(const std::string& key, const std::string& value) override {
    inner_->Set(prefix_ + key, value);
  }
  std::string Get(const std::string& key, std::chrono::milliseconds timeout) override {
    return inner_->Get(prefix_ + key, timeout);
  }
  int64_t Add(const std::string& key, int64_t delta) override {
    return inner_->Add(prefix_ + key, delta);
  }
  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::vector<std::string> prefixed;
    for (const auto& k : keys) prefixed.push_back(prefix_ + k);
    inner_->Wait(prefixed, timeout);
  }
  bool Check(const std::string& key) override { return inner_->Check(prefix_ + key); }

 private:
  std::string prefix_;
  std::shared_ptr<Store> inner_;
};

}  // namespace

std::shared_ptr<Store> MakeMemoryStore() { return std::make_shared<MemoryStore>(); }

std::shared_ptr<Store> MakePrefixStore(std::string prefix, std::shared_ptr<Store> inner) {
  return std::make_shared<PrefixStore>(std::move(prefix), std::move(inner));
}

}  // namespace dlaunch::core
