// Kubeflow's PyTorchJob gives torchrun's options as PET_<OPTION> variables (cluster/kubeflow.h
// reads them): here they join the command line as the flags they stand for.
#include <string>

#include "core/error.h"
#include "launcher/cli/group_parsers.h"
#include "launcher/cluster/kubeflow.h"
#include "launcher/launch_checks.h"

namespace dlaunch::launcher::cli {
namespace {

// The values checked only while the options are resolved, checked on their own: an error in one
// from a PET_* variable then names the variable, not the option it stands for.
void CheckValue(const Flags& one) {
  LaunchOptions scratch;
  if (auto b = one.First<std::string>({"rdzv-backend", "rdzv_backend"})) CheckRdzvBackend(*b);
  if (auto e = one.First<std::string>({"rdzv-endpoint"}); e && !e->empty()) SplitEndpoint(*e);
  if (auto id = one.First<std::string>({"rdzv-id"})) CheckRunId(*id);
  if (auto r = one.First<int>({"max-restarts", "max_restarts"})) CheckMaxRestarts(*r);
  if (one.Has("nnodes")) ParseNnodes(one.Get<std::string>("nnodes"), &scratch);
  if (auto n = one.First<std::string>({"nproc-per-node", "nproc_per_node", "nproc"})) {
    ParseNproc(*n, one.GivenName({"nproc-per-node", "nproc_per_node", "nproc"}));
  }
  if (auto m = one.First<double>({"monitor-interval", "monitor_interval"})) {
    CheckMonitorInterval(*m);
  }
  for (const char* flag : {"redirects", "tee"}) {
    if (one.Has(flag)) ParseStdStreams(one.Get<std::string>(flag), std::string("--") + flag);
  }
  if (auto h = one.First<std::string>({"event-log-handler", "event_log_handler"})) {
    CheckEventLogHandler(*h);
  }
  if (auto t = one.First<double>({"shutdown-timeout", "shutdown_timeout"})) {
    ShutdownTimeout(*t);
  }
  if (auto c = one.First<std::string>({"rdzv-conf", "rdzv_conf"})) ParseRdzvConf(*c);
  if (auto m = one.First<std::string>({"start-method", "start_method"})) ParseStartMethod(*m);
  if (auto f = one.First<std::string>({"local-ranks-filter", "local_ranks_filter"})) {
    ParseRankList(*f);
  }
}

}  // namespace

po::variables_map AddKubeflowFlags(const po::options_description& desc,
                                   const std::map<std::string, std::string>& env,
                                   std::vector<std::string> own, po::variables_map vm) {
  const Flags flags(vm);
  auto given = [&](const std::string& name) { return flags.Given(name); };
  bool from_env = false;
  for (const auto& [variable, token] : cluster::KubeflowArgs(env, given)) {
    // A torchrun option this dlaunch does not have is left to torchrun's own launches.
    if (!desc.find_nothrow(token.substr(2, token.find('=') - 2), false)) continue;
    try {
      CheckValue(Flags(Store(desc, {token})));
    } catch (const UsageError& e) {
      throw UsageError(variable + ": " + e.what());
    }
    own.push_back(token);
    from_env = true;
  }
  return from_env ? Store(desc, own) : vm;
}

}  // namespace dlaunch::launcher::cli
