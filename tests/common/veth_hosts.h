// Two hosts on this machine for multi-node process tests: network namespaces joined by a veth
// pair, each launcher run inside one with a host name of its own (a UTS namespace).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace dlaunch::testing {

inline bool Shell(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
}

// Namespaces <tag>a and <tag>b with 10.231.<subnet>.1 and .2, removed on destruction. `wired`
// says whether it all came up (root and iproute2 are needed).
struct VethHosts {
  std::vector<std::string> ns;
  bool wired = false;
  int subnet;

  VethHosts(const std::string& prefix, int subnet_octet) : subnet(subnet_octet) {
    const std::string tag = prefix + std::to_string(::getpid() % 100000);
    for (const char* side : {"a", "b"}) {
      if (!Shell("ip netns add " + tag + side)) return;
      ns.push_back(tag + side);
    }
    wired = Shell("command -v unshare") &&
            Shell("ip link add " + ns[0] + "v type veth peer name " + ns[1] + "v");
    for (size_t i = 0; i < ns.size() && wired; ++i) {
      const std::string dev = ns[i] + "v", in = "ip -n " + ns[i] + " ";
      wired = Shell("ip link set " + dev + " netns " + ns[i]) &&
              Shell(in + "addr add " + Address(i) + "/24 dev " + dev) &&
              Shell(in + "link set " + dev + " up") && Shell(in + "link set lo up");
    }
  }
  ~VethHosts() {
    for (const std::string& n : ns) Shell("ip netns del " + n);
  }
  std::string Address(size_t i) const {
    return "10.231." + std::to_string(subnet) + "." + std::to_string(i + 1);
  }
  // What runs a command as host `i`, named `hostname`, with gloo bound to its veth.
  std::vector<std::string> Prefix(size_t i, const std::string& hostname) const {
    return {"/usr/sbin/ip",
            "netns",
            "exec",
            ns[i],
            "unshare",
            "--uts",
            "/bin/sh",
            "-c",
            "hostname " + hostname + " && exec env GLOO_SOCKET_IFNAME=" + ns[i] + "v \"$@\"",
            "sh"};
  }
};

}  // namespace dlaunch::testing
