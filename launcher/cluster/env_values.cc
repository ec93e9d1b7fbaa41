#include "launcher/cluster/env_values.h"

#include <exception>

namespace dlaunch::launcher::cluster {

const std::string* Find(const EnvMap& env, const char* key) {
  auto it = env.find(key);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

int ParseCount(const std::string& text, const std::string& what) {
  size_t used = 0;
  int v = -1;
  try {
    v = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || v < 0) {
    throw UsageError(what + "='" + text + "' is not a non-negative integer");
  }
  return v;
}

Sourced<int> CountVar(const EnvMap& env, const char* key) {
  try {
    return Sourced<int>::Of(ParseCount(env.at(key), key), key);
  } catch (const UsageError& e) {
    return Sourced<int>::Bad(key, e.what());
  }
}

Sourced<int> IntVar(const EnvMap& env, const char* key) {
  const std::string& text = env.at(key);
  try {
    size_t used = 0;
    const int v = std::stoi(text, &used);
    if (used == text.size()) return Sourced<int>::Of(v, key);
  } catch (const std::exception&) {
  }
  return Sourced<int>::Bad(key, std::string(key) + "='" + text + "' is not an integer");
}

NodeShare Normalized(NodeShare share) {
  return share.count < 1 || share.index >= share.count ? NodeShare{} : share;
}

std::string JoinEndpoint(const std::string& host, const std::string& port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + port;
}

}  // namespace dlaunch::launcher::cluster
