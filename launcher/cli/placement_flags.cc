// The job group (role, start method, doctor, run directory, token and TLS files), the placement
// group (GPU and NUMA binding) and the program the ranks run.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "launcher/cli/group_parsers.h"
#include "launcher/launch_checks.h"
#include "launcher/nccl_log/nccl_debug_default.h"

namespace dlaunch::launcher::cli {
namespace {

// The first word after dlaunch's flags as a built-in command; kProgram for any other word.
Command BuiltinNamed(const std::string& word) {
  return word == "train"       ? Command::kTrain
         : word == "preflight" ? Command::kPreflight
         : word == "diagnose"  ? Command::kDiagnose
         : word == "report"    ? Command::kReport
         : word == "dump"      ? Command::kDump
         : word == "status"    ? Command::kStatus
         : word == "doctor"    ? Command::kDoctor
                               : Command::kProgram;
}

}  // namespace

void ParseJobFlags(const Flags& f, LaunchOptions* o) {
  if (auto role = f.First<std::string>({"role"})) {
    if (role->empty() || role->find_first_of(" \t\n\r") != std::string::npos) {
      throw UsageError("--role must be a name without spaces (got '" + *role + "')");
    }
    o->role = *role;
    o->role_given = true;
  }
  if (auto m = f.First<std::string>({"start-method", "start_method"})) {
    if (auto note = ParseStartMethod(*m)) o->notes.push_back(*note);
  }
  o->skip_doctor = f.Get<bool>("skip-doctor");
  o->run_dir_mode = ParseRunDirMode(f.Get<std::string>("run-dir-mode"));
  o->token_file = f.First<std::string>({"token-file"}).value_or("");
  o->tls_cert = f.First<std::string>({"tls-cert"}).value_or("");
  o->tls_key = f.First<std::string>({"tls-key"}).value_or("");
  o->tls_ca = f.First<std::string>({"tls-ca"}).value_or("");
}

void ParsePlacementFlags(const Flags& f, LaunchOptions* o) {
  const std::string gpu_binding = f.Get<std::string>("gpu-binding");
  if (!GpuBindingNamed(gpu_binding)) {
    throw UsageError("--gpu-binding must be local-rank, isolate or none (got '" + gpu_binding +
                     "')");
  }
  o->gpu_binding = *GpuBindingNamed(gpu_binding);
  o->virtual_local_rank = f.Get<bool>("virtual-local-rank") || f.Get<bool>("virtual_local_rank");
  if (o->virtual_local_rank && f.Given("gpu-binding") && o->gpu_binding != GpuBinding::kIsolate) {
    throw UsageError(
        "--virtual-local-rank gives each rank its one GPU as device 0: drop "
        "--gpu-binding " +
        std::string(GpuBindingName(o->gpu_binding)));
  }
  std::string numa_binding = f.First<std::string>({"numa-binding", "numa_binding"}).value_or("");
  if (numa_binding.empty()) numa_binding = "none";  // as --numa-binding none
  if (!NumaBindingNamed(numa_binding)) {
    throw UsageError("--numa-binding must be node, socket, exclusive, core-complex or none (got '" +
                     numa_binding + "')");
  }
  o->numa_binding = *NumaBindingNamed(numa_binding);
}

void ParseProgram(const std::vector<std::string>& rest, LaunchOptions* o) {
  if (rest.empty()) throw UsageError("no program given: dlaunch [options] PROGRAM [ARGS...]");
  const std::string& head = rest.front();
  CheckProgramName(head, o->module);
  // After -m or --run-path the first word is the module or file, even if it is called "train".
  const Command builtin = o->module || o->run_path ? Command::kProgram : BuiltinNamed(head);
  if (builtin != Command::kProgram) {
    o->command = builtin;
    o->program.assign(rest.begin() + 1, rest.end());
  } else {
    o->program = rest;
  }
  const char* env_debug = std::getenv("NCCL_DEBUG");
  const bool user_nccl_debug = (env_debug && *env_debug) ||
                               std::any_of(o->env.begin(), o->env.end(),
                                           [](const auto& kv) { return kv.first == "NCCL_DEBUG"; });
  o->nccl_debug =
      nccl_log::ResolveNcclDebug(o->nccl_debug, IsBuiltin(o->command), o->program, user_nccl_debug);
}

}  // namespace dlaunch::launcher::cli
