// What each op of the table (op_table.h) runs through the Communicator and what a correct result
// holds: one entry per OpKind, so that the sweep never branches on an op's name.
#pragma once

#include <memory>
#include <optional>

#include "core/comm/communicator.h"
#include "worker/preflight/op_table.h"

namespace dlaunch::worker {

struct OpArgs {
  core::Buffer send;  // the send view (param or send count elements)
  core::Buffer recv;  // the receive view
  size_t param = 0;   // the op's count
  core::ReduceOp redop = core::ReduceOp::kSum;
  int root = 0;
};

// The expected value of element i of rank r's receive view, given every rank filled its send view
// with Pattern(rank, i); nullopt where the op defines nothing (off the root of reduce and gather).
struct ExpectContext {
  int rank = 0;
  int nranks = 1;
  size_t param = 0;
  int root = 0;
  core::DataType dtype = core::DataType::kFloat32;
  core::ReduceOp redop = core::ReduceOp::kSum;
};

struct OpKernel {
  std::shared_ptr<core::Work> (*run)(core::Communicator& comm, const OpArgs& args);
  std::optional<double> (*expect)(const ExpectContext& ctx, size_t i);
};

const OpKernel& KernelFor(OpKind kind);

// Value rank r's send view holds at index i before a checked run: small integers, exact in every
// dtype; under prod only 1 and 2, so that products stay exact.
double Pattern(int rank, size_t i, core::ReduceOp redop);

// The reduction over ranks of Pattern(k, i), computed with the backend's own element kernels in
// the dtype (so integer wrap-around and fp16 rounding match), then divided for avg.
double ReducedPattern(const ExpectContext& ctx, size_t i);

}  // namespace dlaunch::worker
