#include "worker/train/quick_preflight.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace dlaunch::worker {

QuickPreflightResult RunQuickPreflight(core::Communicator& comm, size_t bytes,
                                       std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  QuickPreflightResult r;
  const int n = comm.size();
  auto start = Clock::now();
  comm.Barrier()->Wait(timeout);
  r.barrier_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();

  size_t count = std::max<size_t>(bytes / sizeof(float), 1);
  std::vector<float> data(count);
  core::Buffer buf{data.data(), count, core::DataType::kFloat32};
  // Correctness: rank r contributes r + 1 everywhere, so every element must be n(n+1)/2.
  for (float& v : data) v = static_cast<float>(comm.rank() + 1);
  comm.AllReduce(buf, core::ReduceOp::kSum)->Wait(timeout);
  const float expected = n * (n + 1) / 2.0f;
  for (size_t i = 0; i < count; ++i) {
    if (std::fabs(data[i] - expected) > 1e-3f) {
      char msg[160];
      std::snprintf(msg, sizeof msg, "allreduce check failed at element %zu: got %g, expected %g",
                    i, data[i], expected);
      r.message = msg;
      return r;
    }
  }
  // Bandwidth: one warm-up above, then the best of a few timed runs.
  constexpr int kIters = 5;
  double best_s = 1e30;
  for (int i = 0; i < kIters; ++i) {
    auto t0 = Clock::now();
    comm.AllReduce(buf, core::ReduceOp::kSum)->Wait(timeout);
    best_s = std::min(best_s, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  double algbw = static_cast<double>(count * sizeof(float)) / best_s / 1e9;
  r.busbw_gbps = n > 1 ? algbw * 2.0 * (n - 1) / n : algbw;
  r.ok = true;
  char msg[200];
  std::snprintf(msg, sizeof msg,
                "preflight ok: %d ranks answered in %.1f ms, allreduce %.1f MiB busbw %.2f GB/s", n,
                r.barrier_ms, count * sizeof(float) / 1048576.0, r.busbw_gbps);
  r.message = msg;
  return r;
}

}  // namespace dlaunch::worker
