#include "launcher/report/report_command.h"

#include <sys/stat.h>

#include <boost/program_options.hpp>
#include <exception>
#include <iostream>

#include "core/base/files.h"
#include "core/error.h"
#include "core/run_dir/paths.h"
#include "launcher/diagnose/diagnose_command.h"
#include "launcher/report/report_data.h"
#include "launcher/report/report_page.h"

namespace dlaunch::launcher {

namespace po = boost::program_options;

int RunReportCommand(const std::vector<std::string>& args) {
  po::options_description visible("Usage: dlaunch report RUN_DIR [-o FILE.html]");
  visible.add_options()("help,h", "show this help")(
      "output,o", po::value<std::string>(),
      "where to write the page (default: RUN_DIR/report.html)");
  po::variables_map vm;
  if (std::optional<int> done = ParseRunDirCommand(args, "report", visible, &vm)) return *done;
  if (!vm.count("run-dir")) {
    std::cerr << "dlaunch report: missing RUN_DIR (e.g. dlaunch-logs/<run-id>)\n" << visible;
    return 2;
  }
  const std::string run_dir = vm["run-dir"].as<std::string>();
  struct stat st {};
  if (::stat(run_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    std::cerr << "dlaunch report: " << run_dir << " is not a directory\n";
    return 2;
  }
  if (!report::IsRunDir(run_dir)) {
    std::cerr << "dlaunch report: " << run_dir
              << " is not a run directory (no summary.json, rank<R>/, preflight.json or "
                 "diagnosis.json)\n";
    return 2;
  }
  const std::string out =
      vm.count("output") ? vm["output"].as<std::string>() : rundir::RunDir(run_dir).report();
  try {
    const report::ReportSnapshot snapshot = report::LoadReportSnapshot(run_dir, out);
    base::WriteFileAtomically(out, report::RenderReportPage(snapshot));
    std::cout << out << "\n";
    return 0;
  } catch (const Error& e) {
    std::cerr << "dlaunch report: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    // A page must come out of any directory; reaching here is a bug worth reporting as such.
    std::cerr << "dlaunch report: internal error while reading " << run_dir << ": " << e.what()
              << "\n";
    return 2;
  }
}

}  // namespace dlaunch::launcher
