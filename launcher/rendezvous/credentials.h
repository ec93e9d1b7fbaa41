// Who may speak to the coordinator as what. Every rank's environment holds the token it connects
// with, so the launchers do not hand the ranks the job token: a rank gets a rank token derived
// from it, which admits the rank calls only, and each node agent gets a credential of its own at
// its first RegisterNode, which only it holds (in memory: never in an environment or a file).
#pragma once

#include <string>

namespace dlaunch::launcher {

// What a token admits.
enum class CallerRole {
  kNone,  // nothing: a wrong or missing token
  kRank,  // the rank calls: Register, the store, Heartbeat, ReportEvent
  kNode,  // everything: a launcher holding the job token
};

// The rank token of `job_token`: HMAC-SHA256(job_token, "dlaunch rank token"), 32 hex digits.
// Anyone with the job token can derive it; nobody with it can derive the job token. Does not
// block; throws Error(kInternal) when the HMAC fails.
std::string RankToken(const std::string& job_token);

// A fresh random node credential: 32 hex digits from std::random_device. Does not block.
std::string NewNodeCredential();

// Compares two secrets in time that does not depend on where they differ. Does not block.
bool SameSecret(const std::string& a, const std::string& b);

}  // namespace dlaunch::launcher
