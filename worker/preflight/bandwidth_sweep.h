// The nccl-tests-shaped sweep of one op over message sizes: for each size, an out-of-place and an
// in-place measurement (timed iterations, then -c verified iterations: #wrong), the time taken
// over ranks as -a says. -G runs the timed and verified iterations as graphs (TimingPlan), -R
// allocates the buffers registered with the communicator.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/comm/communicator.h"
#include "worker/preflight/op_kernels.h"
#include "worker/preflight/op_table.h"
#include "worker/preflight/preflight_options.h"

namespace dlaunch::worker {

// One column group of a row.
struct PlaceResult {
  double time_us = 0;
  double algbw = 0;      // GB/s
  double busbw = 0;      // GB/s
  int64_t wrong = 0;     // elements that differed from the expected result, all ranks together
  bool checked = false;  // false: #wrong reads N/A (-c 0, or in-place alltoall and sendrecv)
};

struct SweepRow {
  size_t bytes = 0;  // nccl-tests' "size": the larger of the send and receive views
  size_t count = 0;  // nccl-tests' "count": the op's element count
  std::string dtype;
  std::string redop;  // "none" for ops without a reduction
  int root = -1;      // -1 for ops without a root
  PlaceResult out_of_place;
  PlaceResult in_place;
};

struct SweepResult {
  const OpSpec* op = nullptr;
  std::vector<SweepRow> rows;
  int out_of_bounds = 0;  // measurements with #wrong > 0: nccl-tests' "Out of bounds values"
  double avg_busbw = 0;   // mean busbw over every measurement of both columns, as nccl-tests
  std::string skipped;    // why the op did not run, when it did not
};

class BandwidthSweep {
 public:
  // on_step runs after every row (status reports). Does not block.
  BandwidthSweep(core::Communicator& comm, const PreflightOptions& options,
                 std::function<void()> on_step);

  // Collective: every rank calls it with the same op. Blocks for the sweep; each op is bounded
  // by the collective timeout (throws Error(kTimeout) on expiry).
  SweepResult Run(const OpSpec& op);

 private:
  struct Case {
    const OpSpec* op;
    core::DataType dtype;
    core::ReduceOp redop;
    int root;
    OpCounts counts;
  };
  PlaceResult Measure(const Case& c, bool in_place);
  // Seconds per op of the timed iterations, as the plan issues them.
  double TimeIterations(const Case& c, const OpArgs& args);
  // Runs the op once (as a one-op graph under -G) and waits for it.
  void RunOnce(const Case& c, const OpArgs& args);
  int64_t Check(const Case& c, const OpArgs& args);
  OpArgs Views(const Case& c, bool in_place) const;
  double OverRanks(double seconds);
  int64_t SumOverRanks(int64_t value);
  void Wait(const std::shared_ptr<core::Work>& work);
  void Fill(core::DataType dtype);

  core::Communicator& comm_;
  const PreflightOptions& options_;
  const TimingPlan plan_;
  std::function<void()> on_step_;
  std::shared_ptr<void> send_, recv_;  // device or host buffers of the largest size
  size_t capacity_ = 0;                // bytes of each
  std::shared_ptr<void> stats_mem_;    // one double for the reductions over ranks
};

}  // namespace dlaunch::worker
