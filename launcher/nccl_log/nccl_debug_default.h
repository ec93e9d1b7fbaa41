// Which NCCL_DEBUG level dlaunch gives the ranks, so that every NCCL job leaves the log the
// analysis reads (rank<R>/nccl.log) unless the user chose otherwise.
#pragma once

#include <string>
#include <vector>

namespace dlaunch::launcher::nccl_log {

// The subsystems whose INFO lines the analysis reads; set with INFO unless the user set
// NCCL_DEBUG_SUBSYS. NET and GRAPH add the GDR, topology and ring/tree lines to NCCL's default
// INIT,BOOTSTRAP,ENV.
inline constexpr const char* kNcclDebugSubsys = "INIT,BOOTSTRAP,ENV,NET,GRAPH";

// The level for the ranks: `flag` (--nccl-debug) when given, "" for "off"; otherwise "INFO" for
// a built-in command (train, preflight) that may run NCCL (its arguments do not choose the gloo
// backend) while the user's environment has no NCCL_DEBUG; else "" (NCCL's own default).
std::string ResolveNcclDebug(const std::string& flag, bool builtin,
                             const std::vector<std::string>& builtin_args,
                             bool user_set_nccl_debug);

// "--backend gloo" or "--backend=gloo" among a built-in's arguments.
bool ChoosesGlooBackend(const std::vector<std::string>& args);

}  // namespace dlaunch::launcher::nccl_log
