#include "core/comm/shm_group.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "core/error.h"

namespace dlaunch::core {

namespace {

constexpr uint64_t kMagic = 0x6d68732d6e75616cull;  // "laun-shm"
constexpr uint32_t kVersion = 1;
constexpr int kMaxLocalRanks = 256;
// How long a sleeping waiter goes without looking at its peers' health and the abort flag.
constexpr std::chrono::milliseconds kSleepSlice(10);

enum RankState : uint32_t { kJoining = 0, kRunning = 1, kLeft = 2, kDead = 3 };
enum Broken : uint32_t { kHealthy = 0, kAborted = 1, kDied = 2 };

size_t RoundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

std::chrono::microseconds EnvMicros(const char* name, int64_t fallback) {
  const char* env = std::getenv(name);
  return std::chrono::microseconds(env && *env ? std::atoll(env) : fallback);
}

// How a waiter passes the time before it sleeps on the futex. With a core per rank it spins
// (DLAUNCH_SHM_SPIN_US, 50 us). On an oversubscribed host spinning only delays the very peers
// it waits for, so it spins 2 us and then yields its core to them for up to
// DLAUNCH_SHM_YIELD_US (100 us): the peer it waits for usually runs next, and a sleeping
// waiter would pay a futex wake-up and a migration instead.
void WaitPhases(int local_size, std::chrono::nanoseconds* spin, std::chrono::nanoseconds* yield) {
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  const bool crowded = local_size > cpus;
  *spin = EnvMicros("DLAUNCH_SHM_SPIN_US", crowded ? 2 : 50);
  *yield = EnvMicros("DLAUNCH_SHM_YIELD_US", crowded ? 100 : 0);
}

void FutexWait(std::atomic<uint32_t>* word, uint32_t seen, std::chrono::nanoseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000000000),
              static_cast<long>(timeout.count() % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

// Per local rank, on its own cache lines.
struct alignas(64) ShmRankArea {
  pthread_mutex_t alive;  // robust: held while attached
  std::atomic<uint32_t> state;
  std::atomic<uint64_t> arrived;  // barriers this rank has arrived at
  int32_t pid;
  ShmOpShape shape[2];  // by barrier parity, like the data
};

struct alignas(64) ShmSegment {
  uint64_t magic;
  uint32_t version;
  uint32_t local_size;
  uint64_t slot_bytes;
  uint64_t total_bytes;
  std::atomic<uint32_t> mapped;
  alignas(64) std::atomic<uint64_t> arrivals;    // sum over ranks of barriers arrived at
  alignas(64) std::atomic<uint32_t> generation;  // barriers completed (the futex word)
  std::atomic<uint32_t> sleepers;
  alignas(64) std::atomic<uint32_t> broken;
  std::atomic<int32_t> broken_by;  // local rank
  ShmRankArea ranks[1];            // local_size of them
};

namespace {

size_t HeaderBytes(int local_size) {
  return RoundUp(sizeof(ShmSegment) + sizeof(ShmRankArea) * (local_size - 1), 4096);
}

std::string NewSegmentName() {
  std::random_device rd;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "/dlaunch-%d-%08x%08x", static_cast<int>(getpid()), rd(), rd());
  return buf;
}

}  // namespace

ShmGroup::ShmGroup(const ShmGroupOptions& options)
    : rank_(options.local_rank),
      size_(static_cast<int>(options.world_ranks.size())),
      world_ranks_(options.world_ranks) {
  if (size_ < 1 || size_ > kMaxLocalRanks || rank_ < 0 || rank_ >= size_) {
    throw Error(ErrorKind::kInvalidArgument, "shared memory: " + std::to_string(size_) +
                                                 " ranks on one host (1 to " +
                                                 std::to_string(kMaxLocalRanks) + " supported)");
  }
  slot_bytes_ = RoundUp(std::max<size_t>(options.slot_bytes, 64 * size_), 64 * size_);
  const size_t header = HeaderBytes(size_);
  const size_t total = header + slot_bytes_ * (2 * size_ + 2);
  const std::string key = "shm/segment";
  const auto deadline = std::chrono::steady_clock::now() + options.rendezvous_timeout;
  WaitPhases(size_, &spin_, &yield_);

  int fd = -1;
  if (rank_ == 0) {
    name_ = NewSegmentName();
    try {
      fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd < 0) throw Error(ErrorKind::kInternal, Errno("shm_open " + name_));
      // Reserve the pages now: a full /dev/shm must fail here, not as SIGBUS in a collective.
      if (int err = posix_fallocate(fd, 0, static_cast<off_t>(total)); err != 0) {
        errno = err;
        throw Error(ErrorKind::kInternal, Errno("reserving " + std::to_string(total) +
                                                " bytes in /dev/shm for " + name_));
      }
    } catch (const Error& e) {
      if (fd >= 0) close(fd);
      shm_unlink(name_.c_str());
      options.store->Set(key, std::string("error:") + e.what());
      throw;
    }
  } else {
    name_ = options.store->Get(key, options.rendezvous_timeout);
    if (name_.rfind("error:", 0) == 0) {
      throw Error(ErrorKind::kInternal,
                  "local rank 0 could not create the shared memory segment: " + name_.substr(6));
    }
    fd = shm_open(name_.c_str(), O_RDWR, 0600);
    if (fd < 0) throw Error(ErrorKind::kInternal, Errno("shm_open " + name_));
  }
  void* map = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    if (rank_ == 0) shm_unlink(name_.c_str());
    throw Error(ErrorKind::kInternal, Errno("mmap " + name_));
  }
  seg_ = static_cast<ShmSegment*>(map);
  mapped_bytes_ = total;
  data_ = static_cast<char*>(map) + header;

  if (rank_ == 0) {
    // The pages are zero: atomics start at 0. Only the mutexes need initialising.
    seg_->version = kVersion;
    seg_->local_size = static_cast<uint32_t>(size_);
    seg_->slot_bytes = slot_bytes_;
    seg_->total_bytes = total;
    for (int r = 0; r < size_; ++r) {
      pthread_mutexattr_t attr;
      pthread_mutexattr_init(&attr);
      pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
      pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
      pthread_mutex_init(&seg_->ranks[r].alive, &attr);
      pthread_mutexattr_destroy(&attr);
    }
    __atomic_store_n(&seg_->magic, kMagic, __ATOMIC_RELEASE);
    options.store->Set(key, name_);
  } else if (__atomic_load_n(&seg_->magic, __ATOMIC_ACQUIRE) != kMagic ||
             seg_->version != kVersion || seg_->local_size != static_cast<uint32_t>(size_) ||
             seg_->slot_bytes != slot_bytes_ || seg_->total_bytes != total) {
    munmap(map, total);
    seg_ = nullptr;
    throw Error(ErrorKind::kInternal, "shared memory segment " + name_ +
                                          " does not match this rank's group (different "
                                          "slot size or rank count?)");
  }
  seg_->ranks[rank_].pid = static_cast<int32_t>(getpid());
  // The last rank to map the segment removes its name: from here on only the mappings keep it.
  if (seg_->mapped.fetch_add(1) + 1 == static_cast<uint32_t>(size_)) shm_unlink(name_.c_str());
  while (seg_->mapped.load() < static_cast<uint32_t>(size_)) {
    if (std::chrono::steady_clock::now() > deadline) {
      shm_unlink(name_.c_str());
      std::string missing;
      for (int r = 0; r < size_; ++r) {
        if (seg_->ranks[r].pid == 0) missing += (missing.empty() ? "" : ", ") + Who(r);
      }
      munmap(map, total);
      seg_ = nullptr;
      throw Error(ErrorKind::kTimeout, "shared memory rendezvous timed out after " +
                                           std::to_string(options.rendezvous_timeout.count()) +
                                           " ms; never mapped: " + missing);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

ShmGroup::~ShmGroup() {
  Detach();
  if (seg_) munmap(seg_, mapped_bytes_);
}

std::string ShmGroup::Who(int local) const { return "rank " + std::to_string(world_ranks_[local]); }

void ShmGroup::Attach() {
  if (attached_) return;
  ShmRankArea& me = seg_->ranks[rank_];
  int rc = pthread_mutex_lock(&me.alive);
  if (rc == EOWNERDEAD) pthread_mutex_consistent(&me.alive);
  me.state.store(kRunning);
  attached_ = true;
}

void ShmGroup::Detach() {
  if (!attached_) return;
  ShmRankArea& me = seg_->ranks[rank_];
  me.state.store(kLeft);
  pthread_mutex_unlock(&me.alive);
  attached_ = false;
  FutexWakeAll(&seg_->generation);  // let waiters see that we left
}

char* ShmGroup::Slot(int set, int local) const {
  return data_ + (static_cast<size_t>(set) * size_ + local) * slot_bytes_;
}

char* ShmGroup::Result(int set) const {
  return data_ + (2 * static_cast<size_t>(size_) + set) * slot_bytes_;
}

void ShmGroup::Begin(const char* op, const ShmOpShape& shape, Deadline deadline) {
  op_ = op;
  deadline_ = deadline;
  shape_ = shape;
  if (aborted_.load() || seg_->broken.load() != kHealthy) ThrowBroken();
  seg_->ranks[rank_].shape[WriteSet()] = shape;
}

void ShmGroup::CheckShapes() {
  auto describe = [](const ShmOpShape& s) {
    static const char* kNames[] = {"?",         "allreduce",      "broadcast",
                                   "allgather", "reduce_scatter", "barrier"};
    std::string d = kNames[s.kind <= kBarrier ? s.kind : 0];
    if (s.kind == kBarrier) return d;
    d += " of " + std::to_string(s.count) + " " + DataTypeName(static_cast<DataType>(s.dtype));
    if (s.kind == kAllReduce || s.kind == kReduceScatter)
      d += std::string(" (") + ReduceOpName(static_cast<ReduceOp>(s.redop)) + ")";
    if (s.root >= 0) d += " root " + std::to_string(s.root);
    return d;
  };
  const int set = ReadSet();
  for (int r = 0; r < size_; ++r) {
    const ShmOpShape& s = seg_->ranks[r].shape[set];
    if (s.kind != shape_.kind || s.dtype != shape_.dtype || s.count != shape_.count ||
        s.root != shape_.root || s.redop != shape_.redop) {
      // Every rank sees the same shapes, so all of them stop here, still in step.
      throw Error(ErrorKind::kInvalidArgument, "ranks disagree on a collective: " + Who(rank_) +
                                                   " called " + describe(shape_) + ", " + Who(r) +
                                                   " called " + describe(s));
    }
  }
}

void ShmGroup::Sync() {
  const uint64_t target = barriers_ + 1;
  ++barriers_;
  seg_->ranks[rank_].arrived.store(target, std::memory_order_relaxed);
  const uint64_t all = target * static_cast<uint64_t>(size_);
  if (seg_->arrivals.fetch_add(1) + 1 == all) {
    seg_->generation.store(static_cast<uint32_t>(target));
    if (seg_->sleepers.load() > 0) FutexWakeAll(&seg_->generation);
    return;
  }
  const uint32_t want = static_cast<uint32_t>(target);
  WaitUntil([&] {
    return static_cast<int32_t>(seg_->generation.load(std::memory_order_acquire) - want) >= 0;
  });
}

template <typename Ready>
void ShmGroup::WaitUntil(Ready ready) {
  if (ready()) return;
  const auto spin_until = std::chrono::steady_clock::now() + spin_;
  do {
    for (int i = 0; i < 64; ++i) {
      CpuRelax();
      if (ready()) return;
    }
  } while (std::chrono::steady_clock::now() < spin_until);
  const auto yield_until = std::chrono::steady_clock::now() + yield_;
  while (std::chrono::steady_clock::now() < yield_until) {
    sched_yield();
    if (ready()) return;
  }
  while (true) {
    if (aborted_.load() || seg_->broken.load() != kHealthy) ThrowBroken();
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline_) ThrowTimeout();
    const uint32_t seen = seg_->generation.load();
    seg_->sleepers.fetch_add(1);
    if (ready()) {
      seg_->sleepers.fetch_sub(1);
      return;
    }
    FutexWait(&seg_->generation, seen,
              std::min<std::chrono::nanoseconds>(deadline_ - now, kSleepSlice));
    seg_->sleepers.fetch_sub(1);
    if (ready()) return;
    CheckPeers();
  }
}

void ShmGroup::CheckPeers() {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    ShmRankArea& peer = seg_->ranks[r];
    const uint32_t state = peer.state.load();
    if (state == kLeft) {
      throw Error(ErrorKind::kPeerGone, "shared memory " + std::string(op_) + ": " + Who(r) +
                                            " left (its communicator was destroyed)");
    }
    if (state != kRunning) continue;
    int rc = pthread_mutex_trylock(&peer.alive);
    if (rc == EOWNERDEAD) {
      // The kernel released the dead owner's lock to us: record the death for everyone.
      peer.state.store(kDead);
      pthread_mutex_consistent(&peer.alive);
      pthread_mutex_unlock(&peer.alive);
      uint32_t healthy = kHealthy;
      if (seg_->broken.compare_exchange_strong(healthy, kDied)) seg_->broken_by.store(r);
      FutexWakeAll(&seg_->generation);
      ThrowBroken();
    }
    if (rc == 0) pthread_mutex_unlock(&peer.alive);  // between Attach's lock and state store
  }
}

void ShmGroup::ThrowBroken() {
  if (aborted_.load()) {
    throw Error(ErrorKind::kInternal,
                "shared memory " + std::string(op_) + ": communicator aborted");
  }
  const int by = seg_->broken_by.load();
  const std::string who = by >= 0 && by < size_ ? Who(by) : "a local rank";
  if (seg_->broken.load() == kDied) {
    throw Error(ErrorKind::kPeerGone,
                "shared memory " + std::string(op_) + ": " + who + " (pid " +
                    std::to_string(by >= 0 && by < size_ ? seg_->ranks[by].pid : 0) + ") died");
  }
  throw Error(ErrorKind::kPeerGone,
              "shared memory " + std::string(op_) + ": " + who + " aborted its communicator");
}

void ShmGroup::ThrowTimeout() {
  std::string late;
  for (int r = 0; r < size_; ++r) {
    if (seg_->ranks[r].arrived.load() < barriers_) late += (late.empty() ? "" : ", ") + Who(r);
  }
  throw Error(ErrorKind::kTimeout,
              "shared memory " + std::string(op_) +
                  " timed out; not arrived: " + (late.empty() ? "none" : late));
}

void ShmGroup::Abort() {
  if (aborted_.exchange(true)) return;
  uint32_t healthy = kHealthy;
  if (seg_->broken.compare_exchange_strong(healthy, kAborted)) seg_->broken_by.store(rank_);
  FutexWakeAll(&seg_->generation);
}

}  // namespace dlaunch::core
