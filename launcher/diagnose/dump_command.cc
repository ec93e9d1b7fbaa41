#include "launcher/diagnose/dump_command.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <thread>

#include "core/base/clock.h"
#include "core/base/files.h"
#include "core/base/format.h"
#include "core/error.h"
#include "core/run_dir/dump_file.h"
#include "core/run_dir/paths.h"
#include "core/run_dir/summary_file.h"
#include "launcher/diagnose/diagnose_command.h"
#include "launcher/diagnose/job_liveness.h"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;

constexpr auto kPollInterval = std::chrono::milliseconds(20);

}  // namespace

int RunDumpCommand(const std::vector<std::string>& args) {
  po::options_description visible("Usage: dlaunch dump <run-dir> [--json] [--timeout S]");
  visible.add_options()("help,h", "show this help")(
      "json", "print the dump's dump.json instead of the text")(
      "timeout", po::value<double>()->default_value(30),
      "seconds to wait for the job's launcher to write the dump");
  po::variables_map vm;
  if (std::optional<int> done = ParseRunDirCommand(args, "dump", visible, &vm)) return *done;
  if (!vm.count("run-dir")) {
    std::cerr << "dlaunch dump: missing <run-dir> (e.g. dlaunch-logs/<run-id>)\n" << visible;
    return 2;
  }
  const double timeout_s = vm["timeout"].as<double>();
  if (!(timeout_s > 0)) {
    std::cerr << "dlaunch dump: --timeout must be > 0 seconds, got " << timeout_s << "\n";
    return 2;
  }
  const std::string run_dir = vm["run-dir"].as<std::string>();
  if (const JobLiveness live = CheckJobLiveness(run_dir, "dump");
      live.kind != JobLiveness::kRunning) {
    std::cerr << "dlaunch dump: " << live.why << "\n";
    return 2;
  }
  const int64_t start = base::UnixMillis();
  const std::string dumps = rundir::RunDir(run_dir).dumps();
  std::string folder;
  try {
    std::error_code ec;
    fs::create_directories(dumps, ec);
    // Filled under a hidden name, then renamed: the launcher never sees half a request.
    const std::string name = rundir::DumpDir::NameAt(start);
    const std::string hidden = dumps + "/." + name + "." + std::to_string(::getpid());
    fs::create_directories(hidden, ec);
    if (ec) throw Error(ErrorKind::kInternal, "cannot create " + hidden + ": " + ec.message());
    rundir::DumpRequest request;
    request.unix_ms = start;
    request.pid = ::getpid();
    request.trigger = "dlaunch dump";
    rundir::WriteDumpRequest(rundir::DumpDir(hidden).request(), request);
    for (int n = 0; folder.empty(); ++n) {
      const std::string target = dumps + "/" + name + (n ? "-" + std::to_string(n) : "");
      if (::rename(hidden.c_str(), target.c_str()) == 0) {
        folder = target;
      } else if (errno != EEXIST && errno != ENOTEMPTY) {
        throw Error(ErrorKind::kInternal, "cannot rename " + hidden + ": " + std::strerror(errno));
      }
    }
  } catch (const Error& e) {
    std::cerr << "dlaunch dump: " << e.what() << "\n";
    return 2;
  }
  const rundir::DumpDir dir(folder);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  rundir::DumpManifest m;
  std::vector<std::string> problems;
  while (rundir::ReadDumpManifest(dir.manifest(), "dump.json", &m, &problems) !=
         rundir::FileState::kOk) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::error_code ec;
      fs::remove_all(folder, ec);  // no launcher took it: a later one must not
      std::cerr << "dlaunch dump: no answer from the job's launcher within " << timeout_s
                << " s (is it still running? node 0's launcher answers)\n";
      return 2;
    }
    problems.clear();
    std::this_thread::sleep_for(kPollInterval);
  }
  if (vm.count("json")) {
    std::string text;
    base::ReadFileBounded(dir.manifest(), rundir::kMaxDumpBytes, &text);
    std::cout << text;
  } else {
    std::string text;
    base::ReadFileBounded(dir.diagnosis_text(), rundir::kMaxDumpBytes, &text);
    std::cout << text;
  }
  std::cerr << "dlaunch dump: " << m.ranks.size() << (m.ranks.size() == 1 ? " rank" : " ranks")
            << " in " << base::FormatDurationMs(m.done_unix_ms - start) << ": " << folder << "\n";
  return 0;
}

}  // namespace dlaunch::launcher
