#include "worker/preflight/bandwidth_sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/comm/reduce_kernels.h"
#include "core/error.h"
#include "worker/preflight/bus_bandwidth.h"

namespace dlaunch::worker {
namespace {

using core::Buffer;
using core::DataType;
using core::ReduceOp;

double Tolerance(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return 1e-3;
    case DataType::kBFloat16:
      return 1e-2;
    case DataType::kFloat32:
      return 1e-6;
    case DataType::kFloat64:
      return 1e-12;
    default:
      return 0;
  }
}

bool IsInteger(DataType t) {
  return t == DataType::kInt32 || t == DataType::kInt64 || t == DataType::kUint8;
}

}  // namespace

double PatternValue(int rank, size_t i) { return 1.0 + static_cast<double>((rank + i) % 7); }

BandwidthSweep::BandwidthSweep(core::Communicator& comm, const PreflightOptions& options,
                               std::function<void()> on_step)
    : comm_(comm),
      options_(options),
      on_step_(std::move(on_step)),
      dtype_(options.dtype),
      type_size_(core::DataTypeSize(options.dtype)) {}

void BandwidthSweep::Wait(const std::shared_ptr<core::Work>& work) {
  work->Wait(options_.collective_timeout);
}

void BandwidthSweep::Launch(const std::string& op, size_t count, int iters) {
  const int n = comm_.size();
  const int r = comm_.rank();
  Buffer a = comm_.MakeBuffer(a_.get(), count, dtype_);
  Buffer b = comm_.MakeBuffer(b_.get(), count, dtype_);
  std::vector<std::shared_ptr<core::Work>> works;
  works.reserve(iters);
  for (int i = 0; i < iters; ++i) {
    if (op == "allreduce") {
      works.push_back(comm_.AllReduce(a, options_.redop));
    } else if (op == "broadcast") {
      works.push_back(comm_.Broadcast(a, options_.root));
    } else if (op == "allgather") {
      Buffer in = comm_.MakeBuffer(a_.get(), count / n, dtype_);
      works.push_back(comm_.AllGather(in, b));
    } else if (op == "reduce_scatter") {
      Buffer out = comm_.MakeBuffer(b_.get(), count / n, dtype_);
      works.push_back(comm_.ReduceScatter(a, out, options_.redop));
    } else if (op == "alltoall") {
      works.push_back(comm_.AllToAll(a, b));
    } else if (op == "sendrecv") {
      works.push_back(comm_.SendRecv(a, (r + 1) % n, b, (r + n - 1) % n));
    }
  }
  for (auto& w : works) Wait(w);
}

int64_t BandwidthSweep::Verify(const std::string& op, size_t count) {
  const int n = comm_.size();
  const int r = comm_.rank();
  const ReduceOp redop = options_.redop;
  auto reduce = [&](const std::function<double(int)>& value_of_rank) {
    double acc = value_of_rank(0);
    for (int k = 1; k < n; ++k) {
      double v = value_of_rank(k);
      if (redop == ReduceOp::kMin)
        acc = std::min(acc, v);
      else if (redop == ReduceOp::kMax)
        acc = std::max(acc, v);
      else
        acc += v;
    }
    if (redop == ReduceOp::kAvg) acc = IsInteger(dtype_) ? std::floor(acc / n) : acc / n;
    return acc;
  };

  // Input pattern, copied to the backend's memory.
  size_t in_count = op == "allgather" ? count / n : count;
  size_t out_count = op == "reduce_scatter" ? count / n : count;
  std::vector<char> host(std::max(in_count, out_count) * type_size_ + 1);
  for (size_t i = 0; i < in_count; ++i)
    core::StoreFromDouble(host.data(), i, dtype_, PatternValue(r, i));
  Buffer in = comm_.MakeBuffer(a_.get(), in_count, dtype_);
  Buffer out = comm_.MakeBuffer(b_.get(), out_count, dtype_);
  comm_.CopyIn(in, host.data());

  std::function<double(size_t)> expected;
  if (op == "allreduce") {
    Wait(comm_.AllReduce(in, redop));
    out = in;
    expected = [&](size_t i) { return reduce([&](int k) { return PatternValue(k, i); }); };
  } else if (op == "broadcast") {
    Wait(comm_.Broadcast(in, options_.root));
    out = in;
    expected = [&](size_t i) { return PatternValue(options_.root, i); };
  } else if (op == "allgather") {
    Wait(comm_.AllGather(in, out));
    size_t block = count / n;
    expected = [=](size_t i) { return PatternValue(static_cast<int>(i / block), i % block); };
  } else if (op == "reduce_scatter") {
    Wait(comm_.ReduceScatter(in, out, redop));
    expected = [&, r, out_count](size_t j) {
      return reduce([&](int k) { return PatternValue(k, r * out_count + j); });
    };
  } else if (op == "alltoall") {
    Wait(comm_.AllToAll(in, out));
    size_t block = count / n;
    // Block p of my output is block r of rank p's input.
    expected = [=](size_t i) {
      return PatternValue(static_cast<int>(i / block), r * block + i % block);
    };
  } else if (op == "sendrecv") {
    int left = (r + n - 1) % n;
    Wait(comm_.SendRecv(in, (r + 1) % n, out, left));
    expected = [=](size_t i) { return PatternValue(left, i); };
  }
  comm_.CopyOut(host.data(), out);
  // Expected values go through the dtype's rounding, as the results did.
  std::vector<char> cell(16);
  const double tol = Tolerance(dtype_);
  int64_t wrong = 0;
  for (size_t i = 0; i < out.count; ++i) {
    core::StoreFromDouble(cell.data(), 0, dtype_, expected(i));
    double want = core::LoadAsDouble(cell.data(), 0, dtype_);
    double got = core::LoadAsDouble(host.data(), i, dtype_);
    if (std::fabs(got - want) > tol * std::max(1.0, std::fabs(want))) ++wrong;
  }
  return wrong;
}

SweepResult BandwidthSweep::Run(const std::string& op) {
  const int n = comm_.size();
  SweepResult result;
  result.op = op;
  result.dtype = core::DataTypeName(dtype_);
  result.redop =
      (op == "allreduce" || op == "reduce_scatter") ? core::ReduceOpName(options_.redop) : "none";
  result.root = op == "broadcast" ? options_.root : -1;
  if (op == "sendrecv" && n < 2) {
    result.skipped = "needs at least 2 ranks";
    return result;
  }

  std::vector<size_t> counts;
  for (size_t bytes : SweepSizes(options_.min_bytes, options_.max_bytes, options_.step_factor)) {
    size_t c = OpElementCount(op, bytes, type_size_, n);
    if (counts.empty() || counts.back() != c) counts.push_back(c);
  }
  capacity_elems_ = counts.empty() ? 1 : counts.back();
  a_ = comm_.Allocate(capacity_elems_ * type_size_);
  b_ = comm_.Allocate(capacity_elems_ * type_size_);
  {
    // Defined values: uninitialised memory may hold NaNs or denormals, which slow CPU reductions
    // down by orders of magnitude and would make the timing meaningless.
    std::vector<char> ones(capacity_elems_ * type_size_);
    for (size_t i = 0; i < capacity_elems_; ++i) core::StoreFromDouble(ones.data(), i, dtype_, 1.0);
    comm_.CopyIn(comm_.MakeBuffer(a_.get(), capacity_elems_, dtype_), ones.data());
    comm_.CopyIn(comm_.MakeBuffer(b_.get(), capacity_elems_, dtype_), ones.data());
  }

  const double factor = BusBwFactor(op, n);
  double busbw_sum = 0;
  // Scratch for averaging times and summing #wrong over ranks.
  auto stats_mem = comm_.Allocate(2 * sizeof(double));
  core::Buffer stats = comm_.MakeBuffer(stats_mem.get(), 2, DataType::kFloat64);

  for (size_t count : counts) {
    Launch(op, count, options_.warmup_iters);
    Wait(comm_.Barrier());
    auto t0 = std::chrono::steady_clock::now();
    Launch(op, count, options_.iters);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                     options_.iters;
    int64_t wrong = Verify(op, count);

    double local[2] = {seconds, static_cast<double>(wrong)};
    comm_.CopyIn(stats, local);
    Wait(comm_.AllReduce(stats, ReduceOp::kSum));
    comm_.CopyOut(local, stats);

    SweepRow row;
    row.count = count;
    row.bytes = count * type_size_;
    double avg_seconds = local[0] / n;
    row.time_us = avg_seconds * 1e6;
    row.algbw = AlgBwGBps(row.bytes, avg_seconds);
    row.busbw = row.algbw * factor;
    row.wrong = static_cast<int64_t>(local[1] + 0.5);
    busbw_sum += row.busbw;
    result.rows.push_back(row);
    if (on_step_) on_step_();
  }
  if (!result.rows.empty()) result.avg_busbw = busbw_sum / result.rows.size();
  a_.reset();
  b_.reset();
  return result;
}

std::string FormatSweepTable(const SweepResult& result, int world_size,
                             const std::string& backend) {
  std::ostringstream out;
  char line[256];
  out << "# " << result.op << ": " << world_size << " ranks, backend " << backend << "\n";
  if (!result.skipped.empty()) {
    out << "# skipped: " << result.skipped << "\n\n";
    return out.str();
  }
  out << "#\n";
  std::snprintf(line, sizeof(line), "# %10s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s\n", "size",
                "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong");
  out << line;
  std::snprintf(line, sizeof(line), "# %10s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s\n", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "");
  out << line;
  for (const SweepRow& r : result.rows) {
    std::snprintf(line, sizeof(line), "  %10zu  %12zu  %8s  %6s  %6d  %9.1f  %7.2f  %7.2f  %6lld\n",
                  r.bytes, r.count, result.dtype.c_str(), result.redop.c_str(), result.root,
                  r.time_us, r.algbw, r.busbw, static_cast<long long>(r.wrong));
    out << line;
  }
  int64_t wrong = 0;
  for (const SweepRow& r : result.rows) wrong += r.wrong;
  out << "# Out of bounds values : " << wrong << (wrong == 0 ? " OK" : " FAILED") << "\n";
  std::snprintf(line, sizeof(line), "# Avg bus bandwidth    : %g\n", result.avg_busbw);
  out << line << "#\n\n";
  return out.str();
}

}  // namespace dlaunch::worker
