#include "core/base/parallel.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace dlaunch::base {

int ReadThreads() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
}

void ParallelFor(size_t n, int threads, const std::function<void(size_t)>& fn) {
  const size_t workers = std::min<size_t>(n, static_cast<size_t>(std::max(threads, 1)));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

}  // namespace dlaunch::base
