#include "launcher/node_env.h"

#include "core/error.h"

extern char** environ;

namespace dlaunch::launcher {
namespace {

int ToInt(const std::map<std::string, std::string>& env, const char* key) {
  auto it = env.find(key);
  try {
    size_t used = 0;
    int v = std::stoi(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  throw UsageError(std::string(key) + "='" + it->second + "' is not an integer");
}

bool Has(const std::map<std::string, std::string>& env, const char* key) {
  auto it = env.find(key);
  return it != env.end() && !it->second.empty();
}

// Splits at commas that are not inside brackets.
std::vector<std::string> TopLevelItems(const std::string& list) {
  std::vector<std::string> items;
  std::string cur;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) throw UsageError("malformed Slurm node list '" + list + "'");
    if (c == ',' && depth == 0) {
      items.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (depth != 0) throw UsageError("malformed Slurm node list '" + list + "'");
  items.push_back(cur);
  return items;
}

}  // namespace

std::vector<std::string> ExpandSlurmNodelist(const std::string& list) {
  std::vector<std::string> hosts;
  for (const std::string& item : TopLevelItems(list)) {
    if (item.empty()) throw UsageError("malformed Slurm node list '" + list + "'");
    size_t open = item.find('[');
    if (open == std::string::npos) {
      hosts.push_back(item);
      continue;
    }
    size_t close = item.find(']', open);
    const std::string prefix = item.substr(0, open);
    const std::string suffix = item.substr(close + 1);
    if (suffix.find('[') != std::string::npos) {
      throw UsageError("Slurm node lists with two bracket groups in one name are not supported: '" +
                       item + "'");
    }
    for (const std::string& range : TopLevelItems(item.substr(open + 1, close - open - 1))) {
      size_t dash = range.find('-');
      try {
        if (dash == std::string::npos) {
          std::stoi(range);
          hosts.push_back(prefix + range + suffix);
          continue;
        }
        const std::string lo = range.substr(0, dash), hi = range.substr(dash + 1);
        const int a = std::stoi(lo), b = std::stoi(hi);
        if (b < a) throw std::invalid_argument(range);
        for (int v = a; v <= b; ++v) {
          std::string num = std::to_string(v);
          // Slurm keeps the zero padding of the range's first number.
          if (num.size() < lo.size()) num = std::string(lo.size() - num.size(), '0') + num;
          hosts.push_back(prefix + num + suffix);
        }
      } catch (const std::logic_error&) {
        throw UsageError("malformed range '" + range + "' in Slurm node list '" + list + "'");
      }
    }
  }
  return hosts;
}

std::string ApplySchedulerEnv(const std::map<std::string, std::string>& env, LaunchOptions* o) {
  if (o->nnodes_given) return "";
  if (Has(env, "SLURM_NNODES") && Has(env, "SLURM_NODEID") && Has(env, "SLURM_JOB_NODELIST")) {
    o->nnodes = ToInt(env, "SLURM_NNODES");
    o->node_rank = ToInt(env, "SLURM_NODEID");
    if (o->rdzv_endpoint.empty()) {
      auto hosts = ExpandSlurmNodelist(env.at("SLURM_JOB_NODELIST"));
      auto port = env.find("DLAUNCH_RDZV_PORT");
      o->rdzv_endpoint =
          hosts.front() + ":" +
          (port != env.end() && !port->second.empty() ? port->second
                                                      : std::to_string(kDefaultRdzvPort));
    }
    if (o->run_id.empty() && Has(env, "SLURM_JOB_ID"))
      o->run_id = "slurm-" + env.at("SLURM_JOB_ID");
    return "slurm";
  }
  if (Has(env, "OMPI_COMM_WORLD_SIZE") && Has(env, "OMPI_COMM_WORLD_RANK")) {
    o->nnodes = ToInt(env, "OMPI_COMM_WORLD_SIZE");
    o->node_rank = ToInt(env, "OMPI_COMM_WORLD_RANK");
    return "openmpi";
  }
  if (Has(env, "PET_NNODES") && Has(env, "PET_NODE_RANK")) {
    o->nnodes = ToInt(env, "PET_NNODES");
    o->node_rank = ToInt(env, "PET_NODE_RANK");
    if (o->rdzv_endpoint.empty() && Has(env, "MASTER_ADDR") && Has(env, "MASTER_PORT")) {
      o->rdzv_endpoint = env.at("MASTER_ADDR") + ":" + env.at("MASTER_PORT");
    }
    return "kubeflow";
  }
  return "";
}

std::map<std::string, std::string> CurrentEnv() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

}  // namespace dlaunch::launcher
