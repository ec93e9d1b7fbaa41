// How a caller asks for a communicator, and what it hears back when a collective hangs.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/communicator.h"
#include "core/exit_codes.h"
#include "core/store.h"

namespace dlaunch::core {

// Why a collective's watchdog fired.
enum class TimeoutCause {
  kTimeout,   // this rank's deadline passed
  kPeerGone,  // a peer broke the connection first
};

// "timeout" or "peer_gone", as the "timeout" event's `cause` field spells it.
constexpr const char* TimeoutCauseName(TimeoutCause cause) {
  return cause == TimeoutCause::kPeerGone ? "peer_gone" : "timeout";
}

// What the watchdog found when a collective ran past its timeout.
struct TimeoutReport {
  int rank = 0;
  int64_t seq = -1;
  std::string op;
  int64_t timeout_ms = 0;
  // kPeerGone when a peer broke the connection first (with gloo, the first rank to time out
  // closes its connections, so the others see that).
  TimeoutCause cause = TimeoutCause::kTimeout;
  // Ranks whose published progress had not reached `seq`: they never joined the collective.
  std::vector<int> missing_ranks;
  // "allreduce seq 5 timed out after 1000 ms on rank 0; rank 2 missing from seq 5"
  std::string message;

  // True when the op failed because ranks never joined it, or ran out of time: a hang, whichever
  // rank noticed it first.
  bool is_hang() const { return cause == TimeoutCause::kTimeout || !missing_ranks.empty(); }

  // Body of the "timeout" event in rank<R>/events.jsonl: seq, op, timeout_ms, missing_ranks,
  // cause, message.
  std::string ToJson() const;
};

struct CommOptions {
  std::string backend = "auto";  // auto | gloo | nccl; auto = nccl when a GPU is visible
  int rank = 0;
  int size = 1;
  // Bootstrap data (gloo addresses, the ncclUniqueId) and progress markers go here under fixed
  // keys, so give every communicator its own MakePrefixStore. May be null when size == 1.
  std::shared_ptr<Store> store;
  // Every collective must finish within this, counted from when it starts running.
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  // Bound on the rendezvous when the communicator is created.
  std::chrono::milliseconds rendezvous_timeout{std::chrono::minutes(5)};
  size_t flight_recorder_capacity = 2000;
  // Gloo: the network interface (e.g. eth0) or host address to bind. Both empty: the interface
  // in GLOO_SOCKET_IFNAME if set; else this host's name when MASTER_ADDR names another host (a
  // multi-node job); else 127.0.0.1.
  std::string iface;
  std::string hostname;
  // Gloo: how ranks on one host reach each other. "auto": shared memory (/dev/shm) when a host
  // has several ranks, TCP between hosts; "shm": the same, and an error where shared memory
  // cannot be set up; "tcp": gloo's TCP transport everywhere.
  std::string transport = "auto";
  // Gloo with shared memory: the identity of this rank's host ("" = host name, boot id and
  // GROUP_RANK; ranks with equal ids share memory), and each rank's slot in the segment (0 =
  // kDefaultShmSlotBytes; larger messages move in chunks).
  std::string host_id;
  size_t shm_slot_bytes = 0;
  // NCCL: the CUDA device; -1 = LOCAL_RANK modulo the visible devices.
  int device_index = -1;
  // On a timeout the flight recorder is dumped here (reason "timeout"); "" = no dump.
  std::string flight_dump_path;
  // Called once per communicator, on the watchdog thread, in the Wait() that expired or on the
  // backend's thread, after the abort and dump; also when a collective fails because a peer broke
  // the connection (cause "peer_gone"), so every rank names the missing ranks.
  std::function<void(const TimeoutReport&)> on_timeout;
  // After on_timeout returns for a hang (is_hang()), end the process with exit code 3 (for rank
  // processes whose main thread may be stuck outside the communicator).
  bool exit_on_timeout = false;
};

// Exit code of a rank whose collective watchdog fired (dlaunch::kExitHang).
constexpr int kWatchdogExitCode = kExitHang;

// Blocks for the rendezvous (at most options.rendezvous_timeout). Throws UsageError for an
// unknown or unavailable backend, Error(kTimeout) naming the absent peers' keys when the
// rendezvous does not complete.
std::unique_ptr<Communicator> MakeCommunicator(const CommOptions& options);

// Throws UsageError unless `transport` is auto, shm or tcp. Does not block.
void CheckTransport(const std::string& transport);

// "gloo" or "nccl": what "auto" resolves to on this machine. Does not block.
std::string ResolveBackend(const std::string& backend);
// True when this build has the NCCL backend and a CUDA device is visible. Does not block.
bool NcclAvailable();

}  // namespace dlaunch::core
