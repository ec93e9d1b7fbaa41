// `dlaunch preflight`: the cluster health check run on every rank before a long job. Torch-free,
// so the worker can be carried to a GPU machine with few shared libraries.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/runtime.h"
#include "core/store.h"
#include "worker/preflight/p2p_matrix.h"
#include "worker/preflight/preflight_options.h"

namespace dlaunch::worker {

struct PreflightContext {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size =
      0;  // ranks per node; the p2p matrix is folded per node when it spans several
  // The job's key/value store (the coordinator's); every rank of the job must pass the same one.
  std::shared_ptr<core::Store> store;
  // Keys go under this prefix; give a restarted job a new one (e.g. "preflight/<restart>/") so it
  // never reads bootstrap data left by the previous attempt.
  std::string store_prefix = "preflight/";
  std::string run_dir;   // rank 0 writes preflight.json here; "" = do not write
  std::string rank_dir;  // flight.json goes here; "" = do not dump
  // Optional. report_event(kind, json_object): "timeout" (a real collective hang), "dumped",
  // "preflight_hang_test" (the deliberate one; not a failure of the job).
  std::function<void(const std::string& kind, const std::string& json)> report_event;
  // Optional; called between steps, does not need to be fast to deliver.
  std::function<void(const core::RankStatus&)> report_status;
  // Optional. The suite hands over a handler for the coordinator's commands (kDump: write the
  // flight recorder to rank_dir/flight.json with the given reason; kAbort: abort the
  // communicator); the worker wires it to Runtime::OnCommand. The handler may be called from any
  // thread at any time, also after RunPreflight returned (it then does nothing).
  std::function<void(std::function<void(core::CommandKind command, const std::string& reason)>)>
      set_command_handler;
  // Optional: slows p2p links down on purpose (tests of the re-measurement).
  P2PInject p2p_inject;
};

// Runs the suite on this rank; every rank of the job must call it with the same args. Blocks for
// the whole suite; every collective is bounded by --collective-timeout.
// Returns this rank's exit code: 0 PASS, 4 FAIL (verdict), 3 a collective timed out (watchdog),
// 2 bad arguments, 1 any other error (a peer died, rendezvous failed). Prints the tables on rank 0.
int RunPreflight(const PreflightContext& ctx, const std::vector<std::string>& args);

}  // namespace dlaunch::worker
