// The dlaunch command line: torchrun's flags (both spellings), dlaunch's own, then either a
// built-in command (train, preflight, diagnose, doctor) or a program with its arguments. Parsed
// into values by one short parser per group of flags (group_parsers.h); the cluster's place is
// weighed against them later, in the job's ResolveLaunch: nothing here includes launcher/job/.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/torchrun_flags.h"
#include "launcher/supervision/placement.h"

namespace dlaunch::launcher {

enum class Command {
  kProgram,
  kTrain,
  kPreflight,
  kDiagnose,
  kReport,
  kDoctor,
  kHelp,
  kVersion,
  kDump,
  kStatus
};

// train and preflight: dlaunch's own rank program (dlaunch-worker), not the user's.
inline bool IsBuiltin(Command c) { return c == Command::kTrain || c == Command::kPreflight; }

// --on-hang: what a diagnosed hang does to the job.
enum class OnHang {
  kExit,     // the job ends with exit code 3
  kRestart,  // the ranks restart, within --max-restarts
};

// "exit" or "restart", as the flag spells it.
const char* OnHangName(OnHang action);
// The action spelt `name`; nullopt for any other name.
std::optional<OnHang> OnHangNamed(const std::string& name);

// --restart-policy: what a failure that --max-restarts would restart does (launcher/job/
// restart_policy.h decides).
enum class RestartPolicy {
  kAuto,     // acts on the decision: a deterministic failure or a restart storm stops the job
  kAlways,   // restarts as torchrun does; the decision is still recorded
  kObserve,  // says and records what auto would do, and restarts
};

// "auto", "always" or "observe", as the flag spells it.
const char* RestartPolicyName(RestartPolicy policy);
// The policy spelt `name`; nullopt for any other name.
std::optional<RestartPolicy> RestartPolicyNamed(const std::string& name);

// The longest duration any flag takes, in seconds (about 115 days); longer means a typo or "inf".
constexpr double kMaxDurationSeconds = 1e7;

struct LaunchOptions {
  Command command = Command::kProgram;
  std::vector<std::string> program;  // argv of each rank (kProgram) or the built-in's arguments

  int nproc = 1;
  bool nproc_given = false;   // on the command line (or PET_NPROC_PER_NODE), so Slurm's is not used
  int nnodes = 1;             // --nnodes N, or MAX of --nnodes MIN:MAX
  int min_nodes = 0;          // MIN of --nnodes MIN:MAX; 0: the same as nnodes
  bool nnodes_given = false;  // on the command line, so the scheduler's variables do not apply
  int node_rank = 0;
  bool node_rank_given = false;  // else the coordinator gives node ranks in join order
  // --rdzv-conf (torchrun's keys); 0: join_timeout is --rdzv-timeout.
  std::chrono::milliseconds join_timeout{0};
  std::chrono::milliseconds last_call_timeout{30000};
  std::chrono::milliseconds close_timeout{30000};
  // host:port of node 0's coordinator (multi-node); on one node, the ranks' MASTER_ADDR/PORT
  std::string rdzv_endpoint;
  std::string master_addr = "127.0.0.1";
  bool master_addr_given = false;
  // --local-addr: this node's address; node 0's is the ranks' MASTER_ADDR unless --master-addr
  std::string local_addr;
  int master_port = 0;  // 0: pick a free one
  std::string run_id;   // empty: generated
  std::string job_id;   // the scheduler's name of the job (a Slurm step), "" outside one
  std::string log_dir = "dlaunch-logs";
  std::chrono::milliseconds rdzv_timeout{300000};
  std::chrono::milliseconds grace_period{30000};
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{30000};
  std::chrono::milliseconds hang_timeout{300000};  // 0: no hang detection
  bool hang_on_silence = false;  // output silence of opaque programs counts as a hang
  OnHang on_hang = OnHang::kExit;
  // Straggler detection (launcher/straggler): a rank this many times the others' median step
  // time over the last straggler_window steps is named; 0 turns it off.
  double straggler_threshold = 1.2;
  int64_t straggler_window = 200;
  std::string events_file;  // --events-file: job events as JSON lines; "" = none
  // --metrics-port/--metrics-addr: node 0 serves /metrics and /healthz; -1 = off, 0 = a free port
  int metrics_port = -1;
  std::string metrics_addr = "127.0.0.1";
  int max_restarts = 0;
  RestartPolicy restart_policy = RestartPolicy::kAuto;
  bool quiet = false;
  std::vector<int> ranks_filter;        // empty: every rank on the console
  std::vector<int> local_ranks_filter;  // torchrun's, by local rank; empty: every one
  // -r/--redirects, -t/--tee: a redirected stream that is not tee'd stays off the console (every
  // stream always goes to its log).
  StdStreams redirects, tee;
  std::string log_line_prefix_template;  // "" = TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, if set
  // --duplicate-std{out,err}-filters: lines holding any of these also go to filtered_*.log
  std::vector<std::string> stdout_filters, stderr_filters;
  std::string nccl_debug;
  std::string nccl_socket_ifname;
  std::vector<std::pair<std::string, std::string>> env;  // --env KEY=VAL, in order
  bool no_python = false;
  std::string python;        // --python: the interpreter of .py, -m and --run-path entries
  bool module = false;       // -m: the program is a Python module
  bool run_path = false;     // --run-path: the program is a Python file, whatever its name
  bool python_agent = true;  // --no-python-agent turns the rank agent off
  bool skip_doctor = false;
  std::string token_file;  // multi-node: the shared job token (else DLAUNCH_JOB_TOKEN)
  std::string tls_cert, tls_key, tls_ca;
  GpuBinding gpu_binding = GpuBinding::kLocalRank;
  // --virtual-local-rank: every rank's LOCAL_RANK is 0, its CUDA_VISIBLE_DEVICES its one GPU
  bool virtual_local_rank = false;
  NumaBinding numa_binding = NumaBinding::kNone;
  std::vector<int> signals_to_handle;  // caught and forwarded to the ranks (--signals-to-handle)
  // --run-dir-mode: the run directory's permission bits; files get the same without execute.
  // Rank logs can hold secrets (a printed environment holds the job token): private by default.
  int run_dir_mode = 0700;
  std::string role = "default";  // --role: ROLE_NAME and ${role_name} of the console prefix
  bool role_given = false;
  // One-line console notes on torchrun options that were accepted but mean nothing under dlaunch
  // (an --rdzv-conf key, --start-method fork), said once the job's input is all checked.
  std::vector<std::string> notes;
};

// The help text, with every flag.
std::string Usage();

// Throws UsageError naming the bad flag or value. Checks only the command line itself; the
// program's existence and the log directory are checked by ValidateSetup.
LaunchOptions ParseCommandLine(const std::vector<std::string>& argv);
// The same with `env` instead of the process environment: Kubeflow's PET_* variables
// (cluster/kubeflow.h) fill the options the command line left out.
LaunchOptions ParseCommandLine(const std::vector<std::string>& argv,
                               const std::map<std::string, std::string>& env);

// "0,2,5-7" -> {0,2,5,6,7}; throws UsageError.
std::vector<int> ParseRankList(const std::string& text);

// "0750" -> 0750: octal permission bits that keep the owner's rwx; throws UsageError.
int ParseRunDirMode(const std::string& text);

// Makes what this process creates from now on (the run directory, its files, the ranks' files)
// carry `run_dir_mode` at most, through the umask the ranks inherit.
void ApplyRunDirMode(int run_dir_mode);

// Raises the soft open-file limit towards what `ranks` local ranks need (pipes, pidfds, log
// files, coordinator connections: about kFdsPerRank each); throws UsageError naming the limit
// when the hard limit is too low, before any rank starts.
constexpr int kFdsPerRank = 6;
void CheckFileDescriptorLimit(int ranks);

}  // namespace dlaunch::launcher
