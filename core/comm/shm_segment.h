// The layout of a ShmGroup's segment and its waiting primitive, shared by the files that make up
// ShmGroup (setup and liveness, collectives, point-to-point). Not for use outside them.
//
// Segment: [header: ShmSegment + one ShmRankArea per local rank]
//          [data: 2 sets of one slot per rank, plus 2 result slots]
//          [channels: one ShmChannel per ordered pair (src, dst)]
//          [channel rings: channel_bytes per ordered pair]
#pragma once

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <ctime>

#include "core/comm/shm_group.h"
#include "core/error.h"

namespace dlaunch::core {

// Per local rank, on its own cache lines.
struct alignas(64) ShmRankArea {
  pthread_mutex_t alive;  // robust: held while attached
  std::atomic<uint32_t> state;
  int32_t pid;
  ShmOpShape shape[2];  // by barrier parity, like the data
  // This rank's arrival flag: the number of meetings it has arrived at (mod 2^32), written only
  // by this rank and on a line of its own, so that a meeting is n stores to n lines that each
  // waiter reads, rather than n read-modify-writes contending for one line. It is also the futex
  // word that a waiter for this rank sleeps on; `watchers` counts those sleepers.
  alignas(64) std::atomic<uint32_t> arrived;
  std::atomic<uint32_t> watchers;
  // Rung by a peer that put data into, or took data out of, a channel of this rank: the futex
  // word this rank sleeps on during send/recv.
  alignas(64) std::atomic<uint32_t> doorbell;
  std::atomic<uint32_t> dozing;  // this rank sleeps on its doorbell
};

struct alignas(64) ShmSegment {
  uint64_t magic;
  uint32_t version;
  uint32_t local_size;
  uint64_t slot_bytes;
  uint64_t channel_bytes;
  uint64_t total_bytes;
  std::atomic<uint32_t> mapped;
  alignas(64) std::atomic<uint32_t> broken;
  std::atomic<int32_t> broken_by;  // local rank
  ShmRankArea ranks[1];            // local_size of them
};

// A single-producer single-consumer byte ring from one local rank to another. Messages go as an
// 8-byte length followed by the payload, so a receive of the wrong size is caught before it
// reads the payload.
struct alignas(64) ShmChannel {
  std::atomic<uint64_t> head;              // bytes the sender has written, ever
  alignas(64) std::atomic<uint64_t> tail;  // bytes the receiver has taken, ever
};

// How long a sleeping waiter goes without looking at its peers' health and the abort flag.
constexpr std::chrono::milliseconds kShmSleepSlice(10);

enum ShmBroken : uint32_t { kShmHealthy = 0, kShmAborted = 1, kShmDied = 2 };

inline void FutexWait(std::atomic<uint32_t>* word, uint32_t seen,
                      std::chrono::nanoseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000000000),
              static_cast<long>(timeout.count() % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

inline void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Where a waiter sleeps: a futex word that whoever makes its condition true changes, and the
// count of sleepers on it that tells that side to wake them.
struct ShmBed {
  std::atomic<uint32_t>* word;
  std::atomic<uint32_t>* sleepers;
};

// Spins, then yields, then sleeps on bed()'s word (announcing itself in its sleepers) until
// ready(); bed() is asked only while ready() is false, each time the waiter goes to sleep, so it
// may name the word of whichever peer is still missing. Throws when the group breaks or is
// aborted; returns false at deadline_.
template <typename Ready, typename Bed>
bool ShmGroup::WaitUntil(Ready ready, Bed bed) {
  if (ready()) return true;
  const auto spin_until = std::chrono::steady_clock::now() + spin_;
  do {
    for (int i = 0; i < 64; ++i) {
      CpuRelax();
      if (ready()) return true;
    }
  } while (std::chrono::steady_clock::now() < spin_until);
  const auto yield_until = std::chrono::steady_clock::now() + yield_;
  while (std::chrono::steady_clock::now() < yield_until) {
    sched_yield();
    if (ready()) return true;
  }
  while (true) {
    if (aborted_.load() || seg_->broken.load() != kShmHealthy) ThrowBroken();
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline_) return false;
    const ShmBed where = bed();
    const uint32_t seen = where.word->load();
    where.sleepers->fetch_add(1);
    if (ready()) {
      where.sleepers->fetch_sub(1);
      return true;
    }
    // The word to sleep on may have moved on before `seen` was read (the peer it names had
    // already arrived, and another one is missing now): sleeping on it would wait for a change
    // that never comes. Only a bed that is still the right one after the sleeper announced
    // itself is slept in; a word that changed after `seen` makes the kernel return at once.
    if (bed().word != where.word) {
      where.sleepers->fetch_sub(1);
      continue;
    }
    FutexWait(where.word, seen,
              std::min<std::chrono::nanoseconds>(deadline_ - now, kShmSleepSlice));
    where.sleepers->fetch_sub(1);
    if (ready()) return true;
    try {
      CheckPeers();
    } catch (const Error&) {
      if (ready()) return true;  // a peer that left (or died) after it finished our part
      throw;
    }
  }
}

}  // namespace dlaunch::core
