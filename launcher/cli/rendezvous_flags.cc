// The rendezvous group: how many nodes and ranks, this node's rank, and where the nodes meet.
#include <unistd.h>

#include <string>

#include "core/base/proc.h"
#include "core/error.h"
#include "core/run_dir/paths.h"
#include "launcher/cli/group_parsers.h"
#include "launcher/launch_checks.h"

namespace dlaunch::launcher::cli {
namespace {

int ParseCount(const std::string& text, const std::string& whole) {
  const int n = PositiveInt(text);
  if (n < 1) {
    throw UsageError("--nnodes must be N or MIN:MAX with 1 <= MIN <= MAX (got '" + whole + "')");
  }
  return n;
}

// torchrun's --standalone: one node meeting on a free port, whatever the rendezvous flags say.
void ApplyStandalone(const Flags& f, LaunchOptions* o) {
  if (o->nnodes > 1) {
    throw UsageError("--standalone is a job on one node: drop --nnodes " +
                     f.Get<std::string>("nnodes"));
  }
  o->nnodes_given = true;  // a scheduler's node count does not apply either
  std::string ignored;
  auto ignore = [&](std::initializer_list<const char*> names) {
    if (!f.First<std::string>(names)) return;
    ignored += (ignored.empty() ? "--" : ", --") + std::string(*names.begin());
  };
  ignore({"rdzv-backend", "rdzv_backend"});
  ignore({"rdzv-endpoint", "rdzv_endpoint"});
  ignore({"rdzv-id", "rdzv_id"});
  if (!ignored.empty()) {
    o->notes.push_back("--standalone: " + ignored +
                       " ignored, as torchrun ignores them (the job meets on a free port)");
  }
  o->rdzv_endpoint.clear();
  o->run_id = f.First<std::string>({"run-id"}).value_or("");
}

}  // namespace

int ParseNproc(const std::string& text, const std::string& flag) {
  if (text == "xpu") {
    throw UsageError(flag +
                     " xpu is not supported: dlaunch places ranks on NVIDIA GPUs or CPUs, "
                     "not Intel XPUs (give a number, auto, cpu or gpu)");
  }
  if (text == "gpu") {
    const int gpus = base::CountGpus();
    if (gpus == 0) {
      throw UsageError(flag + " gpu: no GPU found (" + base::kNvidiaGpuList +
                       " is empty or absent); give a number, or cpu");
    }
    return gpus;
  }
  if (text == "cpu") return static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  if (text == "auto") {
    int gpus = base::CountGpus();
    return gpus > 0 ? gpus : static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  }
  const int n = PositiveInt(text);
  if (n < 1) {
    throw UsageError(flag + " must be a positive integer, auto, cpu or gpu (got '" + text + "')");
  }
  return n;
}

// "2" or "1:4" (torchrun's elastic form).
void ParseNnodes(const std::string& text, LaunchOptions* o) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) {
    o->nnodes = ParseCount(text, text);
    o->min_nodes = 0;
    return;
  }
  o->min_nodes = ParseCount(text.substr(0, colon), text);
  o->nnodes = ParseCount(text.substr(colon + 1), text);
  if (o->min_nodes > o->nnodes) {
    throw UsageError("--nnodes " + text + ": MIN must not be larger than MAX");
  }
}

void CheckRdzvBackend(const std::string& backend) {
  if (backend == "etcd" || backend == "etcd-v2") {
    throw UsageError("--rdzv-backend " + backend +
                     " is not supported: dlaunch's nodes meet at node 0's coordinator, not in "
                     "etcd (give c10d or static, and --rdzv-endpoint NODE0:PORT)");
  }
  if (backend != "static" && backend != "c10d") {
    throw UsageError("--rdzv-backend must be static or c10d (got '" + backend + "')");
  }
}

void CheckMaxRestarts(int restarts) {
  if (restarts < 0) throw UsageError("--max-restarts must not be negative");
}

void ParseNodeFlags(const Flags& f, LaunchOptions* o) {
  o->nproc = ParseNproc(*f.First<std::string>({"nproc-per-node", "nproc_per_node", "nproc"}),
                        f.GivenName({"nproc-per-node", "nproc_per_node", "nproc"}));
  o->nproc_given = f.Given("nproc") || f.Given("nproc-per-node") || f.Given("nproc_per_node");
  ParseNnodes(f.Get<std::string>("nnodes"), o);
  o->nnodes_given = f.Given("nnodes");
  o->node_rank_given = f.Has("node-rank") || f.Has("node_rank");
  if (static_cast<int64_t>(o->nproc) * o->nnodes > rundir::kMaxRanks) {
    throw UsageError("--nproc " + std::to_string(o->nproc) + " x --nnodes " +
                     std::to_string(o->nnodes) + " is more than " +
                     std::to_string(rundir::kMaxRanks) + " ranks");
  }
  o->node_rank = f.First<int>({"node-rank", "node_rank"}).value_or(0);
  if (auto text = f.First<std::string>({"rdzv-conf", "rdzv_conf"})) {
    RdzvConf conf = ParseRdzvConf(*text);
    if (conf.join_timeout) o->join_timeout = *conf.join_timeout;
    if (conf.last_call_timeout) o->last_call_timeout = *conf.last_call_timeout;
    if (conf.close_timeout) o->close_timeout = *conf.close_timeout;
    o->notes.insert(o->notes.end(), conf.notes.begin(), conf.notes.end());
  }
  if (o->node_rank < 0 || o->node_rank >= o->nnodes) {
    throw UsageError("--node-rank must be in [0, " + std::to_string(o->nnodes) + ")");
  }
}

void ParseRendezvousFlags(const Flags& f, LaunchOptions* o) {
  o->rdzv_endpoint = f.First<std::string>({"rdzv-endpoint", "rdzv_endpoint"}).value_or("");
  o->run_id = f.First<std::string>({"rdzv-id", "rdzv_id", "run-id"}).value_or("");
  if (f.Get<bool>("standalone")) ApplyStandalone(f, o);
  CheckRunId(o->run_id);
  // A joining node would otherwise retry a malformed endpoint until its join timeout.
  if (!o->rdzv_endpoint.empty()) SplitEndpoint(o->rdzv_endpoint);
  if (auto b = f.First<std::string>({"rdzv-backend", "rdzv_backend"})) CheckRdzvBackend(*b);
  o->rdzv_timeout = Seconds(f.Get<double>("rdzv-timeout"), "--rdzv-timeout");
}

void ParseMasterFlags(const Flags& f, LaunchOptions* o) {
  o->master_addr_given = f.Has("master-addr") || f.Has("master_addr");
  o->master_addr = f.First<std::string>({"master-addr", "master_addr"}).value_or("127.0.0.1");
  if (o->master_addr.empty()) throw UsageError("--master-addr needs an address");
  if (auto local = f.First<std::string>({"local-addr", "local_addr"})) {
    if (local->empty()) throw UsageError("--local-addr needs an address");
    o->local_addr = *local;
    if (!o->master_addr_given) o->master_addr = o->local_addr;  // node 0's; the others learn it
  }
  o->master_port = f.First<int>({"master-port", "master_port"}).value_or(0);
  if (o->master_port < 0 || o->master_port > 65535) {
    throw UsageError("--master-port out of range");
  }
}

}  // namespace dlaunch::launcher::cli
