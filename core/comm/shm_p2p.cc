// ShmGroup's send/recv: one single-producer single-consumer ring per ordered pair of local
// ranks. Each side moves what the ring allows, rings the other side's doorbell, and sleeps on its
// own doorbell when neither half can move; so a rank that sends and receives at once never waits
// on one half while the other could progress.
#include <algorithm>
#include <cstring>

#include "core/comm/shm_segment.h"
#include "core/error.h"

namespace dlaunch::core {
namespace {

constexpr size_t kHeaderBytes = sizeof(uint64_t);  // the length in front of every message

// One message in flight in one direction: the 8-byte length, then the payload.
struct Transfer {
  int peer = -1;
  char* payload = nullptr;
  size_t bytes = 0;
  uint64_t header = 0;
  size_t done = 0;  // of kHeaderBytes + bytes

  bool active() const { return peer >= 0 && done < kHeaderBytes + bytes; }
  // Where the next byte goes (or comes from), and how many are left before the next boundary.
  char* cursor() {
    return done < kHeaderBytes ? reinterpret_cast<char*>(&header) + done
                               : payload + (done - kHeaderBytes);
  }
  size_t piece() const {
    return done < kHeaderBytes ? kHeaderBytes - done : kHeaderBytes + bytes - done;
  }
};

}  // namespace

ShmChannel& ShmGroup::Channel(int src, int dst) const {
  return channels_[static_cast<size_t>(src) * size_ + dst];
}

char* ShmGroup::Ring(int src, int dst) const {
  return rings_ + (static_cast<size_t>(src) * size_ + dst) * channel_bytes_;
}

void ShmGroup::RingDoorbell(int local) {
  ShmRankArea& peer = seg_->ranks[local];
  peer.doorbell.fetch_add(1);
  if (peer.dozing.load() > 0) FutexWakeAll(&peer.doorbell);
}

size_t ShmGroup::Push(int dst, const char* from, size_t len) {
  ShmChannel& c = Channel(rank_, dst);
  const uint64_t head = c.head.load(std::memory_order_relaxed);  // only this rank writes it
  const uint64_t tail = c.tail.load(std::memory_order_acquire);
  const size_t n = std::min<size_t>(len, channel_bytes_ - (head - tail));
  if (n == 0) return 0;
  char* ring = Ring(rank_, dst);
  const size_t at = head % channel_bytes_;
  const size_t first = std::min(n, channel_bytes_ - at);
  std::memcpy(ring + at, from, first);
  std::memcpy(ring, from + first, n - first);
  c.head.store(head + n, std::memory_order_release);
  RingDoorbell(dst);
  return n;
}

size_t ShmGroup::Pop(int src, char* to, size_t len) {
  ShmChannel& c = Channel(src, rank_);
  const uint64_t tail = c.tail.load(std::memory_order_relaxed);  // only this rank writes it
  const uint64_t head = c.head.load(std::memory_order_acquire);
  const size_t n = std::min<size_t>(len, head - tail);
  if (n == 0) return 0;
  const char* ring = Ring(src, rank_);
  const size_t at = tail % channel_bytes_;
  const size_t first = std::min(n, channel_bytes_ - at);
  std::memcpy(to, ring + at, first);
  std::memcpy(to + first, ring, n - first);
  c.tail.store(tail + n, std::memory_order_release);
  RingDoorbell(src);
  return n;
}

void ShmGroup::SendRecv(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes,
                        int src, Deadline deadline) {
  op_ = dst >= 0 && src >= 0 ? "sendrecv" : dst >= 0 ? "send" : "recv";
  deadline_ = deadline;
  struct Peers {
    int* peers;
    Peers(int* p, int dst, int src) : peers(p) {
      peers[0] = dst >= 0 ? dst : src;
      peers[1] = src >= 0 ? src : dst;
    }
    ~Peers() { peers[0] = peers[1] = -1; }
  } involved(p2p_peers_, dst, src);
  if (aborted_.load() || seg_->broken.load() != kShmHealthy) ThrowBroken();
  Transfer out{dst, const_cast<char*>(static_cast<const char*>(send)), send_bytes, send_bytes};
  Transfer in{src, static_cast<char*>(recv), recv_bytes};
  // Moves what the rings allow; true when anything moved.
  auto progress = [&] {
    bool moved = false;
    while (out.active()) {
      const size_t n = Push(out.peer, out.cursor(), out.piece());
      if (n == 0) break;
      out.done += n;
      moved = true;
    }
    while (in.active()) {
      const size_t n = Pop(in.peer, in.cursor(), in.piece());
      if (n == 0) break;
      in.done += n;
      moved = true;
      if (in.done == kHeaderBytes && in.header != in.bytes) {
        throw Error(ErrorKind::kInvalidArgument, "shared memory recv: " + Who(rank_) +
                                                     " expected " + std::to_string(in.bytes) +
                                                     " bytes from " + Who(in.peer) +
                                                     ", which sent " + std::to_string(in.header));
      }
    }
    // A peer whose part is done may leave: only the other one still matters to CheckPeers.
    if (!in.active() && out.active()) p2p_peers_[1] = p2p_peers_[0];
    if (!out.active() && in.active()) p2p_peers_[0] = p2p_peers_[1];
    return moved;
  };
  auto can_move = [&] {
    if (out.active()) {
      const ShmChannel& c = Channel(rank_, out.peer);
      if (c.head.load(std::memory_order_relaxed) - c.tail.load(std::memory_order_acquire) <
          channel_bytes_)
        return true;
    }
    if (in.active()) {
      const ShmChannel& c = Channel(in.peer, rank_);
      if (c.head.load(std::memory_order_acquire) != c.tail.load(std::memory_order_relaxed))
        return true;
    }
    return false;
  };
  ShmRankArea& me = seg_->ranks[rank_];
  while (out.active() || in.active()) {
    if (progress()) continue;
    if (!WaitUntil(can_move, [&] { return ShmBed{&me.doorbell, &me.dozing}; })) {
      auto moved = [](const Transfer& t, const char* what) {
        return std::string(what) + " " +
               std::to_string(t.done > kHeaderBytes ? t.done - kHeaderBytes : 0) + " of " +
               std::to_string(t.bytes) + " bytes";
      };
      std::string stuck;
      if (out.active()) stuck = "send to " + Who(out.peer) + " (" + moved(out, "sent") + ")";
      if (in.active()) {
        stuck += (stuck.empty() ? "" : ", ") + std::string("recv from ") + Who(in.peer) + " (" +
                 moved(in, "received") + ")";
      }
      throw Error(ErrorKind::kTimeout,
                  "shared memory " + std::string(op_) + " timed out; not finished: " + stuck);
    }
  }
}

}  // namespace dlaunch::core
