#include "launcher/cluster/kubeflow.h"

#include <algorithm>
#include <cctype>
#include <exception>

#include "launcher/cluster/env_values.h"

namespace dlaunch::launcher::cluster {
namespace {

// PET_X="" is a mistake, not "unset": torchrun takes the value and fails on it.
std::string SetButEmpty(const char* key) {
  return std::string(key) + " is set but empty: give it a value, or unset it";
}

// torchrun's --nnodes: "2" or "1:4", each at least 1.
int NodeCount(const std::string& text, const std::string& whole) {
  size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || n < 1) {
    throw UsageError("PET_NNODES: --nnodes must be N or MIN:MAX with 1 <= MIN <= MAX (got '" +
                     whole + "')");
  }
  return n;
}

void ReadNnodes(const std::string& text, ClusterPlace* place) {
  const char* kKey = "PET_NNODES";
  if (text.empty()) {
    place->nnodes = Sourced<int>::Bad(kKey, SetButEmpty(kKey));
    return;
  }
  try {
    const size_t colon = text.find(':');
    if (colon == std::string::npos) {
      place->nnodes = Sourced<int>::Of(NodeCount(text, text), kKey);
      return;
    }
    const int min = NodeCount(text.substr(0, colon), text);
    const int max = NodeCount(text.substr(colon + 1), text);
    if (min > max) {
      throw UsageError("PET_NNODES: --nnodes " + text + ": MIN must not be larger than MAX");
    }
    place->nnodes = Sourced<int>::Of(max, kKey);
    place->min_nodes = min;
  } catch (const UsageError& e) {
    place->nnodes = Sourced<int>::Bad(kKey, e.what());
  }
}

// An int as the command line's parser reads --node-rank: an optional sign and digits.
Sourced<int> NodeRank(const std::string& text) {
  const char* kKey = "PET_NODE_RANK";
  if (text.empty()) return Sourced<int>::Bad(kKey, SetButEmpty(kKey));
  size_t used = 0;
  try {
    const int v = std::stoi(text, &used);
    if (used == text.size() && !std::isspace(static_cast<unsigned char>(text[0]))) {
      return Sourced<int>::Of(v, kKey);
    }
  } catch (const std::exception&) {
  }
  return Sourced<int>::Bad(kKey, std::string(kKey) + ": the argument ('" + text +
                                     "') for option '--node-rank' is invalid");
}

// A PET_* string taken as it is; set but empty is an error.
Sourced<std::string> Text(const EnvMap& env, const char* key) {
  const std::string& text = env.at(key);
  if (text.empty()) return Sourced<std::string>::Bad(key, SetButEmpty(key));
  return Sourced<std::string>::Of(text, key);
}

// The master pod's address: PET_MASTER_ADDR and PET_MASTER_PORT, each else its plain name.
Sourced<std::string> MasterEndpoint(const EnvMap& env) {
  const char* addr_key = Find(env, "PET_MASTER_ADDR") ? "PET_MASTER_ADDR" : "MASTER_ADDR";
  const char* port_key = Find(env, "PET_MASTER_PORT") ? "PET_MASTER_PORT" : "MASTER_PORT";
  const std::string* addr = Find(env, addr_key);
  const std::string* port = Find(env, port_key);
  if (!addr || !port) return {};
  return Sourced<std::string>::Of(JoinEndpoint(*addr, *port),
                                  std::string(addr_key) + "/" + port_key);
}

}  // namespace

std::optional<ClusterPlace> DetectKubeflow(const EnvMap& env) {
  const auto nnodes = env.find("PET_NNODES");
  if (nnodes == env.end()) return std::nullopt;
  ClusterPlace place;
  place.engine = Engine::kKubeflow;
  ReadNnodes(nnodes->second, &place);
  if (env.count("PET_NODE_RANK")) place.node_rank = NodeRank(env.at("PET_NODE_RANK"));
  place.endpoint =
      env.count("PET_RDZV_ENDPOINT") ? Text(env, "PET_RDZV_ENDPOINT") : MasterEndpoint(env);
  if (env.count("PET_RDZV_ID")) place.run_id = Text(env, "PET_RDZV_ID");
  return place;
}

const std::vector<PetOption>& PetOptions() {
  // torchrun reads each option's default from PET_<DEST>; these are the ones dlaunch has.
  static const std::vector<PetOption> kOptions = {
      {"PET_NPROC_PER_NODE", {"nproc-per-node", "nproc_per_node", "nproc"}},
      {"PET_NNODES", {"nnodes"}},
      {"PET_NODE_RANK", {"node-rank", "node_rank"}},
      {"PET_RDZV_BACKEND", {"rdzv-backend", "rdzv_backend"}},
      {"PET_RDZV_ENDPOINT", {"rdzv-endpoint", "rdzv_endpoint"}},
      {"PET_RDZV_ID", {"rdzv-id", "rdzv_id", "run-id"}},
      {"PET_RDZV_CONF", {"rdzv-conf", "rdzv_conf"}},
      {"PET_STANDALONE", {"standalone"}, true},
      {"PET_MAX_RESTARTS", {"max-restarts", "max_restarts"}},
      {"PET_MONITOR_INTERVAL", {"monitor-interval", "monitor_interval"}},
      {"PET_LOG_DIR", {"log-dir", "log_dir"}},
      {"PET_REDIRECTS", {"redirects"}},
      {"PET_TEE", {"tee"}},
      {"PET_LOCAL_RANKS_FILTER", {"local-ranks-filter", "local_ranks_filter", "ranks-filter"}},
      {"PET_NO_PYTHON", {"no-python", "no_python"}, true},
      {"PET_MODULE", {"module"}, true},
      {"PET_RUN_PATH", {"run-path", "run_path"}, true},
      {"PET_NUMA_BINDING", {"numa-binding", "numa_binding"}},
      {"PET_ROLE", {"role"}},
      {"PET_START_METHOD", {"start-method", "start_method"}},
      {"PET_EVENT_LOG_HANDLER", {"event-log-handler", "event_log_handler"}},
      {"PET_LOG_LINE_PREFIX_TEMPLATE", {"log-line-prefix-template", "log_line_prefix_template"}},
      {"PET_DUPLICATE_STDOUT_FILTERS", {"duplicate-stdout-filters", "duplicate_stdout_filters"}},
      {"PET_DUPLICATE_STDERR_FILTERS", {"duplicate-stderr-filters", "duplicate_stderr_filters"}},
      {"PET_LOCAL_ADDR", {"local-addr", "local_addr"}},
      {"PET_SIGNALS_TO_HANDLE", {"signals-to-handle", "signals_to_handle"}},
      {"PET_SHUTDOWN_TIMEOUT", {"shutdown-timeout", "shutdown_timeout", "grace-period"}},
      {"PET_VIRTUAL_LOCAL_RANK", {"virtual-local-rank", "virtual_local_rank"}, true},
  };
  return kOptions;
}

std::vector<std::pair<std::string, std::string>> KubeflowArgs(
    const EnvMap& env, const std::function<bool(const std::string&)>& given) {
  auto set = [&](const std::vector<std::string>& names) {
    return std::any_of(names.begin(), names.end(), given);
  };
  std::vector<std::pair<std::string, std::string>> args;
  for (const PetOption& p : PetOptions()) {
    const auto it = env.find(p.variable);
    if (it == env.end() || set(p.option)) continue;
    // torchrun takes a set variable's value, "" included, and then fails on it (int(""), a
    // switch's int("")): an empty one is a mistake, not "unset".
    if (it->second.empty()) {
      throw UsageError(std::string(p.variable) + " is set but empty: give it a value, or unset it");
    }
    const std::string* value = &it->second;
    if (!p.is_switch) {
      args.emplace_back(p.variable, "--" + p.option.front() + "=" + *value);
    } else if (*value == "1") {
      args.emplace_back(p.variable, "--" + p.option.front());
    } else if (*value != "0") {
      throw UsageError(std::string(p.variable) + "='" + *value + "' must be 1 or 0");
    }
  }
  // A PyTorchJob sets MASTER_ADDR and MASTER_PORT too, older operators only those.
  const bool kubeflow = Find(env, "PET_NNODES") != nullptr;
  const std::string* addr = Find(env, "PET_MASTER_ADDR");
  const std::string* port = Find(env, "PET_MASTER_PORT");
  if (kubeflow && !addr) addr = Find(env, "MASTER_ADDR");
  if (kubeflow && !port) port = Find(env, "MASTER_PORT");
  if (addr && port && !Find(env, "PET_RDZV_ENDPOINT") && !set({"rdzv-endpoint", "rdzv_endpoint"})) {
    args.emplace_back("PET_MASTER_ADDR/PET_MASTER_PORT",
                      "--rdzv-endpoint=" + JoinEndpoint(*addr, *port));
  }
  return args;
}

}  // namespace dlaunch::launcher::cluster
