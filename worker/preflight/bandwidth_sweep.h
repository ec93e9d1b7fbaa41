// The nccl-tests-shaped sweep of one op over message sizes: timed iterations, then one verified
// iteration per size (#wrong), with times averaged over ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/comm/communicator.h"
#include "worker/preflight/preflight_options.h"

namespace dlaunch::worker {

struct SweepRow {
  size_t bytes = 0;
  size_t count = 0;  // total elements, as nccl-tests prints it
  double time_us = 0;
  double algbw = 0;   // GB/s
  double busbw = 0;   // GB/s
  int64_t wrong = 0;  // elements that differed from the expected result, all ranks together
};

struct SweepResult {
  std::string op;
  std::string dtype;
  std::string redop;  // "none" for ops without a reduction
  int root = -1;      // broadcast only
  std::vector<SweepRow> rows;
  double avg_busbw = 0;
  std::string skipped;  // why the op did not run, when it did not
};

class BandwidthSweep {
 public:
  // on_step runs after every size (status reports). Does not block.
  BandwidthSweep(core::Communicator& comm, const PreflightOptions& options,
                 std::function<void()> on_step);

  // Collective: every rank calls it with the same op. Blocks for the sweep; each op is bounded
  // by the collective timeout (throws Error(kTimeout) on expiry).
  SweepResult Run(const std::string& op);

 private:
  // Runs `iters` ops back to back (nccl-tests style) and waits for all.
  void Launch(const std::string& op, size_t count, int iters);
  int64_t Verify(const std::string& op, size_t count);
  void Wait(const std::shared_ptr<core::Work>& work);

  core::Communicator& comm_;
  const PreflightOptions& options_;
  std::function<void()> on_step_;
  core::DataType dtype_;
  size_t type_size_;
  std::shared_ptr<void> a_, b_;  // device or host buffers of the largest size
  size_t capacity_elems_ = 0;
};

// The table as nccl-tests prints it, ending with "# Avg bus bandwidth".
std::string FormatSweepTable(const SweepResult& result, int world_size, const std::string& backend);

// Value an element of rank r at index i holds before a verified op: small integers, exact in
// every dtype.
double PatternValue(int rank, size_t i);

}  // namespace dlaunch::worker
