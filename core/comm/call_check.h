// The argument rules of every Communicator call, shared by all backends so that a call one backend
// rejects is rejected by every other (devices, null buffers, dtypes, element counts, peers, roots).
#pragma once

#include <vector>

#include "core/comm/communicator.h"

namespace dlaunch::core {

class CallCheck {
 public:
  // backend: "gloo" or "nccl", for the messages; device: the memory the backend works on.
  CallCheck(const char* backend, int rank, int size, DeviceType device)
      : backend_(backend), rank_(rank), size_(size), device_(device) {}

  // Each throws Error(kInvalidArgument) naming the rank, backend, op and rule. Do not block.
  void Buffer(const char* op, const core::Buffer& buf) const;
  void Root(const char* op, int root) const;
  void Peer(const char* op, int peer) const;
  // out holds size() * in.count elements of in's dtype.
  void AllGather(const core::Buffer& in, const core::Buffer& out) const;
  // in holds size() * out.count elements of out's dtype.
  void ReduceScatter(const core::Buffer& in, const core::Buffer& out) const;
  // in and out are alike and hold a multiple of size() elements.
  void AllToAll(const core::Buffer& in, const core::Buffer& out) const;
  // One count per rank on each side, adding up to the buffer's count.
  void AllToAllV(const core::Buffer& in, const std::vector<size_t>& in_counts,
                 const core::Buffer& out, const std::vector<size_t>& out_counts) const;
  // Out-of-place allreduce, broadcast and reduce: out is like in (same dtype and count).
  void Alike(const char* op, const core::Buffer& in, const core::Buffer& out) const;
  // Gather: the root's out holds size() * in.count elements; scatter: the root's in holds
  // size() * out.count. Only the root's gathered/scattered buffer is checked.
  void Gather(const core::Buffer& in, const core::Buffer& out, int root) const;
  void Scatter(const core::Buffer& in, const core::Buffer& out, int root) const;

 private:
  [[noreturn]] void Fail(const char* op, const std::string& why) const;
  void SameType(const char* op, const core::Buffer& in, const core::Buffer& out) const;

  const char* const backend_;
  const int rank_;
  const int size_;
  const DeviceType device_;
};

}  // namespace dlaunch::core
