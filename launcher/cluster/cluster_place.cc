#include "launcher/cluster/cluster_place.h"

#include <functional>

namespace dlaunch::launcher::cluster {
namespace {

const char* EngineKind(Engine engine) {
  switch (engine) {
    case Engine::kNone:
      return "none";
    case Engine::kSlurmStep:
      return "slurm-step";
    case Engine::kSlurmBatch:
      return "slurm-batch";
    case Engine::kOpenMpi:
      return "openmpi";
    case Engine::kKubeflow:
      return "kubeflow";
  }
  return "?";
}

const char* TokenName(TokenSource token) {
  switch (token) {
    case TokenSource::kNone:
      return "none";
    case TokenSource::kJobTokenVariable:
      return "job-token-variable";
    case TokenSource::kSlurmStepSecret:
      return "slurm-step-secret";
  }
  return "?";
}

// " name=value[source]", " name=!error[source]", or nothing for a field the environment left out.
template <typename T>
void Field(const char* name, const Sourced<T>& field,
           const std::function<std::string(const T&)>& text, std::string* out) {
  if (!field.given()) return;
  *out += std::string(" ") + name + "=" +
          (field.error.empty() ? text(*field.value) : "!" + field.error) + "[" + field.source + "]";
}

}  // namespace

const char* EngineName(Engine engine) {
  switch (engine) {
    case Engine::kSlurmStep:
    case Engine::kSlurmBatch:
      return "slurm";
    case Engine::kOpenMpi:
      return "openmpi";
    case Engine::kKubeflow:
      return "kubeflow";
    case Engine::kNone:
      break;
  }
  return "";
}

std::string FormatPlace(const ClusterPlace& place) {
  std::string out = EngineKind(place.engine);
  const auto number = [](const int& n) { return std::to_string(n); };
  const auto text = [](const std::string& s) { return s; };
  Field<int>(
      "nnodes", place.nnodes,
      [&](const int& n) {
        return (place.min_nodes ? std::to_string(place.min_nodes) + ":" : "") + std::to_string(n);
      },
      &out);
  Field<int>("node_rank", place.node_rank, number, &out);
  Field<std::string>("endpoint", place.endpoint, text, &out);
  Field<std::string>(
      "run_id", place.run_id,
      [&](const std::string& s) { return s + (place.run_id_is_stem ? "-*" : ""); }, &out);
  if (!place.job_id.empty()) out += " job='" + place.job_id + "'";
  Field<int>("nproc", place.nproc, number, &out);
  Field<NodeShare>(
      "share", place.share,
      [](const NodeShare& s) { return std::to_string(s.index) + "/" + std::to_string(s.count); },
      &out);
  Field<TokenSource>("token", place.token, TokenName, &out);
  return out;
}

}  // namespace dlaunch::launcher::cluster
