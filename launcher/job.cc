#include "launcher/job.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/exit_codes.h"
#include "core/telemetry.h"
#include "launcher/builtins.h"
#include "launcher/coordinator.h"
#include "launcher/diagnose/diagnose.h"
#include "launcher/live_job.h"
#include "launcher/mpi_rendezvous.h"
#include "launcher/node_agent.h"
#include "launcher/node_env.h"
#include "launcher/python/python_launch.h"
#include "launcher/report.h"
#include "launcher/supervisor.h"

extern char** environ;

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;

std::string RandomHex(size_t bytes) {
  std::random_device rd;
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < bytes; ++i) {
    unsigned v = rd() & 0xff;
    s += kHex[v >> 4];
    s += kHex[v & 15];
  }
  return s;
}

std::string NewRunId() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &tm);
  return std::string(buf) + "-" + RandomHex(2);
}

std::string Hostname() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

void MakeDirs(const std::string& path, const char* what) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec || ::access(path.c_str(), W_OK) != 0) {
    throw UsageError(std::string("cannot use ") + what + " '" + path +
                     "': " + (ec ? ec.message() : std::strerror(errno)));
  }
}

// The environment every rank inherits: ours, with the job's variables on top.
std::vector<std::string> RankEnv(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (!overrides.count(kv.substr(0, kv.find('=')))) env.push_back(kv);
  }
  for (const auto& [k, v] : overrides) env.push_back(k + "=" + v);
  return env;
}

bool IsSet(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

}  // namespace

std::string ResolveProgram(const std::string& program) {
  auto check = [&](const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return false;
    if (S_ISDIR(st.st_mode)) throw UsageError("program '" + path + "' is a directory");
    if (::access(path.c_str(), X_OK) != 0) {
      throw UsageError("program '" + path +
                       "' is not executable (chmod +x, or run it with an "
                       "interpreter: dlaunch ... -- python3 " +
                       path + ")");
    }
    return true;
  };
  if (program.find('/') != std::string::npos) {
    if (!check(program)) throw UsageError("program '" + program + "' does not exist");
    return program;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), F_OK) == 0 && check(candidate)) return candidate;
    start = end + 1;
  }
  throw UsageError("program '" + program + "' not found in PATH");
}

bool PortIsFree(const std::string& host, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) addr.sin_addr.s_addr = INADDR_ANY;
  bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return free;
}

int PickFreePort(const std::string& host) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) addr.sin_addr.s_addr = INADDR_ANY;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw Error(ErrorKind::kInternal,
                std::string("cannot find a free port: ") + std::strerror(errno));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

namespace {

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// host:port -> {host, port}; throws UsageError.
std::pair<std::string, int> SplitEndpoint(const std::string& endpoint) {
  size_t colon = endpoint.rfind(':');
  int port = -1;
  if (colon != std::string::npos && colon > 0) {
    try {
      size_t used = 0;
      port = std::stoi(endpoint.substr(colon + 1), &used);
      if (used != endpoint.size() - colon - 1) port = -1;
    } catch (const std::exception&) {
      port = -1;
    }
  }
  if (port <= 0 || port > 65535) {
    throw UsageError("--rdzv-endpoint must be host:port (got '" + endpoint + "')");
  }
  return {endpoint.substr(0, colon), port};
}

// The program each rank runs, checked before anything starts.
std::vector<std::string> RankArgv(const LaunchOptions& o, const std::string& self_exe) {
  if (o.command == Command::kTrain || o.command == Command::kPreflight) {
    return BuiltinWorkerArgv(o, self_exe);
  }
  if (python::IsPythonEntry(o)) {
    const python::Interpreter interpreter = python::ResolveInterpreter(o);
    std::cerr << "dlaunch: python " << interpreter.path << " (from " << interpreter.source << ")"
              << std::endl;
    return python::PythonArgv(o, interpreter);
  }
  std::vector<std::string> argv = o.program;
  argv[0] = ResolveProgram(argv[0]);
  return argv;
}

// Where this node stands in a multi-node job, resolved before any rank starts.
struct NodePlan {
  bool multi = false;
  std::string endpoint;  // node 0's coordinator, host:port
  std::string token;
  core::TlsFiles tls;
};

NodePlan PlanNodes(LaunchOptions* o) {
  NodePlan plan;
  const std::string engine = ApplySchedulerEnv(CurrentEnv(), o);
  if (o->node_rank < 0 || o->node_rank >= o->nnodes) {
    throw UsageError("node rank " + std::to_string(o->node_rank) + " is outside [0, " +
                     std::to_string(o->nnodes) + ")" +
                     (engine.empty() ? "" : " (from " + engine + ")"));
  }
  plan.tls = {o->tls_ca, o->tls_cert, o->tls_key};
  plan.multi = o->nnodes > 1;
  if (!plan.multi) {
    if (plan.tls.enabled()) throw UsageError("--tls-* options are for multi-node launches");
    plan.token = RandomHex(16);
    return plan;
  }
  if (o->max_restarts > 0) {
    throw UsageError("--max-restarts is not available for multi-node launches yet");
  }
  if (!o->token_file.empty()) {
    plan.token = Trim(core::ReadWholeFile(o->token_file, "--token-file"));
  } else if (const char* t = std::getenv("DLAUNCH_JOB_TOKEN"); t && *t) {
    plan.token = t;
  }
  if (plan.token.size() < 16) {
    throw UsageError(
        "multi-node launches need a shared job token of at least 16 characters: "
        "--token-file FILE or DLAUNCH_JOB_TOKEN, the same on every node");
  }
  if (plan.tls.enabled() &&
      (plan.tls.ca.empty() || plan.tls.cert.empty() || plan.tls.key.empty())) {
    throw UsageError("TLS needs all of --tls-cert, --tls-key and --tls-ca");
  }
  if (o->rdzv_endpoint.empty()) {
    if (engine != "openmpi") {
      throw UsageError("--nnodes " + std::to_string(o->nnodes) +
                       " needs --rdzv-endpoint host:port (node 0's address)");
    }
    // Node 0 proposes its own address and a free port; MPI carries it to every launcher.
    std::string proposal;
    if (o->node_rank == 0) {
      proposal = (o->master_addr != "127.0.0.1" ? o->master_addr : Hostname()) + ":" +
                 std::to_string(PickFreePort("0.0.0.0"));
    }
    o->rdzv_endpoint = AgreeOverMpi(proposal);
  }
  SplitEndpoint(o->rdzv_endpoint);
  plan.endpoint = o->rdzv_endpoint;
  return plan;
}

}  // namespace

int RunJob(const LaunchOptions& options, const std::string& self_exe) {
  // ---- set-up checks: everything that can be wrong with the input fails here, before any rank.
  LaunchOptions o = options;
  const std::vector<std::string> argv = RankArgv(o, self_exe);
  const bool builtin = o.command == Command::kTrain || o.command == Command::kPreflight;
  NodePlan plan = PlanNodes(&o);
  const bool agent = plan.multi && o.node_rank > 0;
  const int world = o.nproc * o.nnodes;
  const std::string host = Hostname();

  int master_port = o.master_port;
  std::string master_addr = o.master_addr;
  if (plan.multi && master_addr == "127.0.0.1") master_addr = SplitEndpoint(plan.endpoint).first;
  if (!agent) {
    if (master_port == 0) {
      master_port = PickFreePort(plan.multi ? "0.0.0.0" : o.master_addr);
    } else if (!PortIsFree(plan.multi ? "0.0.0.0" : o.master_addr, master_port)) {
      throw UsageError("--master-port " + std::to_string(master_port) +
                       " is already in use on this machine (leave it out and dlaunch picks a free "
                       "one)");
    }
  }
  if (builtin && !o.skip_doctor) CheckDoctorBeforeStart();

  // ---- coordinator (node 0) or the way to it (agents)
  std::unique_ptr<CoordinatorHandler> handler;
  std::unique_ptr<CoordinatorServer> server;
  std::unique_ptr<NodeAgent> node_agent;
  std::string run_id = o.run_id;
  std::string coordinator_address;
  if (agent) {
    auto client = std::make_shared<core::CoordinatorClient>(plan.endpoint, plan.token, plan.tls);
    node_agent = std::make_unique<NodeAgent>(client, o.node_rank);
    v1::NodeRequest req;
    req.set_node_rank(o.node_rank);
    req.set_host(host);
    req.set_nproc(o.nproc);
    req.set_doctor_json(DoctorFingerprint());
    std::cerr << "dlaunch: node " << o.node_rank << " joining " << plan.endpoint << std::endl;
    v1::NodeResponse resp;
    try {
      resp = node_agent->Join(req, o.rdzv_timeout);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kInvalidArgument) throw UsageError(e.what());
      throw;
    }
    run_id = resp.run_id();
    master_addr = resp.master_addr();
    master_port = resp.master_port();
    coordinator_address = plan.endpoint;
  } else {
    if (run_id.empty()) run_id = NewRunId();
  }

  MakeDirs(o.log_dir, "--log-dir");
  const std::string run_dir = o.log_dir + "/" + run_id;
  MakeDirs(run_dir, "run directory");
  std::map<int, std::string> rank_dirs;
  for (int local = 0; local < o.nproc; ++local) {
    const int r = o.node_rank * o.nproc + local;
    rank_dirs[r] = run_dir + "/rank" + std::to_string(r);
    MakeDirs(rank_dirs[r], "rank directory");
  }

  if (!agent) {
    CoordinatorConfig cc;
    cc.world_size = world;
    cc.nproc_per_node = o.nproc;
    cc.nnodes = o.nnodes;
    cc.master_addr = master_addr;
    cc.master_port = master_port;
    cc.token = plan.token;
    cc.run_id = run_id;
    cc.run_dir = run_dir;
    cc.rdzv_timeout = o.rdzv_timeout;
    handler = std::make_unique<CoordinatorHandler>(cc);
    // Beyond loopback only when other nodes must reach it.
    const std::string listen =
        plan.multi ? "0.0.0.0:" + std::to_string(SplitEndpoint(plan.endpoint).second)
                   : "127.0.0.1:0";
    server = std::make_unique<CoordinatorServer>(handler.get(), listen, plan.tls);
    coordinator_address =
        plan.multi ? plan.endpoint : "127.0.0.1:" + std::to_string(server->port());
  }

  SupervisorOptions so;
  so.grace_period = o.grace_period;
  so.quiet = o.quiet;
  so.console_ranks = {o.ranks_filter.begin(), o.ranks_filter.end()};
  auto spawner = MakeForkExecSpawner();
  Supervisor supervisor(spawner.get(), so);

  std::mutex events_mu;
  std::map<int, std::string> rank_errors;  // the first error each rank reported
  std::string node_failure;                // multi-node: why another node ended the job
  if (handler) {
    handler->SetEventListener([&](const v1::Event& e) {
      auto body = nlohmann::json::parse(e.json(), nullptr, false);
      if (e.kind() == "rendezvous_timeout") {
        std::cerr << "dlaunch: " << body.value("message", "rendezvous timed out") << std::endl;
        return;
      }
      if (e.kind() == "node_failed" || e.kind() == "node_lost") {
        std::string msg = body.is_object() ? body.value("message", e.kind()) : e.kind();
        if (e.kind() == "node_failed") {
          msg = "node " + std::to_string(body.value("node_rank", -1)) + " (" +
                body.value("host", "?") + ") failed: " + msg;
        }
        {
          std::lock_guard<std::mutex> lock(events_mu);
          if (node_failure.empty()) node_failure = msg;
        }
        supervisor.RequestStop(kExitRankFailed, msg);
        return;
      }
      if (e.kind() == "error" || e.kind() == "timeout" || e.kind() == "oom") {
        std::string msg = body.is_object() ? body.value("message", e.kind()) : e.json();
        std::lock_guard<std::mutex> lock(events_mu);
        rank_errors.emplace(e.rank(), e.kind() + ": " + msg);
      }
    });
  }
  if (plan.multi && !agent) {
    handler->AddLocalNode(host, DoctorFingerprint());
    std::cerr << "dlaunch: node 0 of " << o.nnodes << ", coordinator on " << plan.endpoint
              << ", waiting for the other nodes" << std::endl;
    auto absent = handler->WaitForNodes();
    if (!absent.empty()) {
      std::string list;
      for (int n : absent) list += (list.empty() ? "" : ",") + std::to_string(n);
      std::cerr << "dlaunch: node rendezvous timed out: node" << (absent.size() > 1 ? "s " : " ")
                << list << " never joined" << std::endl;
      return kExitRankFailed;
    }
    std::vector<std::string> fingerprints;
    for (const auto& n : handler->Nodes()) fingerprints.push_back(n.doctor_json);
    for (const auto& w : CompareDoctorFingerprints(fingerprints)) {
      std::cerr << "dlaunch: warning: " << w << std::endl;
    }
  }

  std::map<std::string, std::string> common = {
      {"WORLD_SIZE", std::to_string(world)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(o.nnodes)},
      {"ROLE_NAME", "default"},
      {"ROLE_WORLD_SIZE", std::to_string(world)},
      {"MASTER_ADDR", master_addr},
      {"MASTER_PORT", std::to_string(master_port)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(o.max_restarts)},
      {"TORCHELASTIC_RUN_ID", run_id},
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"DLAUNCH_COORDINATOR", coordinator_address},
      {"DLAUNCH_JOB_TOKEN", plan.token},
      {"DLAUNCH_RUN_ID", run_id},
      {"DLAUNCH_RUN_DIR", run_dir},
      {"DLAUNCH_RDZV_TIMEOUT", std::to_string(o.rdzv_timeout.count() / 1000)},
      {"DLAUNCH_HEARTBEAT_MS", std::to_string(o.heartbeat_interval.count())},
  };
  if (plan.tls.enabled()) {
    common["DLAUNCH_TLS_CA"] = fs::absolute(plan.tls.ca).string();
    common["DLAUNCH_TLS_CERT"] = fs::absolute(plan.tls.cert).string();
    common["DLAUNCH_TLS_KEY"] = fs::absolute(plan.tls.key).string();
  }
  if (o.nproc > 1 && !IsSet("OMP_NUM_THREADS")) common["OMP_NUM_THREADS"] = "1";
  if (!IsSet("TORCH_NCCL_ASYNC_ERROR_HANDLING")) common["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1";
  if (!o.nccl_debug.empty()) common["NCCL_DEBUG"] = o.nccl_debug;
  if (!o.nccl_socket_ifname.empty()) {
    common["NCCL_SOCKET_IFNAME"] = o.nccl_socket_ifname;
    common["GLOO_SOCKET_IFNAME"] = o.nccl_socket_ifname;
  }
  if (!builtin) python::AddJobEnv(python::FindAgentDir(self_exe), o.python_agent, &common);
  for (const auto& [k, v] : o.env) common[k] = v;

  // Node 0 watches every rank for stalls: heartbeats of linked ranks, output of the others.
  std::unique_ptr<LiveJobView> job_view;
  std::unique_ptr<HangMonitor> monitor;
  if (handler && o.hang_timeout.count() > 0) {
    job_view = std::make_unique<LiveJobView>(handler.get(), &supervisor, world, run_dir);
    HangMonitor::Options ho;
    ho.hang_timeout = o.hang_timeout;
    ho.silence_is_hang = o.hang_on_silence;
    ho.heartbeat_timeout = o.heartbeat_timeout;
    monitor = std::make_unique<HangMonitor>(*job_view, ho);
  }
  bool hang_diagnosed = false;

  // Ticks on the supervisor's loop: the hang monitor; agents copy their files to node 0; node 0
  // watches the other nodes' heartbeats.
  supervisor.on_tick = [&] {
    if (monitor) {
      if (auto d = monitor->Poll(core::UnixMillis())) {
        hang_diagnosed = true;
        std::cerr << FormatDiagnosis(*d) << std::flush;
        supervisor.RequestStop(kExitHang, d->headline);
      }
    }
    if (node_agent) node_agent->PushFiles(rank_dirs);
    if (plan.multi && handler) {
      const int64_t now = core::UnixMillis();
      for (const auto& n : handler->Nodes()) {
        if (n.node_rank == 0 || (n.status && n.status->done())) continue;
        if (now - n.last_heartbeat_unix_ms > o.heartbeat_timeout.count()) {
          std::string msg = "node " + std::to_string(n.node_rank) + " (" + n.host +
                            ") lost: no heartbeat for " +
                            std::to_string((now - n.last_heartbeat_unix_ms) / 1000) + " s";
          {
            std::lock_guard<std::mutex> lock(events_mu);
            if (node_failure.empty()) node_failure = msg;
          }
          supervisor.RequestStop(kExitRankFailed, msg);
        }
      }
    }
  };
  if (node_agent) {
    node_agent->Start(
        [&] {
          v1::NodeStatus s;
          s.set_node_rank(o.node_rank);
          for (const auto& live : supervisor.Live()) {
            auto* r = s.add_ranks();
            r->set_rank(live.rank);
            r->set_pid(live.pid);
            r->set_exited(live.exited);
          }
          return s;
        },
        o.heartbeat_interval,
        [&](const std::string& reason) { supervisor.RequestStop(kExitRankFailed, reason); });
  }

  SummaryInfo summary;
  summary.run_id = run_id;
  summary.host = host;
  const std::string summary_path =
      run_dir + (agent ? "/summary.node" + std::to_string(o.node_rank) + ".json" : "/summary.json");
  std::cerr << "dlaunch: " << world << " rank" << (world > 1 ? "s" : "");
  if (plan.multi) std::cerr << " on " << o.nnodes << " nodes (this is node " << o.node_rank << ")";
  std::cerr << ", run directory " << run_dir << std::endl;

  int exit_code = 0;
  std::vector<RankOutcome> outcomes;
  for (int attempt = 0;; ++attempt) {
    std::vector<RankSpec> specs;
    for (int local = 0; local < o.nproc; ++local) {
      const int rank = o.node_rank * o.nproc + local;
      auto env = common;
      env["RANK"] = env["ROLE_RANK"] = std::to_string(rank);
      env["LOCAL_RANK"] = std::to_string(local);
      env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(attempt);
      env["DLAUNCH_RANK_DIR"] = rank_dirs[rank];
      python::AddRankEnv(rank_dirs[rank], &env);
      if (!o.nccl_debug.empty()) env["NCCL_DEBUG_FILE"] = rank_dirs[rank] + "/nccl.log";
      specs.push_back(RankSpec{rank, local, ProcessSpec{argv, RankEnv(env)}, rank_dirs[rank]});
    }
    summary.restarts = attempt;
    summary.exit_code = -1;
    AttemptResult result = supervisor.Run(specs);
    outcomes = result.ranks;

    exit_code = 0;
    summary.error.clear();
    if (result.interrupted_by) {
      exit_code = 128 + result.interrupted_by;
      summary.error = "interrupted by " + SignalName(result.interrupted_by);
      std::cerr << "dlaunch: " << summary.error << "; ranks stopped" << std::endl;
    } else if (result.stop_code) {
      exit_code = *result.stop_code;
      summary.error = result.stop_reason;
      std::cerr << "dlaunch: " << result.stop_reason << std::endl;
    } else if (result.first_failure) {
      const RankOutcome& f = result.ranks[*result.first_failure];
      std::string extra;
      {
        std::lock_guard<std::mutex> lock(events_mu);
        if (rank_errors.count(f.rank)) extra = rank_errors[f.rank];
      }
      std::cerr << FormatRootCause(f, host, rank_dirs[f.rank], extra);
      summary.error = "rank " + std::to_string(f.rank) + " failed: " + DescribeExit(f) +
                      (extra.empty() ? "" : "; " + extra);
      exit_code = builtin ? BuiltinExitCode(f) : kExitRankFailed;
    }
    if (plan.multi && !agent) {
      if (exit_code != 0) {
        v1::Command abort;
        abort.set_kind(v1::Command::ABORT);
        abort.set_reason(summary.error);
        handler->BroadcastToNodes(abort);
      }
      // Node 0's ranks are done; the job is done when every node says so.
      std::string remote = handler->WaitForNodesDone(o.heartbeat_timeout);
      if (!remote.empty() && exit_code == 0) {
        exit_code = kExitRankFailed;
        summary.error = remote;
        std::cerr << "dlaunch: " << remote << std::endl;
      }
      summary.nodes = handler->Nodes();
    }
    summary.exit_code = exit_code;
    WriteSummary(summary_path, summary, result.ranks);
    if (exit_code != 0 && !hang_diagnosed && !agent && !result.interrupted_by) {
      // The failure's picture across ranks: each one's last collective, phase and memory.
      std::cerr << FormatDiagnosis(AnalyzeRunDir(run_dir, world)) << std::flush;
    }

    const bool retryable =
        exit_code != 0 && !result.interrupted_by && (!result.stop_code || o.on_hang == "restart");
    if (!retryable || attempt >= o.max_restarts) break;
    std::cerr << "dlaunch: restarting all ranks (restart " << attempt + 1 << " of "
              << o.max_restarts << ")" << std::endl;
    handler->Reset();
    if (monitor) monitor->Reset();
    hang_diagnosed = false;
    std::lock_guard<std::mutex> lock(events_mu);
    rank_errors.clear();
  }
  if (node_agent) {
    node_agent->PushFiles(rank_dirs);
    v1::NodeStatus last;
    last.set_node_rank(o.node_rank);
    last.set_done(true);
    last.set_exit_code(exit_code);
    last.set_message(summary.error);
    for (const auto& r : outcomes) {
      auto* x = last.add_ranks();
      x->set_rank(r.rank);
      x->set_pid(r.pid);
      x->set_exited(r.exited);
      x->set_exit_code(r.exit_code);
      x->set_signal(r.signal);
    }
    node_agent->Finish(last);
  }
  if (server) server->Shutdown();
  return exit_code;
}

}  // namespace dlaunch::launcher
