// The data movement of ShmGroup's collectives. Every op is a sequence of intervals separated by
// Sync(): each interval copies this rank's next chunk into its slot, works on what the previous
// interval published, and the first Sync() is followed by the shape check, before any rank reads
// another's slot. Chunks never exceed a slot, so a message of any size moves through a segment
// of fixed size, pipelined one chunk per meeting.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/comm/reduce_kernels.h"
#include "core/comm/shm_group.h"

namespace dlaunch::core {
namespace {

// Up to this much data, allreduce meets once: every rank publishes its buffer and reduces all of
// them itself, trading (n-1) extra reductions of a small buffer for a second meeting.
// DLAUNCH_SHM_SMALL_BYTES overrides it.
size_t SmallAllReduceBytes() {
  static const size_t bytes = [] {
    const char* env = std::getenv("DLAUNCH_SHM_SMALL_BYTES");
    return env && *env ? static_cast<size_t>(std::atoll(env)) : size_t{32} << 10;
  }();
  return bytes;
}

size_t Chunks(size_t total, size_t per) { return (total + per - 1) / per; }

// Elements [lo, hi) of a chunk of `len` that local rank r reduces: equal shares, in whole
// cache lines where the chunk allows.
void Share(size_t len, int r, int n, size_t line, size_t* lo, size_t* hi) {
  size_t per = (len + n - 1) / n;
  per = (per + line - 1) / line * line;
  *lo = std::min(len, r * per);
  *hi = std::min(len, *lo + per);
}

// out = in[0] op in[1] op ... in[n-1], in rank order so that every rank computes the same bits.
void ReduceAll(ReduceFn fn, char* out, char* const* in, int n, size_t offset, size_t count,
               size_t elem) {
  if (n == 1) {
    if (out != in[0] + offset) std::memcpy(out, in[0] + offset, count * elem);
    return;
  }
  fn(out, in[0] + offset, in[1] + offset, count);
  for (int r = 2; r < n; ++r) fn(out, out, in[r] + offset, count);
}

}  // namespace

void ShmGroup::Barrier(Deadline deadline) {
  Begin("barrier", ShmOpShape{kBarrier, 0, 0, -1, 0}, deadline);
  Sync();
  CheckShapes();
}

void ShmGroup::AllReduce(void* buf, size_t count, DataType dtype, ReduceOp op, int divisor,
                         int root, Deadline deadline) {
  Begin(
      "allreduce",
      ShmOpShape{kAllReduce, static_cast<uint32_t>(dtype), count, root, static_cast<uint32_t>(op)},
      deadline);
  const size_t elem = DataTypeSize(dtype);
  const size_t cap = slot_bytes_ / elem;
  const ReduceFn fn = GetReduceFn(dtype, op);
  const bool wants = root < 0 || root == rank_;
  char* data = static_cast<char*>(buf);
  std::vector<char*> slots(size_);

  if (count * elem <= SmallAllReduceBytes() && count <= cap) {
    std::memcpy(Slot(WriteSet(), rank_), data, count * elem);
    Sync();
    CheckShapes();
    if (count == 0 || !wants) return;
    for (int r = 0; r < size_; ++r) slots[r] = Slot(ReadSet(), r);
    ReduceAll(fn, data, slots.data(), size_, 0, count, elem);
    if (divisor > 0) DivideInPlace(data, count, dtype, divisor);
    return;
  }

  // Three stages in flight: copy chunk j in, reduce this rank's share of chunk j-1 into the
  // result, copy the result of chunk j-2 out.
  const size_t chunks = Chunks(count, cap);
  auto len = [&](size_t k) { return std::min(cap, count - k * cap); };
  const size_t line = std::max<size_t>(1, 64 / elem);
  for (size_t j = 0; j < chunks + 2; ++j) {
    const int wset = WriteSet(), rset = ReadSet();
    if (j < chunks) std::memcpy(Slot(wset, rank_), data + j * cap * elem, len(j) * elem);
    if (j >= 1 && j <= chunks) {
      size_t lo, hi;
      Share(len(j - 1), rank_, size_, line, &lo, &hi);
      if (hi > lo) {
        for (int r = 0; r < size_; ++r) slots[r] = Slot(rset, r);
        char* out = Result(wset) + lo * elem;
        ReduceAll(fn, out, slots.data(), size_, lo * elem, hi - lo, elem);
        if (divisor > 0) DivideInPlace(out, hi - lo, dtype, divisor);
      }
    }
    if (j >= 2 && wants) {
      std::memcpy(data + (j - 2) * cap * elem, Result(rset), len(j - 2) * elem);
    }
    if (j <= chunks) {
      Sync();
      if (j == 0) CheckShapes();
    }
  }
}

void ShmGroup::Broadcast(void* buf, size_t count, DataType dtype, int root, Deadline deadline) {
  Begin("broadcast", ShmOpShape{kBroadcast, static_cast<uint32_t>(dtype), count, root, 0},
        deadline);
  // Only the root writes, so a chunk may fill the whole set of slots.
  const size_t bytes = count * DataTypeSize(dtype);
  const size_t cap = slot_bytes_ * size_;
  const size_t chunks = Chunks(bytes, cap);
  auto len = [&](size_t k) { return std::min(cap, bytes - k * cap); };
  char* data = static_cast<char*>(buf);
  if (chunks == 0) {
    Sync();
    CheckShapes();
    return;
  }
  for (size_t j = 0; j <= chunks; ++j) {
    if (rank_ == root && j < chunks) std::memcpy(Slot(WriteSet(), 0), data + j * cap, len(j));
    if (rank_ != root && j >= 1) {
      std::memcpy(data + (j - 1) * cap, Slot(ReadSet(), 0), len(j - 1));
    }
    if (j < chunks) {
      Sync();
      if (j == 0) CheckShapes();
    }
  }
}

void ShmGroup::AllGather(const void* in, size_t count, DataType dtype, void* out, int root,
                         Deadline deadline) {
  Begin("allgather", ShmOpShape{kAllGather, static_cast<uint32_t>(dtype), count, root, 0},
        deadline);
  const size_t bytes = count * DataTypeSize(dtype);
  const size_t cap = slot_bytes_;
  const size_t chunks = Chunks(bytes, cap);
  auto len = [&](size_t k) { return std::min(cap, bytes - k * cap); };
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  const bool wants = root < 0 || root == rank_;
  if (chunks == 0) {
    Sync();
    CheckShapes();
    return;
  }
  for (size_t j = 0; j <= chunks; ++j) {
    if (j < chunks) std::memcpy(Slot(WriteSet(), rank_), src + j * cap, len(j));
    if (j >= 1 && wants) {
      for (int r = 0; r < size_; ++r) {
        std::memcpy(dst + r * bytes + (j - 1) * cap, Slot(ReadSet(), r), len(j - 1));
      }
    }
    if (j < chunks) {
      Sync();
      if (j == 0) CheckShapes();
    }
  }
}

void ShmGroup::ReduceScatter(const void* in, void* out, size_t count, DataType dtype, ReduceOp op,
                             int divisor, Deadline deadline) {
  Begin("reduce_scatter",
        ShmOpShape{kReduceScatter, static_cast<uint32_t>(dtype), count, -1,
                   static_cast<uint32_t>(op)},
        deadline);
  // A chunk holds the same stretch of every block; rank r reduces block r's stretch.
  const size_t elem = DataTypeSize(dtype);
  const size_t cap = slot_bytes_ / elem / size_;
  const size_t chunks = Chunks(count, cap);
  auto len = [&](size_t k) { return std::min(cap, count - k * cap); };
  const ReduceFn fn = GetReduceFn(dtype, op);
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  std::vector<char*> slots(size_);
  if (chunks == 0) {
    Sync();
    CheckShapes();
    return;
  }
  for (size_t j = 0; j <= chunks; ++j) {
    if (j < chunks) {
      char* mine = Slot(WriteSet(), rank_);
      for (int p = 0; p < size_; ++p) {
        std::memcpy(mine + p * cap * elem, src + (p * count + j * cap) * elem, len(j) * elem);
      }
    }
    if (j >= 1) {
      for (int r = 0; r < size_; ++r) slots[r] = Slot(ReadSet(), r);
      char* target = dst + (j - 1) * cap * elem;
      ReduceAll(fn, target, slots.data(), size_, rank_ * cap * elem, len(j - 1), elem);
      if (divisor > 0) DivideInPlace(target, len(j - 1), dtype, divisor);
    }
    if (j < chunks) {
      Sync();
      if (j == 0) CheckShapes();
    }
  }
}

}  // namespace dlaunch::core
