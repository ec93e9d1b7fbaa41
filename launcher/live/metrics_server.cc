#include "launcher/live/metrics_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>

#include "core/base/clock.h"
#include "core/base/files.h"
#include "core/error.h"
#include "core/run_dir/paths.h"
#include "launcher/live/live_status.h"
#include "launcher/live/metrics_text.h"
#include "launcher/report/report_data.h"
#include "launcher/report/report_page.h"
#include "launcher/report/svg_chart.h"

namespace dlaunch::launcher {
namespace {

// A request must arrive, and its answer leave, within this: a client that sends nothing, or
// reads nothing, is dropped then.
constexpr time_t kIoTimeoutS = 2;
// Threads serving connections: each idle client holds one until the timeout.
constexpr size_t kThreads = 4;
// The live page is redrawn from the run directory at most this often, and reloads itself every
// kPageRefreshS: a page open in many browsers reads the run directory once per kPageEveryMs.
// A run directory that takes long to read (1,024 ranks: ~3.6 s) is read at most a tenth of the
// time: the page is kept for kPageCostFactor times its last drawing.
constexpr int64_t kPageEveryMs = 2000;
constexpr int64_t kPageCostFactor = 10;
constexpr int kPageRefreshS = 5;
// trace.json larger than this is left to be opened from the run directory.
constexpr size_t kMaxTraceBytes = 256 << 20;

}  // namespace

MetricsServer::MetricsServer(const LiveStatus* live, const std::string& addr, int port,
                             const std::string& run_dir)
    : run_dir_(run_dir), server_(std::make_unique<httplib::Server>()) {
  httplib::Server& s = *server_;
  // httplib's default adds SO_REUSEPORT, which would let a second job share a port in use.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // A response goes out in two writes (headers, body): with Nagle on, a kept-alive scraper's
  // delayed ACK held the body back 40 ms per scrape.
  s.set_tcp_nodelay(true);
  s.set_read_timeout(kIoTimeoutS, 0);
  s.set_write_timeout(kIoTimeoutS, 0);
  s.set_keep_alive_timeout(kIoTimeoutS);
  s.set_keep_alive_max_count(100);
  s.set_payload_max_length(64 << 10);
  s.new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
  s.Get("/metrics", [live](const httplib::Request&, httplib::Response& res) {
    res.set_content(live->Metrics(), kMetricsContentType);
  });
  s.Get("/healthz", [live](const httplib::Request&, httplib::Response& res) {
    const bool healthy = live->Healthy();
    res.status = healthy ? 200 : 503;
    res.set_content(healthy ? "ok\n" : "unhealthy: a hang or failure was judged\n", "text/plain");
  });
  if (!run_dir_.empty()) {
    s.Get("/", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(Page(), "text/html; charset=utf-8");
    });
    s.Get("/trace.json", [this](const httplib::Request&, httplib::Response& res) {
      std::string trace;
      const base::ReadStatus read =
          base::ReadFileBounded(rundir::RunDir(run_dir_).trace(), kMaxTraceBytes, &trace);
      if (read == base::ReadStatus::kOk) {
        res.set_content(trace, "application/json");
      } else {
        res.status = 404;
        res.set_content("trace.json: " + base::DescribeReadStatus(read, kMaxTraceBytes) +
                            " (dlaunch writes it when an attempt ends)\n",
                        "text/plain");
      }
    });
  }
  if (port == 0) {
    port_ = s.bind_to_any_port(addr);
  } else if (s.bind_to_port(addr, port)) {
    port_ = port;
  }
  if (port_ <= 0) {
    throw Error(ErrorKind::kInvalidArgument,
                "--metrics-port " + std::to_string(port) + ": cannot listen on " + addr + ":" +
                    std::to_string(port) + " (the port is in use, or the address is not local)");
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // stop() ends a server that runs; one whose thread has not started yet it would miss. httplib
  // 0.11 has no ready notice, so look for it (it comes within microseconds).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!s.is_running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::string MetricsServer::Page() {
  std::lock_guard<std::mutex> lock(page_mu_);
  const int64_t now = base::UnixMillis();
  if (page_.empty() || now - page_unix_ms_ >= std::max(kPageEveryMs, kPageCostFactor * page_ms_)) {
    try {
      page_ = report::RenderReportPage(report::LoadReportSnapshot(run_dir_),
                                       report::PageOptions{kPageRefreshS});
    } catch (const std::exception& e) {
      // The run directory went (the job ended, and someone removed it): say so, not a crash.
      page_ = "<!DOCTYPE html><html><body><p>dlaunch: cannot read the run directory: " +
              report::Escape(e.what()) + "</p></body></html>\n";
    }
    page_unix_ms_ = base::UnixMillis();
    page_ms_ = page_unix_ms_ - now;
  }
  return page_;
}

MetricsServer::~MetricsServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace dlaunch::launcher
