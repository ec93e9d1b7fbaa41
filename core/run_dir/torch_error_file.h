// rank<R>/torch_error.json: TORCHELASTIC_ERROR_FILE, where torch's @record (or any program that
// follows torchelastic's contract) writes why the rank failed. torch's format, read only:
// {"message": {"message": "ValueError: ...", "extraInfo": {"py_callstack": "...", "timestamp":
// "1700000000"}}}, or {"message": "text"} from a program that writes its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dlaunch::rundir {

struct TorchError {
  std::string path;
  std::string message;    // "ValueError: boom"
  std::string traceback;  // Python's traceback text, possibly several lines
  int64_t timestamp = 0;  // seconds since the epoch, 0 when absent
};

// The file at `path`, read within kMaxErrorBytes (never a FIFO that would hold the reader);
// nullopt when absent or not in torch's format. Never throws.
std::optional<TorchError> ReadTorchError(const std::string& path);

}  // namespace dlaunch::rundir
