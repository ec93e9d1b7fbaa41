#include "launcher/doctor/doctor_report.h"

#include <algorithm>
#include <sstream>

#include "launcher/doctor/build_info.h"
#include "launcher/doctor/system_parsers.h"

namespace dlaunch::launcher {
namespace {

void Row(std::ostringstream& out, const std::string& key, const std::string& value) {
  std::string padded = key;
  if (padded.size() < 14) padded.resize(14, ' ');
  out << "  " << padded << " " << value << "\n";
}

std::string Or(const std::string& value, const std::string& fallback) {
  return value.empty() ? fallback : value;
}

std::string LimitText(const LimitFacts& limit, bool bytes) {
  if (!limit.known) return "unknown";
  auto one = [&](bool unlimited, uint64_t v) {
    return unlimited ? std::string("unlimited") : bytes ? FormatByteCount(v) : std::to_string(v);
  };
  return one(limit.unlimited, limit.soft) + " (hard " + one(limit.hard_unlimited, limit.hard) + ")";
}

}  // namespace

std::string DoctorReport::Summary(const DoctorFacts& facts,
                                  const std::vector<CheckResult>& checks) {
  int fails = 0, warns = 0;
  for (const CheckResult& c : checks) {
    fails += c.status == CheckStatus::kFail;
    warns += c.status == CheckStatus::kWarn;
  }
  std::string text =
      fails == 0 ? "no problems" : std::to_string(fails) + " problem" + (fails == 1 ? "" : "s");
  if (warns > 0) text += ", " + std::to_string(warns) + " warning" + (warns == 1 ? "" : "s");
  if (facts.gpus.empty() && facts.driver_version.empty()) {
    text += "; no NVIDIA GPU or driver found, so the GPU checks were skipped";
  }
  return text;
}

std::string DoctorReport::Table(const DoctorFacts& f, const std::vector<CheckResult>& checks) {
  std::ostringstream out;
  out << "dlaunch doctor " << GetBuildInfo().dlaunch_version << " on " << Or(f.hostname, "?")
      << "\n\nSystem\n";
  Row(out, "OS", Or(f.os, "?") + ", kernel " + Or(f.kernel, "?"));
  Row(out, "CPU", Or(f.cpu_model, "?") + " x " + std::to_string(f.cpu_count));
  Row(out, "Memory",
      FormatByteCount(f.memory_total_bytes) + " total, " +
          FormatByteCount(f.memory_available_bytes) + " available");

  out << "\nNVIDIA software\n";
  if (f.driver_version.empty()) {
    Row(out, "Driver", "none" + (f.libcuda_error.empty() ? "" : " (" + f.libcuda_error + ")"));
  } else {
    Row(out, "Driver",
        f.driver_version + " (from " + f.driver_source + ")" +
            (f.cuda_driver_version > 0
                 ? ", supports CUDA " + FormatCudaVersion(f.cuda_driver_version)
                 : ""));
  }
  Row(out, "CUDA runtime",
      (f.cuda_runtime_version > 0
           ? FormatCudaVersion(f.cuda_runtime_version) + " (" + f.cudart_library + ")"
           : std::string("not found")) +
          ", built with " + Or(FormatCudaVersion(f.cuda_compile_version), "none"));
  Row(out, "NCCL",
      (f.nccl_runtime_version > 0
           ? FormatNcclVersion(f.nccl_runtime_version) + " (" + f.nccl_library + ")"
           : std::string("not found")) +
          ", built with " + Or(FormatNcclVersion(f.nccl_compile_version), "none"));
  Row(out, "cuDNN",
      f.cudnn_version > 0 ? FormatCudnnVersion(f.cudnn_version) + " (" + f.cudnn_library + ")"
                          : "not found");
  if (f.torch_built_in) {
    std::string cuda = f.torch_cuda.empty()  ? "CPU-only"
                       : f.torch_cuda == "?" ? "CUDA of unknown version"
                                             : "CUDA " + f.torch_cuda;
    std::string arch = f.torch_cuda_arch_list.empty() ? "" : ", arch " + [&] {
      std::string s;
      for (const auto& a : f.torch_cuda_arch_list) s += (s.empty() ? "" : ";") + a;
      return s;
    }();
    Row(out, "libtorch", Or(f.torch_version, "?") + ", " + cuda + arch);
  } else {
    Row(out, "libtorch", "not built in");
  }
  const PythonFacts& py = f.python;
  if (!py.interpreter.empty()) {
    Row(out, "Python",
        !py.runs
            ? py.interpreter + " (from " + py.source + "): " + py.error
            : Or(py.executable, py.interpreter) + " " + py.version + " (from " + py.source + ")");
    if (py.runs) {
      Row(out, "torch (Python)",
          !py.torch ? "cannot be imported: " + py.error
                    : py.torch_version + ", " +
                          (py.torch_cuda.empty() ? "CPU-only" : "CUDA " + py.torch_cuda) +
                          ", NCCL " + Or(FormatNcclVersion(py.nccl_version), "none") + ", cuDNN " +
                          Or(FormatCudnnVersion(py.cudnn_version), "none") + ", " +
                          std::to_string(py.cuda_devices) + " GPU(s) visible");
    }
  }

  out << "\nGPUs\n";
  if (f.gpus.empty()) {
    Row(out, "none", Or(f.gpu_error, "no NVIDIA GPU found"));
  }
  for (const GpuFacts& g : f.gpus) {
    std::string line = g.name + ", compute " + std::to_string(g.cc_major) + "." +
                       std::to_string(g.cc_minor) + ", " + FormatByteCount(g.memory_total_bytes);
    if (f.gpu_source == "nvml") line += " (" + FormatByteCount(g.memory_used_bytes) + " used)";
    if (!g.uuid.empty()) line += ", " + g.uuid;
    Row(out, "[" + std::to_string(g.index) + "]", line);
  }
  for (const GpuProcessFacts& p : f.gpu_processes) {
    Row(out, "pid " + std::to_string(p.pid),
        Or(p.command, "?") + " holds " + FormatByteCount(p.used_bytes) + " on GPU " +
            std::to_string(p.gpu_index));
  }

  out << "\nLimits\n";
  Row(out, "/dev/shm",
      f.shm_total_bytes < 0 ? std::string("not mounted")
                            : FormatByteCount(f.shm_total_bytes) + " (" +
                                  FormatByteCount(f.shm_available_bytes) + " free)");
  Row(out, "memlock", LimitText(f.memlock, true));
  Row(out, "nofile", LimitText(f.nofile, false));
  if (!f.rdma_devices.empty()) {
    std::string rdma;
    for (const auto& d : f.rdma_devices) rdma += (rdma.empty() ? "" : ", ") + d;
    Row(out, "RDMA", rdma);
  }

  out << "\nNetwork\n";
  for (const NetInterfaceFacts& nic : f.interfaces) {
    std::string addrs;
    for (const auto& a : nic.ipv4) addrs += " " + a;
    for (const auto& a : nic.ipv6) addrs += " " + a;
    Row(out, nic.name,
        std::string(nic.up ? "up" : "down") + (addrs.empty() ? " (no address)" : addrs));
  }

  out << "\nEnvironment\n";
  if (f.env.empty()) Row(out, "(none)", "no NCCL_*, TORCH_NCCL_*, CUDA_VISIBLE_DEVICES set");
  for (const auto& [name, value] : f.env) out << "  " << name << "=" << value << "\n";

  out << "\nChecks\n";
  for (const CheckResult& c : checks) {
    out << "  " << CheckStatusSymbol(c.status) << " " << c.title << ": " << c.detail << "\n";
    if (!c.fix.empty()) out << "      fix: " << c.fix << "\n";
  }
  out << "\n" << Summary(f, checks) << "\n";
  return out.str();
}

nlohmann::json DoctorReport::Json(const DoctorFacts& facts,
                                  const std::vector<CheckResult>& checks) {
  nlohmann::json list = nlohmann::json::array();
  for (const CheckResult& c : checks) {
    list.push_back({{"id", c.id},
                    {"title", c.title},
                    {"status", CheckStatusName(c.status)},
                    {"symbol", CheckStatusSymbol(c.status)},
                    {"detail", c.detail},
                    {"fix", c.fix},
                    {"fatal", c.fatal}});
  }
  return {{"ok", !Verdict::AnyFailed(checks)},
          {"gpu_present", !facts.gpus.empty()},
          {"summary", Summary(facts, checks)},
          {"checks", list},
          {"facts", facts}};
}

}  // namespace dlaunch::launcher
