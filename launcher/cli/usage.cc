// dlaunch's flags as Boost describes them (the --help text): torchrun's spellings beside
// dlaunch's own, one table per group of flags, in the order --help lists them.
#include <sstream>
#include <string>
#include <vector>

#include "launcher/cli/flags.h"
#include "launcher/cli/options.h"
#include "launcher/supervision/supervisor.h"

namespace dlaunch::launcher {
namespace cli {
namespace {

// The flags of help and version; nodes, ranks and the rendezvous, in the order --help lists them.
void DescribeNodes(po::options_description* d) {
  // clang-format off
  d->add_options()
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
    ("local_addr", po::value<std::string>(), "alias of --local-addr");
  // clang-format on
}

// The flags of restarts, teardown and signals; the console and the logs; the ranks' environment, in
// the order --help lists them.
void DescribeRunAndOutput(po::options_description* d) {
  // clang-format off
  d->add_options()
    ("max-restarts", po::value<int>()->default_value(0), "restart all ranks up to K times after a failure (alias --max_restarts)")
    ("max_restarts", po::value<int>(), "alias of --max-restarts")
    ("restart-policy", po::value<std::string>()->default_value("auto"), "after a failure --max-restarts would restart: auto stops a failure that would repeat (the same exception at the same place twice, an import or argument error before the first collective, a restart storm), always restarts as torchrun does, observe says what auto would do and restarts")
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
    ("env", po::value<std::vector<std::string>>()->composing(), "KEY=VAL for every rank; repeatable");
  // clang-format on
}

// The flags of Python entries; heartbeats, hangs, stragglers, events and metrics; doctor and TLS,
// in the order --help lists them.
void DescribePythonAndHealth(po::options_description* d) {
  // clang-format off
  d->add_options()
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
    ("tls-ca", po::value<std::string>(), "multi-node: CA that signed every node's certificate (PEM)");
  // clang-format on
}

// The flags of GPU and NUMA binding; the run directory; torchrun's flags taken for compatibility,
// in the order --help lists them.
void DescribePlacementAndTorchrun(po::options_description* d) {
  // clang-format off
  d->add_options()
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
}
}  // namespace

po::options_description Describe() {
  po::options_description d("dlaunch options");
  DescribeNodes(&d);
  DescribeRunAndOutput(&d);
  DescribePythonAndHealth(&d);
  DescribePlacementAndTorchrun(&d);
  return d;
}

}  // namespace cli

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
      << cli::Describe()
      << "\nexit codes: 0 success, 1 a rank failed, 2 usage or setup error, 3 hang detected,\n"
         "            4 pre-flight found the cluster unhealthy, 130/143 interrupted\n";
  return out.str();
}

}  // namespace dlaunch::launcher
