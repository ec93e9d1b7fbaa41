// The Probe step of `dlaunch doctor`: gathers what the machine has into DoctorFacts, judging
// nothing. Tests point it at a folder of fixture files instead of / and switch off the libraries.
#pragma once

#include <string>

#include "launcher/doctor/doctor_facts.h"

namespace dlaunch::launcher {

struct ProbeOptions {
  // Prefix for /proc, /etc, /sys and /dev/shm ("" = the real ones).
  std::string root;
  // Open the NVIDIA libraries (NVML, libcuda, libcudart, libnccl, libcudnn).
  bool load_libraries = true;
  // Ask NVML which processes hold GPU memory (and read their names from /proc).
  bool list_gpu_processes = true;
  // Read the interfaces (getifaddrs), limits (getrlimit) and environment of this process.
  bool read_process_state = true;
  // Run this interpreter on a probe for its torch (a few seconds); "" = do not. `python_source`
  // says where the choice came from (--python, PYTHON_EXEC, PATH).
  std::string python_interpreter;
  std::string python_source;
};

class Probe {
 public:
  explicit Probe(ProbeOptions options = {}) : options_(std::move(options)) {}

  // Blocks for the file reads and, with load_libraries, the library loads (see
  // NvidiaLibraries::Probe: usually well under a second). Never throws for a missing piece: the
  // fact stays empty and, where useful, an *_error field says why.
  DoctorFacts Run() const;

 private:
  std::string Path(const std::string& absolute) const { return options_.root + absolute; }
  void ProbeHost(DoctorFacts* facts) const;
  void ProbeLimits(DoctorFacts* facts) const;
  static void ProbeInterfaces(DoctorFacts* facts);
  static void ProbeEnvironment(DoctorFacts* facts);

  ProbeOptions options_;
};

}  // namespace dlaunch::launcher
