// A rank that prints where it was placed: "rank R cpus 0-3 cuda <unset> local 0".
#include <sched.h>

#include <cstdlib>
#include <iostream>
#include <vector>

#include "launcher/supervision/placement.h"

int main() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  auto env = [](const char* k) {
    const char* v = std::getenv(k);
    return std::string(v ? v : "<unset>");
  };
  std::cout << "rank " << env("RANK") << " cpus " << dlaunch::launcher::FormatCpuList(cpus)
            << " cuda " << env("CUDA_VISIBLE_DEVICES") << " local " << env("LOCAL_RANK")
            << std::endl;
  return 0;
}
