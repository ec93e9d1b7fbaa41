// The torch builds a job will use against this machine: libtorch (the built-in `train`) and the
// torch of the Python the ranks run. One rule for both: the driver must support the CUDA
// runtime the build was made for (a cu121 build needs driver >= 530.30.02, CUDA 12.1's minimum).
#include "launcher/doctor/verdict_rules.h"

namespace dlaunch::launcher {
namespace {

// Judges a build for CUDA `cuda` ("12.1", "" for CPU-only, "?" unknown) named `what`.
// `cpu_fix` and `build_fix` say what to install instead; `fatal` marks a failure that stops
// `train` and `preflight`.
void JudgeCudaBuild(const DoctorFacts& f, const std::string& what, const std::string& cuda,
                    const std::string& cpu_fix, const std::string& build_fix, bool fatal,
                    CheckResult* c) {
  if (cuda.empty()) {
    if (!f.gpus.empty()) {
      Warn(c,
           what + " is a CPU-only build: it cannot use the " + std::to_string(f.gpus.size()) +
               " GPU(s) here",
           cpu_fix + " for CUDA " + FormatCudaVersion(DriverCuda(f)) + " or older");
    } else {
      Pass(c, what + " is a CPU-only build; nothing to match");
    }
    return;
  }
  const int build_cuda = ParseCudaVersion(cuda);
  if (!HaveDriver(f)) {
    Skip(c, what + " built for CUDA " + cuda + "; no NVIDIA driver to compare with");
    return;
  }
  if (build_cuda == 0) {
    Warn(c, what + " was built with CUDA of unknown version; cannot compare with the driver",
         build_fix);
    return;
  }
  const std::string minimum = MinimumDriverForCuda(build_cuda);
  const int driver_cuda = DriverCuda(f);
  const bool too_new = (f.cuda_driver_version > 0 && build_cuda > f.cuda_driver_version) ||
                       (!minimum.empty() && CompareDriverVersions(f.driver_version, minimum) < 0);
  if (too_new) {
    Fail(c,
         what + " is built for CUDA " + cuda + ", newer than driver " + f.driver_version +
             " supports (CUDA " + FormatCudaVersion(driver_cuda) + ")" +
             (minimum.empty() ? "" : "; CUDA " + cuda + " needs driver >= " + minimum),
         "upgrade the NVIDIA driver to " + (minimum.empty() ? "a newer branch" : ">= " + minimum) +
             ", or " + cpu_fix + " for CUDA <= " + FormatCudaVersion(driver_cuda),
         fatal);
    return;
  }
  Pass(c, what + " for CUDA " + cuda + " on driver " + f.driver_version + " (CUDA " +
              FormatCudaVersion(driver_cuda) + ")");
}

std::string PythonName(const PythonFacts& p) {
  return (p.executable.empty() ? p.interpreter : p.executable) +
         (p.version.empty() ? "" : " (Python " + p.version + ")");
}

}  // namespace

CheckResult CheckTorchCuda(const DoctorFacts& f) {
  CheckResult c = Make("torch_cuda_driver", "libtorch's CUDA supported by the driver");
  if (!f.torch_built_in) {
    Skip(&c, "dlaunch was built without libtorch (no `train`)");
    return c;
  }
  JudgeCudaBuild(f, "libtorch " + (f.torch_version.empty() ? "?" : f.torch_version), f.torch_cuda,
                 "rebuild dlaunch against a CUDA build of libtorch (cmake "
                 "-DCMAKE_PREFIX_PATH=<libtorch>)",
                 "configure dlaunch against a libtorch archive or wheel (they record their CUDA "
                 "version)",
                 /*fatal=*/true, &c);
  return c;
}

CheckResult CheckPythonTorch(const DoctorFacts& f) {
  CheckResult c = Make("python_torch", "the ranks' Python imports torch");
  const PythonFacts& p = f.python;
  if (p.interpreter.empty()) {
    Skip(&c, "not probed");
    return c;
  }
  const std::string fix =
      "pass --python PATH (or set PYTHON_EXEC) to an interpreter with torch, or install torch "
      "for this one (Debian: apt-get install python3-torch)";
  if (!p.runs) {
    Warn(&c, p.interpreter + " (from " + p.source + ") does not run: " + p.error, fix);
    return c;
  }
  if (!p.torch) {
    Warn(&c, PythonName(p) + " (from " + p.source + ") cannot import torch: " + p.error, fix);
    return c;
  }
  std::string detail = PythonName(p) + " from " + p.source + ": torch " + p.torch_version + ", " +
                       (p.torch_cuda.empty() ? "CPU-only" : "CUDA " + p.torch_cuda);
  if (p.nccl_version > 0) detail += ", NCCL " + FormatNcclVersion(p.nccl_version);
  if (p.cudnn_version > 0) detail += ", cuDNN " + FormatCudnnVersion(p.cudnn_version);
  if (p.cuda_available) detail += ", " + std::to_string(p.cuda_devices) + " GPU(s) visible";
  detail += std::string("; backends:") + (p.gloo ? " gloo" : "") + (p.nccl ? " nccl" : "");
  if (!p.distributed) {
    Warn(&c, detail + "; torch.distributed is not available in this build",
         "install a torch build with distributed support");
    return c;
  }
  Pass(&c, detail);
  return c;
}

CheckResult CheckPythonTorchCuda(const DoctorFacts& f) {
  CheckResult c = Make("python_torch_cuda_driver", "the ranks' torch CUDA supported by the driver");
  const PythonFacts& p = f.python;
  if (!p.torch) {
    Skip(&c, "no torch in the ranks' Python");
    return c;
  }
  JudgeCudaBuild(f, "torch " + p.torch_version + " of " + PythonName(p), p.torch_cuda,
                 "install a CUDA build of torch (e.g. pip install torch --index-url "
                 "https://download.pytorch.org/whl/cuXYZ)",
                 "install an official torch build (it records its CUDA version)",
                 /*fatal=*/false, &c);
  return c;
}

}  // namespace dlaunch::launcher
