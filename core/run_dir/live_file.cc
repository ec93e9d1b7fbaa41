#include "core/run_dir/live_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/run_dir/json_fields.h"

namespace dlaunch::rundir {

void WriteLiveEndpoint(const std::string& path, const LiveEndpoint& live) {
  const nlohmann::json doc = {{"schema", SchemaId(kLiveSchema)},
                              {"endpoint", live.endpoint},
                              {"status_token", live.status_token},
                              {"host", live.host},
                              {"pid", live.pid},
                              {"unix_ms", live.unix_ms}};
  const std::string text = detail::Dump(doc, 2) + "\n";
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    throw Error(ErrorKind::kInternal, "cannot write " + tmp + ": " + std::strerror(errno));
  }
  // O_CREAT's mode is cut by the umask only, never widened; an old file of that name keeps its
  // mode, so set it.
  bool ok = ::fchmod(fd, 0600) == 0;
  size_t done = 0;
  while (ok && done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  const int saved = errno;
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(ok ? errno : saved);
    ::unlink(tmp.c_str());
    throw Error(ErrorKind::kInternal, "cannot write " + path + ": " + why);
  }
}

FileState ReadLiveEndpoint(const std::string& path, const std::string& label, LiveEndpoint* out,
                           std::vector<std::string>* problems) {
  nlohmann::json j;
  if (FileState state =
          detail::ReadJsonObject(path, label, kLiveSchema, kMaxLiveBytes, &j, problems);
      state != FileState::kOk) {
    return state;
  }
  out->endpoint = detail::GetString(j, "endpoint");
  out->status_token = detail::GetString(j, "status_token");
  out->host = detail::GetString(j, "host");
  out->pid = detail::GetInt32(j, "pid", 0, 0);
  out->unix_ms = detail::GetInt(j, "unix_ms", 0);
  if (out->endpoint.empty()) {
    problems->push_back(label + " names no endpoint");
    return FileState::kInvalid;
  }
  return FileState::kOk;
}

}  // namespace dlaunch::rundir
