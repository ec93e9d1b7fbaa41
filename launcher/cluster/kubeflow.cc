#include "launcher/cluster/kubeflow.h"

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

}  // namespace dlaunch::launcher::cluster
