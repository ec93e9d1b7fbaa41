// The command line into LaunchOptions: dlaunch's flags split from the program's words, Kubeflow's
// PET_* variables added where the command line left their flags out, then one parser per group
// of flags (group_parsers.h).
#include "launcher/cli/options.h"

#include <sys/resource.h>
#include <sys/stat.h>

#include <sstream>

#include "core/base/environ.h"
#include "core/error.h"
#include "launcher/cli/flags.h"
#include "launcher/cli/group_parsers.h"

namespace dlaunch::launcher {

LaunchOptions ParseCommandLine(const std::vector<std::string>& argv) {
  return ParseCommandLine(argv, base::CurrentEnv());
}

LaunchOptions ParseCommandLine(const std::vector<std::string>& argv,
                               const std::map<std::string, std::string>& env) {
  const cli::po::options_description desc = cli::Describe();
  std::vector<std::string> own, rest;
  cli::SplitArgs(desc, argv, &own, &rest);
  const cli::Flags f(cli::AddKubeflowFlags(desc, env, own, cli::Store(desc, own)));

  LaunchOptions o;
  if (f.Has("help")) {
    o.command = Command::kHelp;
    return o;
  }
  if (f.Has("version")) {
    o.command = Command::kVersion;
    return o;
  }
  cli::ParseNodeFlags(f, &o);
  cli::ParseRendezvousFlags(f, &o);
  cli::ParseMasterFlags(f, &o);
  cli::ParseSupervisionFlags(f, env, &o);
  cli::ParseOutputFlags(f, &o);
  cli::ParsePythonFlags(f, &o);
  cli::ParseDiagnosisFlags(f, &o);
  cli::ParseJobFlags(f, &o);
  cli::ParsePlacementFlags(f, &o);
  cli::ParseProgram(rest, &o);
  return o;
}

const char* OnHangName(OnHang action) { return action == OnHang::kRestart ? "restart" : "exit"; }

const char* RestartPolicyName(RestartPolicy policy) {
  switch (policy) {
    case RestartPolicy::kAuto:
      return "auto";
    case RestartPolicy::kAlways:
      return "always";
    case RestartPolicy::kObserve:
      return "observe";
  }
  return "auto";
}

std::optional<RestartPolicy> RestartPolicyNamed(const std::string& name) {
  for (RestartPolicy p : {RestartPolicy::kAuto, RestartPolicy::kAlways, RestartPolicy::kObserve}) {
    if (name == RestartPolicyName(p)) return p;
  }
  return std::nullopt;
}

std::optional<OnHang> OnHangNamed(const std::string& name) {
  if (name == "exit") return OnHang::kExit;
  if (name == "restart") return OnHang::kRestart;
  return std::nullopt;
}

std::vector<int> ParseRankList(const std::string& text) {
  std::vector<int> ranks;
  if (text.empty() || text.back() == ',') {
    throw UsageError("bad rank list '" + text + "': use ranks and ranges such as 0,2-3");
  }
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    try {
      size_t dash = part.find('-');
      size_t used = 0;
      if (dash == std::string::npos) {
        ranks.push_back(std::stoi(part, &used));
        if (used != part.size() || ranks.back() < 0) throw std::invalid_argument(part);
      } else {
        int lo = std::stoi(part.substr(0, dash), &used);
        if (used != dash) throw std::invalid_argument(part);
        int hi = std::stoi(part.substr(dash + 1), &used);
        if (used != part.size() - dash - 1 || lo < 0 || hi < lo) throw std::invalid_argument(part);
        for (int r = lo; r <= hi; ++r) ranks.push_back(r);
      }
    } catch (const std::exception&) {
      throw UsageError("bad rank list '" + text + "': use ranks and ranges such as 0,2-3");
    }
  }
  if (ranks.empty()) throw UsageError("empty rank list");
  return ranks;
}

int ParseRunDirMode(const std::string& text) {
  size_t used = 0;
  unsigned long mode = 0;
  try {
    mode = std::stoul(text, &used, 8);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || mode > 0777 || (mode & 0700) != 0700) {
    throw UsageError("--run-dir-mode must be octal permission bits from 0700 to 0777 (got '" +
                     text + "')");
  }
  return static_cast<int>(mode);
}

void ApplyRunDirMode(int run_dir_mode) {
  const mode_t old = ::umask(0);
  ::umask(old | (0777 & ~static_cast<mode_t>(run_dir_mode)));
}

void CheckFileDescriptorLimit(int ranks) {
  constexpr rlim_t kBase = 64;  // the launcher's own: gRPC, epoll, timers, the run directory
  const rlim_t need = kBase + static_cast<rlim_t>(kFdsPerRank) * static_cast<rlim_t>(ranks);
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= need) return;
  if (limit.rlim_max == RLIM_INFINITY || limit.rlim_max >= need) {
    limit.rlim_cur = need;
    if (::setrlimit(RLIMIT_NOFILE, &limit) == 0) return;
  }
  throw UsageError("too few file descriptors: ulimit -n is " + std::to_string(limit.rlim_cur) +
                   "; " + std::to_string(ranks) + " rank" + (ranks == 1 ? "" : "s") +
                   " need about " + std::to_string(need) + " (raise it with ulimit -n " +
                   std::to_string(need) + ", or use fewer ranks per node)");
}

}  // namespace dlaunch::launcher
