// Where a small shared-memory allreduce spends its time: the same float32 sum allreduce of
// BYTES, ITERS times on RANKS ranks as threads, measured (a) on a bare ShmGroup, called on the
// rank's own thread, and (b) through the gloo communicator (AllReduce then Wait: the op runs on
// the communicator's worker thread). Prints one JSON line per layer with the median of
// REPEATS runs in microseconds per op.
//
// usage: comm_shm_latency [RANKS=4] [BYTES=1024] [ITERS=2000] [REPEATS=5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "core/comm/comm_options.h"
#include "core/comm/shm_group.h"
#include "core/store.h"

namespace {

using namespace dlaunch::core;
using Clock = std::chrono::steady_clock;

// Runs body(rank) on `ranks` threads; returns the slowest rank's microseconds per op.
template <typename Body>
double Timed(int ranks, int iters, Body body) {
  std::vector<double> us(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] { us[r] = body(r) / iters; });
  }
  for (auto& t : threads) t.join();
  return *std::max_element(us.begin(), us.end());
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 4;
  const size_t bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024;
  const int iters = argc > 3 ? std::atoi(argv[3]) : 2000;
  const int repeats = argc > 4 ? std::atoi(argv[4]) : 5;
  const size_t count = std::max<size_t>(bytes / sizeof(float), 1);
  const auto forever = std::chrono::seconds(60);

  std::vector<double> bare, comm;
  for (int rep = 0; rep < repeats; ++rep) {
    auto store = MakeMemoryStore();
    bare.push_back(Timed(ranks, iters, [&](int r) {
      ShmGroupOptions o;
      o.local_rank = r;
      for (int i = 0; i < ranks; ++i) o.world_ranks.push_back(i);
      o.store = MakePrefixStore("bare/", store);
      ShmGroup g(o);
      g.Attach();
      std::vector<float> buf(count, 1.0f);
      g.Barrier(Clock::now() + forever);
      const auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) {
        g.AllReduce(buf.data(), count, DataType::kFloat32, ReduceOp::kSum, 0, -1,
                    Clock::now() + forever);
      }
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      g.Barrier(Clock::now() + forever);
      g.Detach();
      return us;
    }));
    comm.push_back(Timed(ranks, iters, [&](int r) {
      CommOptions o;
      o.backend = "gloo";
      o.rank = r;
      o.size = ranks;
      o.store = MakePrefixStore("comm/", store);
      o.transport = "shm";
      auto c = MakeCommunicator(o);
      std::vector<float> buf(count, 1.0f);
      c->Barrier()->Wait(forever);
      const auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) {
        c->AllReduce({buf.data(), count}, ReduceOp::kSum)->Wait(forever);
      }
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      c->Barrier()->Wait(forever);
      return us;
    }));
  }
  std::printf("{\"layer\": \"shm_group\", \"ranks\": %d, \"bytes\": %zu, \"us_per_op\": %.2f}\n",
              ranks, bytes, Median(bare));
  std::printf("{\"layer\": \"communicator\", \"ranks\": %d, \"bytes\": %zu, \"us_per_op\": %.2f}\n",
              ranks, bytes, Median(comm));
  return 0;
}
