// Collective communication behind one interface (gloo's transport::Device / c10d's Backend split):
// callers never see which backend runs, and no torch type crosses this boundary.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/store.h"

namespace dlaunch::core {

class FlightRecorder;

enum class DataType { kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUint8, kInt8 };
enum class ReduceOp { kSum, kAvg, kMin, kMax, kProd };
enum class DeviceType { kCpu, kCuda };
// nccl-tests' -R: none, local registration of a buffer with the communicator (ncclCommRegister),
// or a symmetric window every rank registers together (ncclMemAlloc + ncclCommWindowRegister).
enum class BufferRegistration { kNone, kLocal, kSymmetric };

size_t DataTypeSize(DataType dtype);
const char* DataTypeName(DataType dtype);  // nccl-tests' names: float, double, half, bfloat16, ...
const char* ReduceOpName(ReduceOp op);     // sum, avg, min, max, prod

// A view of memory owned by the caller; it must stay valid until the work completes.
struct Buffer {
  void* ptr = nullptr;
  size_t count = 0;  // elements, not bytes
  DataType dtype = DataType::kFloat32;
  DeviceType device = DeviceType::kCpu;
  int device_index = 0;

  size_t bytes() const { return count * DataTypeSize(dtype); }
};

// Handle of one asynchronous collective.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the collective completes, at most `timeout`; throws Error(kTimeout) naming the
  // op and seq on expiry (the communicator is then aborted), Error(kPeerGone) when a peer died.
  virtual void Wait(std::chrono::milliseconds timeout) = 0;
  // Does not block.
  virtual bool IsCompleted() = 0;
};

// Ops recorded once and replayed as a whole (nccl-tests' -G: a CUDA graph). Must not outlive the
// communicator that recorded it.
class OpGraph {
 public:
  virtual ~OpGraph() = default;
  // Runs the recorded ops `times` times back to back; the work completes after the last run.
  // Does not block.
  virtual std::shared_ptr<Work> Launch(int times) = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend() const = 0;  // "gloo" or "nccl"
  // The path this rank's collectives and send/recv take to `peer`: "shm" (shared memory inside the
  // host), "tcp" (gloo's TCP transport) or "nccl" (NCCL's own choice). Does not block.
  virtual const char* CollectivePath(int peer) const { return backend(); }

  // All calls return at once; the work runs in the background. In-place where one buffer is given.
  virtual std::shared_ptr<Work> AllReduce(Buffer buf, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> Broadcast(Buffer buf, int root) = 0;
  // out holds size() * in.count elements, rank r's contribution at offset r * in.count.
  virtual std::shared_ptr<Work> AllGather(Buffer in, Buffer out) = 0;
  // in holds size() * out.count elements; rank r receives the reduced block r.
  virtual std::shared_ptr<Work> ReduceScatter(Buffer in, Buffer out, ReduceOp op) = 0;
  // in and out hold size() blocks of in.count / size() elements each.
  virtual std::shared_ptr<Work> AllToAll(Buffer in, Buffer out) = 0;
  virtual std::shared_ptr<Work> Send(Buffer buf, int peer) = 0;
  virtual std::shared_ptr<Work> Recv(Buffer buf, int peer) = 0;
  // Both halves in flight together, so a ring of ranks that all send and receive cannot deadlock
  // (nccl-tests' sendrecv pattern). Recorded as one "send" and one "recv" entry.
  virtual std::shared_ptr<Work> SendRecv(Buffer send, int dst, Buffer recv, int src) = 0;
  virtual std::shared_ptr<Work> Barrier() = 0;

  // Out-of-place forms and the rooted collectives (nccl-tests' out-of-place column, reduce,
  // gather, scatter). `in` is left as it was; in.ptr == out.ptr is the in-place form. The
  // defaults throw Error(kInvalidArgument) naming the backend, for communicators without them.
  virtual std::shared_ptr<Work> AllReduce(Buffer in, Buffer out, ReduceOp op);
  // Every rank's out receives root's in (in is read on root only).
  virtual std::shared_ptr<Work> Broadcast(Buffer in, Buffer out, int root);
  // Root's out receives the reduction of every rank's in. out holds in.count elements on every
  // rank; off the root its contents afterwards are unspecified (backends may use it as scratch).
  virtual std::shared_ptr<Work> Reduce(Buffer in, Buffer out, ReduceOp op, int root);
  // Root's out holds size() * in.count elements, rank r's in at offset r * in.count.
  virtual std::shared_ptr<Work> Gather(Buffer in, Buffer out, int root);
  // Root's in holds size() * out.count elements; rank r receives block r.
  virtual std::shared_ptr<Work> Scatter(Buffer in, Buffer out, int root);
  // PyTorch's all_to_all_single with split sizes: in holds size() consecutive blocks, block p
  // (in_counts[p] elements) going to rank p; out receives rank p's block for us at the offset of
  // out_counts[0..p). Every rank's in_counts[q] equals rank q's out_counts[rank].
  virtual std::shared_ptr<Work> AllToAllV(Buffer in, std::vector<size_t> in_counts, Buffer out,
                                          std::vector<size_t> out_counts);

  // Records the ops that `issue` calls on this communicator instead of running them (their work
  // completes at once, having done nothing) and returns them as one graph. Collective: every rank
  // records the same ops. Blocks while `issue` runs. Backends without graphs (gloo) throw
  // Error(kInvalidArgument) naming the backend.
  virtual std::unique_ptr<OpGraph> Capture(const std::function<void()>& issue);

  // Unblocks every pending call with an error. Does not block. The communicator is unusable after.
  virtual void Abort() = 0;

  virtual FlightRecorder& flight_recorder() = 0;

  // Memory the backend can use (host memory for gloo, device memory for NCCL), so that callers such
  // as the preflight suite stay free of CUDA. Block until the copy is done.
  virtual DeviceType device_type() const { return DeviceType::kCpu; }
  virtual std::shared_ptr<void> Allocate(size_t bytes);
  // Allocate(bytes), registered with this communicator as `reg` says, and deregistered when the
  // last reference goes (which must be before the communicator). kSymmetric is collective: every
  // rank allocates the same size in the same order. Backends that cannot register throw
  // Error(kInvalidArgument) naming the backend. Blocks for the registration.
  virtual std::shared_ptr<void> AllocateRegistered(size_t bytes, BufferRegistration reg);
  virtual void CopyIn(Buffer dst, const void* host);  // dst.bytes() bytes from host memory
  virtual void CopyOut(void* host, Buffer src);       // src.bytes() bytes into host memory
  // A buffer of `count` elements in memory from Allocate().
  Buffer MakeBuffer(void* ptr, size_t count, DataType dtype) const {
    return Buffer{ptr, count, dtype, device_type(), 0};
  }
};

}  // namespace dlaunch::core
