// The ranks of one host over one POSIX shared-memory segment (/dev/shm): collectives move data
// through per-rank slots with no kernel involvement, synchronised by a barrier that spins briefly
// and then sleeps on a futex, so that an oversubscribed host does not lose a core to waiting.
//
// Lifetime: the host's leader creates the segment and publishes its name through the job's
// store; the others map it; the last rank to map it unlinks the name, so that nothing is left in
// /dev/shm even when every rank is SIGKILLed afterwards. Each rank holds a robust mutex in the
// segment while it runs ops: the kernel marks it when the rank dies, which is how waiting peers
// tell a dead rank (fail at once, "peer gone") from a slow or stopped one (fail at the deadline).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/communicator.h"
#include "core/store.h"

namespace dlaunch::core {

// Bytes of one rank's slot; a message larger than this moves in slot-sized chunks.
constexpr size_t kDefaultShmSlotBytes = size_t{1} << 20;

struct ShmGroupOptions {
  int local_rank = 0;
  std::vector<int> world_ranks;  // world rank of every local rank, for messages
  // The segment's name is published here (give each group its own prefix).
  std::shared_ptr<Store> store;
  size_t slot_bytes = kDefaultShmSlotBytes;
  std::chrono::milliseconds rendezvous_timeout{std::chrono::minutes(5)};
};

// What one rank passed to an op; ranks compare them before reading each other's data.
struct ShmOpShape {
  uint32_t kind = 0;  // ShmGroup::OpKind
  uint32_t dtype = 0;
  uint64_t count = 0;
  int32_t root = -1;
  uint32_t redop = 0;
};

struct ShmSegment;
struct ShmChannel;

class ShmGroup {
 public:
  using Deadline = std::chrono::steady_clock::time_point;
  enum OpKind : uint32_t { kAllReduce = 1, kBroadcast, kAllGather, kReduceScatter, kBarrier };

  // Blocks until every local rank has mapped the segment (at most rendezvous_timeout); throws
  // Error(kTimeout) naming the ranks that never did, Error(kInternal) when /dev/shm refuses.
  explicit ShmGroup(const ShmGroupOptions& options);
  ~ShmGroup();
  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  // Called on the thread that runs the ops, before the first and after the last: while attached,
  // this rank's death is visible to its peers.
  void Attach();
  void Detach();

  // The collectives among the local ranks. Each blocks until done or until `deadline`; throws
  // Error(kTimeout) naming the ranks not yet arrived, Error(kPeerGone) when a peer died, left or
  // aborted, Error(kInvalidArgument) when the ranks' calls differ (op, dtype, count, root,
  // reduction) - detected before any rank reads another's data.
  // root >= 0: only that local rank gets the result (a reduce / a gather); -1: every rank.
  // divisor > 0: the result is divided by it (the second half of an average).
  void AllReduce(void* buf, size_t count, DataType dtype, ReduceOp op, int divisor, int root,
                 Deadline deadline);
  void Broadcast(void* buf, size_t count, DataType dtype, int root, Deadline deadline);
  // out: local_size() * count elements in local-rank order (only on `root` when root >= 0).
  void AllGather(const void* in, size_t count, DataType dtype, void* out, int root,
                 Deadline deadline);
  // in: local_size() * count elements; out: the reduced block local_rank().
  void ReduceScatter(const void* in, void* out, size_t count, DataType dtype, ReduceOp op,
                     int divisor, Deadline deadline);
  void Barrier(Deadline deadline);

  // Point-to-point between local ranks (dst, src; -1 for none), both halves in flight together
  // so that a ring of ranks that all send and receive cannot deadlock. Each ordered pair has a
  // ring of channel_bytes(): a send returns once its last byte is in the ring (at once when the
  // message fits), a receive once its last byte arrived; messages between a pair keep their
  // order. Each message carries its length: a receive of a different size throws
  // Error(kInvalidArgument) naming both sizes before it reads any payload. Errors and deadline
  // as for the collectives.
  void SendRecv(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes,
                int src, Deadline deadline);

  // Makes the op in progress (here and on every peer) fail at once. Thread-safe; does not block.
  void Abort();

  int local_rank() const { return rank_; }
  int local_size() const { return size_; }
  size_t slot_bytes() const { return slot_bytes_; }
  size_t channel_bytes() const { return channel_bytes_; }

 private:
  // The three steps of every op: publish this rank's shape, meet, compare everyone's.
  void Begin(const char* op, const ShmOpShape& shape, Deadline deadline);
  void CheckShapes();
  // Meets every local rank: the barrier that separates writing a set from reading it.
  void Sync();
  template <typename Ready, typename Bed>
  bool WaitUntil(Ready ready, Bed bed);
  bool Arrived(int local, uint32_t meeting) const;
  void CheckPeers();
  void WakeEveryone();
  [[noreturn]] void ThrowBroken();
  [[noreturn]] void ThrowTimeout();
  std::string Who(int local) const;

  // Double buffering by barrier parity: what is written before barrier g lives in set g % 2 and
  // is read only between barriers g and g + 1, so writing set g % 2 again (before barrier g + 2)
  // never races with a reader.
  int WriteSet() const { return static_cast<int>(barriers_ & 1); }
  int ReadSet() const { return static_cast<int>((barriers_ + 1) & 1); }
  char* Slot(int set, int local) const;
  char* Result(int set) const;
  // The ring from local rank src to dst, and what moves through it: each returns the bytes it
  // moved (0 when the ring is full / empty) and rings the other side's doorbell when it moved any.
  ShmChannel& Channel(int src, int dst) const;
  char* Ring(int src, int dst) const;
  size_t Push(int dst, const char* from, size_t len);
  size_t Pop(int src, char* to, size_t len);
  void RingDoorbell(int local);

  const int rank_;
  const int size_;
  const std::vector<int> world_ranks_;
  size_t slot_bytes_ = 0;
  std::string name_;
  ShmSegment* seg_ = nullptr;
  size_t mapped_bytes_ = 0;
  char* data_ = nullptr;
  size_t channel_bytes_ = 0;
  ShmChannel* channels_ = nullptr;
  char* rings_ = nullptr;
  uint64_t barriers_ = 0;  // barriers completed by this rank; equal on every rank between ops
  std::chrono::nanoseconds spin_{0};   // waiting: spin this long,
  std::chrono::nanoseconds yield_{0};  // then yield the core this long, then sleep
  std::atomic<bool> aborted_{false};
  bool attached_ = false;
  // The op in progress, for messages and for the deadline of its waits.
  const char* op_ = "";
  Deadline deadline_{};
  ShmOpShape shape_{};
  int p2p_peers_[2] = {-1, -1};  // the send/recv in progress: its peers (-1: none, or a collective)
};

}  // namespace dlaunch::core
