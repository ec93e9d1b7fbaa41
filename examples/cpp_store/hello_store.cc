// The smallest libdlaunch program: every rank learns who it is, says hello through the job's
// key/value store and reads every other rank's greeting.
//
//   dlaunch --nproc 4 build/examples/cpp_store/hello_store
//   build/examples/cpp_store/hello_store            # a world of one, no launcher needed
#include <iostream>

#include "core/runtime.h"

int main() {
  auto rt = dlaunch::core::Runtime::FromEnv();  // blocks for the rendezvous
  auto store = rt->store();
  store->Set("greeting/" + std::to_string(rt->rank()),
             "hello from rank " + std::to_string(rt->rank()));
  for (int r = 0; r < rt->world_size(); ++r) {
    rt->UpdateStatus([&](dlaunch::core::RankStatus& s) { s.step = r; });
    std::cout << "rank " << rt->rank()
              << " read: " << store->Get("greeting/" + std::to_string(r), std::chrono::seconds(60))
              << std::endl;
  }
  return 0;
}
