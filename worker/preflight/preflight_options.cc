#include "worker/preflight/preflight_options.h"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <cmath>
#include <sstream>

#include "core/error.h"

namespace dlaunch::worker {
namespace {

namespace po = boost::program_options;

const std::vector<std::string> kKnownOps = {"allreduce", "allgather", "reduce_scatter",
                                            "broadcast", "alltoall",  "sendrecv"};

po::options_description Describe() {
  po::options_description d("dlaunch preflight options");
  // clang-format off
  d.add_options()
      ("help,h", "print this help")
      ("backend", po::value<std::string>()->default_value("auto"), "auto | gloo | nccl (auto: nccl when a GPU is visible)")
      ("minbytes,b", po::value<std::string>()->default_value("8"), "smallest message size (K/M/G suffixes)")
      ("maxbytes,e", po::value<std::string>(), "largest message size (default 64M on gloo, 1G on nccl)")
      ("stepfactor,f", po::value<int>()->default_value(2), "multiply the size by this each step (>= 2)")
      ("warmup_iters,w", po::value<int>(), "untimed iterations per size (default 2 on gloo, 5 on nccl)")
      ("iters,n", po::value<int>(), "timed iterations per size (default 5 on gloo, 20 on nccl)")
      ("ops", po::value<std::string>(), "comma-separated subset of allreduce,allgather,reduce_scatter,broadcast,alltoall,sendrecv")
      ("datatype,d", po::value<std::string>()->default_value("float"), "float | double | half | bfloat16 | int32 | int64")
      ("op,o", po::value<std::string>()->default_value("sum"), "reduction: sum | avg | min | max")
      ("root,r", po::value<int>()->default_value(0), "broadcast root")
      ("collective-timeout", po::value<double>()->default_value(10.0), "seconds any one collective may take before the watchdog fires")
      ("slow-link-factor", po::value<double>()->default_value(0.5), "flag p2p links slower than this fraction of the median (0..1]")
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

core::DataType ParseDataType(const std::string& s) {
  if (s == "float" || s == "float32") return core::DataType::kFloat32;
  if (s == "double" || s == "float64") return core::DataType::kFloat64;
  if (s == "half" || s == "float16") return core::DataType::kFloat16;
  if (s == "bfloat16") return core::DataType::kBFloat16;
  if (s == "int32") return core::DataType::kInt32;
  if (s == "int64") return core::DataType::kInt64;
  throw UsageError("preflight: unknown --datatype '" + s +
                   "' (float, double, half, bfloat16, int32, int64)");
}

core::ReduceOp ParseRedOp(const std::string& s) {
  if (s == "sum") return core::ReduceOp::kSum;
  if (s == "avg") return core::ReduceOp::kAvg;
  if (s == "min") return core::ReduceOp::kMin;
  if (s == "max") return core::ReduceOp::kMax;
  throw UsageError("preflight: unknown --op '" + s + "' (sum, avg, min, max)");
}

}  // namespace

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

PreflightOptions ParsePreflightArgs(const std::vector<std::string>& args) {
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
  o.backend = vm["backend"].as<std::string>();
  if (o.backend != "auto" && o.backend != "gloo" && o.backend != "nccl") {
    throw UsageError("preflight: unknown --backend '" + o.backend + "' (auto, gloo, nccl)");
  }
  o.min_bytes = ParseSize(vm["minbytes"].as<std::string>());
  if (vm.count("maxbytes")) {
    o.max_bytes = ParseSize(vm["maxbytes"].as<std::string>());
    if (o.max_bytes < o.min_bytes) {
      throw UsageError("preflight: --maxbytes (-e) is smaller than --minbytes (-b)");
    }
  }
  int f = vm["stepfactor"].as<int>();
  if (f < 2) throw UsageError("preflight: --stepfactor (-f) must be at least 2");
  o.step_factor = static_cast<size_t>(f);
  if (vm.count("warmup_iters")) {
    o.warmup_iters = vm["warmup_iters"].as<int>();
    if (o.warmup_iters < 0) throw UsageError("preflight: --warmup_iters (-w) must be >= 0");
  }
  if (vm.count("iters")) {
    o.iters = vm["iters"].as<int>();
    if (o.iters < 1) throw UsageError("preflight: --iters (-n) must be >= 1");
  }
  if (vm.count("ops")) {
    o.ops.clear();
    std::stringstream in(vm["ops"].as<std::string>());
    std::string op;
    while (std::getline(in, op, ',')) {
      if (op.empty()) continue;
      if (std::find(kKnownOps.begin(), kKnownOps.end(), op) == kKnownOps.end()) {
        throw UsageError("preflight: unknown op '" + op +
                         "' in --ops (allreduce, allgather, reduce_scatter, broadcast, alltoall, "
                         "sendrecv)");
      }
      if (std::find(o.ops.begin(), o.ops.end(), op) == o.ops.end()) o.ops.push_back(op);
    }
  }
  o.dtype = ParseDataType(vm["datatype"].as<std::string>());
  o.redop = ParseRedOp(vm["op"].as<std::string>());
  o.root = vm["root"].as<int>();
  if (o.root < 0) throw UsageError("preflight: --root (-r) must be >= 0");
  double timeout_s = vm["collective-timeout"].as<double>();
  if (!(timeout_s > 0) || timeout_s > 86400) {
    throw UsageError("preflight: --collective-timeout must be between 0 and 86400 seconds");
  }
  o.collective_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(std::ceil(timeout_s * 1000)));
  o.slow_link_factor = vm["slow-link-factor"].as<double>();
  if (!(o.slow_link_factor > 0 && o.slow_link_factor <= 1)) {
    throw UsageError("preflight: --slow-link-factor must be in (0, 1]");
  }
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
  return o;
}

std::string PreflightUsage() {
  std::ostringstream out;
  out << "usage: dlaunch --nproc N preflight [OPTIONS]\n\n" << Describe();
  return out.str();
}

}  // namespace dlaunch::worker
