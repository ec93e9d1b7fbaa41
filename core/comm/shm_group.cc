#include "core/comm/shm_group.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "core/comm/shm_segment.h"
#include "core/error.h"

namespace dlaunch::core {

namespace {

constexpr uint64_t kMagic = 0x6d68732d6e75616cull;  // "laun-shm"
constexpr uint32_t kVersion = 3;
constexpr int kMaxLocalRanks = 256;
// All send/recv rings of a host together stay under this, however many ranks it has.
constexpr size_t kChannelBudgetBytes = size_t{64} << 20;

enum RankState : uint32_t { kJoining = 0, kRunning = 1, kLeft = 2, kDead = 3 };

size_t RoundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

std::chrono::microseconds EnvMicros(const char* name, int64_t fallback) {
  const char* env = std::getenv(name);
  return std::chrono::microseconds(env && *env ? std::atoll(env) : fallback);
}

// How a waiter passes the time before it sleeps on the futex. With a core per rank it spins
// (DLAUNCH_SHM_SPIN_US, 50 us). On an oversubscribed host spinning only delays the very peers
// it waits for - the one that is late is usually queued behind the spinner on the same core -
// so it does not spin at all (it polls its peers' flags a few dozen times) and yields its core
// at once, for up to DLAUNCH_SHM_YIELD_US (100 us), as OpenMPI does when oversubscribed
// (mpi_yield_when_idle): the peer it waits for usually runs next, and a sleeping waiter would
// pay a futex wake-up and a migration instead. After that it sleeps, so a stopped peer costs
// the host 100 us of yielding per wait, not a core. Measured with 4 ranks on 2 cores
// (comm_shm_latency, 1 KiB): spinning 2 us first took 17-25 us per allreduce, not spinning 6-12.
void WaitPhases(int local_size, std::chrono::nanoseconds* spin, std::chrono::nanoseconds* yield) {
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  const bool crowded = local_size > cpus;
  *spin = EnvMicros("DLAUNCH_SHM_SPIN_US", crowded ? 0 : 50);
  *yield = EnvMicros("DLAUNCH_SHM_YIELD_US", crowded ? 100 : 0);
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

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
  const size_t pairs = static_cast<size_t>(size_) * size_;
  channel_bytes_ =
      RoundUp(std::max<size_t>(256, std::min(slot_bytes_ / 4, kChannelBudgetBytes / pairs)), 64);
  const size_t header = HeaderBytes(size_);
  const size_t data_bytes = slot_bytes_ * (2 * size_ + 2);
  const size_t channel_table = RoundUp(pairs * sizeof(ShmChannel), 4096);
  const size_t total = header + data_bytes + channel_table + pairs * channel_bytes_;
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
  channels_ = reinterpret_cast<ShmChannel*>(data_ + data_bytes);
  rings_ = data_ + data_bytes + channel_table;

  if (rank_ == 0) {
    // The pages are zero: atomics start at 0. Only the mutexes need initialising.
    seg_->version = kVersion;
    seg_->local_size = static_cast<uint32_t>(size_);
    seg_->slot_bytes = slot_bytes_;
    seg_->channel_bytes = channel_bytes_;
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
             seg_->slot_bytes != slot_bytes_ || seg_->channel_bytes != channel_bytes_ ||
             seg_->total_bytes != total) {
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
  WakeEveryone();  // let waiters see that we left
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
  if (aborted_.load() || seg_->broken.load() != kShmHealthy) ThrowBroken();
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

bool ShmGroup::Arrived(int local, uint32_t meeting) const {
  const uint32_t at = seg_->ranks[local].arrived.load(std::memory_order_acquire);
  return static_cast<int32_t>(at - meeting) >= 0;  // the flag wraps at 2^32
}

void ShmGroup::Sync() {
  // Arrive: one store to this rank's own flag (release: the slot it just wrote goes with it),
  // then a wake-up only for peers asleep on that flag.
  const uint32_t meeting = static_cast<uint32_t>(++barriers_);
  ShmRankArea& me = seg_->ranks[rank_];
  me.arrived.store(meeting);
  if (me.watchers.load() > 0) FutexWakeAll(&me.arrived);
  // Wait for each peer's flag in turn, as MPI's shared-memory collectives do: the peers before
  // `next` are known to have arrived, so each look reads only the flags still missing, and a
  // waiter that has to sleep sleeps on the first missing peer's flag, woken by that peer alone.
  int next = 0;
  auto all_arrived = [&] {
    while (next < size_ && (next == rank_ || Arrived(next, meeting))) ++next;
    return next == size_;
  };
  auto missing = [&] {
    ShmRankArea& peer = seg_->ranks[next];
    return ShmBed{&peer.arrived, &peer.watchers};
  };
  if (!WaitUntil(all_arrived, missing)) ThrowTimeout();
}

void ShmGroup::CheckPeers() {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    ShmRankArea& peer = seg_->ranks[r];
    const uint32_t state = peer.state.load();
    // During send/recv only the peers of the transfer matter; the others may be done.
    if (state == kLeft && (p2p_peers_[0] < 0 || r == p2p_peers_[0] || r == p2p_peers_[1])) {
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
      uint32_t healthy = kShmHealthy;
      if (seg_->broken.compare_exchange_strong(healthy, kShmDied)) seg_->broken_by.store(r);
      WakeEveryone();
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
  if (seg_->broken.load() == kShmDied) {
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
    if (!Arrived(r, static_cast<uint32_t>(barriers_))) late += (late.empty() ? "" : ", ") + Who(r);
  }
  throw Error(ErrorKind::kTimeout,
              "shared memory " + std::string(op_) +
                  " timed out; not arrived: " + (late.empty() ? "none" : late));
}

void ShmGroup::WakeEveryone() {
  for (int r = 0; r < size_; ++r) {
    FutexWakeAll(&seg_->ranks[r].arrived);
    FutexWakeAll(&seg_->ranks[r].doorbell);
  }
}

void ShmGroup::Abort() {
  if (aborted_.exchange(true)) return;
  uint32_t healthy = kShmHealthy;
  if (seg_->broken.compare_exchange_strong(healthy, kShmAborted)) seg_->broken_by.store(rank_);
  WakeEveryone();
}

}  // namespace dlaunch::core
