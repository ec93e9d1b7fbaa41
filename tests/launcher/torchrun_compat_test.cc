// Every flag of torchrun 2.15's --help (fixtures/torchrun-2.15-help.txt, its output saved as is)
// is either accepted by dlaunch's parser or refused with a reason that names it; and the README's
// compatibility table names every one of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "launcher/cli/options.h"

namespace dlaunch::launcher {
namespace {

// One option of torchrun's help: its spellings ("-r", "--redirects") and what it takes: "" for a
// switch, a METAVAR, or "{a,b}" choices.
struct TorchrunFlag {
  std::vector<std::string> spellings;
  std::string takes;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The option lines of argparse's help ("  -r REDIRECTS, --redirects REDIRECTS   help..."): two
// spaces, a dash; the help text after two more spaces, or on the lines below, is dropped.
std::vector<TorchrunFlag> TorchrunFlags() {
  std::stringstream in(ReadFile(TORCHRUN_HELP));
  std::vector<TorchrunFlag> flags;
  bool options = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "options:") options = true;
    if (!options || line.rfind("  -", 0) != 0) continue;
    line = line.substr(2, line.find("  ", 2) - 2);
    TorchrunFlag flag;
    size_t start = 0;
    for (size_t comma; start < line.size(); start = comma + 2) {
      comma = line.find(", ", start);
      if (comma == std::string::npos) comma = line.size();
      const std::string part = line.substr(start, comma - start);
      const size_t space = part.find(' ');
      flag.spellings.push_back(part.substr(0, space));
      if (space != std::string::npos) flag.takes = part.substr(space + 1);
    }
    flags.push_back(flag);
  }
  return flags;
}

// Values to try for each metavar of torchrun's help: the usual ones and those dlaunch refuses.
// A metavar missing here (a flag of a newer torchrun) fails the test until it is added.
const std::map<std::string, std::vector<std::string>>& SampleValues() {
  static const std::map<std::string, std::vector<std::string>> kValues = {
      {"NNODES", {"1", "1:2"}},
      {"NPROC_PER_NODE", {"2", "auto", "cpu", "gpu", "xpu"}},
      {"RDZV_BACKEND", {"static", "c10d", "etcd", "etcd-v2"}},
      {"RDZV_ENDPOINT", {"localhost:29400"}},
      {"RDZV_ID", {"job7"}},
      {"RDZV_CONF", {"timeout=60,read_timeout=30"}},
      {"MAX_RESTARTS", {"2"}},
      {"MONITOR_INTERVAL", {"0.1"}},
      {"EVENT_LOG_HANDLER", {"null", "dynamic_rendezvous", "console"}},
      {"ROLE", {"trainer"}},
      {"LOG_DIR", {"/tmp/torchrun-logs"}},
      {"REDIRECTS", {"3", "0:1,1:2"}},
      {"TEE", {"3", "0:1"}},
      {"LOG_LINE_PREFIX_TEMPLATE", {"${hostname}:${rank}: "}},
      {"LOCAL_RANKS_FILTER", {"0,1"}},
      {"DUPLICATE_STDOUT_FILTERS", {"apple,orange"}},
      {"DUPLICATE_STDERR_FILTERS", {"apple,,pear"}},
      {"NODE_RANK", {"0"}},
      {"MASTER_ADDR", {"127.0.0.1"}},
      {"MASTER_PORT", {"29500"}},
      {"LOCAL_ADDR", {"10.0.0.7"}},
      {"LOGS_SPECS", {"my_logs_specs"}},
      {"SIGNALS_TO_HANDLE", {"SIGTERM,SIGINT,SIGHUP,SIGQUIT", "SIGUSR1,SIGUSR2"}},
      {"SHUTDOWN_TIMEOUT", {"30"}},
  };
  return kValues;
}

std::vector<std::string> ValuesOf(const TorchrunFlag& flag) {
  if (flag.takes.empty()) return {};
  if (flag.takes.front() == '{') {  // argparse's choices: every one
    std::vector<std::string> choices;
    std::stringstream in(flag.takes.substr(1, flag.takes.size() - 2));
    for (std::string c; std::getline(in, c, ',');) choices.push_back(c);
    return choices;
  }
  auto it = SampleValues().find(flag.takes);
  return it == SampleValues().end() ? std::vector<std::string>{} : it->second;
}

// Whether `text` names `flag` as a whole word: "--nproc" is not named by "--nproc-per-node".
bool Names(const std::string& text, const std::string& flag) {
  for (size_t at = text.find(flag); at != std::string::npos; at = text.find(flag, at + 1)) {
    const size_t end = at + flag.size();
    const bool starts = at == 0 || (text[at - 1] != '-' && !std::isalnum(text[at - 1]));
    const bool ends = end == text.size() || !(std::isalnum(static_cast<unsigned char>(text[end])) ||
                                              text[end] == '-' || text[end] == '_');
    if (starts && ends) return true;
  }
  return false;
}

TEST(TorchrunCompatTest, TheFixtureHoldsTorchrunsFlags) {
  const auto flags = TorchrunFlags();
  // torchrun 2.15 has 31 options; a parser that found fewer is broken, not torchrun.
  ASSERT_GE(flags.size(), 31u);
  std::set<std::string> all;
  for (const auto& f : flags) all.insert(f.spellings.begin(), f.spellings.end());
  for (const char* known : {"-h", "--nproc_per_node", "-r", "--tee", "--numa-binding",
                            "--virtual_local_rank", "--print-completion", "--logs-specs"}) {
    EXPECT_TRUE(all.count(known)) << known;
  }
}

// Each spelling, in each form (`--flag V`, `--flag=V`, `-rV`), with each sample value: accepted,
// or a UsageError that names the flag (any of its spellings) and is not the parser's "unknown
// option" (a flag dlaunch forgot, not one it refuses on purpose). main turns a UsageError into
// exit code 2 before anything starts.
TEST(TorchrunCompatTest, EveryFlagIsAcceptedOrRefusedByName) {
  int accepted = 0, refused = 0;
  for (const auto& flag : TorchrunFlags()) {
    const auto values = ValuesOf(flag);
    if (!flag.takes.empty()) {
      ASSERT_FALSE(values.empty())
          << flag.spellings[0] << " takes " << flag.takes << ": add sample values for it";
    }
    for (const auto& spelling : flag.spellings) {
      std::vector<std::vector<std::string>> argvs;
      if (values.empty()) argvs.push_back({spelling, "prog"});
      for (const auto& v : values) {
        argvs.push_back({spelling, v, "prog"});
        const bool is_long = spelling.rfind("--", 0) == 0;
        argvs.push_back({is_long ? spelling + "=" + v : spelling + v, "prog"});
      }
      for (const auto& argv : argvs) {
        const std::string shown = argv[0] + (argv.size() > 2 ? " " + argv[1] : "");
        try {
          ParseCommandLine(argv, {});
          ++accepted;
        } catch (const UsageError& e) {
          const std::string what = e.what();
          EXPECT_EQ(what.find("unrecognised option"), std::string::npos) << shown << ": " << what;
          EXPECT_TRUE(std::any_of(flag.spellings.begin(), flag.spellings.end(),
                                  [&](const std::string& s) { return Names(what, s); }))
              << shown << ": the error does not name the flag: " << what;
          EXPECT_EQ(what.find('\n'), std::string::npos) << shown << ": not one line: " << what;
          ++refused;
        } catch (const std::exception& e) {
          ADD_FAILURE() << shown << ": not a usage error: " << e.what();
        }
      }
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

// The flags refused whatever their value, and the values refused, say why: no bare "invalid".
TEST(TorchrunCompatTest, RefusalsGiveTheirReason) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--logs-specs", "x", "prog"}, "--logs-specs is not supported: it loads a Python"},
      {{"--logs_specs=x", "prog"}, "--logs_specs is not supported: it loads a Python"},
      {{"--print-completion", "bash", "prog"}, "--print-completion is not supported: it prints"},
      {{"--print_completion", "zsh", "prog"}, "--print_completion is not supported"},
      {{"--nproc_per_node", "xpu", "prog"}, "--nproc_per_node xpu is not supported"},
      {{"--rdzv-backend", "etcd", "prog"}, "not in etcd"},
      {{"--event-log-handler", "console", "prog"}, "--events-file"},
      {{"--numa-binding", "cache", "prog"}, "core-complex"},
      {{"--standalone", "--nnodes", "2", "prog"}, "--standalone is a job on one node"},
      {{"-r", "4", "prog"}, "--redirects must be 0-3"},
      {{"-t", "0:1,", "prog"}, "--tee must be 0-3"},
      {{"--shutdown-timeout", "-1", "prog"}, "--shutdown-timeout must be"},
      {{"--monitor-interval", "nan", "prog"}, "--monitor-interval must be"},
      {{"--virtual-local-rank", "--gpu-binding", "none", "prog"}, "drop --gpu-binding none"},
      {{"-m", "--no-python", "mod"}, "-m runs Python"},
  };
  for (const auto& [argv, reason] : cases) {
    try {
      ParseCommandLine(argv, {});
      ADD_FAILURE() << argv[0] << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
  }
}

// The README's section on torchrun names every spelling of every flag of the fixture, in code
// quotes (`--tee` or `--tee N`).
TEST(TorchrunCompatTest, TheReadmeTableNamesEveryFlag) {
  const std::string readme = ReadFile(README_MD);
  const size_t start = readme.find("## Launching programs (torchrun-compatible)");
  ASSERT_NE(start, std::string::npos);
  const size_t end = readme.find("\n## ", start + 1);
  const std::string section = readme.substr(start, end - start);
  for (const auto& flag : TorchrunFlags()) {
    for (const auto& spelling : flag.spellings) {
      EXPECT_TRUE(Names(section, "`" + spelling)) << spelling << " is not in the README's table";
    }
  }
}

}  // namespace
}  // namespace dlaunch::launcher
