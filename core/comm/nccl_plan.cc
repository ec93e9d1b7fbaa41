#include "core/comm/nccl_plan.h"

namespace dlaunch::core {

std::string NcclVersionText(int code) {
  // Codes below 2.9 carry the minor version in hundreds, later ones in hundreds of tens.
  const bool old = code < 10000;
  const int major = old ? code / 1000 : code / 10000;
  const int minor = old ? code % 1000 / 100 : code % 10000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

const char* RegistrationName(BufferRegistration reg) {
  switch (reg) {
    case BufferRegistration::kNone:
      return "none";
    case BufferRegistration::kLocal:
      return "local";
    case BufferRegistration::kSymmetric:
      return "symmetric";
  }
  return "unknown";
}

std::string RegistrationRefusal(BufferRegistration reg, int header_version, int runtime_version) {
  if (reg == BufferRegistration::kNone) return "";
  const bool symmetric = reg == BufferRegistration::kSymmetric;
  const int needed = symmetric ? NcclVersionCode(2, 27, 0) : NcclVersionCode(2, 19, 0);
  const std::string what = symmetric ? "symmetric registration (ncclCommWindowRegister)"
                                     : "buffer registration (ncclCommRegister)";
  if (header_version < needed) {
    return what + " needs NCCL " + NcclVersionText(needed) + " or later; dlaunch was built with " +
           NcclVersionText(header_version);
  }
  if (runtime_version < needed) {
    return what + " needs NCCL " + NcclVersionText(needed) + " or later; the NCCL loaded is " +
           NcclVersionText(runtime_version);
  }
  return "";
}

std::vector<size_t> BlockOffsets(const std::vector<size_t>& counts, size_t elt_size) {
  std::vector<size_t> offsets;
  offsets.reserve(counts.size());
  size_t at = 0;
  for (size_t c : counts) {
    offsets.push_back(at);
    at += c * elt_size;
  }
  return offsets;
}

}  // namespace dlaunch::core
