// dlaunch: launch, supervise and diagnose distributed jobs.
#include <unistd.h>

#include <climits>
#include <iostream>

#include "core/error.h"
#include "core/exit_codes.h"
#include "core/grpc_setup.h"
#include "launcher/cli/options.h"
#include "launcher/diagnose/diagnose_command.h"
#include "launcher/diagnose/dump_command.h"
#include "launcher/doctor/doctor.h"
#include "launcher/job/job.h"
#include "launcher/live/status_command.h"
#include "launcher/program/rank_program.h"
#include "launcher/report/report_command.h"
#include "launcher/supervision/supervisor.h"

namespace {

std::string SelfExe(const char* argv0) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return argv0;
  return std::string(buf, n);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dlaunch;
  using namespace dlaunch::launcher;
  // Before gRPC starts any thread, so that every thread inherits the mask.
  BlockForwardedSignals();
  core::UseSystemResolver();
  core::RouteGrpcLog();
  try {
    LaunchOptions options = ParseCommandLine({argv + 1, argv + argc});
    // Still before any thread: a job catches the signals it forwards, the other commands none.
    HandleSignals(RunsRanks(options.command) ? options.signals_to_handle : std::vector<int>{});
    switch (options.command) {
      case Command::kHelp:
        std::cout << Usage();
        return kExitOk;
      case Command::kVersion:
        std::cout << "dlaunch " << DLAUNCH_VERSION << "\n";
        return kExitOk;
      case Command::kDoctor:
        return RunDoctorCommand(options.program);
      case Command::kDiagnose:
        return RunDiagnoseCommand(options.program);
      case Command::kReport:
        return RunReportCommand(options.program);
      case Command::kDump:
        return RunDumpCommand(options.program);
      case Command::kStatus:
        return RunStatusCommand(options.program);
      default:
        return RunJob(options, SelfExe(argv[0]));
    }
  } catch (const UsageError& e) {
    std::cerr << "dlaunch: " << e.what() << "\n(see dlaunch --help)" << std::endl;
    return kExitUsage;
  } catch (const Error& e) {
    std::cerr << "dlaunch: " << e.what() << std::endl;
    return e.kind() == ErrorKind::kInvalidArgument ? kExitUsage : kExitRankFailed;
  } catch (const std::exception& e) {
    std::cerr << "dlaunch: internal error: " << e.what() << std::endl;
    return kExitRankFailed;
  }
}
