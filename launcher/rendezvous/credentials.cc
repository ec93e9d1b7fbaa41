#include "launcher/rendezvous/credentials.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "core/base/format.h"
#include "core/error.h"

namespace dlaunch::launcher {

std::string RankToken(const std::string& job_token) {
  static const std::string kPurpose = "dlaunch rank token";
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), job_token.data(), static_cast<int>(job_token.size()),
            reinterpret_cast<const unsigned char*>(kPurpose.data()), kPurpose.size(), mac, &len) ||
      len < 16) {
    throw Error(ErrorKind::kInternal, "HMAC-SHA256 failed");
  }
  // 16 bytes, as long as the random job token a single-node run makes.
  return base::FormatHex(mac, 16);
}

std::string NewNodeCredential() { return base::RandomHex(16); }

bool SameSecret(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace dlaunch::launcher
