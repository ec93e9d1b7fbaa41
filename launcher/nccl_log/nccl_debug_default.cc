#include "launcher/nccl_log/nccl_debug_default.h"

namespace dlaunch::launcher::nccl_log {

bool ChoosesGlooBackend(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--backend=gloo") return true;
    if (args[i] == "--backend" && i + 1 < args.size() && args[i + 1] == "gloo") return true;
  }
  return false;
}

std::string ResolveNcclDebug(const std::string& flag, bool builtin,
                             const std::vector<std::string>& builtin_args,
                             bool user_set_nccl_debug) {
  if (flag == "off" || flag == "OFF") return "";
  if (!flag.empty()) return flag;
  if (!builtin || user_set_nccl_debug || ChoosesGlooBackend(builtin_args)) return "";
  // With backend auto and no GPU the ranks never load NCCL, and NCCL writes no file.
  return "INFO";
}

}  // namespace dlaunch::launcher::nccl_log
