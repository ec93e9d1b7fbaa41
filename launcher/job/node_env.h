// What a node's setup needs beyond the resolved launch (launch_config.h): the process
// environment, and the token, endpoint and addresses that only files, MPI or the network settle.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "launcher/cli/options.h"
#include "launcher/job/job_plan.h"
#include "launcher/job/launch_config.h"

namespace dlaunch::launcher {

// What of `config` only I/O settles, for this node: the token (read from --token-file, which must
// be readable on one node too, from DLAUNCH_JOB_TOKEN in `env`, or derived from the user's Slurm
// secret), node 0's address agreed over MPI (blocking until every launcher has called it) and
// checked against --master-port, the endpoint's host resolved (one lookup, blocking), and on one
// node the endpoint's port checked free and its host taken as MASTER_ADDR when it names this
// machine. Throws UsageError for what is missing or wrong.
NodeSetup ResolveNodeSetup(const LaunchConfig& config,
                           const std::map<std::string, std::string>& env);

// "20261201-103000-ab12": the local time and two random bytes.
std::string NewRunId();

}  // namespace dlaunch::launcher
