// dlaunch-worker: the built-in rank program behind `dlaunch train` and `dlaunch preflight`.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/exit_codes.h"
#include "core/runtime.h"

#ifdef DLAUNCH_HAVE_PREFLIGHT
#include "worker/preflight/preflight.h"
#endif
#ifdef DLAUNCH_HAVE_TRAIN
#include "worker/train/train.h"
#endif

namespace {

using dlaunch::core::Runtime;

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
  ctx.report_event = [&rt](const std::string& kind, const std::string& json) {
    rt.ReportEvent(kind, json);
  };
  return ctx;
}

int Run(const std::string& command, const std::vector<std::string>& args) {
#ifdef DLAUNCH_HAVE_PREFLIGHT
  if (command == "preflight") {
    auto rt = Runtime::FromEnv();
    auto ctx = MakeContext<dlaunch::worker::PreflightContext>(*rt);
    ctx.report_status = [&rt](const dlaunch::core::RankStatus& s) {
      rt->UpdateStatus([&](dlaunch::core::RankStatus& mine) { mine = s; });
    };
    return dlaunch::worker::RunPreflight(ctx, args);
  }
#endif
#ifdef DLAUNCH_HAVE_TRAIN
  if (command == "train") {
    auto rt = Runtime::FromEnv();
    auto ctx = MakeContext<dlaunch::worker::TrainContext>(*rt);
    ctx.restart_count = rt->restart_count();
    ctx.update_status = [&rt](const std::function<void(dlaunch::core::RankStatus&)>& f) {
      rt->UpdateStatus(f);
    };
    return dlaunch::worker::RunTrain(ctx, args);
  }
#endif
  throw dlaunch::UsageError("unknown or unavailable command '" + command +
                            "' (this worker knows: "
#ifdef DLAUNCH_HAVE_PREFLIGHT
                            "preflight "
#endif
#ifdef DLAUNCH_HAVE_TRAIN
                            "train"
#endif
                            ")");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: dlaunch-worker preflight|train [OPTIONS] (normally started by dlaunch)\n";
    return dlaunch::kExitUsage;
  }
  try {
    return Run(argv[1], {argv + 2, argv + argc});
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
