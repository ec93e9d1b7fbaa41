// libdlaunch: what a rank process uses to take part in a dlaunch job. Rank identity comes from the
// environment the launcher sets; the store, heartbeats and events go through the coordinator.
// With no launcher (no DLAUNCH_COORDINATOR and WORLD_SIZE unset or 1) it runs as a world of one.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/store.h"

namespace dlaunch::core {

enum class Phase {
  kUnknown,
  kInit,
  kData,
  kForward,
  kBackward,
  kCommunication,
  kOptimizer,
  kCheckpoint,
  kPreflight,
  kDone
};
const char* PhaseName(Phase phase);

// What a rank reports in each heartbeat. -1 means "none yet" for seqs and "unknown" for sizes.
struct RankStatus {
  int64_t step = 0;
  Phase phase = Phase::kInit;
  int64_t last_started_seq = -1;
  int64_t last_completed_seq = -1;
  std::string current_op;
  int64_t rss_bytes = -1;
  int64_t peak_rss_bytes = -1;
  int64_t device_allocated_bytes = -1;
  int64_t device_reserved_bytes = -1;
  int64_t device_peak_bytes = -1;
  double loss = 0;
  double samples_per_sec = 0;
  // For straggler detection: steps timed so far and their busy milliseconds (each step less its
  // waits inside collectives), cumulative; and the start times (unix us) of collectives
  // arrivals_first_seq, +1, ... entered lately (a few hundred at most per heartbeat).
  int64_t steps_timed = 0;
  double step_busy_ms_total = 0;
  int64_t arrivals_first_seq = -1;
  std::vector<int64_t> arrival_unix_us;
};

// What the coordinator asks of a rank (v1::Command::Kind on the wire).
enum class CommandKind {
  kDump,  // write the flight recorder to rank<R>/flight.json now
  kAbort  // abort communicators and exit
};

// What a rank reports; value for value the wire's v1::EventKind.
enum class EventKind {
  kUnspecified,
  kError,
  kTimeout,
  kOom,
  kTelemetry,
  kDumped,
  kResumed,
  kCheckpoint,
  kPreflight,
  kPreflightHangTest,
  kEval,
  kMemory,
  kNan
};
// The kind's name in rank<R>/events.jsonl: "error", "preflight_hang_test".
const char* EventKindName(EventKind kind);
// The kind EventKindName names; nullopt for any other name.
std::optional<EventKind> EventKindFromName(std::string_view name);

class Runtime {
 public:
  // Blocks for the rendezvous, at most DLAUNCH_RDZV_TIMEOUT seconds (default 300); throws Error
  // naming the absent ranks on timeout, Error(kUnauthenticated) on a wrong DLAUNCH_JOB_TOKEN.
  static std::unique_ptr<Runtime> FromEnv();

  virtual ~Runtime() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual int local_rank() const = 0;
  virtual int local_world_size() const = 0;
  virtual int restart_count() const = 0;
  // This rank's folder in the run directory (rank<R>/), created; "" with no launcher.
  virtual const std::string& rank_dir() const = 0;

  virtual std::shared_ptr<Store> store() = 0;

  // Do not block: the status goes out with the next heartbeat (every DLAUNCH_HEARTBEAT_MS).
  virtual void UpdateStatus(const std::function<void(RankStatus&)>& update) = 0;
  virtual RankStatus status() const = 0;
  // One round trip to the coordinator (bounded by a 5 s deadline); also appended to
  // rank<R>/events.jsonl and flushed. `json_object` is the event's body.
  virtual void ReportEvent(EventKind kind, const std::string& json_object) = 0;
  // Called on the heartbeat thread when the coordinator sends a command.
  virtual void OnCommand(std::function<void(CommandKind, const std::string& reason)> handler) = 0;
};

}  // namespace dlaunch::core
