#include "launcher/doctor/doctor.h"

#include <algorithm>
#include <boost/program_options.hpp>
#include <iostream>
#include <map>

#include "launcher/doctor/build_info.h"
#include "launcher/doctor/doctor_report.h"
#include "launcher/doctor/probe.h"

namespace dlaunch::launcher {
namespace po = boost::program_options;
namespace {

// Versions compared between nodes, in report order. Host, OS and kernel are reported but not
// compared: they differ harmlessly.
const char* const kFingerprintKeys[] = {
    "dlaunch",      "driver", "cuda_driver", "cuda_runtime", "nccl_runtime",
    "nccl_compile", "cudnn",  "torch",       "torch_cuda",   "gpus"};

DoctorFacts QuickFacts() {
  ProbeOptions options;
  options.list_gpu_processes = false;
  return Probe(options).Run();
}

}  // namespace

int RunDoctorCommand(const std::vector<std::string>& args) {
  return RunDoctorCommand(args, std::cout, std::cerr);
}

int RunDoctorCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> rest = args;
  if (!rest.empty() && rest.front() == "doctor") rest.erase(rest.begin());
  po::options_description desc("dlaunch doctor [--json]");
  desc.add_options()("json", "print the facts and verdicts as one JSON document")(
      "python", po::value<std::string>(),
      "the interpreter Python ranks run (default: $PYTHON_EXEC, else python3)")(
      "no-python", "do not probe the ranks' Python")("help,h", "show this help");
  po::variables_map vm;
  try {
    // An empty positional description makes stray words an error instead of being ignored.
    po::positional_options_description no_positionals;
    po::store(po::command_line_parser(rest).options(desc).positional(no_positionals).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    err << "dlaunch doctor: " << e.what() << "\n" << desc;
    return 2;
  }
  if (vm.count("help")) {
    out << "Checks the NVIDIA driver, CUDA, NCCL, libtorch, the ranks' Python and its torch,\n"
           "/dev/shm, limits, interfaces and CUDA_VISIBLE_DEVICES of this machine. Exit 0: no "
           "problem; 1: a check failed.\n"
        << desc;
    return 0;
  }
  ProbeOptions options;
  if (!vm.count("no-python")) {
    const char* exec = std::getenv("PYTHON_EXEC");
    options.python_source = vm.count("python") ? "--python"
                            : exec && *exec    ? "PYTHON_EXEC"
                                               : "PATH";
    options.python_interpreter = vm.count("python") ? vm["python"].as<std::string>()
                                 : exec && *exec    ? std::string(exec)
                                                    : std::string("python3");
  }
  DoctorFacts facts = Probe(options).Run();
  std::vector<CheckResult> checks = Verdict::Judge(facts);
  if (vm.count("json")) {
    out << DoctorReport::Json(facts, checks)
               .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
        << "\n";
  } else {
    out << DoctorReport::Table(facts, checks);
  }
  out.flush();
  return Verdict::AnyFailed(checks) ? 1 : 0;
}

std::vector<std::string> FatalProblems(const std::vector<CheckResult>& checks) {
  std::vector<std::string> problems;
  for (const CheckResult& c : checks) {
    if (c.status != CheckStatus::kFail || !c.fatal) continue;
    problems.push_back(c.title + ": " + c.detail + ". Fix: " + c.fix);
  }
  return problems;
}

std::vector<std::string> DoctorFatalProblems() {
  return FatalProblems(Verdict::Judge(QuickFacts()));
}

nlohmann::json Fingerprint(const DoctorFacts& f) {
  // GPU models with counts, e.g. "8x NVIDIA H100 80GB HBM3 (9.0)": a mixed node shows up too.
  std::map<std::string, int> models;
  for (const GpuFacts& g : f.gpus) {
    ++models[g.name + " (" + std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor) + ")"];
  }
  std::string gpus;
  for (const auto& [model, count] : models) {
    gpus += (gpus.empty() ? "" : ", ") + std::to_string(count) + "x " + model;
  }
  return {{"host", f.hostname},
          {"os", f.os},
          {"kernel", f.kernel},
          {"dlaunch", GetBuildInfo().dlaunch_version},
          {"driver", f.driver_version},
          {"cuda_driver", FormatCudaVersion(f.cuda_driver_version)},
          {"cuda_runtime", FormatCudaVersion(f.cuda_runtime_version)},
          {"nccl_runtime", FormatNcclVersion(f.nccl_runtime_version)},
          {"nccl_compile", FormatNcclVersion(f.nccl_compile_version)},
          {"cudnn", FormatCudnnVersion(f.cudnn_version)},
          {"torch", f.torch_version},
          {"torch_cuda", f.torch_cuda},
          {"gpus", gpus}};
}

std::string DoctorFingerprintJson() {
  return Fingerprint(QuickFacts()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::vector<std::string> CompareFingerprints(const std::vector<std::string>& per_node_json) {
  std::vector<std::string> messages;
  std::vector<nlohmann::json> nodes(per_node_json.size());
  std::vector<bool> valid(per_node_json.size(), false);
  for (size_t i = 0; i < per_node_json.size(); ++i) {
    if (per_node_json[i].empty()) continue;  // a node whose dlaunch was built without doctor
    nodes[i] = nlohmann::json::parse(per_node_json[i], nullptr, false);
    valid[i] = nodes[i].is_object();
    if (!valid[i]) {
      messages.push_back("node " + std::to_string(i) + ": doctor fingerprint is not a JSON object");
    }
  }
  auto name = [&](size_t i) {
    std::string host = nodes[i].value("host", std::string());
    return "node " + std::to_string(i) + (host.empty() ? "" : " (" + host + ")");
  };
  for (const char* key : kFingerprintKeys) {
    // value -> nodes having it, in first-seen order so the message reads in node order.
    std::vector<std::pair<std::string, std::vector<size_t>>> groups;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!valid[i]) continue;
      std::string value;
      auto it = nodes[i].find(key);
      if (it != nodes[i].end()) value = it->is_string() ? it->get<std::string>() : it->dump();
      auto g = std::find_if(groups.begin(), groups.end(),
                            [&](const auto& group) { return group.first == value; });
      if (g == groups.end()) {
        groups.push_back({value, {i}});
      } else {
        g->second.push_back(i);
      }
    }
    if (groups.size() < 2) continue;
    std::string text = std::string(key) + " differs between nodes:";
    for (size_t k = 0; k < groups.size(); ++k) {
      text += (k ? ";" : "") + std::string(" ") +
              (groups[k].first.empty() ? "none" : groups[k].first) + " on ";
      for (size_t j = 0; j < groups[k].second.size(); ++j) {
        text += (j ? ", " : "") + name(groups[k].second[j]);
      }
    }
    messages.push_back(text);
  }
  return messages;
}

}  // namespace dlaunch::launcher
