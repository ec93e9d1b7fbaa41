// dlaunch-worker: the built-in rank program behind `dlaunch preflight` and `dlaunch train`.
#include <signal.h>

#include <cstdlib>
#include <functional>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/exit_codes.h"
#include "core/runtime.h"
#include "worker/preflight/preflight.h"
#ifdef DLAUNCH_HAVE_TRAIN
#include "worker/train/train.h"
#endif

namespace {

using dlaunch::core::CommandKind;
using dlaunch::core::Runtime;
using CommandHandler = std::function<void(CommandKind command, const std::string& reason)>;

// The suite's handler for the coordinator's commands; also run on SIGTERM and SIGINT, so a rank
// torn down by the launcher leaves its flight recorder behind for the diagnosis.
std::mutex g_handler_mu;
CommandHandler g_handler;

void RunHandler(CommandKind command, const std::string& reason) {
  CommandHandler h;
  {
    std::lock_guard<std::mutex> lock(g_handler_mu);
    h = g_handler;
  }
  if (h) h(command, reason);
}

// SIGTERM and SIGINT are blocked in every thread (call before any starts) and taken by one
// watcher thread: it dumps, then lets the signal end the process as it would have. SIGUSR1 and
// SIGUSR2, which the launcher forwards, never end a built-in rank: ignored until `train` installs
// its checkpoint handler.
void TakeSignals() {
  ::signal(SIGUSR1, SIG_IGN);
  ::signal(SIGUSR2, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int sig = 0;
    while (::sigwait(&set, &sig) != 0) {
    }
    RunHandler(CommandKind::kDump, sig == SIGINT ? "interrupted" : "terminated");
    ::signal(sig, SIG_DFL);
    ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    ::raise(sig);
  }).detach();
}

// What the built-ins call to hand over their command handler: it serves the coordinator's DUMP and
// ABORT commands and the dump on SIGTERM and SIGINT.
std::function<void(CommandHandler)> CommandWiring(Runtime& rt) {
  return [&rt](CommandHandler handler) {
    {
      std::lock_guard<std::mutex> lock(g_handler_mu);
      g_handler = std::move(handler);
    }
    rt.OnCommand(RunHandler);
  };
}

template <typename Context>
Context MakeContext(Runtime& rt) {
  Context ctx;
  ctx.rank = rt.rank();
  ctx.world_size = rt.world_size();
  ctx.local_rank = rt.local_rank();
  ctx.store = rt.store();
  const char* run_dir = std::getenv("DLAUNCH_RUN_DIR");
  ctx.run_dir = run_dir ? run_dir : "";
  ctx.rank_dir = rt.rank_dir();
  // The built-ins name their events; the wire carries the kind.
  ctx.report_event = [&rt](const std::string& kind, const std::string& json) {
    auto typed = dlaunch::core::EventKindFromName(kind);
    if (!typed) {
      throw dlaunch::Error(dlaunch::ErrorKind::kInternal,
                           "event kind '" + kind + "' is not in dlaunch.v1.EventKind");
    }
    rt.ReportEvent(*typed, json);
  };
  ctx.set_command_handler = CommandWiring(rt);
  return ctx;
}

int Run(const std::string& command, const std::vector<std::string>& args) {
  if (command == "preflight") {
    auto rt = Runtime::FromEnv();
    auto ctx = MakeContext<dlaunch::worker::PreflightContext>(*rt);
    ctx.local_world_size = rt->local_world_size();
    ctx.store_prefix = "preflight/" + std::to_string(rt->restart_count()) + "/";
    ctx.report_status = [&rt](const dlaunch::core::RankStatus& s) {
      rt->UpdateStatus([&](dlaunch::core::RankStatus& mine) { mine = s; });
    };
    return dlaunch::worker::RunPreflight(ctx, args);
  }
#ifdef DLAUNCH_HAVE_TRAIN
  if (command == "train") {
    auto rt = Runtime::FromEnv();
    auto ctx = MakeContext<dlaunch::worker::TrainContext>(*rt);
    ctx.restart_count = rt->restart_count();
    if (const char* a = std::getenv("DLAUNCH_ATTEMPT")) ctx.attempt = std::atoi(a);
    ctx.update_status = [&rt](const std::function<void(dlaunch::core::RankStatus&)>& f) {
      rt->UpdateStatus(f);
    };
    return dlaunch::worker::RunTrain(ctx, args);
  }
#endif
  throw dlaunch::UsageError("unknown or unavailable command '" + command +
                            "' (this worker knows: preflight"
#ifdef DLAUNCH_HAVE_TRAIN
                            ", train"
#endif
                            ")");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: dlaunch-worker preflight|train [OPTIONS] (normally started by dlaunch)\n";
    return dlaunch::kExitUsage;
  }
  TakeSignals();
  try {
    int code = Run(argv[1], {argv + 2, argv + argc});
    // A SIGTERM that lands while the process exits must not call into a handler whose state the
    // exit is destroying.
    std::lock_guard<std::mutex> lock(g_handler_mu);
    g_handler = nullptr;
    return code;
  } catch (const dlaunch::UsageError& e) {
    std::cerr << "dlaunch-worker: " << e.what() << std::endl;
    return dlaunch::kExitUsage;
  } catch (const dlaunch::Error& e) {
    std::cerr << "dlaunch-worker: " << dlaunch::ErrorKindName(e.kind()) << ": " << e.what()
              << std::endl;
    return e.kind() == dlaunch::ErrorKind::kTimeout ? dlaunch::kExitHang : dlaunch::kExitRankFailed;
  } catch (const std::exception& e) {
    std::cerr << "dlaunch-worker: " << e.what() << std::endl;
    return dlaunch::kExitRankFailed;
  }
}
