// What the doctor's checks share: building a CheckResult, the driver's CUDA, and the checks that
// live outside verdict.cc (torch_checks.cc: libtorch's and the ranks' Python torch).
#pragma once

#include <string>

#include "launcher/doctor/cuda_compat.h"
#include "launcher/doctor/doctor_facts.h"
#include "launcher/doctor/verdict.h"

namespace dlaunch::launcher {

inline bool HaveDriver(const DoctorFacts& f) { return !f.driver_version.empty(); }

// The newest CUDA this driver runs: what the driver says, else NVIDIA's table.
inline int DriverCuda(const DoctorFacts& f) {
  if (f.cuda_driver_version > 0) return f.cuda_driver_version;
  return NewestCudaForDriver(f.driver_version);
}

inline CheckResult Make(const std::string& id, const std::string& title) {
  CheckResult c;
  c.id = id;
  c.title = title;
  return c;
}
inline void Pass(CheckResult* c, const std::string& detail) {
  c->status = CheckStatus::kPass;
  c->detail = detail;
}
inline void Skip(CheckResult* c, const std::string& detail) {
  c->status = CheckStatus::kSkip;
  c->detail = detail;
}
inline void Warn(CheckResult* c, const std::string& detail, const std::string& fix) {
  c->status = CheckStatus::kWarn;
  c->detail = detail;
  c->fix = fix;
}
inline void Fail(CheckResult* c, const std::string& detail, const std::string& fix, bool fatal) {
  c->status = CheckStatus::kFail;
  c->detail = detail;
  c->fix = fix;
  c->fatal = fatal;
}

// torch_checks.cc
CheckResult CheckTorchCuda(const DoctorFacts& f);        // libtorch of `train`
CheckResult CheckPythonTorch(const DoctorFacts& f);      // the ranks' interpreter imports torch
CheckResult CheckPythonTorchCuda(const DoctorFacts& f);  // its torch's CUDA on this driver

}  // namespace dlaunch::launcher
