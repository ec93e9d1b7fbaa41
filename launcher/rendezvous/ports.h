// TCP ports on this machine: whether one is free, and one that is.
#pragma once

#include <string>

namespace dlaunch::launcher {

// True when nothing listens on host:port (TCP) right now.
bool PortIsFree(const std::string& host, int port);
// A TCP port nothing listens on at the moment of the call. Throws Error(kInternal) when the
// kernel gives none.
int PickFreePort(const std::string& host);
// True when `host` (a name or an address) names this machine: one of its addresses can be bound.
bool IsLocalAddress(const std::string& host);

}  // namespace dlaunch::launcher
