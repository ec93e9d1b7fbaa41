#include "launcher/job.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "core/error.h"
#include "core/telemetry.h"
#include "launcher/builtins.h"
#include "launcher/coordinator.h"
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

int RunJob(const LaunchOptions& o, const std::string& self_exe) {
  // ---- set-up checks: everything that can be wrong with the input fails here, before any rank.
  std::vector<std::string> argv;
  const bool builtin = o.command == Command::kTrain || o.command == Command::kPreflight;
  if (builtin) {
    argv = BuiltinWorkerArgv(o, self_exe);
  } else {
    argv = o.program;
    bool python =
        !o.no_python && argv[0].size() > 3 && argv[0].compare(argv[0].size() - 3, 3, ".py") == 0;
    if (python) {
      if (::access(argv[0].c_str(), R_OK) != 0) {
        throw UsageError("script '" + argv[0] + "' does not exist or is not readable");
      }
      const char* py = std::getenv("DLAUNCH_PYTHON");
      argv.insert(argv.begin(), ResolveProgram(py && *py ? py : "python3"));
    } else {
      argv[0] = ResolveProgram(argv[0]);
    }
  }
  if (o.nnodes > 1) {
    throw UsageError("--nnodes " + std::to_string(o.nnodes) +
                     ": multi-node launches are not available in this build");
  }
  int master_port = o.master_port;
  if (master_port == 0) {
    master_port = PickFreePort(o.master_addr);
  } else if (!PortIsFree(o.master_addr, master_port)) {
    throw UsageError("--master-port " + std::to_string(master_port) +
                     " is already in use on this machine (leave it out and dlaunch picks a free "
                     "one)");
  }
  if (builtin && !o.skip_doctor) CheckDoctorBeforeStart();

  const std::string run_id = o.run_id.empty() ? NewRunId() : o.run_id;
  MakeDirs(o.log_dir, "--log-dir");
  const std::string run_dir = o.log_dir + "/" + run_id;
  MakeDirs(run_dir, "run directory");
  const int world = o.nproc * o.nnodes;
  std::vector<std::string> rank_dirs;
  for (int r = 0; r < world; ++r) {
    rank_dirs.push_back(run_dir + "/rank" + std::to_string(r));
    MakeDirs(rank_dirs.back(), "rank directory");
  }

  // ---- coordinator
  CoordinatorConfig cc;
  cc.world_size = world;
  cc.nproc_per_node = o.nproc;
  cc.token = RandomHex(16);
  cc.run_id = run_id;
  cc.run_dir = run_dir;
  cc.rdzv_timeout = o.rdzv_timeout;
  CoordinatorHandler handler(cc);
  CoordinatorServer server(&handler, "127.0.0.1:0");

  std::mutex events_mu;
  std::map<int, std::string> rank_errors;  // the first error each rank reported
  handler.SetEventListener([&](const v1::Event& e) {
    if (e.kind() == "rendezvous_timeout") {
      auto body = nlohmann::json::parse(e.json(), nullptr, false);
      std::cerr << "dlaunch: " << body.value("message", "rendezvous timed out") << std::endl;
      return;
    }
    if (e.kind() == "error" || e.kind() == "timeout" || e.kind() == "oom") {
      auto body = nlohmann::json::parse(e.json(), nullptr, false);
      std::string msg = body.is_object() ? body.value("message", e.kind()) : e.json();
      std::lock_guard<std::mutex> lock(events_mu);
      rank_errors.emplace(e.rank(), e.kind() + ": " + msg);
    }
  });

  std::map<std::string, std::string> common = {
      {"WORLD_SIZE", std::to_string(world)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(o.nnodes)},
      {"ROLE_NAME", "default"},
      {"ROLE_WORLD_SIZE", std::to_string(world)},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(master_port)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(o.max_restarts)},
      {"TORCHELASTIC_RUN_ID", run_id},
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"DLAUNCH_COORDINATOR", "127.0.0.1:" + std::to_string(server.port())},
      {"DLAUNCH_JOB_TOKEN", cc.token},
      {"DLAUNCH_RUN_ID", run_id},
      {"DLAUNCH_RUN_DIR", run_dir},
      {"DLAUNCH_RDZV_TIMEOUT", std::to_string(o.rdzv_timeout.count() / 1000)},
      {"DLAUNCH_HEARTBEAT_MS", std::to_string(o.heartbeat_interval.count())},
  };
  if (o.nproc > 1 && !IsSet("OMP_NUM_THREADS")) common["OMP_NUM_THREADS"] = "1";
  if (!IsSet("TORCH_NCCL_ASYNC_ERROR_HANDLING")) common["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1";
  if (!o.nccl_debug.empty()) common["NCCL_DEBUG"] = o.nccl_debug;
  if (!o.nccl_socket_ifname.empty()) {
    common["NCCL_SOCKET_IFNAME"] = o.nccl_socket_ifname;
    common["GLOO_SOCKET_IFNAME"] = o.nccl_socket_ifname;
  }
  for (const auto& [k, v] : o.env) common[k] = v;

  SupervisorOptions so;
  so.grace_period = o.grace_period;
  so.quiet = o.quiet;
  so.console_ranks = {o.ranks_filter.begin(), o.ranks_filter.end()};
  auto spawner = MakeForkExecSpawner();
  Supervisor supervisor(spawner.get(), so);

  SummaryInfo summary;
  summary.run_id = run_id;
  summary.host = Hostname();
  const std::string summary_path = run_dir + "/summary.json";
  std::cerr << "dlaunch: " << world << " rank" << (world > 1 ? "s" : "") << ", run directory "
            << run_dir << std::endl;

  int exit_code = 0;
  for (int attempt = 0;; ++attempt) {
    std::vector<RankSpec> specs;
    for (int local = 0; local < o.nproc; ++local) {
      const int rank = o.node_rank * o.nproc + local;
      auto env = common;
      env["RANK"] = env["ROLE_RANK"] = std::to_string(rank);
      env["LOCAL_RANK"] = std::to_string(local);
      env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(attempt);
      env["TORCHELASTIC_ERROR_FILE"] = rank_dirs[rank] + "/torch_error.json";
      env["DLAUNCH_RANK_DIR"] = rank_dirs[rank];
      if (!o.nccl_debug.empty()) env["NCCL_DEBUG_FILE"] = rank_dirs[rank] + "/nccl.log";
      specs.push_back(RankSpec{rank, local, ProcessSpec{argv, RankEnv(env)}, rank_dirs[rank]});
    }
    summary.restarts = attempt;
    summary.exit_code = -1;
    AttemptResult result = supervisor.Run(specs);

    exit_code = 0;
    summary.error.clear();
    if (result.interrupted_by) {
      exit_code = 128 + result.interrupted_by;
      summary.error = "interrupted by " + SignalName(result.interrupted_by);
      std::cerr << "dlaunch: " << summary.error << "; ranks stopped" << std::endl;
    } else if (result.stop_code) {
      exit_code = *result.stop_code;
      summary.error = result.stop_reason;
    } else if (result.first_failure) {
      const RankOutcome& f = result.ranks[*result.first_failure];
      std::string extra;
      {
        std::lock_guard<std::mutex> lock(events_mu);
        if (rank_errors.count(f.rank)) extra = rank_errors[f.rank];
      }
      std::cerr << FormatRootCause(f, summary.host, rank_dirs[f.rank], extra);
      summary.error = "rank " + std::to_string(f.rank) + " failed: " + DescribeExit(f) +
                      (extra.empty() ? "" : "; " + extra);
      exit_code = builtin ? BuiltinExitCode(f) : 1;
    }
    summary.exit_code = exit_code;
    WriteSummary(summary_path, summary, result.ranks);

    const bool retryable =
        exit_code != 0 && !result.interrupted_by && (!result.stop_code || o.on_hang == "restart");
    if (!retryable || attempt >= o.max_restarts) break;
    std::cerr << "dlaunch: restarting all ranks (restart " << attempt + 1 << " of "
              << o.max_restarts << ")" << std::endl;
    handler.Reset();
    std::lock_guard<std::mutex> lock(events_mu);
    rank_errors.clear();
  }
  server.Shutdown();
  return exit_code;
}

}  // namespace dlaunch::launcher
