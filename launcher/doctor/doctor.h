// `dlaunch doctor`: driver, CUDA, NCCL and libtorch compatibility check, plus the quick checks the
// launcher runs before `train` and `preflight` and the per-node fingerprints it compares.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "launcher/doctor/doctor_facts.h"
#include "launcher/doctor/verdict.h"

namespace dlaunch::launcher {

// `dlaunch doctor [--json]` with the arguments after "doctor" (a leading "doctor" is ignored).
// Prints the table (or the JSON document) on stdout. Returns 0 when no check failed, 1 when one
// did, 2 on bad arguments (message on stderr). Blocks for the probe: usually under a second.
int RunDoctorCommand(const std::vector<std::string>& args);
int RunDoctorCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// The failed fatal checks of this machine, each "<what>: <detail>. Fix: <fix>"; empty when fine.
// For `train` and `preflight` before they start (--skip-doctor skips the call). Blocks like
// RunDoctorCommand minus the GPU process listing.
std::vector<std::string> DoctorFatalProblems();
// The same, pure, over checks already judged.
std::vector<std::string> FatalProblems(const std::vector<CheckResult>& checks);

// This node's versions as a one-line JSON object (host, driver, CUDA, NCCL, cuDNN, libtorch, GPU
// models), for the launcher to collect from every node. Blocks like DoctorFatalProblems.
std::string DoctorFingerprintJson();
nlohmann::json Fingerprint(const DoctorFacts& facts);

// Pure: given each node's fingerprint (index = node rank), one message per version that differs
// between nodes, naming which nodes have which value; empty when all agree. An empty fingerprint
// (a node built without doctor) is left out; one that is not a JSON object gets a message.
std::vector<std::string> CompareFingerprints(const std::vector<std::string>& per_node_json);

}  // namespace dlaunch::launcher
