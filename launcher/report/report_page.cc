#include "launcher/report/report_page.h"

#include <openssl/evp.h>

#include "core/base/format.h"
#include "launcher/report/plots.h"
#include "launcher/report/svg_chart.h"

namespace dlaunch::launcher::report {
namespace {

constexpr char kStyle[] = R"css(
body { font-family: sans-serif; margin: 24px auto; max-width: 1000px; color: #222; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 16px; margin: 0 0 6px 0; }
.part { border-top: 1px solid #ddd; padding: 12px 0; }
.verdict { display: inline-block; padding: 2px 10px; border-radius: 4px; color: #fff;
           font-weight: bold; margin-right: 8px; }
.v-OK { background: #2ca02c; } .v-RUNNING { background: #1f77b4; }
.v-FAILED, .v-HANG, .v-MISMATCH { background: #d62728; } .v-INCOMPLETE { background: #7f7f7f; }
.headline { font-size: 15px; }
table.facts { border-collapse: collapse; margin: 8px 0; }
table.facts td { padding: 2px 14px 2px 0; }
table.facts td:first-child { color: #666; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; font-size: 12px; }
.caption, .missing-note { color: #555; font-size: 12px; }
.missing-note { font-style: italic; }
.problems li { color: #8a4b00; font-size: 13px; }
svg.plot { max-width: 100%; height: auto; }
)css";

// Stamps the time the page took to load, for the browser test and the benchmark.
constexpr char kScript[] =
    "addEventListener('load', function () {"
    " document.documentElement.setAttribute('data-rendered-ms',"
    " String(Math.round(performance.now()))); });";

// The CSP source that lets exactly kScript run: an injected script, had one slipped past the
// escaping, would not.
std::string ScriptHash() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(kScript, sizeof(kScript) - 1, digest, &length, EVP_sha256(), nullptr);
  unsigned char base64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
  const int n = EVP_EncodeBlock(base64, digest, static_cast<int>(length));
  return "'sha256-" + std::string(reinterpret_cast<char*>(base64), n) + "'";
}

std::string Row(const std::string& name, const std::string& value) {
  return "<tr><td>" + Escape(name) + "</td><td>" + Escape(value) + "</td></tr>";
}

std::string Top(const ReportSnapshot& run) {
  std::string out = "<header class=\"part\" id=\"top\"><h1>dlaunch run " + Escape(run.run_id) +
                    "</h1>\n<p><span class=\"verdict v-" + Escape(run.verdict) + "\">" +
                    Escape(run.verdict) + "</span><span class=\"headline\">" +
                    Escape(run.headline.empty() ? "No diagnosis headline." : run.headline) +
                    "</span></p>\n<table class=\"facts\">";
  out += Row("ranks", std::to_string(run.world_size));
  out += Row("nodes", std::to_string(run.nodes));
  out += Row("attempts", std::to_string(std::max<size_t>(run.attempts.size(), 1)));
  const double seconds = run.start_unix_ms > 0 && run.end_unix_ms >= run.start_unix_ms
                             ? (run.end_unix_ms - run.start_unix_ms) / 1000.0
                             : -1;
  out += Row("duration", seconds >= 0 ? FormatNumber(seconds) + " s" : "unknown");
  out += Row("started", base::FormatUnixMs(run.start_unix_ms));
  out += Row("exit", run.live ? "still running (as of " + base::FormatUnixMs(run.end_unix_ms) + ")"
                     : run.exit_code ? std::to_string(*run.exit_code)
                                     : "unknown (no exit code in summary.json)");
  std::string statuses;
  for (const auto& [name, n] : run.status_counts) {
    statuses += (statuses.empty() ? "" : ", ") + std::to_string(n) + " " + name;
  }
  if (!statuses.empty()) out += Row("rank status", statuses);
  if (run.preflight_verdict) out += Row("pre-flight", *run.preflight_verdict);
  out += Row("run directory", run.run_dir);
  out += "</table>\n";
  if (!run.details.empty()) {
    std::string details;
    for (const std::string& d : run.details) details += d + "\n";
    out += "<details open><summary>Diagnosis details</summary><pre class=\"details\">" +
           Escape(details) + "</pre></details>\n";
  }
  for (const auto& [rank, tail] : run.failed_tails) {
    if (tail.empty()) continue;
    std::string text;
    for (const std::string& l : tail) text += l + "\n";
    out += "<details><summary>rank " + std::to_string(rank) +
           ": last lines of stderr.log</summary><pre class=\"rank-output\">" + Escape(text) +
           "</pre></details>\n";
  }
  if (!run.preflight_reasons.empty()) {
    out += "<p>Pre-flight reasons:</p><ul>";
    for (const std::string& r : run.preflight_reasons) out += "<li>" + Escape(r) + "</li>";
    out += "</ul>\n";
  }
  if (!run.problems.empty()) {
    out += "<div class=\"problems\"><p>What is missing or unreadable:</p><ul>";
    constexpr size_t kMaxProblems = 50;
    for (size_t i = 0; i < run.problems.size() && i < kMaxProblems; ++i) {
      out += "<li>" + Escape(run.problems[i]) + "</li>";
    }
    if (run.problems.size() > kMaxProblems) {
      out += "<li>and " + std::to_string(run.problems.size() - kMaxProblems) + " more</li>";
    }
    out += "</ul></div>\n";
  }
  out += "</header>\n";
  return out;
}

}  // namespace

std::string RenderReportPage(const ReportSnapshot& run, const PageOptions& options) {
  const std::string refresh =
      options.refresh_s > 0
          ? "<meta http-equiv=\"refresh\" content=\"" + std::to_string(options.refresh_s) + "\">\n"
          : "";
  std::string page =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n" + refresh +
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; script-src " +
      ScriptHash() + "; img-src data:\">\n<title>dlaunch report: " + Escape(run.run_id) +
      "</title>\n<style>" + kStyle + "</style>\n<script>" + kScript + "</script>\n</head><body>\n";
  page += Top(run);
  page += MemoryPlot(run);
  page += PhaseMemoryPlot(run);
  page += StepTimePlot(run);
  page += CommSharePlot(run);
  page += BusbwPlot(run);
  if (run.p2p) page += HeatmapPlot(*run.p2p, "p2p");
  if (run.node_matrix) page += HeatmapPlot(*run.node_matrix, "node-matrix");
  if (!run.p2p && run.preflight_verdict) {
    page +=
        "<section class=\"part missing\" id=\"p2p\"><h2>Pre-flight: p2p links</h2><p "
        "class=\"missing-note\">preflight.json has no p2p matrix.</p></section>\n";
  }
  page += TimelinePlot(run);
  page += LossPlot(run);
  page += AccuracyPlot(run);
  page += "<footer class=\"part caption\">Written by dlaunch report from " + Escape(run.run_dir) +
          (options.refresh_s > 0
               ? "; node 0 redraws it from the live run directory, and this page reloads every " +
                     std::to_string(options.refresh_s) + " s"
               : "") +
          ".</footer>\n</body></html>\n";
  return page;
}

}  // namespace dlaunch::launcher::report
