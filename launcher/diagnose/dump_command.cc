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

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;

constexpr auto kPollInterval = std::chrono::milliseconds(20);

// Why the job of `run_dir` cannot be dumped, "" when it runs. Blocks for one small read.
std::string WhyNotRunning(const std::string& run_dir) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) return "no run directory at " + run_dir;
  struct stat st {};
  if (::stat(run_dir.c_str(), &st) != 0) return "cannot read " + run_dir;
  if (st.st_uid != ::geteuid() && ::geteuid() != 0) {
    return run_dir + " belongs to uid " + std::to_string(st.st_uid) +
           ": only the job's owner can dump it";
  }
  const rundir::RunDir run(run_dir);
  rundir::Summary summary;
  std::vector<std::string> problems;
  switch (rundir::ReadSummary(run.summary(), "summary.json", &summary, &problems)) {
    case rundir::FileState::kAbsent:
      return run_dir + " has no summary.json: not a dlaunch run directory";
    case rundir::FileState::kInvalid:
      return problems.empty() ? run.summary() + " is unreadable" : problems.front();
    case rundir::FileState::kOk:
      break;
  }
  if (summary.exit_code && *summary.exit_code >= 0) {
    return "the job of " + run_dir + " has ended (exit " + std::to_string(*summary.exit_code) +
           "): nothing runs to dump (see dlaunch diagnose " + run_dir + ")";
  }
  // A launcher that died (SIGKILL) left "running": its ranks on this host tell.
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  if (summary.host == host) {
    bool any = false, alive = false;
    for (const rundir::SummaryRank& r : summary.ranks) {
      if (r.pid <= 0 || (!r.host.empty() && r.host != host)) continue;
      any = true;
      alive = alive || ::kill(r.pid, 0) == 0 || errno == EPERM;
    }
    if (any && !alive) {
      return "the job of " + run_dir +
             " is not running: its ranks are gone and its launcher did not record the end";
    }
  }
  return "";
}

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
  if (std::string why = WhyNotRunning(run_dir); !why.empty()) {
    std::cerr << "dlaunch dump: " << why << "\n";
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
