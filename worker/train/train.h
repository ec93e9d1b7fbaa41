// The `train` built-in of dlaunch-worker: data-parallel training of a small libtorch model with
// per-rank telemetry, checkpoints and an OOM report. This header is torch-free so the launcher
// can validate arguments without linking libtorch.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/runtime.h"
#include "core/store.h"
#include "worker/train/train_options.h"  // ValidateTrainArgs

namespace dlaunch::worker {

// What the rank process knows about its place in the job. The callbacks may be empty (tests, no
// launcher); then events go to rank_dir/events.jsonl directly (when rank_dir is set) and status
// updates are dropped.
struct TrainContext {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int restart_count = 0;
  int attempt = 0;  // DLAUNCH_ATTEMPT: restarts and elastic changes of membership
  std::shared_ptr<core::Store> store;
  std::string run_dir;
  std::string rank_dir;
  // Appends {"unix_ms","rank","kind",...body} to rank<R>/events.jsonl and forwards it to the
  // coordinator; `json` is the event's body (a JSON object). May block for one round trip.
  std::function<void(const std::string& kind, const std::string& json)> report_event;
  // Must not block: the status goes out with the next heartbeat.
  std::function<void(const std::function<void(core::RankStatus&)>&)> update_status;
  // Optional, as in PreflightContext: the trainer hands over its handler for the coordinator's
  // commands (kDump: write the flight recorder to rank_dir/flight.json; kAbort: abort the
  // communicator). It may be called from any thread, also after RunTrain returned.
  std::function<void(std::function<void(core::CommandKind command, const std::string& reason)>)>
      set_command_handler;
};

// Runs pre-flight (unless --no-preflight) and training on this rank. Blocks for the whole run.
// Returns the rank's exit code: 0 done, 1 failed (OOM included; rank_dir/error.json says why),
// 2 bad arguments, 3 a collective timed out (the hang watchdog fired), 4 the pre-flight failed.
int RunTrain(const TrainContext& ctx, const std::vector<std::string>& args);

}  // namespace dlaunch::worker
