#include "launcher/rendezvous/credentials.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <charconv>

#include "core/base/format.h"
#include "core/error.h"

namespace dlaunch::launcher {

namespace {
// The highest rank a token may name: far past any world, short enough to parse without overflow.
constexpr int kMaxRank = 1 << 24;
}  // namespace

std::string RankToken(const std::string& job_token, int rank) {
  const std::string purpose = "dlaunch rank token " + std::to_string(rank);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), job_token.data(), static_cast<int>(job_token.size()),
            reinterpret_cast<const unsigned char*>(purpose.data()), purpose.size(), mac, &len) ||
      len < 16) {
    throw Error(ErrorKind::kInternal, "HMAC-SHA256 failed");
  }
  // 16 bytes, as long as the random job token a single-node run makes.
  return std::to_string(rank) + "." + base::FormatHex(mac, 16);
}

std::optional<int> RankOfToken(const std::string& job_token, const std::string& token) {
  const size_t dot = token.find('.');
  if (job_token.empty() || dot == std::string::npos || dot == 0 || dot > 8) return std::nullopt;
  int rank = -1;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + dot, rank);
  if (ec != std::errc() || end != token.data() + dot || rank < 0 || rank > kMaxRank) {
    return std::nullopt;
  }
  if (!SameSecret(token, RankToken(job_token, rank))) return std::nullopt;
  return rank;
}

std::string NewNodeCredential() { return base::RandomHex(16); }

bool SameSecret(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace dlaunch::launcher
