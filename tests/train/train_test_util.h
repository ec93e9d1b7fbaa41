// Helpers for the trainer tests: ranks as threads over one in-memory store, temp dirs.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace dlaunch::worker::testing {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/dlaunch-train-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs fn(rank) on n threads and joins them all. Blocks until every rank returned.
inline void RunRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

}  // namespace dlaunch::worker::testing
