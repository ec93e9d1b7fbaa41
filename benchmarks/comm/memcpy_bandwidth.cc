// The machine's memcpy bandwidth: the physical ceiling any single-host collective lives under.
// Prints one JSON object: {"bytes", "repeats", "median_gbps", "best_gbps"}, counting the bytes
// copied (read + write traffic is twice that).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  const size_t bytes = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 64) << 20;  // MiB
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::memcpy(dst.data(), src.data(), bytes);  // fault the pages in
  std::vector<double> gbps;
  for (int i = 0; i < repeats; ++i) {
    src[i % bytes] = static_cast<char>(i);
    auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gbps.push_back(bytes / 1e9 / s);
  }
  std::sort(gbps.begin(), gbps.end());
  std::printf(
      "{\"bytes\": %zu, \"repeats\": %d, \"median_gbps\": %.3f, \"best_gbps\": %.3f, "
      "\"check\": %d}\n",
      bytes, repeats, gbps[gbps.size() / 2], gbps.back(), dst[repeats % bytes]);
  return 0;
}
