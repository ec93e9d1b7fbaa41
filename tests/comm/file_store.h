// A Store over a directory, shared by forked rank processes of a test (the in-memory store is not
// shared across fork): one file per key, written atomically; Add under flock.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/store.h"

namespace dlaunch::core::testing {

class FileStore : public Store {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_);
  }

  void Set(const std::string& key, const std::string& value) override {
    const std::string path = Path(key);
    const std::string tmp =
        path + ".tmp." + std::to_string(getpid()) + "." +
        std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
    {
      std::ofstream out(tmp, std::ios::binary);
      out << value;
    }
    std::filesystem::rename(tmp, path);
  }

  std::string Get(const std::string& key, std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!Check(key)) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw Error(ErrorKind::kTimeout, "file store: no key " + key);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::ifstream in(Path(key), std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  int64_t Add(const std::string& key, int64_t delta) override {
    int fd = open((dir_ + "/.lock").c_str(), O_CREAT | O_RDWR, 0600);
    flock(fd, LOCK_EX);
    int64_t value = delta;
    if (Check(key)) value += std::stoll(Get(key, std::chrono::milliseconds(0)));
    Set(key, std::to_string(value));
    flock(fd, LOCK_UN);
    close(fd);
    return value;
  }

  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    for (const std::string& k : keys) Get(k, timeout);
  }

  bool Check(const std::string& key) override { return std::filesystem::exists(Path(key)); }

 private:
  std::string Path(std::string key) const {
    for (char& c : key) {
      if (c == '/') c = '%';
    }
    return dir_ + "/" + key;
  }

  const std::string dir_;
};

}  // namespace dlaunch::core::testing
