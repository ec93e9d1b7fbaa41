// The one error type of dlaunch. Exceptions from gloo, torch and gRPC are caught at the boundary
// and rethrown as Error with context, so callers tell "timed out", "peer gone" and "internal"
// apart without parsing messages.
#pragma once

#include <stdexcept>
#include <string>

namespace dlaunch {

enum class ErrorKind {
  kInvalidArgument,  // bad input from the user: exit code 2
  kTimeout,          // a blocking call ran past its timeout
  kPeerGone,         // the other side (coordinator, rank) is not there any more
  kUnauthenticated,  // wrong or missing job token
  kOutOfMemory,      // an allocation failed
  kInternal,         // anything else
};

const char* ErrorKindName(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Thrown for bad command-line input; the launcher maps it to exit code 2.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(ErrorKind::kInvalidArgument, message) {}
};

}  // namespace dlaunch
