// Node 0's HTTP endpoints (--metrics-port): /metrics, the live view in Prometheus' text format,
// and /healthz, 200 while the job is healthy and 503 once a hang or failure is judged. Served by
// cpp-httplib on threads of its own from LiveStatus' latest texts, so a scrape never waits for
// the job nor the job for a scrape; a client that connects and sends nothing holds one of the
// pool's threads until the read timeout, never the others.
#pragma once

#include <memory>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace dlaunch::launcher {

class LiveStatus;

class MetricsServer {
 public:
  // Binds `addr`:`port` (0: a free port) now, so a port in use fails before any rank starts:
  // throws Error(kInvalidArgument) naming it. `live` outlives the server. Does not block.
  MetricsServer(const LiveStatus* live, const std::string& addr, int port);
  // Stops serving; blocks until the pool's requests end (at most the read/write timeouts).
  ~MetricsServer();

  int port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace dlaunch::launcher
