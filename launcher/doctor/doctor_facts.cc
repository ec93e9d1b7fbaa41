#include "launcher/doctor/doctor_facts.h"

#include <cstdio>

namespace dlaunch::launcher {

std::string FormatCudaVersion(int version) {
  if (version <= 0) return "";
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

std::string FormatNcclVersion(int code) {
  if (code <= 0) return "";
  // NCCL changed its version code at 2.9 from major*1000 + minor*100 + patch to
  // major*10000 + minor*100 + patch (nccl.h's NCCL_VERSION macro).
  int major, minor, patch;
  if (code >= 20900) {
    major = code / 10000;
    minor = (code % 10000) / 100;
    patch = code % 100;
  } else {
    major = code / 1000;
    minor = (code % 1000) / 100;
    patch = code % 100;
  }
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string FormatCudnnVersion(int version) {
  if (version <= 0) return "";
  // cuDNN 9 encodes major*10000 + minor*100 + patch; cuDNN 8 and older major*1000 + minor*100.
  int major, minor, patch;
  if (version >= 90000) {
    major = version / 10000;
    minor = (version % 10000) / 100;
    patch = version % 100;
  } else {
    major = version / 1000;
    minor = (version % 1000) / 100;
    patch = version % 100;
  }
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

int ParseCudaVersion(const std::string& text) {
  int major = 0, minor = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%d.%d%c", &major, &minor, &tail) < 2) return 0;
  if (major <= 0 || minor < 0 || minor > 9) return 0;
  return major * 1000 + minor * 10;
}

}  // namespace dlaunch::launcher
