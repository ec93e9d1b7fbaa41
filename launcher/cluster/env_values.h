// Reading one variable of an engine's environment into a Sourced value, with the error texts
// dlaunch has always given for a malformed one. Shared by the engine files; no engine here.
#pragma once

#include <string>

#include "launcher/cluster/cluster_place.h"

namespace dlaunch::launcher::cluster {

// The value of `key`, or nullptr when it is unset or empty (an empty Slurm variable says nothing).
const std::string* Find(const EnvMap& env, const char* key);

// A count (0 or more) from `text`; throws UsageError "<what>='<text>' is not a non-negative
// integer".
int ParseCount(const std::string& text, const std::string& what);

// `key` as a count (ParseCount), or its error. Precondition: Find(env, key).
Sourced<int> CountVar(const EnvMap& env, const char* key);

// `key` as any integer, or "<key>='<text>' is not an integer". Precondition: Find(env, key).
Sourced<int> IntVar(const EnvMap& env, const char* key);

// `share` unless it names no agent of the machine (count < 1, index past the count): alone.
NodeShare Normalized(NodeShare share);

// "host:port", an IPv6 address in brackets (as SplitEndpoint reads it back).
std::string JoinEndpoint(const std::string& host, const std::string& port);

}  // namespace dlaunch::launcher::cluster
