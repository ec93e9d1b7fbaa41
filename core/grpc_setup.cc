#include "core/grpc_setup.h"

#include <grpc/support/log.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace dlaunch::core {
namespace {

void ToDlaunchLog(gpr_log_func_args* args) {
  std::string line = args->message ? args->message : "";
  for (char& c : line)
    if (c == '\n') c = ' ';
  const char* file = args->file ? args->file : "";
  if (const char* slash = std::strrchr(file, '/')) file = slash + 1;
  std::fprintf(stderr, "dlaunch: grpc: %s (%s:%d)\n", line.c_str(), file, args->line);
}

void Drop(gpr_log_func_args*) {}

}  // namespace

void UseSystemResolver() { ::setenv("GRPC_DNS_RESOLVER", "native", /*overwrite=*/0); }

void RouteGrpcLog() {
  const bool asked = std::getenv("GRPC_VERBOSITY") || std::getenv("GRPC_TRACE");
  gpr_set_log_function(asked ? ToDlaunchLog : Drop);
}

}  // namespace dlaunch::core
