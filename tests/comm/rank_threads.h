// Runs a world of ranks as threads over one in-memory store with real gloo TCP on loopback.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/comm/comm_options.h"
#include "core/comm/shm_group.h"
#include "core/store.h"

namespace dlaunch::core::testing {

inline CommOptions GlooOptions(int rank, int size, std::shared_ptr<Store> store,
                               std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  CommOptions o;
  o.backend = "gloo";
  o.rank = rank;
  o.size = size;
  o.store = std::move(store);
  o.timeout = timeout;
  o.rendezvous_timeout = std::chrono::seconds(30);
  return o;
}

// Local rank `local` of an n-rank shared-memory group over `store` (world ranks 10, 11, ...). A
// 4 KiB slot gives 1 KiB send/recv rings, so most test messages wrap around them many times.
inline std::unique_ptr<ShmGroup> JoinShmGroup(int local, int n, const std::shared_ptr<Store>& store,
                                              bool attach = true) {
  ShmGroupOptions o;
  o.local_rank = local;
  for (int r = 0; r < n; ++r) o.world_ranks.push_back(10 + r);
  o.store = store;
  o.slot_bytes = 4096;
  o.rendezvous_timeout = std::chrono::seconds(30);
  auto g = std::make_unique<ShmGroup>(o);
  if (attach) g->Attach();
  return g;
}

// Calls body(rank) on `size` threads; rethrows the first exception after all joined.
inline void RunRanks(int size, const std::function<void(int rank)>& body) {
  std::vector<std::thread> threads;
  std::mutex mu;
  std::exception_ptr first;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace dlaunch::core::testing
