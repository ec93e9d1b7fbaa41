// NCCL_SOCKET_IFNAME as NCCL reads it: a comma-separated list of interface-name prefixes, each
// optionally followed by ":port"; a leading '^' excludes the listed interfaces instead, and a '='
// after it (or at the start) makes the names exact instead of prefixes ("^=docker0").
#pragma once

#include <string>
#include <vector>

#include "launcher/doctor/doctor_facts.h"

namespace dlaunch::launcher {

class NcclIfnameFilter {
 public:
  static NcclIfnameFilter Parse(const std::string& spec);

  // Whether NCCL would consider an interface of this name. Pure; does not block.
  bool Matches(const std::string& interface_name) const;

  // The interfaces NCCL could use under this filter: names that match and carry an IPv4 or
  // non-link-local IPv6 address (NCCL skips interfaces without one).
  std::vector<std::string> Usable(const std::vector<NetInterfaceFacts>& interfaces) const;

  bool exclude() const { return exclude_; }
  bool exact() const { return exact_; }
  const std::vector<std::string>& names() const { return names_; }

 private:
  bool exclude_ = false;
  bool exact_ = false;
  std::vector<std::string> names_;
};

}  // namespace dlaunch::launcher
