#include "core/run_dir/torch_error_file.h"

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/base/files.h"
#include "core/run_dir/error_file.h"

namespace dlaunch::rundir {

std::optional<TorchError> ReadTorchError(const std::string& path) {
  std::string text;
  if (base::ReadFileBounded(path, kMaxErrorBytes, &text) != base::ReadStatus::kOk) {
    return std::nullopt;
  }
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  TorchError e;
  e.path = path;
  auto message = j.find("message");
  if (message == j.end()) return std::nullopt;
  if (message->is_string()) {
    // Written by a program rather than by @record: a plain message.
    e.message = message->get<std::string>();
    return e;
  }
  if (!message->is_object()) return std::nullopt;
  e.message = message->value("message", std::string());
  auto extra = message->find("extraInfo");
  if (extra != message->end() && extra->is_object()) {
    e.traceback = extra->value("py_callstack", std::string());
    auto ts = extra->find("timestamp");
    if (ts != extra->end()) {
      if (ts->is_number_integer()) e.timestamp = ts->get<int64_t>();
      if (ts->is_string()) e.timestamp = std::atoll(ts->get<std::string>().c_str());
    }
  }
  return e;
}

}  // namespace dlaunch::rundir
