// The command line of `dlaunch preflight`, nccl-tests' flags where they exist.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "core/comm/communicator.h"

namespace dlaunch::worker {

struct PreflightOptions {
  std::string backend = "auto";
  size_t min_bytes = 8;    // -b
  size_t max_bytes = 0;    // -e; 0 = backend default (64 MiB gloo, 1 GiB nccl)
  size_t step_factor = 2;  // -f
  int warmup_iters = -1;   // -w; -1 = backend default
  int iters = -1;          // -n; -1 = backend default
  std::vector<std::string> ops = {"allreduce", "allgather", "reduce_scatter",
                                  "broadcast", "alltoall",  "sendrecv"};
  core::DataType dtype = core::DataType::kFloat32;  // -d
  core::ReduceOp redop = core::ReduceOp::kSum;      // -o
  int root = 0;                                     // -r (broadcast)
  std::chrono::milliseconds collective_timeout{std::chrono::seconds(10)};
  double slow_link_factor = 0.5;
  double min_busbw = 0;  // GB/s at the largest size, every op; 0 = no threshold
  bool hang_test = true;
  int hang_rank = -1;  // -1 = the last rank
  bool p2p = true;
  size_t p2p_bytes = 0;  // 0 = backend default (4 MiB gloo, 64 MiB nccl)
  int p2p_iters = 5;
  std::string iface;  // gloo: network interface to use
  // gloo: auto | shm | tcp (core::CommOptions::transport)
  std::string transport = "auto";
  bool help = false;

  // Fills the backend-dependent defaults. Does not block.
  void ResolveDefaults(const std::string& resolved_backend);
};

// Throws UsageError naming the bad flag or value.
PreflightOptions ParsePreflightArgs(const std::vector<std::string>& args);
// The --help text.
std::string PreflightUsage();
// "8", "1K", "4M", "1G" (powers of 1024; B suffix optional). Throws UsageError.
size_t ParseSize(const std::string& text);

}  // namespace dlaunch::worker
