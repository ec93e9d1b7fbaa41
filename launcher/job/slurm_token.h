// The job token of a multi-node Slurm step when none is given: every task of one step derives the
// same token, and only the user (and root) can. The tasks share nothing secret from Slurm itself
// (SLURM_JOB_ID is public), so the key is a random secret in the user's home directory, which the
// nodes of a cluster share: HMAC-SHA256(secret, "<job>.<step>.<restart count>"). Ranks get the
// step's token only, never the secret, and a token tells nothing of another step's.
#pragma once

#include <map>
#include <string>

namespace dlaunch::launcher {

// $HOME/.dlaunch/job-secret; "" without HOME.
std::string DefaultJobSecretPath();

// The token of the Slurm step that `env` describes (SLURM_JOB_ID, SLURM_STEP_ID, and
// SLURM_RESTART_COUNT of a requeued job), keyed by the secret at `secret_path`. The secret is
// created on first use (64 random hex digits, mode 0600, its folder 0700; a race between nodes
// creating it at once keeps the first). Throws UsageError when the variables are missing or the
// secret is not private to this user: owned by someone else, a symbolic link, readable or
// writable by the group or others, or in a folder others can write.
std::string SlurmStepToken(const std::map<std::string, std::string>& env,
                           const std::string& secret_path);

}  // namespace dlaunch::launcher
