// How much a rank may keep in the coordinator's store. Every rank holds a token that admits the
// store calls, and the store lives in node 0's launcher: without a bound, one rank that stores
// 200 values of 1 MiB grows that launcher by 200 MiB, and one that adds a million counters by
// as many map nodes. Bootstrap data is small (an ncclUniqueId is 128 bytes, a Gloo address a few
// dozen), torch's TCPStore users store a few MB; the default bounds leave room for far more.
// Plain logic; the coordinator holds it under its store lock.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace dlaunch::launcher {

struct StoreLimits {
  int64_t value_bytes = int64_t{16} << 20;     // one value (a counter always fits)
  int64_t bytes_per_rank = int64_t{64} << 20;  // the keys and values a rank's writes hold
  int64_t keys_per_rank = 100000;              // the keys a rank's writes hold
};

class StoreQuota {
 public:
  // The writer of keys that no bound applies to: a launcher (the job token), the coordinator.
  static constexpr int kLauncher = -1;
  // The most bytes a counter's value takes (Store::Add writes it in decimal:
  // "-9223372036854775808").
  static constexpr int64_t kCounterBytes = 20;

  explicit StoreQuota(StoreLimits limits = {});

  // Whether rank `rank` (kLauncher: always) may make `key` hold `value_bytes`: "" when it may,
  // else the bound it would pass, one line. A key counts for the rank whose write it holds now,
  // with its length and its value's, so a key written again (by any rank) counts once. Records
  // nothing: Record follows the write.
  std::string Check(int rank, const std::string& key, int64_t value_bytes) const;
  // `key` holds `value_bytes` written by `rank` now.
  void Record(int rank, const std::string& key, int64_t value_bytes);
  // A new attempt: its store starts empty.
  void Clear();

  // What rank `rank`'s writes hold now.
  int64_t bytes(int rank) const;
  int64_t keys(int rank) const;

 private:
  struct Entry {
    int rank = kLauncher;
    int64_t bytes = 0;  // of key and value
  };
  StoreLimits limits_;
  std::map<std::string, Entry> entries_;
  std::map<int, int64_t> bytes_;  // by rank
  std::map<int, int64_t> keys_;   // by rank
};

}  // namespace dlaunch::launcher
