#include "core/error.h"

namespace dlaunch {

const char* ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return "invalid argument";
    case ErrorKind::kTimeout:
      return "timed out";
    case ErrorKind::kPeerGone:
      return "peer gone";
    case ErrorKind::kUnauthenticated:
      return "unauthenticated";
    case ErrorKind::kOutOfMemory:
      return "out of memory";
    case ErrorKind::kInternal:
      return "internal";
  }
  return "internal";
}

}  // namespace dlaunch
