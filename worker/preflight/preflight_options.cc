#include "worker/preflight/preflight_options.h"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "core/run_dir/paths.h"
#include "worker/preflight/op_table.h"

namespace dlaunch::worker {
namespace {

namespace po = boost::program_options;
using core::DataType;
using core::ReduceOp;

// nccl-tests' -d and -o spellings (and the common aliases), in nccl-tests' order: "all" runs them
// all in this order.
const std::vector<std::pair<std::string, DataType>> kTypes = {
    {"int8", DataType::kInt8},      {"uint8", DataType::kUint8},      {"int32", DataType::kInt32},
    {"int64", DataType::kInt64},    {"half", DataType::kFloat16},     {"float", DataType::kFloat32},
    {"double", DataType::kFloat64}, {"bfloat16", DataType::kBFloat16}};
const std::vector<std::pair<std::string, DataType>> kTypeAliases = {
    {"char", DataType::kInt8},       {"int", DataType::kInt32},
    {"float16", DataType::kFloat16}, {"float32", DataType::kFloat32},
    {"float64", DataType::kFloat64}, {"bf16", DataType::kBFloat16}};
const std::vector<std::pair<std::string, ReduceOp>> kRedOps = {{"sum", ReduceOp::kSum},
                                                               {"prod", ReduceOp::kProd},
                                                               {"max", ReduceOp::kMax},
                                                               {"min", ReduceOp::kMin},
                                                               {"avg", ReduceOp::kAvg}};

template <typename T>
std::string Names(const std::vector<std::pair<std::string, T>>& table) {
  std::string out;
  for (const auto& [name, value] : table) out += (out.empty() ? "" : ", ") + name;
  return out + ", all";
}

// A single name, a comma-separated list or "all", checked against the table.
template <typename T>
std::vector<T> ParseList(const std::string& text, const char* flag,
                         const std::vector<std::pair<std::string, T>>& table,
                         const std::vector<std::pair<std::string, T>>& aliases = {}) {
  std::vector<T> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    if (item == "all") {
      for (const auto& entry : table) out.push_back(entry.second);
      continue;
    }
    auto match = [&](const auto& entry) { return entry.first == item; };
    auto it = std::find_if(table.begin(), table.end(), match);
    auto alias = std::find_if(aliases.begin(), aliases.end(), match);
    if (it == table.end() && alias == aliases.end()) {
      throw UsageError(std::string("preflight: unknown ") + flag + " '" + item + "' (" +
                       Names(table) + ")");
    }
    out.push_back(it != table.end() ? it->second : alias->second);
  }
  if (out.empty()) throw UsageError(std::string("preflight: ") + flag + " names nothing");
  std::vector<T> unique;
  for (T v : out)
    if (std::find(unique.begin(), unique.end(), v) == unique.end()) unique.push_back(v);
  return unique;
}

po::options_description Describe() {
  po::options_description d("dlaunch preflight options (nccl-tests' flags keep their meaning)");
  // clang-format off
  d.add_options()
      ("help,h", "print this help")
      ("backend", po::value<std::string>()->default_value("auto"), "auto | gloo | nccl (auto: nccl when a GPU is visible)")
      ("ops", po::value<std::string>(), ("comma-separated subset of " + OpNames() + "; nccl-tests' names (all_reduce_perf) also work").c_str())
      ("minbytes,b", po::value<std::string>()->default_value("8"), "smallest message size (K/M/G suffixes)")
      ("maxbytes,e", po::value<std::string>(), "largest message size (default 64M on gloo, 1G on nccl)")
      ("stepfactor,f", po::value<int>(), "multiply the size by this each step (default 2)")
      ("stepbytes,i", po::value<std::string>(), "add this many bytes each step instead of -f")
      ("warmup_iters,w", po::value<int>(), "untimed iterations per size (default 2 on gloo, 5 on nccl)")
      ("iters,n", po::value<int>(), "timed iterations per size (default 5 on gloo, 20 on nccl)")
      ("check,c", po::value<int>()->default_value(1), "verified iterations per size and column; 0 turns checking off (#wrong N/A)")
      ("blocking,z", po::value<int>()->default_value(0), "0: iterations back to back; 1: wait and barrier after each; 2: wait after each; 3: as 1, barrier not timed")
      ("average,a", po::value<int>()->default_value(1), "time reported over ranks: 0 rank 0, 1 mean, 2 min, 3 max")
      ("datatype,d", po::value<std::string>()->default_value("float"), ("element type(s): " + Names(kTypes)).c_str())
      ("op,o", po::value<std::string>()->default_value("sum"), ("reduction(s): " + Names(kRedOps)).c_str())
      ("root,r", po::value<std::string>()->default_value("0"), "root of broadcast, reduce, gather, scatter; all = every rank in turn")
      ("collective-timeout,T", po::value<double>()->default_value(10.0), "seconds any one collective may take before the watchdog fires")
      ("cudagraph,G", po::value<int>()->default_value(0), "nccl only: capture the -n iterations into a CUDA graph and launch it this many times (0: no graph; needs -z 0)")
      ("local_register,R", po::value<int>()->default_value(0), "nccl only: register the buffers with NCCL: 0 no, 1 local (ncclCommRegister), 2 symmetric (ncclMemAlloc + ncclCommWindowRegister, NCCL 2.27+)")
      ("json", po::bool_switch(), "print preflight.json's document on stdout instead of the tables")
      ("csv", po::bool_switch(), "print the bandwidth rows as CSV on stdout instead of the tables")
      ("slow-link-factor", po::value<double>()->default_value(0.5), "flag p2p links slower than this fraction of the median (0..1]")
      ("p2p-retries", po::value<int>()->default_value(2), "re-measure a link below the threshold this many times before flagging it")
      ("min-busbw", po::value<double>()->default_value(0.0), "FAIL when an op's busbw at the largest size is below this many GB/s")
      ("no-hang-test", po::bool_switch(), "skip the deadlock-timeout test")
      ("hang-rank", po::value<int>()->default_value(-1), "rank that skips a collective in the hang test (default: the last)")
      ("no-p2p", po::bool_switch(), "skip the pairwise point-to-point matrix")
      ("p2p-bytes", po::value<std::string>(), "message size of the p2p matrix (default 4M on gloo, 64M on nccl)")
      ("p2p-iters", po::value<int>()->default_value(5), "timed transfers per link")
      ("iface", po::value<std::string>()->default_value(""), "gloo: network interface to bind (default loopback)")
      ("transport", po::value<std::string>()->default_value("auto"), "gloo: auto | shm | tcp (auto: shared memory between ranks of one host)");
  // clang-format on
  return d;
}

int IntInRange(const po::variables_map& vm, const char* key, const char* flag, int lo, int hi) {
  int v = vm[key].as<int>();
  if (v < lo || v > hi) {
    throw UsageError(std::string("preflight: ") + flag + " must be between " + std::to_string(lo) +
                     " and " + std::to_string(hi) + " (got " + std::to_string(v) + ")");
  }
  return v;
}

}  // namespace

void CheckBackendFlags(const PreflightOptions& o, const std::string& backend) {
  if (backend == "nccl") return;
  const struct {
    bool set;
    const char* flag;
    const char* what;
  } kFlags[] = {{o.graph_launches > 0, "-G (--cudagraph", "CUDA graph capture"},
                {o.registration != core::BufferRegistration::kNone, "-R (--local_register",
                 "NCCL buffer registration"}};
  for (const auto& f : kFlags) {
    if (!f.set) continue;
    throw UsageError(std::string("preflight: ") + f.flag + ", " + f.what +
                     ") needs the nccl backend, and this preflight runs on " + backend +
                     (backend == "gloo" ? " (pass --backend nccl on a GPU machine)" : ""));
  }
}

TimingPlan PlanTiming(const PreflightOptions& o) {
  TimingPlan plan;
  plan.iters = std::max(o.iters, 1);
  if (o.graph_launches > 0) {
    plan.graph = true;
    plan.captured_ops = plan.iters;
    plan.launches = o.graph_launches;
  }
  return plan;
}

size_t ParseSize(const std::string& text) {
  std::string s = text;
  if (!s.empty() && (s.back() == 'B' || s.back() == 'b')) s.pop_back();
  size_t mult = 1;
  if (!s.empty()) {
    char c = static_cast<char>(std::toupper(static_cast<unsigned char>(s.back())));
    if (c == 'K') mult = size_t{1} << 10;
    if (c == 'M') mult = size_t{1} << 20;
    if (c == 'G') mult = size_t{1} << 30;
    if (mult != 1) s.pop_back();
  }
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(c); })) {
    throw UsageError("preflight: bad size '" + text + "' (e.g. 8, 64K, 4M, 1G)");
  }
  if (s.size() > 12) throw UsageError("preflight: size '" + text + "' is too large");
  return std::stoull(s) * mult;
}

void PreflightOptions::ResolveDefaults(const std::string& resolved_backend) {
  const bool gpu = resolved_backend == "nccl";
  if (max_bytes == 0) max_bytes = std::max(min_bytes, gpu ? size_t{1} << 30 : size_t{64} << 20);
  if (warmup_iters < 0) warmup_iters = gpu ? 5 : 2;
  if (iters < 0) iters = gpu ? 20 : 5;
  if (p2p_bytes == 0) p2p_bytes = gpu ? size_t{64} << 20 : size_t{4} << 20;
}

PreflightOptions ParsePreflightArgs(const std::vector<std::string>& args, int world_size) {
  po::variables_map vm;
  try {
    auto style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    // No positional arguments: a stray word is a mistake, not something to ignore.
    po::positional_options_description none;
    po::store(po::command_line_parser(args).options(Describe()).positional(none).style(style).run(),
              vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string("preflight: ") + e.what());
  }
  PreflightOptions o;
  o.help = vm.count("help") > 0;
  if (o.help) return o;
  o.backend = vm["backend"].as<std::string>();
  if (o.backend != "auto" && o.backend != "gloo" && o.backend != "nccl") {
    throw UsageError("preflight: unknown --backend '" + o.backend + "' (auto, gloo, nccl)");
  }
  o.graph_launches = IntInRange(vm, "cudagraph", "--cudagraph (-G)", 0, 100000);
  o.registration = static_cast<core::BufferRegistration>(
      IntInRange(vm, "local_register", "--local_register (-R)", 0, 2));
  if (o.backend != "auto") CheckBackendFlags(o, o.backend);
  o.min_bytes = ParseSize(vm["minbytes"].as<std::string>());
  if (vm.count("maxbytes")) {
    o.max_bytes = ParseSize(vm["maxbytes"].as<std::string>());
    if (o.max_bytes < o.min_bytes) {
      throw UsageError("preflight: --maxbytes (-e) is smaller than --minbytes (-b)");
    }
  }
  if (vm.count("stepfactor") && vm.count("stepbytes")) {
    throw UsageError("preflight: give -f (stepfactor) or -i (stepbytes), not both");
  }
  if (vm.count("stepfactor")) {
    int f = vm["stepfactor"].as<int>();
    if (f < 2) throw UsageError("preflight: --stepfactor (-f) must be at least 2");
    o.step_factor = static_cast<size_t>(f);
  }
  if (vm.count("stepbytes")) {
    o.step_bytes = ParseSize(vm["stepbytes"].as<std::string>());
    if (o.step_bytes == 0) throw UsageError("preflight: --stepbytes (-i) must be > 0");
  }
  if (o.min_bytes == 0) throw UsageError("preflight: --minbytes (-b) must be > 0");
  if (vm.count("warmup_iters")) {
    o.warmup_iters = vm["warmup_iters"].as<int>();
    if (o.warmup_iters < 0) throw UsageError("preflight: --warmup_iters (-w) must be >= 0");
  }
  if (vm.count("iters")) {
    o.iters = vm["iters"].as<int>();
    if (o.iters < 1) throw UsageError("preflight: --iters (-n) must be >= 1");
  }
  o.check_iters = IntInRange(vm, "check", "--check (-c)", 0, 1000);
  o.blocking = IntInRange(vm, "blocking", "--blocking (-z)", 0, 3);
  o.average = IntInRange(vm, "average", "--average (-a)", 0, 3);
  if (o.graph_launches > 0 && o.blocking != 0) {
    // nccl-tests drops -z 3 under -G with a warning, and -z 1/2 synchronise inside the capture,
    // which CUDA refuses: a flag that cannot apply is refused instead.
    throw UsageError(
        "preflight: -G (CUDA graph) records the -n iterations back to back; it "
        "cannot be combined with -z " +
        std::to_string(o.blocking) + " (use -z 0)");
  }
  if (vm.count("ops")) {
    std::stringstream in(vm["ops"].as<std::string>());
    std::string op;
    while (std::getline(in, op, ',')) {
      if (op.empty()) continue;
      const OpSpec* spec = FindOp(op);
      if (spec == nullptr) {
        throw UsageError("preflight: unknown op '" + op + "' in --ops (" + OpNames() + ")");
      }
      if (std::find(o.ops.begin(), o.ops.end(), spec->name) == o.ops.end()) {
        o.ops.push_back(spec->name);
      }
    }
    if (o.ops.empty()) throw UsageError("preflight: --ops names no op");
  } else {
    for (const OpSpec& spec : AllOps()) o.ops.push_back(spec.name);
  }
  o.dtypes = ParseList(vm["datatype"].as<std::string>(), "--datatype (-d)", kTypes, kTypeAliases);
  o.redops = ParseList(vm["op"].as<std::string>(), "--op (-o)", kRedOps);
  const std::string root = vm["root"].as<std::string>();
  if (root == "all") {
    o.root = -1;
  } else {
    try {
      size_t used = 0;
      o.root = std::stoi(root, &used);
      if (used != root.size() || o.root < 0) throw std::invalid_argument(root);
    } catch (const std::exception&) {
      throw UsageError("preflight: --root (-r) must be a rank or 'all' (got '" + root + "')");
    }
  }
  double timeout_s = vm["collective-timeout"].as<double>();
  if (!(timeout_s > 0) || timeout_s > 86400) {
    throw UsageError("preflight: --collective-timeout (-T) must be between 0 and 86400 seconds");
  }
  o.collective_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(std::ceil(timeout_s * 1000)));
  const bool json = vm["json"].as<bool>(), csv = vm["csv"].as<bool>();
  if (json && csv) throw UsageError("preflight: give --json or --csv, not both");
  o.format = json ? OutputFormat::kJson : csv ? OutputFormat::kCsv : OutputFormat::kText;
  o.slow_link_factor = vm["slow-link-factor"].as<double>();
  if (!(o.slow_link_factor > 0 && o.slow_link_factor <= 1)) {
    throw UsageError("preflight: --slow-link-factor must be in (0, 1]");
  }
  o.p2p_retries = IntInRange(vm, "p2p-retries", "--p2p-retries", 0, 100);
  o.min_busbw = vm["min-busbw"].as<double>();
  if (!(o.min_busbw >= 0)) throw UsageError("preflight: --min-busbw must be >= 0");
  o.hang_test = !vm["no-hang-test"].as<bool>();
  o.hang_rank = vm["hang-rank"].as<int>();
  if (o.hang_rank < -1) throw UsageError("preflight: --hang-rank must be >= 0");
  o.p2p = !vm["no-p2p"].as<bool>();
  if (vm.count("p2p-bytes")) {
    o.p2p_bytes = ParseSize(vm["p2p-bytes"].as<std::string>());
    if (o.p2p_bytes == 0) throw UsageError("preflight: --p2p-bytes must be > 0");
  }
  o.p2p_iters = vm["p2p-iters"].as<int>();
  if (o.p2p_iters < 1) throw UsageError("preflight: --p2p-iters must be >= 1");
  o.iface = vm["iface"].as<std::string>();
  o.transport = vm["transport"].as<std::string>();
  if (o.transport != "auto" && o.transport != "shm" && o.transport != "tcp") {
    throw UsageError("preflight: unknown --transport '" + o.transport + "' (auto, shm, tcp)");
  }
  if (o.transport == "shm" && o.backend == "nccl") {
    throw UsageError(
        "preflight: --transport shm is the gloo backend's; nccl picks its own paths (drop "
        "--transport, or give --backend gloo)");
  }
  if (world_size > 0) {
    if (o.root >= world_size) {
      throw UsageError("preflight: --root " + std::to_string(o.root) +
                       " is not a rank of this world of " + std::to_string(world_size));
    }
    if (o.hang_rank >= world_size) {
      throw UsageError("preflight: --hang-rank " + std::to_string(o.hang_rank) +
                       " is not a rank of this world of " + std::to_string(world_size));
    }
  }
  return o;
}

std::string PreflightUsage() {
  std::ostringstream out;
  out << "usage: dlaunch --nproc N preflight [OPTIONS]\n\n" << Describe();
  return out.str();
}

std::string PreflightFailureReport(const std::string& run_dir) {
  const std::string path = rundir::RunDir(run_dir).preflight();
  std::ifstream in(path);
  if (!in) return "";
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || doc.value("verdict", "") != "FAIL") return "";
  std::string out =
      "dlaunch: preflight verdict FAIL (the cluster, not a rank, failed; details in " + path +
      ")\n";
  for (const auto& reason : doc.value("reasons", nlohmann::json::array())) {
    if (reason.is_string()) out += "dlaunch: preflight FAIL: " + reason.get<std::string>() + "\n";
  }
  return out;
}

}  // namespace dlaunch::worker
