// The command line as Boost stores it, and what the group parsers (group_parsers.h) share: the
// flags read by name under any of their spellings, and durations checked the one way.
// Internal to launcher/cli/.
#pragma once

#include <boost/program_options.hpp>
#include <chrono>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace dlaunch::launcher::cli {

namespace po = boost::program_options;

// Every flag of dlaunch, torchrun's spellings beside its own (usage.cc).
po::options_description Describe();

// The first token that is not an option (or follows "--") starts the program or built-in; what
// comes after it belongs to that program, never to dlaunch. Throws UsageError for a flag of
// torchrun's that dlaunch refuses.
void SplitArgs(const po::options_description& desc, const std::vector<std::string>& argv,
               std::vector<std::string>* own, std::vector<std::string>* rest);

// `own` (SplitArgs) stored against `desc`; throws UsageError for what Boost refuses.
po::variables_map Store(const po::options_description& desc, const std::vector<std::string>& own);

// The flags of one command line, read by name.
class Flags {
 public:
  explicit Flags(po::variables_map vm) : vm_(std::move(vm)) {}

  // Set on the command line, not by a default.
  bool Given(const std::string& name) const { return vm_.count(name) && !vm_[name].defaulted(); }
  // Set, on the command line or by a default.
  bool Has(const std::string& name) const { return vm_.count(name) > 0; }
  // The value of a flag that has one (a default, or Has()).
  template <typename T>
  T Get(const std::string& name) const {
    return vm_[name].as<T>();
  }
  // The first of `names` the command line gave, else the first with a default.
  template <typename T>
  std::optional<T> First(std::initializer_list<const char*> names) const {
    for (const char* n : names) {
      if (Given(n)) return vm_[n].as<T>();
    }
    for (const char* n : names) {
      if (Has(n)) return vm_[n].as<T>();
    }
    return std::nullopt;
  }
  // "--nproc_per_node": the first of `names` the command line gave, else the last (the flag whose
  // default applies), as a flag.
  std::string GivenName(std::initializer_list<const char*> names) const;

 private:
  po::variables_map vm_;
};

// The whole of `text` as an integer of at least 1; 0 when it is not one.
int PositiveInt(const std::string& text);

// Durations are finite: "inf" or 1e300 would overflow the millisecond count into a negative or
// tiny deadline (an instant false hang). "Never" is spelt 0 where a flag offers it. Throws
// UsageError naming `flag`.
std::chrono::milliseconds Seconds(double s, const char* flag, bool zero_is_never = false);

// torchrun's --shutdown-timeout (and TORCH_ELASTIC_SHUTDOWN_TIMEOUT): 0 is SIGKILL at once.
std::chrono::milliseconds ShutdownTimeout(double s);

}  // namespace dlaunch::launcher::cli
