// The short check `train` runs before training: every rank answers a barrier (the hang check),
// an all-reduce returns the right sum (correctness), and a few MiB all-reduce give a bus
// bandwidth figure. Torch-free; a fuller suite lives in `dlaunch preflight`.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "core/comm/communicator.h"

namespace dlaunch::worker {

struct QuickPreflightResult {
  bool ok = false;
  double busbw_gbps = 0;  // nccl-tests' bus bandwidth: algbw * 2(n-1)/n
  double barrier_ms = 0;
  std::string message;  // what went wrong, or a one-line summary
};

// Blocks for about 10 small collectives, each bounded by `timeout`; throws Error(kTimeout) when a
// rank does not answer (the hang check), returns ok=false when the all-reduce sum is wrong.
QuickPreflightResult RunQuickPreflight(core::Communicator& comm, size_t bytes,
                                       std::chrono::milliseconds timeout);

}  // namespace dlaunch::worker
