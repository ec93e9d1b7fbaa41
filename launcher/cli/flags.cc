#include "launcher/cli/flags.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>

#include "core/error.h"
#include "launcher/cli/options.h"
#include "launcher/cli/torchrun_flags.h"

namespace dlaunch::launcher::cli {

void SplitArgs(const po::options_description& desc, const std::vector<std::string>& argv,
               std::vector<std::string>* own, std::vector<std::string>* rest) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& tok = argv[i];
    if (tok == "--") {
      rest->assign(argv.begin() + i + 1, argv.end());
      return;
    }
    if (tok.size() > 1 && tok[0] == '-') {
      const bool is_long = tok.rfind("--", 0) == 0;
      if (const char* why =
              is_long ? RefusedTorchrunFlag(tok.substr(2, tok.find('=') - 2)) : nullptr) {
        throw UsageError(tok.substr(0, tok.find('=')) + " is not supported: " + why);
      }
      own->push_back(tok);
      if (tok.find('=') != std::string::npos) continue;
      const auto* opt = desc.find_nothrow(is_long ? tok.substr(2) : tok, false, false, false);
      if (opt && opt->semantic()->max_tokens() > 0 && i + 1 < argv.size()) {
        own->push_back(argv[++i]);
      }
      continue;
    }
    rest->assign(argv.begin() + i, argv.end());
    return;
  }
}

po::variables_map Store(const po::options_description& desc, const std::vector<std::string>& own) {
  po::variables_map vm;
  try {
    const int style =
        po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(own).options(desc).style(style).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  return vm;
}

std::string Flags::GivenName(std::initializer_list<const char*> names) const {
  for (const char* n : names) {
    if (Given(n)) return std::string("--") + n;
  }
  return std::string("--") + *(names.end() - 1);
}

int PositiveInt(const std::string& text) {
  size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(text, &used);
  } catch (const std::exception&) {
    return 0;
  }
  return used == text.size() && n >= 1 ? n : 0;
}

std::chrono::milliseconds Seconds(double s, const char* flag, bool zero_is_never) {
  if (zero_is_never && s == 0) return std::chrono::milliseconds(0);
  if (!std::isfinite(s) || s <= 0 || s > kMaxDurationSeconds) {
    std::ostringstream got;
    got << s;
    throw UsageError(std::string(flag) + " must be a number of seconds in (0, " +
                     std::to_string(static_cast<int64_t>(kMaxDurationSeconds)) + "]" +
                     (zero_is_never ? ", or 0 for never" : "") + " (got " + got.str() + ")");
  }
  // Never rounded down to 0 ms, which means "off" for some flags.
  return std::chrono::milliseconds(std::max<int64_t>(1, std::llround(s * 1000)));
}

std::chrono::milliseconds ShutdownTimeout(double s) {
  return s == 0 ? std::chrono::milliseconds(1) : Seconds(s, "--shutdown-timeout");
}

}  // namespace dlaunch::launcher::cli
