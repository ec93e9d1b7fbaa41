#include "launcher/diagnose/diagnose_command.h"

#include <boost/program_options.hpp>
#include <exception>
#include <iostream>

#include "core/error.h"
#include "core/run_dir/paths.h"
#include "launcher/diagnose/analyzer.h"
#include "launcher/diagnose/diagnosis_writer.h"
#include "launcher/diagnose/nccl_findings.h"
#include "launcher/diagnose/python_evidence.h"
#include "launcher/diagnose/run_snapshot.h"
#include "launcher/diagnose/trace_writer.h"
#include "launcher/nccl_log/parser.h"
#include "launcher/nccl_log/report.h"

namespace dlaunch::launcher {

namespace po = boost::program_options;

std::optional<int> ParseRunDirCommand(const std::vector<std::string>& args,
                                      const std::string& command,
                                      const po::options_description& visible,
                                      po::variables_map* vm) {
  po::options_description all;
  all.add(visible).add_options()("run-dir", po::value<std::string>());
  po::positional_options_description positional;
  positional.add("run-dir", 1);
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), *vm);
    po::notify(*vm);
  } catch (const po::error& e) {
    std::cerr << "dlaunch " << command << ": " << e.what() << "\n" << visible;
    return 2;
  }
  if (vm->count("help")) {
    std::cout << visible;
    return 0;
  }
  return std::nullopt;
}

int RunDiagnoseCommand(const std::vector<std::string>& args) {
  po::options_description visible(
      "Usage: dlaunch diagnose <run-dir> [--json] [--trace]\n"
      "       dlaunch diagnose --nccl-log FILE... [--json]");
  visible.add_options()("help,h", "show this help")(
      "json", "print the diagnosis as JSON (the diagnosis.json format)")(
      "trace", "also write <run-dir>/trace.json (Chrome trace events; open in Perfetto)")(
      "world-size", po::value<int>()->default_value(0),
      "number of ranks, when rank folders may be missing (default: derived)")(
      "nccl-log", po::value<std::vector<std::string>>()->multitoken(),
      "analyze NCCL_DEBUG=INFO logs instead of a run directory: per-rank files or one file of "
      "interleaved ranks, from any launcher (mpirun, srun, torchrun)");
  po::variables_map vm;
  if (std::optional<int> done = ParseRunDirCommand(args, "diagnose", visible, &vm)) return *done;
  if (vm.count("nccl-log")) {
    nccl_log::NcclReport report =
        nccl_log::Analyze(nccl_log::ParseFiles(vm["nccl-log"].as<std::vector<std::string>>()));
    if (report.parsed.ranks.empty() && !report.parsed.problems.empty()) {
      std::cerr << "dlaunch diagnose: " << report.parsed.problems.front() << "\n";
      return 2;
    }
    if (vm.count("json")) {
      std::cout << nccl_log::ReportToJson(report).dump(2) << "\n";
    } else {
      std::cout << nccl_log::FormatReport(report);
    }
    return 0;
  }
  if (!vm.count("run-dir")) {
    std::cerr << "dlaunch diagnose: missing <run-dir> (e.g. dlaunch-logs/<run-id>)\n" << visible;
    return 2;
  }
  const std::string run_dir = vm["run-dir"].as<std::string>();
  if (vm["world-size"].as<int>() < 0) {
    std::cerr << "dlaunch diagnose: --world-size must be >= 0 (0: from the run directory), got "
              << vm["world-size"].as<int>() << "\n";
    return 2;
  }
  try {
    RunSnapshot run = LoadRunDir(run_dir, vm["world-size"].as<int>());
    Diagnosis diagnosis = Analyze(run);
    AttachNcclVerdicts(run_dir, &diagnosis);
    ReadCulpritTorchFlight(diagnosis, &run);
    AttachTorchFlight(run, &diagnosis);
    NoteSkippedTorchFlight(run, &diagnosis);
    if (vm.count("trace")) {
      const std::string path = rundir::RunDir(run_dir).trace();
      try {
        WriteTrace(run, &diagnosis, path);
        std::cerr << "dlaunch diagnose: wrote " << path << " (open in https://ui.perfetto.dev)\n";
      } catch (const Error& e) {
        std::cerr << "dlaunch diagnose: " << e.what() << "\n";
      }
    }
    if (vm.count("json")) {
      std::cout << DiagnosisToJson(diagnosis).dump(2) << "\n";
    } else {
      std::cout << FormatDiagnosis(diagnosis);
    }
    return 0;
  } catch (const Error& e) {
    std::cerr << "dlaunch diagnose: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    // A report must come out of any directory; reaching here is a bug worth reporting as such.
    std::cerr << "dlaunch diagnose: internal error while reading " << run_dir << ": " << e.what()
              << "\n";
    return 2;
  }
}

}  // namespace dlaunch::launcher
