#include "core/comm/call_check.h"

#include "core/error.h"

namespace dlaunch::core {

void CallCheck::Fail(const char* op, const std::string& why) const {
  throw Error(ErrorKind::kInvalidArgument,
              "rank " + std::to_string(rank_) + ": " + backend_ + " " + op + " " + why);
}

void CallCheck::Buffer(const char* op, const core::Buffer& buf) const {
  if (buf.device != device_) {
    Fail(op, device_ == DeviceType::kCpu ? "needs host memory" : "needs device memory");
  }
  if (buf.ptr == nullptr && buf.count > 0) Fail(op, "on a null buffer");
}

void CallCheck::Root(const char* op, int root) const {
  if (root < 0 || root >= size_) {
    Fail(op, "with invalid root " + std::to_string(root) + " (world size " + std::to_string(size_) +
                 ")");
  }
}

void CallCheck::Peer(const char* op, int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    Fail(op, "with invalid peer " + std::to_string(peer));
  }
}

void CallCheck::SameType(const char* op, const core::Buffer& in, const core::Buffer& out) const {
  Buffer(op, in);
  Buffer(op, out);
  if (in.dtype != out.dtype) {
    Fail(op, std::string("input is ") + DataTypeName(in.dtype) + " but output is " +
                 DataTypeName(out.dtype));
  }
}

void CallCheck::AllGather(const core::Buffer& in, const core::Buffer& out) const {
  SameType("allgather", in, out);
  if (out.count != in.count * size_) {
    Fail("allgather", "output must hold size() * input elements (input " +
                          std::to_string(in.count) + ", output " + std::to_string(out.count) + ")");
  }
}

void CallCheck::ReduceScatter(const core::Buffer& in, const core::Buffer& out) const {
  SameType("reduce_scatter", in, out);
  if (in.count != out.count * size_) {
    Fail("reduce_scatter", "input must hold size() * output elements (input " +
                               std::to_string(in.count) + ", output " + std::to_string(out.count) +
                               ")");
  }
}

void CallCheck::AllToAll(const core::Buffer& in, const core::Buffer& out) const {
  SameType("alltoall", in, out);
  if (in.count != out.count || in.count % size_ != 0) {
    Fail("alltoall", "buffers must be equal and hold a multiple of size() elements (input " +
                         std::to_string(in.count) + ", output " + std::to_string(out.count) + ")");
  }
}

void CallCheck::AllToAllV(const core::Buffer& in, const std::vector<size_t>& in_counts,
                          const core::Buffer& out, const std::vector<size_t>& out_counts) const {
  SameType("alltoallv", in, out);
  auto check = [&](const std::vector<size_t>& counts, const core::Buffer& buf, const char* side) {
    if (counts.size() != static_cast<size_t>(size_)) {
      Fail("alltoallv", std::string("needs one ") + side + " count per rank (got " +
                            std::to_string(counts.size()) + " for world size " +
                            std::to_string(size_) + ")");
    }
    size_t total = 0;
    for (size_t c : counts) total += c;
    if (total != buf.count) {
      Fail("alltoallv", std::string(side) + " counts add up to " + std::to_string(total) +
                            " elements but the " + side + " buffer holds " +
                            std::to_string(buf.count));
    }
  };
  check(in_counts, in, "input");
  check(out_counts, out, "output");
}

void CallCheck::Alike(const char* op, const core::Buffer& in, const core::Buffer& out) const {
  SameType(op, in, out);
  if (in.count != out.count) {
    Fail(op, "output must match its input (input " + std::to_string(in.count) + ", output " +
                 std::to_string(out.count) + ")");
  }
}

void CallCheck::Gather(const core::Buffer& in, const core::Buffer& out, int root) const {
  Root("gather", root);
  Buffer("gather", in);
  if (rank_ != root) return;
  SameType("gather", in, out);
  if (out.count != in.count * size_) {
    Fail("gather", "output must hold size() * input elements (input " + std::to_string(in.count) +
                       ", output " + std::to_string(out.count) + ")");
  }
}

void CallCheck::Scatter(const core::Buffer& in, const core::Buffer& out, int root) const {
  Root("scatter", root);
  Buffer("scatter", out);
  if (rank_ != root) return;
  SameType("scatter", in, out);
  if (in.count != out.count * size_) {
    Fail("scatter", "input must hold size() * output elements (input " + std::to_string(in.count) +
                        ", output " + std::to_string(out.count) + ")");
  }
}

}  // namespace dlaunch::core
