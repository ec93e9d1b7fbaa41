// Over the house's 600 lines: the whole command line is here, torchrun's spellings and aliases
// of every option beside dlaunch's own (the Boost table alone is ~150 lines). The split into
// per-group parsers and one ResolveLaunch (scheduler places out of launcher/cluster/) is #24's
// part 3, not done yet.
#include "launcher/options.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "core/base/proc.h"
#include "core/error.h"
#include "core/run_dir/paths.h"
#include "launcher/job/cluster_env.h"
#include "launcher/job/node_env.h"
#include "launcher/launch_checks.h"
#include "launcher/nccl_log/nccl_debug_default.h"
#include "launcher/supervision/supervisor.h"
#include "launcher/torchrun_flags.h"

namespace po = boost::program_options;

namespace dlaunch::launcher {
namespace {

// The whole of `text` as an integer of at least 1; 0 when it is not one.
int PositiveInt(const std::string& text) {
  size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(text, &used);
  } catch (const std::exception&) {
    return 0;
  }
  return used == text.size() && n >= 1 ? n : 0;
}

// `flag`: the spelling given, for the errors.
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

// Durations are finite: "inf" or 1e300 would overflow the millisecond count into a negative or
// tiny deadline (an instant false hang). "Never" is spelt 0 where a flag offers it.
std::chrono::milliseconds Seconds(double s, const char* flag, bool zero_is_never = false) {
  if (zero_is_never && s == 0) return std::chrono::milliseconds(0);
  if (!std::isfinite(s) || s <= 0 || s > kMaxDurationSeconds) {
    std::ostringstream got;
    got << s;
    throw UsageError(std::string(flag) + " must be a number of seconds in (0, " +
                     std::to_string(static_cast<int64_t>(kMaxDurationSeconds)) + "]" +
                     (zero_is_never ? ", or 0 for never" : "") + " (got " + got.str() + ")");
  }
  // Never rounded down to 0 ms, which means "off" for some flags.
  return std::chrono::milliseconds(std::max<int64_t>(1, std::llround(s * 1000)));
}

// torchrun's --shutdown-timeout (and TORCH_ELASTIC_SHUTDOWN_TIMEOUT): 0 is SIGKILL at once.
std::chrono::milliseconds ShutdownTimeout(double s) {
  return s == 0 ? std::chrono::milliseconds(1) : Seconds(s, "--shutdown-timeout");
}

int ParseCount(const std::string& text, const std::string& whole) {
  const int n = PositiveInt(text);
  if (n < 1) {
    throw UsageError("--nnodes must be N or MIN:MAX with 1 <= MIN <= MAX (got '" + whole + "')");
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

po::options_description Describe() {
  po::options_description d("dlaunch options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("version", "print the version")
    ("nproc", po::value<std::string>()->default_value("1"),
        "ranks per node: N, auto, cpu or gpu (aliases --nproc-per-node, --nproc_per_node)")
    ("nproc-per-node", po::value<std::string>(), "alias of --nproc")
    ("nproc_per_node", po::value<std::string>(), "alias of --nproc")
    ("nnodes", po::value<std::string>()->default_value("1"), "number of nodes: N, or MIN:MAX for an elastic job")
    ("node-rank", po::value<int>(), "this node's rank (alias --node_rank)")
    ("node_rank", po::value<int>(), "alias of --node-rank")
    ("rdzv-endpoint", po::value<std::string>(), "host:port of node 0's coordinator (alias --rdzv_endpoint)")
    ("rdzv_endpoint", po::value<std::string>(), "alias of --rdzv-endpoint")
    ("rdzv-id", po::value<std::string>(), "run id (alias --rdzv_id, --run-id)")
    ("rdzv_id", po::value<std::string>(), "alias of --rdzv-id")
    ("run-id", po::value<std::string>(), "alias of --rdzv-id")
    ("rdzv-backend", po::value<std::string>(), "accepted for torchrun compatibility: static or c10d")
    ("rdzv_backend", po::value<std::string>(), "alias of --rdzv-backend")
    ("rdzv-timeout", po::value<double>()->default_value(300), "seconds ranks may take to register")
    ("rdzv-conf", po::value<std::string>(), "timeout=S (or join_timeout=S),last_call_timeout=S,close_timeout=S; torchrun's other keys are accepted and noted (alias --rdzv_conf)")
    ("rdzv_conf", po::value<std::string>(), "alias of --rdzv-conf")
    ("standalone", po::bool_switch(), "one node, its coordinator on a free port, as torchrun's: --rdzv-backend, --rdzv-endpoint and --rdzv-id are ignored (with a note)")
    ("master-addr", po::value<std::string>(), "MASTER_ADDR given to ranks (alias --master_addr)")
    ("master_addr", po::value<std::string>(), "alias of --master-addr")
    ("master-port", po::value<int>(), "MASTER_PORT given to ranks; default: a free port (alias --master_port)")
    ("master_port", po::value<int>(), "alias of --master-port")
    ("local-addr", po::value<std::string>(), "this node's address: on node 0 the ranks' MASTER_ADDR, unless --master-addr is given (alias --local_addr)")
    ("local_addr", po::value<std::string>(), "alias of --local-addr")
    ("max-restarts", po::value<int>()->default_value(0), "restart all ranks up to K times after a failure (alias --max_restarts)")
    ("max_restarts", po::value<int>(), "alias of --max-restarts")
    ("grace-period", po::value<double>()->default_value(30), "seconds between SIGTERM and SIGKILL at teardown (alias --shutdown-timeout; default: $TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30)")
    ("shutdown-timeout", po::value<double>(), "alias of --grace-period (torchrun's name)")
    ("shutdown_timeout", po::value<double>(), "alias of --grace-period")
    ("signals-to-handle", po::value<std::string>()->default_value(kDefaultHandledSignals), "signals forwarded to the ranks: SIGINT, SIGTERM, SIGHUP, SIGQUIT end the job, SIGUSR1, SIGUSR2 do not (alias --signals_to_handle)")
    ("signals_to_handle", po::value<std::string>(), "alias of --signals-to-handle")
    ("log-dir", po::value<std::string>()->default_value("dlaunch-logs"), "where run directories go (alias --log_dir)")
    ("log_dir", po::value<std::string>(), "alias of --log-dir")
    ("quiet,q", po::bool_switch(), "no rank output on the console (it still goes to the log files)")
    ("ranks-filter", po::value<std::string>(), "show only these ranks' output, e.g. 0,2-3")
    ("local-ranks-filter", po::value<std::string>(), "show only these local ranks' output on every node, e.g. 0,2-3 (torchrun's; alias --local_ranks_filter)")
    ("local_ranks_filter", po::value<std::string>(), "alias of --local-ranks-filter")
    ("log-line-prefix-template", po::value<std::string>(), "the console prefix of rank lines, with ${role_name}, ${rank}, ${local_rank}, ${hostname} (torchrun's; else $TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE; alias --log_line_prefix_template)")
    ("log_line_prefix_template", po::value<std::string>(), "alias of --log-line-prefix-template")
    ("duplicate-stdout-filters", po::value<std::string>(), "stdout lines holding any of these comma-separated strings (,, for a comma) also go to rank<R>/filtered_stdout.log (alias --duplicate_stdout_filters)")
    ("duplicate_stdout_filters", po::value<std::string>(), "alias of --duplicate-stdout-filters")
    ("duplicate-stderr-filters", po::value<std::string>(), "the same for stderr, to rank<R>/filtered_stderr.log (alias --duplicate_stderr_filters)")
    ("duplicate_stderr_filters", po::value<std::string>(), "alias of --duplicate-stderr-filters")
    ("nccl-debug", po::value<std::string>(), "NCCL_DEBUG level (VERSION, WARN, INFO, TRACE) or off; each rank logs to rank<R>/nccl.log (train and preflight on NCCL: INFO unless NCCL_DEBUG is set)")
    ("nccl-socket-ifname", po::value<std::string>(), "NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) for the ranks")
    ("env", po::value<std::vector<std::string>>()->composing(), "KEY=VAL for every rank; repeatable")
    ("no-python", po::bool_switch(), "run the program as is, even a .py file (alias --no_python)")
    ("no_python", po::bool_switch(), "alias of --no-python")
    ("python", po::value<std::string>(), "interpreter for .py, -m and --run-path (else $PYTHON_EXEC, else python3)")
    ("module,m", po::bool_switch(), "the program is a Python module, run as python -m (torchrun's -m)")
    ("run-path", po::bool_switch(), "the program is a Python file run through runpy, whatever its name (alias --run_path)")
    ("run_path", po::bool_switch(), "alias of --run-path")
    ("no-python-agent", po::bool_switch(), "do not load dlaunch's rank agent into Python ranks")
    ("heartbeat-interval", po::value<double>()->default_value(1), "seconds between rank heartbeats (at least 0.01)")
    ("heartbeat-timeout", po::value<double>()->default_value(30), "seconds of heartbeat silence before a rank counts as stalled")
    ("hang-timeout", po::value<double>()->default_value(300), "seconds a collective may sit without progress before a hang is diagnosed; 0 turns detection off")
    ("hang-on-silence", po::bool_switch(), "a program with neither libdlaunch nor Python that prints nothing for --hang-timeout counts as hung")
    ("on-hang", po::value<std::string>()->default_value("exit"), "exit (code 3) or restart")
    ("straggler-threshold", po::value<double>()->default_value(1.2), "a rank this many times the other ranks' median step time is named a straggler; 0 turns detection off")
    ("straggler-window", po::value<int64_t>()->default_value(200), "steps the straggler figures cover (a rolling window, 20 to 100000)")
    ("events-file", po::value<std::string>(), "append job events (rank start/exit, restart, hang, straggler, node lost) to this file as JSON lines")
    ("metrics-port", po::value<int>(), "node 0 serves Prometheus /metrics and /healthz on this port (0: a free one)")
    ("metrics-addr", po::value<std::string>()->default_value("127.0.0.1"), "the address --metrics-port listens on")
    ("skip-doctor", po::bool_switch(), "do not run doctor's quick checks before train and preflight")
    ("token-file", po::value<std::string>(), "multi-node: file holding the job token every node shares (else DLAUNCH_JOB_TOKEN)")
    ("tls-cert", po::value<std::string>(), "multi-node: this node's certificate (PEM)")
    ("tls-key", po::value<std::string>(), "multi-node: this node's private key (PEM)")
    ("tls-ca", po::value<std::string>(), "multi-node: CA that signed every node's certificate (PEM)")
    ("gpu-binding", po::value<std::string>()->default_value("local-rank"), "local-rank: every rank sees this launcher's GPUs and uses GPU LOCAL_RANK; isolate: CUDA_VISIBLE_DEVICES is the rank's one GPU; none: the environment as is")
    ("virtual-local-rank", po::bool_switch(), "every rank's LOCAL_RANK is 0 and CUDA_VISIBLE_DEVICES its one GPU (torchrun's; alias --virtual_local_rank)")
    ("virtual_local_rank", po::bool_switch(), "alias of --virtual-local-rank")
    ("numa-binding", po::value<std::string>(), "bind each rank to CPUs near its GPU (torchrun's modes): node, socket, exclusive (cores of the node split among its ranks), core-complex (a last-level cache's cores each) or none (alias --numa_binding)")
    ("numa_binding", po::value<std::string>(), "alias of --numa-binding")
    ("run-dir-mode", po::value<std::string>()->default_value("0700"), "permissions of the run directory (octal; files get them without x): 0700 keeps rank logs private, 0755 lets others read them")
    ("redirects,r", po::value<std::string>(), "torchrun's: these streams stay off the console, e.g. 3 (both) or 0:1,1:2 (by local rank; 1 stdout, 2 stderr); the logs always get them")
    ("tee,t", po::value<std::string>(), "torchrun's: these streams reach the console even when redirected (same form as -r)")
    ("role", po::value<std::string>(), "the ranks' ROLE_NAME and ${role_name} of the console prefix (default: default)")
    ("start-method", po::value<std::string>(), "spawn, fork or forkserver: accepted for torchrun compatibility; every rank is a fresh process (alias --start_method)")
    ("start_method", po::value<std::string>(), "alias of --start-method")
    ("monitor-interval", po::value<double>(), "accepted for torchrun compatibility (exits are events here)")
    ("monitor_interval", po::value<double>(), "alias of --monitor-interval")
    ("event-log-handler", po::value<std::string>(), "null or dynamic_rendezvous: accepted for torchrun compatibility (no-ops there too); job events: --events-file (alias --event_log_handler)")
    ("event_log_handler", po::value<std::string>(), "alias of --event-log-handler");
  // clang-format on
  return d;
}

// The first token that is not an option (or follows "--") starts the program or built-in; what
// comes after it belongs to that program, never to dlaunch.
void SplitArgs(const po::options_description& desc, const std::vector<std::string>& argv,
               std::vector<std::string>* own, std::vector<std::string>* rest) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& tok = argv[i];
    if (tok == "--") {
      rest->assign(argv.begin() + i + 1, argv.end());
      return;
    }
    if (tok.size() > 1 && tok[0] == '-') {
      const bool is_long = tok.rfind("--", 0) == 0;
      if (const char* why =
              is_long ? RefusedTorchrunFlag(tok.substr(2, tok.find('=') - 2)) : nullptr) {
        throw UsageError(tok.substr(0, tok.find('=')) + " is not supported: " + why);
      }
      own->push_back(tok);
      if (tok.find('=') != std::string::npos) continue;
      const auto* opt = desc.find_nothrow(is_long ? tok.substr(2) : tok, false, false, false);
      if (opt && opt->semantic()->max_tokens() > 0 && i + 1 < argv.size()) {
        own->push_back(argv[++i]);
      }
      continue;
    }
    rest->assign(argv.begin() + i, argv.end());
    return;
  }
}

po::variables_map Store(const po::options_description& desc, const std::vector<std::string>& own) {
  po::variables_map vm;
  try {
    const int style =
        po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(own).options(desc).style(style).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  return vm;
}

template <typename T>
std::optional<T> First(const po::variables_map& vm, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (vm.count(n) && !vm[n].defaulted()) return vm[n].as<T>();
  }
  for (const char* n : names) {
    if (vm.count(n)) return vm[n].as<T>();
  }
  return std::nullopt;
}

// "--nproc_per_node": the first of `names` the command line gave, else the last (the flag whose
// default applies), as a flag.
std::string GivenName(const po::variables_map& vm, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (vm.count(n) && !vm[n].defaulted()) return std::string("--") + n;
  }
  return std::string("--") + *(names.end() - 1);
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

// torchrun's --monitor-interval: a number of seconds, which dlaunch does not need (exits are
// events, not polled).
void CheckMonitorInterval(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) {
    throw UsageError("--monitor-interval must be a number of seconds, at least 0");
  }
}

// The values checked only while the options are resolved, checked on their own: an error in one
// from a PET_* variable then names the variable, not the option it stands for.
void CheckValue(const po::variables_map& one) {
  LaunchOptions scratch;
  if (auto b = First<std::string>(one, {"rdzv-backend", "rdzv_backend"})) CheckRdzvBackend(*b);
  if (auto e = First<std::string>(one, {"rdzv-endpoint"}); e && !e->empty()) SplitEndpoint(*e);
  if (auto id = First<std::string>(one, {"rdzv-id"})) CheckRunId(*id);
  if (auto r = First<int>(one, {"max-restarts", "max_restarts"})) CheckMaxRestarts(*r);
  if (one.count("nnodes")) ParseNnodes(one["nnodes"].as<std::string>(), &scratch);
  if (auto n = First<std::string>(one, {"nproc-per-node", "nproc_per_node", "nproc"})) {
    ParseNproc(*n, GivenName(one, {"nproc-per-node", "nproc_per_node", "nproc"}));
  }
  if (auto m = First<double>(one, {"monitor-interval", "monitor_interval"})) {
    CheckMonitorInterval(*m);
  }
  for (const char* flag : {"redirects", "tee"}) {
    if (one.count(flag)) ParseStdStreams(one[flag].as<std::string>(), std::string("--") + flag);
  }
  if (auto h = First<std::string>(one, {"event-log-handler", "event_log_handler"})) {
    CheckEventLogHandler(*h);
  }
  if (auto t = First<double>(one, {"shutdown-timeout", "shutdown_timeout"})) {
    ShutdownTimeout(*t);
  }
  if (auto c = First<std::string>(one, {"rdzv-conf", "rdzv_conf"})) ParseRdzvConf(*c, &scratch);
  if (auto m = First<std::string>(one, {"start-method", "start_method"})) {
    ParseStartMethod(*m, &scratch);
  }
  if (auto f = First<std::string>(one, {"local-ranks-filter", "local_ranks_filter"})) {
    ParseRankList(*f);
  }
}

}  // namespace

std::string Usage() {
  std::ostringstream out;
  out << "usage: dlaunch [options] PROGRAM [ARGS...]      run PROGRAM as N ranks (like torchrun)\n"
         "       dlaunch [options] -- PROGRAM [ARGS...]\n"
         "       dlaunch [options] train [TRAIN OPTIONS]     data-parallel training (libtorch)\n"
         "       dlaunch [options] preflight [OPTIONS]       cluster health check\n"
         "       dlaunch diagnose RUN_DIR [--json]           explain a hang or failure\n"
         "       dlaunch report RUN_DIR [-o FILE.html]       the run as one HTML page of plots\n"
         "       dlaunch dump RUN_DIR [--json]               stacks and flight records of a "
         "running job\n"
         "       dlaunch status RUN_DIR [--json] [--watch [S]]  a running job's ranks, live\n"
         "       dlaunch doctor [--json]                     driver/CUDA/NCCL/libtorch check\n\n"
      << Describe()
      << "\nexit codes: 0 success, 1 a rank failed, 2 usage or setup error, 3 hang detected,\n"
         "            4 pre-flight found the cluster unhealthy, 130/143 interrupted\n";
  return out.str();
}

const char* OnHangName(OnHang action) { return action == OnHang::kRestart ? "restart" : "exit"; }

std::optional<OnHang> OnHangNamed(const std::string& name) {
  if (name == "exit") return OnHang::kExit;
  if (name == "restart") return OnHang::kRestart;
  return std::nullopt;
}

std::vector<int> ParseRankList(const std::string& text) {
  std::vector<int> ranks;
  if (text.empty() || text.back() == ',') {
    throw UsageError("bad rank list '" + text + "': use ranks and ranges such as 0,2-3");
  }
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    try {
      size_t dash = part.find('-');
      size_t used = 0;
      if (dash == std::string::npos) {
        ranks.push_back(std::stoi(part, &used));
        if (used != part.size() || ranks.back() < 0) throw std::invalid_argument(part);
      } else {
        int lo = std::stoi(part.substr(0, dash), &used);
        if (used != dash) throw std::invalid_argument(part);
        int hi = std::stoi(part.substr(dash + 1), &used);
        if (used != part.size() - dash - 1 || lo < 0 || hi < lo) throw std::invalid_argument(part);
        for (int r = lo; r <= hi; ++r) ranks.push_back(r);
      }
    } catch (const std::exception&) {
      throw UsageError("bad rank list '" + text + "': use ranks and ranges such as 0,2-3");
    }
  }
  if (ranks.empty()) throw UsageError("empty rank list");
  return ranks;
}

int ParseRunDirMode(const std::string& text) {
  size_t used = 0;
  unsigned long mode = 0;
  try {
    mode = std::stoul(text, &used, 8);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || mode > 0777 || (mode & 0700) != 0700) {
    throw UsageError("--run-dir-mode must be octal permission bits from 0700 to 0777 (got '" +
                     text + "')");
  }
  return static_cast<int>(mode);
}

void ApplyRunDirMode(int run_dir_mode) {
  const mode_t old = ::umask(0);
  ::umask(old | (0777 & ~static_cast<mode_t>(run_dir_mode)));
}

void CheckFileDescriptorLimit(int ranks) {
  constexpr rlim_t kBase = 64;  // the launcher's own: gRPC, epoll, timers, the run directory
  const rlim_t need = kBase + static_cast<rlim_t>(kFdsPerRank) * static_cast<rlim_t>(ranks);
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= need) return;
  if (limit.rlim_max == RLIM_INFINITY || limit.rlim_max >= need) {
    limit.rlim_cur = need;
    if (::setrlimit(RLIMIT_NOFILE, &limit) == 0) return;
  }
  throw UsageError("too few file descriptors: ulimit -n is " + std::to_string(limit.rlim_cur) +
                   "; " + std::to_string(ranks) + " rank" + (ranks == 1 ? "" : "s") +
                   " need about " + std::to_string(need) + " (raise it with ulimit -n " +
                   std::to_string(need) + ", or use fewer ranks per node)");
}

LaunchOptions ParseCommandLine(const std::vector<std::string>& argv) {
  return ParseCommandLine(argv, CurrentEnv());
}

LaunchOptions ParseCommandLine(const std::vector<std::string>& argv,
                               const std::map<std::string, std::string>& env) {
  const po::options_description desc = Describe();
  std::vector<std::string> own, rest;
  SplitArgs(desc, argv, &own, &rest);

  po::variables_map vm = Store(desc, own);
  auto given = [&](const std::string& name) { return vm.count(name) && !vm[name].defaulted(); };
  bool from_env = false;
  for (const auto& [variable, token] : KubeflowArgs(env, given)) {
    // A torchrun option this dlaunch does not have is left to torchrun's own launches.
    if (!desc.find_nothrow(token.substr(2, token.find('=') - 2), false)) continue;
    try {
      CheckValue(Store(desc, {token}));
    } catch (const UsageError& e) {
      throw UsageError(variable + ": " + e.what());
    }
    own.push_back(token);
    from_env = true;
  }
  if (from_env) vm = Store(desc, own);

  LaunchOptions o;
  if (vm.count("help")) {
    o.command = Command::kHelp;
    return o;
  }
  if (vm.count("version")) {
    o.command = Command::kVersion;
    return o;
  }
  o.nproc = ParseNproc(*First<std::string>(vm, {"nproc-per-node", "nproc_per_node", "nproc"}),
                       GivenName(vm, {"nproc-per-node", "nproc_per_node", "nproc"}));
  o.nproc_given = given("nproc") || given("nproc-per-node") || given("nproc_per_node");
  ParseNnodes(vm["nnodes"].as<std::string>(), &o);
  o.nnodes_given = !vm["nnodes"].defaulted();
  o.node_rank_given = vm.count("node-rank") || vm.count("node_rank");
  if (static_cast<int64_t>(o.nproc) * o.nnodes > rundir::kMaxRanks) {
    throw UsageError("--nproc " + std::to_string(o.nproc) + " x --nnodes " +
                     std::to_string(o.nnodes) + " is more than " +
                     std::to_string(rundir::kMaxRanks) + " ranks");
  }
  o.node_rank = First<int>(vm, {"node-rank", "node_rank"}).value_or(0);
  if (auto conf = First<std::string>(vm, {"rdzv-conf", "rdzv_conf"})) ParseRdzvConf(*conf, &o);
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    throw UsageError("--node-rank must be in [0, " + std::to_string(o.nnodes) + ")");
  }
  o.rdzv_endpoint = First<std::string>(vm, {"rdzv-endpoint", "rdzv_endpoint"}).value_or("");
  o.run_id = First<std::string>(vm, {"rdzv-id", "rdzv_id", "run-id"}).value_or("");
  if (vm["standalone"].as<bool>()) {
    // torchrun's --standalone: one node meeting on a free port, whatever the rendezvous flags say.
    if (o.nnodes > 1) {
      throw UsageError("--standalone is a job on one node: drop --nnodes " +
                       vm["nnodes"].as<std::string>());
    }
    o.nnodes_given = true;  // a scheduler's node count does not apply either
    std::string ignored;
    auto ignore = [&](std::initializer_list<const char*> names) {
      if (!First<std::string>(vm, names)) return;
      ignored += (ignored.empty() ? "--" : ", --") + std::string(*names.begin());
    };
    ignore({"rdzv-backend", "rdzv_backend"});
    ignore({"rdzv-endpoint", "rdzv_endpoint"});
    ignore({"rdzv-id", "rdzv_id"});
    if (!ignored.empty()) {
      o.notes.push_back("--standalone: " + ignored +
                        " ignored, as torchrun ignores them (the job meets on a free port)");
    }
    o.rdzv_endpoint.clear();
    o.run_id = First<std::string>(vm, {"run-id"}).value_or("");
  }
  CheckRunId(o.run_id);
  // A joining node would otherwise retry a malformed endpoint until its join timeout.
  if (!o.rdzv_endpoint.empty()) SplitEndpoint(o.rdzv_endpoint);
  if (auto b = First<std::string>(vm, {"rdzv-backend", "rdzv_backend"})) CheckRdzvBackend(*b);
  o.rdzv_timeout = Seconds(vm["rdzv-timeout"].as<double>(), "--rdzv-timeout");
  o.master_addr_given = vm.count("master-addr") || vm.count("master_addr");
  o.master_addr = First<std::string>(vm, {"master-addr", "master_addr"}).value_or("127.0.0.1");
  if (o.master_addr.empty()) throw UsageError("--master-addr needs an address");
  if (auto local = First<std::string>(vm, {"local-addr", "local_addr"})) {
    if (local->empty()) throw UsageError("--local-addr needs an address");
    o.local_addr = *local;
    if (!o.master_addr_given) o.master_addr = o.local_addr;  // node 0's; the others learn it
  }
  o.master_port = First<int>(vm, {"master-port", "master_port"}).value_or(0);
  if (o.master_port < 0 || o.master_port > 65535) throw UsageError("--master-port out of range");
  o.max_restarts = *First<int>(vm, {"max_restarts", "max-restarts"});
  CheckMaxRestarts(o.max_restarts);
  const auto env_shutdown = env.find("TORCH_ELASTIC_SHUTDOWN_TIMEOUT");
  if (given("grace-period")) {
    o.grace_period = Seconds(vm["grace-period"].as<double>(), "--grace-period");
  } else if (auto t = First<double>(vm, {"shutdown-timeout", "shutdown_timeout"})) {
    o.grace_period = ShutdownTimeout(*t);
  } else if (env_shutdown != env.end() && !env_shutdown->second.empty()) {
    // torchrun's agent reads it when --shutdown-timeout is not given.
    size_t used = 0;
    double s = -1;
    try {
      s = std::stod(env_shutdown->second, &used);
    } catch (const std::exception&) {
    }
    if (used != env_shutdown->second.size() || !(s >= 0) || s > kMaxDurationSeconds) {
      throw UsageError("TORCH_ELASTIC_SHUTDOWN_TIMEOUT must be a number of seconds (got '" +
                       env_shutdown->second + "')");
    }
    o.grace_period = ShutdownTimeout(s);
  } else {
    o.grace_period = Seconds(vm["grace-period"].as<double>(), "--grace-period");
  }
  o.signals_to_handle =
      ParseSignalList(*First<std::string>(vm, {"signals-to-handle", "signals_to_handle"}));
  o.log_dir = *First<std::string>(vm, {"log_dir", "log-dir"});
  if (o.log_dir.empty()) throw UsageError("--log-dir must not be empty");
  o.quiet = vm["quiet"].as<bool>();
  if (auto f = First<std::string>(vm, {"ranks-filter"})) o.ranks_filter = ParseRankList(*f);
  if (auto f = First<std::string>(vm, {"local-ranks-filter", "local_ranks_filter"})) {
    o.local_ranks_filter = ParseRankList(*f);
  }
  if (vm.count("redirects")) {
    o.redirects = ParseStdStreams(vm["redirects"].as<std::string>(), "--redirects");
  }
  if (vm.count("tee")) o.tee = ParseStdStreams(vm["tee"].as<std::string>(), "--tee");
  o.log_line_prefix_template =
      First<std::string>(vm, {"log-line-prefix-template", "log_line_prefix_template"}).value_or("");
  if (auto f = First<std::string>(vm, {"duplicate-stdout-filters", "duplicate_stdout_filters"})) {
    o.stdout_filters = ParseFilterList(*f);
  }
  if (auto f = First<std::string>(vm, {"duplicate-stderr-filters", "duplicate_stderr_filters"})) {
    o.stderr_filters = ParseFilterList(*f);
  }
  if (auto h = First<std::string>(vm, {"event-log-handler", "event_log_handler"})) {
    CheckEventLogHandler(*h);
  }
  if (auto m = First<double>(vm, {"monitor-interval", "monitor_interval"})) {
    CheckMonitorInterval(*m);
  }
  o.nccl_debug = First<std::string>(vm, {"nccl-debug"}).value_or("");
  if (vm.count("nccl-debug")) {
    static const char* kLevels[] = {"VERSION", "WARN", "INFO", "TRACE", "ABORT", "off"};
    if (std::none_of(std::begin(kLevels), std::end(kLevels),
                     [&](const char* l) { return o.nccl_debug == l; })) {
      throw UsageError("--nccl-debug must be VERSION, WARN, INFO, TRACE or off (got '" +
                       o.nccl_debug + "')");
    }
  }
  o.nccl_socket_ifname = First<std::string>(vm, {"nccl-socket-ifname"}).value_or("");
  if (vm.count("env")) {
    for (const auto& kv : vm["env"].as<std::vector<std::string>>()) {
      size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        throw UsageError("--env takes KEY=VAL (got '" + kv + "')");
      }
      o.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
  }
  o.no_python = vm["no-python"].as<bool>() || vm["no_python"].as<bool>();
  o.python = First<std::string>(vm, {"python"}).value_or("");
  o.module = vm["module"].as<bool>();
  o.run_path = vm["run-path"].as<bool>() || vm["run_path"].as<bool>();
  o.python_agent = !vm["no-python-agent"].as<bool>();
  if (o.module && o.run_path) throw UsageError("-m and --run-path exclude each other");
  if (o.run_path && o.no_python) {
    // torchrun's help: --run-path takes precedence over --no-python.
    o.notes.push_back("--no-python has no effect with --run-path, which runs the file in Python");
    o.no_python = false;
  }
  if (o.module && o.no_python) throw UsageError("-m runs Python: drop --no-python");
  o.heartbeat_interval = Seconds(vm["heartbeat-interval"].as<double>(), "--heartbeat-interval");
  // Every rank sends a heartbeat this often: faster than 100 a second is a flood, not liveness.
  if (vm["heartbeat-interval"].as<double>() < 0.01) {
    throw UsageError("--heartbeat-interval must be at least 0.01 seconds (got " +
                     std::to_string(vm["heartbeat-interval"].as<double>()) + ")");
  }
  o.heartbeat_timeout = Seconds(vm["heartbeat-timeout"].as<double>(), "--heartbeat-timeout");
  o.hang_timeout = Seconds(vm["hang-timeout"].as<double>(), "--hang-timeout", true);
  o.hang_on_silence = vm["hang-on-silence"].as<bool>();
  o.straggler_threshold = vm["straggler-threshold"].as<double>();
  if (!std::isfinite(o.straggler_threshold) ||
      (o.straggler_threshold != 0 && (o.straggler_threshold <= 1 || o.straggler_threshold > 100))) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", o.straggler_threshold);
    throw UsageError(std::string("--straggler-threshold must be a factor in (1, 100], or 0 for off "
                                 "(got ") +
                     got + ")");
  }
  o.straggler_window = vm["straggler-window"].as<int64_t>();
  if (o.straggler_window < 20 || o.straggler_window > 100000) {
    throw UsageError("--straggler-window must be a number of steps in [20, 100000] (got " +
                     std::to_string(o.straggler_window) + ")");
  }
  if (vm.count("metrics-port")) {
    o.metrics_port = vm["metrics-port"].as<int>();
    if (o.metrics_port < 0 || o.metrics_port > 65535) {
      throw UsageError("--metrics-port must be a port in [0, 65535], got " +
                       std::to_string(o.metrics_port));
    }
  }
  o.metrics_addr = vm["metrics-addr"].as<std::string>();
  if (o.metrics_addr.empty()) throw UsageError("--metrics-addr needs an address");
  if (vm.count("events-file")) {
    o.events_file = vm["events-file"].as<std::string>();
    if (o.events_file.empty()) throw UsageError("--events-file needs a file name");
  }
  const std::string on_hang = vm["on-hang"].as<std::string>();
  if (!OnHangNamed(on_hang)) {
    throw UsageError("--on-hang must be exit or restart (got '" + on_hang + "')");
  }
  o.on_hang = *OnHangNamed(on_hang);
  if (auto role = First<std::string>(vm, {"role"})) {
    if (role->empty() || role->find_first_of(" \t\n\r") != std::string::npos) {
      throw UsageError("--role must be a name without spaces (got '" + *role + "')");
    }
    o.role = *role;
    o.role_given = true;
  }
  if (auto m = First<std::string>(vm, {"start-method", "start_method"})) ParseStartMethod(*m, &o);
  o.skip_doctor = vm["skip-doctor"].as<bool>();
  o.run_dir_mode = ParseRunDirMode(vm["run-dir-mode"].as<std::string>());
  o.token_file = First<std::string>(vm, {"token-file"}).value_or("");
  o.tls_cert = First<std::string>(vm, {"tls-cert"}).value_or("");
  o.tls_key = First<std::string>(vm, {"tls-key"}).value_or("");
  o.tls_ca = First<std::string>(vm, {"tls-ca"}).value_or("");
  const std::string gpu_binding = vm["gpu-binding"].as<std::string>();
  if (!GpuBindingNamed(gpu_binding)) {
    throw UsageError("--gpu-binding must be local-rank, isolate or none (got '" + gpu_binding +
                     "')");
  }
  o.gpu_binding = *GpuBindingNamed(gpu_binding);
  o.virtual_local_rank = vm["virtual-local-rank"].as<bool>() || vm["virtual_local_rank"].as<bool>();
  if (o.virtual_local_rank && given("gpu-binding") && o.gpu_binding != GpuBinding::kIsolate) {
    throw UsageError(
        "--virtual-local-rank gives each rank its one GPU as device 0: drop "
        "--gpu-binding " +
        std::string(GpuBindingName(o.gpu_binding)));
  }
  std::string numa_binding = First<std::string>(vm, {"numa-binding", "numa_binding"}).value_or("");
  if (numa_binding.empty()) numa_binding = "none";  // as --numa-binding none
  if (!NumaBindingNamed(numa_binding)) {
    throw UsageError("--numa-binding must be node, socket, exclusive, core-complex or none (got '" +
                     numa_binding + "')");
  }
  o.numa_binding = *NumaBindingNamed(numa_binding);

  if (rest.empty()) throw UsageError("no program given: dlaunch [options] PROGRAM [ARGS...]");
  const std::string& head = rest.front();
  CheckProgramName(head, o.module);
  // After -m or --run-path the first word is the module or file, even if it is called "train".
  const bool python_entry = o.module || o.run_path;
  if (!python_entry &&
      (head == "train" || head == "preflight" || head == "diagnose" || head == "report" ||
       head == "doctor" || head == "dump" || head == "status")) {
    o.command = head == "train"       ? Command::kTrain
                : head == "preflight" ? Command::kPreflight
                : head == "diagnose"  ? Command::kDiagnose
                : head == "report"    ? Command::kReport
                : head == "dump"      ? Command::kDump
                : head == "status"    ? Command::kStatus
                                      : Command::kDoctor;
    o.program.assign(rest.begin() + 1, rest.end());
  } else {
    o.program = rest;
  }
  const char* env_debug = std::getenv("NCCL_DEBUG");
  const bool user_nccl_debug = (env_debug && *env_debug) ||
                               std::any_of(o.env.begin(), o.env.end(),
                                           [](const auto& kv) { return kv.first == "NCCL_DEBUG"; });
  o.nccl_debug =
      nccl_log::ResolveNcclDebug(o.nccl_debug, IsBuiltin(o.command), o.program, user_nccl_debug);
  return o;
}

}  // namespace dlaunch::launcher
