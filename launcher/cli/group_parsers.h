// One short parser per group of flags, each reading its flags from the stored command line into
// the options and throwing UsageError naming the first bad one. ParseCommandLine (options.cc)
// calls them in the order below, which is the order their errors are found in. Internal to
// launcher/cli/.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "launcher/cli/flags.h"
#include "launcher/cli/options.h"

namespace dlaunch::launcher::cli {

// rendezvous_flags.cc: --nproc, --nnodes, --node-rank and --rdzv-conf.
void ParseNodeFlags(const Flags& f, LaunchOptions* o);
// rendezvous_flags.cc: --rdzv-endpoint, --rdzv-id, --standalone, --rdzv-backend, --rdzv-timeout.
void ParseRendezvousFlags(const Flags& f, LaunchOptions* o);
// rendezvous_flags.cc: --master-addr, --local-addr and --master-port.
void ParseMasterFlags(const Flags& f, LaunchOptions* o);
// supervision_flags.cc: --max-restarts, the grace period (--grace-period, --shutdown-timeout,
// else TORCH_ELASTIC_SHUTDOWN_TIMEOUT in `env`) and --signals-to-handle.
void ParseSupervisionFlags(const Flags& f, const std::map<std::string, std::string>& env,
                           LaunchOptions* o);
// output_flags.cc: the log directory, the console (--quiet, rank filters, -r/-t, the line
// prefix), the duplicated streams, torchrun's no-op --event-log-handler and --monitor-interval,
// and NCCL's logging.
void ParseOutputFlags(const Flags& f, LaunchOptions* o);
// output_flags.cc: --env, and how Python entries run (--no-python, --python, -m, --run-path,
// --no-python-agent).
void ParsePythonFlags(const Flags& f, LaunchOptions* o);
// supervision_flags.cc: heartbeats, hang detection (--hang-timeout, --hang-on-silence,
// --on-hang), stragglers, --metrics-port/--metrics-addr and --events-file.
void ParseDiagnosisFlags(const Flags& f, LaunchOptions* o);
// placement_flags.cc: --role, --start-method, --skip-doctor, --run-dir-mode, the token and TLS
// files.
void ParseJobFlags(const Flags& f, LaunchOptions* o);
// placement_flags.cc: --gpu-binding, --virtual-local-rank and --numa-binding.
void ParsePlacementFlags(const Flags& f, LaunchOptions* o);
// placement_flags.cc: the built-in command or the program with its arguments (`rest`, what
// follows dlaunch's own flags), and the ranks' NCCL_DEBUG for it.
void ParseProgram(const std::vector<std::string>& rest, LaunchOptions* o);

// The checks the parsers above make of one flag, for a value from elsewhere (a PET_* variable):
// rendezvous_flags.cc.
int ParseNproc(const std::string& text, const std::string& flag);
void ParseNnodes(const std::string& text, LaunchOptions* o);
void CheckRdzvBackend(const std::string& backend);
void CheckMaxRestarts(int restarts);
// output_flags.cc: torchrun's --monitor-interval, a number of seconds dlaunch does not need.
void CheckMonitorInterval(double seconds);

// kubeflow_flags.cc: the command line `vm` stored from `own` with Kubeflow's PET_* variables in
// `env` (cluster/kubeflow.h) added as the flags they stand for, where the command line left them
// out; each value checked on its own first, so that an error names its variable.
po::variables_map AddKubeflowFlags(const po::options_description& desc,
                                   const std::map<std::string, std::string>& env,
                                   std::vector<std::string> own, po::variables_map vm);

}  // namespace dlaunch::launcher::cli
