#include "launcher/doctor/nccl_ifname_filter.h"

#include <sstream>

namespace dlaunch::launcher {

NcclIfnameFilter NcclIfnameFilter::Parse(const std::string& spec) {
  NcclIfnameFilter filter;
  std::string rest = spec;
  if (!rest.empty() && rest[0] == '^') {
    filter.exclude_ = true;
    rest.erase(0, 1);
  }
  if (!rest.empty() && rest[0] == '=') {
    filter.exact_ = true;
    rest.erase(0, 1);
  }
  std::istringstream in(rest);
  std::string item;
  while (std::getline(in, item, ',')) {
    // A ":port" suffix narrows the match to a port; the name part is what selects interfaces.
    size_t colon = item.find(':');
    if (colon != std::string::npos) item.resize(colon);
    if (!item.empty()) filter.names_.push_back(item);
  }
  return filter;
}

bool NcclIfnameFilter::Matches(const std::string& interface_name) const {
  bool listed = false;
  for (const std::string& name : names_) {
    if (exact_ ? interface_name == name : interface_name.compare(0, name.size(), name) == 0) {
      listed = true;
      break;
    }
  }
  // An empty list matches everything, as in NCCL.
  if (names_.empty()) return true;
  return exclude_ ? !listed : listed;
}

std::vector<std::string> NcclIfnameFilter::Usable(
    const std::vector<NetInterfaceFacts>& interfaces) const {
  std::vector<std::string> usable;
  for (const NetInterfaceFacts& nic : interfaces) {
    if (nic.ipv4.empty() && nic.ipv6.empty()) continue;
    if (Matches(nic.name)) usable.push_back(nic.name);
  }
  return usable;
}

}  // namespace dlaunch::launcher
