// Element types and host-memory defaults shared by every backend.
#include <cstdlib>
#include <cstring>

#include "core/comm/communicator.h"
#include "core/error.h"

namespace dlaunch::core {

size_t DataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
    case DataType::kInt32:
      return 4;
    case DataType::kFloat64:
    case DataType::kInt64:
      return 8;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kUint8:
    case DataType::kInt8:
      return 1;
  }
  return 0;
}

const char* DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return "float";
    case DataType::kFloat64:
      return "double";
    case DataType::kFloat16:
      return "half";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kUint8:
      return "uint8";
    case DataType::kInt8:
      return "int8";
  }
  return "unknown";
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kProd:
      return "prod";
  }
  return "unknown";
}

std::shared_ptr<void> Communicator::Allocate(size_t bytes) {
  // 64-byte alignment keeps the reduction loops vectorisable; at least one byte so that a
  // zero-element buffer still has a valid, distinct address.
  size_t rounded = ((bytes == 0 ? 1 : bytes) + 63) / 64 * 64;
  void* ptr = std::aligned_alloc(64, rounded);
  if (ptr == nullptr) {
    throw Error(ErrorKind::kOutOfMemory,
                "cannot allocate " + std::to_string(bytes) + " bytes of host memory");
  }
  return std::shared_ptr<void>(ptr, [](void* p) { std::free(p); });
}

void Communicator::CopyIn(Buffer dst, const void* host) {
  if (dst.bytes() > 0) std::memcpy(dst.ptr, host, dst.bytes());
}

void Communicator::CopyOut(void* host, Buffer src) {
  if (src.bytes() > 0) std::memcpy(host, src.ptr, src.bytes());
}

namespace {

std::shared_ptr<Work> Unsupported(const Communicator& comm, const char* op) {
  throw Error(ErrorKind::kInvalidArgument,
              std::string("the ") + comm.backend() + " communicator has no " + op);
}

}  // namespace

std::shared_ptr<Work> Communicator::AllReduce(Buffer, Buffer, ReduceOp) {
  return Unsupported(*this, "out-of-place allreduce");
}
std::shared_ptr<Work> Communicator::Broadcast(Buffer, Buffer, int) {
  return Unsupported(*this, "out-of-place broadcast");
}
std::shared_ptr<Work> Communicator::Reduce(Buffer, Buffer, ReduceOp, int) {
  return Unsupported(*this, "reduce");
}
std::shared_ptr<Work> Communicator::Gather(Buffer, Buffer, int) {
  return Unsupported(*this, "gather");
}
std::shared_ptr<Work> Communicator::Scatter(Buffer, Buffer, int) {
  return Unsupported(*this, "scatter");
}
std::shared_ptr<Work> Communicator::AllToAllV(Buffer, std::vector<size_t>, Buffer,
                                              std::vector<size_t>) {
  return Unsupported(*this, "alltoallv");
}

std::unique_ptr<OpGraph> Communicator::Capture(const std::function<void()>&) {
  throw Error(ErrorKind::kInvalidArgument,
              std::string("the ") + backend() + " communicator cannot capture ops into a graph");
}

std::shared_ptr<void> Communicator::AllocateRegistered(size_t bytes, BufferRegistration reg) {
  if (reg == BufferRegistration::kNone) return Allocate(bytes);
  throw Error(ErrorKind::kInvalidArgument,
              std::string("the ") + backend() + " communicator cannot register buffers");
}

}  // namespace dlaunch::core
