// Node 0's HTTP endpoints (--metrics-port): /metrics, the live view in Prometheus' text format;
// /healthz, 200 while the job is healthy and 503 once a hang or failure is judged; and `/`, the
// report page of the live run directory (dlaunch report's), redrawn at most every 2 s (or 10
// times as long as its last drawing took) and reloading itself every 5 s, with /trace.json for
// its trace link. Served by
// cpp-httplib on threads of its own from LiveStatus' latest texts, so a scrape never waits for
// the job nor the job for a scrape; a client that connects and sends nothing holds one of the
// pool's threads until the read timeout, never the others.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
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
  // throws Error(kInvalidArgument) naming it. `live` outlives the server. `run_dir` is the page's
  // (none: `/` answers 404). Does not block.
  MetricsServer(const LiveStatus* live, const std::string& addr, int port,
                const std::string& run_dir = "");
  // Stops serving; blocks until the pool's requests end (at most the read/write timeouts).
  ~MetricsServer();

  int port() const { return port_; }

 private:
  // The page as last drawn, and when: requests within kPageEveryMs share it.
  std::string Page();

  const std::string run_dir_;
  std::mutex page_mu_;
  std::string page_;
  int64_t page_unix_ms_ = 0;
  int64_t page_ms_ = 0;  // how long the last drawing took
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace dlaunch::launcher
