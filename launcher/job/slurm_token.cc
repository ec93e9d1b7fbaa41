#include "launcher/job/slurm_token.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/base/format.h"
#include "core/base/proc.h"
#include "core/base/unique_fd.h"
#include "core/error.h"

namespace dlaunch::launcher {
namespace {

[[noreturn]] void Refuse(const std::string& path, const std::string& why) {
  throw UsageError("cannot derive this Slurm step's job token from " + path + ": " + why +
                   "; export DLAUNCH_JOB_TOKEN=$(openssl rand -hex 16) before srun (srun passes "
                   "it to every task), or give --token-file FILE");
}

// Owned by this user and not writable by anyone else, so nobody else can swap the secret.
void CheckFolder(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) Refuse(dir, std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) Refuse(dir, "not a directory");
  if (st.st_uid != ::geteuid()) Refuse(dir, "the folder belongs to another user");
  if (st.st_mode & (S_IWGRP | S_IWOTH)) Refuse(dir, "the folder is writable by others");
}

// A new secret under a temporary name, then linked into place: link() fails if another node made
// one first (also over NFS), and that one stands.
void CreateSecret(const std::string& path) {
  const std::string text = base::RandomHex(32) + "\n";
  const std::string tmp = path + ".tmp." + base::Hostname() + "." + std::to_string(::getpid());
  {
    base::UniqueFd fd(
        ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) Refuse(path, std::string("cannot create it: ") + std::strerror(errno));
    if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
        ::fsync(fd.get()) != 0) {
      const std::string why = std::strerror(errno);
      ::unlink(tmp.c_str());
      Refuse(path, "cannot write it: " + why);
    }
  }
  const int linked = ::link(tmp.c_str(), path.c_str());
  const int err = errno;
  ::unlink(tmp.c_str());
  if (linked != 0 && err != EEXIST)
    Refuse(path, std::string("cannot create it: ") + std::strerror(err));
}

std::string ReadSecret(const std::string& path) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    Refuse(path, errno == ELOOP ? "it is a symbolic link" : std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) Refuse(path, "not a regular file");
  if (st.st_uid != ::geteuid()) Refuse(path, "it belongs to another user");
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    Refuse(path, "others may read or change it (chmod 600 it, or remove it for a new one)");
  }
  char buf[256];
  const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
  std::string secret(buf, n > 0 ? static_cast<size_t>(n) : 0);
  while (!secret.empty() && std::isspace(static_cast<unsigned char>(secret.back()))) {
    secret.pop_back();
  }
  if (secret.size() < 32) Refuse(path, "it holds fewer than 32 characters");
  return secret;
}

}  // namespace

std::string DefaultJobSecretPath() {
  const char* home = std::getenv("HOME");
  if (!home || !*home) return "";
  return std::string(home) + "/.dlaunch/job-secret";
}

std::string SlurmStepToken(const std::map<std::string, std::string>& env,
                           const std::string& secret_path) {
  auto var = [&](const char* key) {
    auto it = env.find(key);
    return it == env.end() ? std::string() : it->second;
  };
  if (var("SLURM_JOB_ID").empty() || var("SLURM_STEP_ID").empty()) {
    Refuse(secret_path, "SLURM_JOB_ID or SLURM_STEP_ID is not set");
  }
  if (secret_path.empty()) Refuse("$HOME/.dlaunch/job-secret", "HOME is not set");
  const std::string dir = std::filesystem::path(secret_path).parent_path().string();
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    Refuse(secret_path, "cannot create " + dir + ": " + std::strerror(errno));
  }
  CheckFolder(dir);
  struct stat st {};
  if (::lstat(secret_path.c_str(), &st) != 0) {
    if (errno != ENOENT) Refuse(secret_path, std::strerror(errno));
    CreateSecret(secret_path);
  }
  const std::string secret = ReadSecret(secret_path);
  const std::string restarts = var("SLURM_RESTART_COUNT");
  const std::string step =
      var("SLURM_JOB_ID") + "." + var("SLURM_STEP_ID") + "." + (restarts.empty() ? "0" : restarts);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
            reinterpret_cast<const unsigned char*>(step.data()), step.size(), mac, &len)) {
    throw Error(ErrorKind::kInternal, "HMAC-SHA256 failed");
  }
  return base::FormatHex(mac, len);
}

}  // namespace dlaunch::launcher
