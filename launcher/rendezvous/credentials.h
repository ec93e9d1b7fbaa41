// Who may speak to the coordinator as what. Every rank's environment holds the token it connects
// with, so the launchers do not hand the ranks the job token: each rank gets a rank token of its
// own, derived from the job token and its rank, which admits the rank calls for that rank only
// (another rank's Register, Heartbeat or ReportEvent is refused); and each node agent gets a
// credential of its own at its first RegisterNode, which only it holds (in memory: never in an
// environment or a file).
#pragma once

#include <optional>
#include <string>

namespace dlaunch::launcher {

// What a token admits.
enum class CallerRole {
  kNone,  // nothing: a wrong or missing token
  kRank,  // the rank calls, as the rank the token names: Register, the store, Heartbeat,
          // ReportEvent
  kNode,  // everything: a launcher holding the job token
};

// Who presented a token: its role, and for a rank token the rank it speaks for.
struct Caller {
  CallerRole role = CallerRole::kNone;
  int rank = -1;
};

// The rank token of rank `rank` (>= 0) in the job of `job_token`: "R.HEX", the rank, a dot and
// HMAC-SHA256(job_token, "dlaunch rank token R") as 32 hex digits. Anyone with the job token can
// derive every rank's; nobody with one can derive another rank's or the job token. Does not
// block; throws Error(kInternal) when the HMAC fails.
std::string RankToken(const std::string& job_token, int rank);

// The rank `token` speaks for when it is a rank token of `job_token`, else nullopt. Does not block.
std::optional<int> RankOfToken(const std::string& job_token, const std::string& token);

// A fresh random node credential: 32 hex digits from std::random_device. Does not block.
std::string NewNodeCredential();

// Compares two secrets in time that does not depend on where they differ. Does not block.
bool SameSecret(const std::string& a, const std::string& b);

}  // namespace dlaunch::launcher
