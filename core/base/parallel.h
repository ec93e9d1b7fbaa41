// Running independent pieces of work (reading thousands of rank folders) on a few threads.
#pragma once

#include <cstddef>
#include <functional>

namespace dlaunch::base {

// Threads worth using for file reading and parsing here: the cores, 1 to 8.
int ReadThreads();

// Calls fn(i) for every i in [0, n), on up to `threads` threads (this one included), each index
// exactly once, in no set order. Blocks until every call returned. `fn` must not throw; the
// caller gives each index its own output so that results can be combined in index order.
void ParallelFor(size_t n, int threads, const std::function<void(size_t)>& fn);

}  // namespace dlaunch::base
