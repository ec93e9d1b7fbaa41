// The command line of `dlaunch preflight`: nccl-tests' flags with nccl-tests' meanings, plus
// dlaunch's own checks. A library of its own (no communicator, no Gloo), so that the launcher
// checks every flag before any rank starts.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "core/comm/communicator.h"  // DataType and ReduceOp only: enums, nothing to link

namespace dlaunch::worker {

enum class OutputFormat { kText, kJson, kCsv };

struct PreflightOptions {
  std::string backend = "auto";
  size_t min_bytes = 8;    // -b
  size_t max_bytes = 0;    // -e; 0 = backend default (64 MiB gloo, 1 GiB nccl)
  size_t step_factor = 2;  // -f
  size_t step_bytes = 0;   // -i; > 0: linear steps instead of -f
  int warmup_iters = -1;   // -w; -1 = backend default
  int iters = -1;          // -n; -1 = backend default
  int check_iters = 1;     // -c; 0 = no check (#wrong N/A)
  int blocking = 0;        // -z: 0 back to back, 1 wait + barrier, 2 wait, 3 as 1, barrier untimed
  int average = 1;         // -a: time over ranks: 0 rank 0, 1 mean, 2 min, 3 max
  std::vector<std::string> ops;  // dlaunch names from the op table, in the order given
  std::vector<core::DataType> dtypes = {core::DataType::kFloat32};  // -d
  std::vector<core::ReduceOp> redops = {core::ReduceOp::kSum};      // -o
  int root = 0;  // -r; -1 = every rank in turn ("all")
  std::chrono::milliseconds collective_timeout{std::chrono::seconds(10)};  // -T
  int graph_launches =
      0;  // -G: > 0 captures the -n iterations into a CUDA graph, launched this often
  core::BufferRegistration registration = core::BufferRegistration::kNone;  // -R 0, 1, 2
  double slow_link_factor = 0.5;
  int p2p_retries = 2;   // re-measurements of a link below the threshold before it is flagged
  double min_busbw = 0;  // GB/s at the largest size, every op; 0 = no threshold
  bool hang_test = true;
  int hang_rank = -1;  // -1 = the last rank
  bool p2p = true;
  size_t p2p_bytes = 0;  // 0 = backend default (4 MiB gloo, 64 MiB nccl)
  int p2p_iters = 5;
  std::string iface;  // gloo: network interface to use
  // gloo: auto | shm | tcp (core::CommOptions::transport)
  std::string transport = "auto";
  OutputFormat format = OutputFormat::kText;
  bool help = false;

  // Fills the backend-dependent defaults. Does not block.
  void ResolveDefaults(const std::string& resolved_backend);
};

// How one measurement issues its timed iterations, as nccl-tests' BenchTime does: -n ops back to
// back, or (-G N) those -n ops captured into one graph that is launched N times; the time per op
// is the elapsed time over timed_ops(). With a graph, each -c check also runs as a one-op graph.
struct TimingPlan {
  bool graph = false;
  int captured_ops = 0;  // ops recorded into the graph (-n); 0 without one
  int launches = 1;      // graph launches (-G); 1 without a graph
  int iters = 1;         // -n
  int timed_ops() const { return graph ? captured_ops * launches : iters; }
};
TimingPlan PlanTiming(const PreflightOptions& options);

// -G and -R need the NCCL communicator (CUDA graphs, NCCL buffer registration): throws UsageError
// naming the flag and the backend when `backend` ("gloo" or "nccl") is not nccl. The launcher
// checks an explicit --backend gloo; a rank checks what --backend auto resolved to.
void CheckBackendFlags(const PreflightOptions& options, const std::string& backend);

// Throws UsageError naming the bad flag or value. world_size > 0 also checks -r and --hang-rank
// against it. Does not block.
PreflightOptions ParsePreflightArgs(const std::vector<std::string>& args, int world_size = 0);
// The launcher's check before it spawns any rank: the same parse. Throws UsageError.
inline void ValidatePreflightArgs(const std::vector<std::string>& args, int world_size = 0) {
  ParsePreflightArgs(args, world_size);
}
// The --help text.
std::string PreflightUsage();
// "8", "1K", "4M", "1G" (powers of 1024; B suffix optional). Throws UsageError.
size_t ParseSize(const std::string& text);

// The verdict of a finished preflight, from <run_dir>/preflight.json, as the lines the launcher
// prints in place of a crashed rank's report: "dlaunch: preflight FAIL: <reason>" per reason.
// Empty when the file is missing, unreadable or says PASS.
std::string PreflightFailureReport(const std::string& run_dir);

}  // namespace dlaunch::worker
