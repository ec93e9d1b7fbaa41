#include "launcher/rendezvous/ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "launcher/supervision/unique_fd.h"

namespace dlaunch::launcher {
namespace {

sockaddr_in Address(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) addr.sin_addr.s_addr = INADDR_ANY;
  return addr;
}

}  // namespace

bool PortIsFree(const std::string& host, int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr = Address(host, port);
  return ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

int PickFreePort(const std::string& host) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr = Address(host, 0);
  socklen_t len = sizeof(addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw Error(ErrorKind::kInternal,
                std::string("cannot find a free port: ") + std::strerror(errno));
  }
  return ntohs(addr.sin_port);
}

}  // namespace dlaunch::launcher
