// The Python the ranks will run, as doctor sees it: the interpreter's version and its torch
// (version, CUDA and NCCL it was built with, cuDNN, GPUs it sees). Learned by running the
// interpreter on a short probe script, so nothing of Python or torch is linked.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dlaunch::launcher {

struct CapturedRun {
  bool started = false;  // the program could be executed
  bool timed_out = false;
  int exit_code = -1;  // -1 when killed or not started
  std::string out;     // stdout and stderr together, at most 1 MiB
};

// Runs argv (no shell; argv[0] looked up in PATH) with stdin from /dev/null and waits at most
// `timeout`, killing it then. Blocks for the run. Never throws.
CapturedRun RunCaptured(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

struct PythonFacts {
  std::string interpreter;  // as given
  std::string source;       // where it came from: --python, PYTHON_EXEC, PATH
  bool runs = false;        // the interpreter started and answered
  std::string error;        // why not, or why torch did not import
  std::string executable;   // sys.executable
  std::string version;      // "3.11.2"
  bool torch = false;       // torch imports
  std::string torch_version;
  std::string torch_cuda;  // torch.version.cuda; "" for a CPU-only build
  int nccl_version = 0;    // torch.cuda.nccl.version() as NCCL_VERSION_CODE; 0 when none
  int cudnn_version = 0;   // torch.backends.cudnn.version(); 0 when none
  bool cuda_available = false;
  int cuda_devices = 0;
  bool distributed = false;  // torch.distributed.is_available()
  bool gloo = false;
  bool nccl = false;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PythonFacts, interpreter, source, runs, error,
                                                executable, version, torch, torch_version,
                                                torch_cuda, nccl_version, cudnn_version,
                                                cuda_available, cuda_devices, distributed, gloo,
                                                nccl)

// Runs `interpreter` on the probe (imports torch: a few seconds). Blocks for at most `timeout`.
PythonFacts ProbePython(const std::string& interpreter, const std::string& source,
                        std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Whether `interpreter` can find `module` (importlib.util.find_spec, no import): fast. Returns
// false when the interpreter does not run either.
bool PythonHasModule(const std::string& interpreter, const std::string& module);

}  // namespace dlaunch::launcher
