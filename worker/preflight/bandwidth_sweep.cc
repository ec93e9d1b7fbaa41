#include "worker/preflight/bandwidth_sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/comm/reduce_kernels.h"
#include "core/error.h"

namespace dlaunch::worker {
namespace {

using core::Buffer;
using core::DataType;
using core::ReduceOp;
using Clock = std::chrono::steady_clock;

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

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

BandwidthSweep::BandwidthSweep(core::Communicator& comm, const PreflightOptions& options,
                               std::function<void()> on_step)
    : comm_(comm), options_(options), plan_(PlanTiming(options)), on_step_(std::move(on_step)) {}

void BandwidthSweep::Wait(const std::shared_ptr<core::Work>& work) {
  work->Wait(options_.collective_timeout);
}

// Defined values: uninitialised memory may hold NaNs or denormals, which slow CPU reductions
// down by orders of magnitude and would make the timing meaningless.
void BandwidthSweep::Fill(DataType dtype) {
  const size_t count = capacity_ / core::DataTypeSize(dtype);
  std::vector<char> ones(capacity_);
  for (size_t i = 0; i < count; ++i) core::StoreFromDouble(ones.data(), i, dtype, 1.0);
  comm_.CopyIn(comm_.MakeBuffer(send_.get(), count, dtype), ones.data());
  comm_.CopyIn(comm_.MakeBuffer(recv_.get(), count, dtype), ones.data());
}

// nccl-tests' views: out-of-place, the send and receive buffers; in-place, both inside the
// receive buffer at the op's in-place offsets.
OpArgs BandwidthSweep::Views(const Case& c, bool in_place) const {
  const size_t elt = core::DataTypeSize(c.dtype);
  const size_t r = static_cast<size_t>(comm_.rank());
  char* send = static_cast<char*>(send_.get());
  char* recv = static_cast<char*>(recv_.get());
  OpArgs a;
  a.param = c.counts.param;
  a.redop = c.redop;
  a.root = std::max(c.root, 0);
  if (in_place) {
    send = recv + r * c.counts.send_inplace_offset * elt;
    recv = recv + r * c.counts.recv_inplace_offset * elt;
  }
  a.send = comm_.MakeBuffer(send, c.counts.send, c.dtype);
  a.recv = comm_.MakeBuffer(recv, c.counts.recv, c.dtype);
  return a;
}

double BandwidthSweep::OverRanks(double seconds) {
  Buffer b = comm_.MakeBuffer(stats_mem_.get(), 1, DataType::kFloat64);
  comm_.CopyIn(b, &seconds);
  if (options_.average == 0) {
    Wait(comm_.Broadcast(b, 0));
  } else {
    const ReduceOp op = options_.average == 2   ? ReduceOp::kMin
                        : options_.average == 3 ? ReduceOp::kMax
                                                : ReduceOp::kSum;
    Wait(comm_.AllReduce(b, op));
  }
  comm_.CopyOut(&seconds, b);
  return options_.average == 1 ? seconds / comm_.size() : seconds;
}

int64_t BandwidthSweep::SumOverRanks(int64_t value) {
  Buffer b = comm_.MakeBuffer(stats_mem_.get(), 1, DataType::kInt64);
  comm_.CopyIn(b, &value);
  Wait(comm_.AllReduce(b, ReduceOp::kSum));
  comm_.CopyOut(&value, b);
  return value;
}

int64_t BandwidthSweep::Check(const Case& c, const OpArgs& args) {
  const size_t elt = core::DataTypeSize(c.dtype);
  const int r = comm_.rank();
  std::vector<char> host(std::max(args.send.count, args.recv.count) * elt + elt);
  for (size_t i = 0; i < args.send.count; ++i) {
    core::StoreFromDouble(host.data(), i, c.dtype, Pattern(r, i, c.redop));
  }
  comm_.CopyIn(args.send, host.data());
  RunOnce(c, args);
  comm_.CopyOut(host.data(), args.recv);

  ExpectContext ctx{r, comm_.size(), c.counts.param, args.root, c.dtype, c.redop};
  const auto expect = KernelFor(c.op->kind).expect;
  const double tol = Tolerance(c.dtype);
  alignas(8) char cell[8];
  int64_t wrong = 0;
  for (size_t i = 0; i < args.recv.count; ++i) {
    std::optional<double> want = expect(ctx, i);
    if (!want) continue;
    // The expected value goes through the dtype's rounding, as the result did.
    core::StoreFromDouble(cell, 0, c.dtype, *want);
    double w = core::LoadAsDouble(cell, 0, c.dtype);
    double got = core::LoadAsDouble(host.data(), i, c.dtype);
    if (!(std::fabs(got - w) <= tol * std::max(1.0, std::fabs(w)))) ++wrong;
  }
  return wrong;
}

void BandwidthSweep::RunOnce(const Case& c, const OpArgs& args) {
  const auto run = KernelFor(c.op->kind).run;
  if (!plan_.graph) return Wait(run(comm_, args));
  // nccl-tests checks under -G with the op captured and launched once.
  std::unique_ptr<core::OpGraph> graph = comm_.Capture([&] { Wait(run(comm_, args)); });
  Wait(graph->Launch(1));
}

double BandwidthSweep::TimeIterations(const Case& c, const OpArgs& args) {
  const auto run = KernelFor(c.op->kind).run;
  const int iters = plan_.iters;
  double seconds = 0;
  if (plan_.graph) {
    // The -n ops recorded once, then the graph launched -G times back to back; capture and
    // instantiation stay outside the time, as in nccl-tests.
    std::unique_ptr<core::OpGraph> graph = comm_.Capture([&] {
      for (int i = 0; i < plan_.captured_ops; ++i) Wait(run(comm_, args));
    });
    Wait(comm_.Barrier());
    auto t0 = Clock::now();
    Wait(graph->Launch(plan_.launches));
    seconds = Seconds(Clock::now() - t0);
  } else if (options_.blocking == 0) {
    // Back to back, as nccl-tests launches them, then one wait for all.
    std::vector<std::shared_ptr<core::Work>> works;
    works.reserve(iters);
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) works.push_back(run(comm_, args));
    for (auto& w : works) Wait(w);
    seconds = Seconds(Clock::now() - t0);
  } else {
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) {
      auto start = Clock::now();
      Wait(run(comm_, args));
      if (options_.blocking == 3) seconds += Seconds(Clock::now() - start);
      if (options_.blocking != 2) Wait(comm_.Barrier());
    }
    if (options_.blocking != 3) seconds = Seconds(Clock::now() - t0);
  }
  return seconds / plan_.timed_ops();
}

PlaceResult BandwidthSweep::Measure(const Case& c, bool in_place) {
  const OpArgs args = Views(c, in_place);
  Wait(comm_.Barrier());
  const double per_op = TimeIterations(c, args);
  const int n = comm_.size();
  const double avg = OverRanks(per_op);
  PlaceResult p;
  p.time_us = avg * 1e6;
  p.algbw = OpAlgBw(*c.op, c.counts.param, core::DataTypeSize(c.dtype), avg, n);
  p.busbw = OpBusBw(*c.op, p.algbw, n);
  p.checked = options_.check_iters > 0 && (!in_place || c.op->checks_in_place);
  if (p.checked) {
    for (int k = 0; k < options_.check_iters && p.wrong == 0; ++k) {
      p.wrong = SumOverRanks(Check(c, args));
    }
  }
  return p;
}

SweepResult BandwidthSweep::Run(const OpSpec& op) {
  const int n = comm_.size();
  SweepResult result;
  result.op = &op;
  if (n < op.min_ranks) {
    result.skipped = "needs at least " + std::to_string(op.min_ranks) + " ranks";
    return result;
  }
  const std::vector<size_t> sizes =
      SweepSizes(options_.min_bytes, options_.max_bytes, options_.step_factor, options_.step_bytes);
  capacity_ = std::max<size_t>(options_.max_bytes, 16);
  send_ = comm_.AllocateRegistered(capacity_, options_.registration);
  recv_ = comm_.AllocateRegistered(capacity_, options_.registration);
  stats_mem_ = comm_.Allocate(sizeof(double));

  std::vector<int> roots = {-1};
  if (op.rooted) {
    roots = {options_.root};
    if (options_.root < 0) {
      roots.clear();
      for (int k = 0; k < n; ++k) roots.push_back(k);
    }
  }
  const std::vector<ReduceOp> redops =
      op.reduces ? options_.redops : std::vector<ReduceOp>{ReduceOp::kSum};
  double busbw_sum = 0;
  int measurements = 0;
  for (DataType dtype : options_.dtypes) {
    Fill(dtype);
    const size_t elt = core::DataTypeSize(dtype);
    for (ReduceOp redop : redops) {
      for (int root : roots) {
        for (size_t bytes : sizes) {
          Case c{&op, dtype, redop, root, CountsFor(op, bytes, elt, n)};
          {  // warm-up, out of place and untimed
            const OpArgs args = Views(c, false);
            std::vector<std::shared_ptr<core::Work>> works;
            for (int i = 0; i < options_.warmup_iters; ++i) {
              works.push_back(KernelFor(op.kind).run(comm_, args));
            }
            for (auto& w : works) Wait(w);
          }
          SweepRow row;
          row.bytes = RowBytes(c.counts, elt);
          row.count = c.counts.param;
          row.dtype = core::DataTypeName(dtype);
          row.redop = op.reduces ? core::ReduceOpName(redop) : "none";
          row.root = root;
          // A check leaves the pattern behind: small integers, as harmless to time as ones.
          row.out_of_place = Measure(c, false);
          row.in_place = Measure(c, true);
          for (const PlaceResult* p : {&row.out_of_place, &row.in_place}) {
            busbw_sum += p->busbw;
            ++measurements;
            if (p->wrong > 0) ++result.out_of_bounds;
          }
          result.rows.push_back(row);
          if (on_step_) on_step_();
        }
      }
    }
  }
  if (measurements > 0) result.avg_busbw = busbw_sum / measurements;
  send_.reset();
  recv_.reset();
  stats_mem_.reset();
  return result;
}

}  // namespace dlaunch::worker
