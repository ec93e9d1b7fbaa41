// What a job-token holder may ask of the coordinator. Every rank holds the token (it is in the
// ranks' environment), so it proves membership of the job, not a role (credentials.h gives the
// roles): these checks keep a caller from speaking for a rank outside the world, a node from
// pushing another node's files, and anyone from writing anywhere but a rank folder of the run
// directory.
#pragma once

#include <cstdint>
#include <string>

#include "dlaunch.pb.h"

namespace dlaunch::launcher {

// The job as it stands in the attempt that runs: an elastic job's world changes between attempts.
struct JobShape {
  int world_size = 0;
  int nproc_per_node = 0;
  int nnodes = 1;
};

// The most one pushed rank file may hold on node 0.
inline constexpr int64_t kMaxPushedFileBytes = int64_t{16} << 30;

bool RankInWorld(int rank, const JobShape& shape);

// Whether `rank` is in the world and one of node `node_rank`'s (each node holds nproc_per_node
// consecutive ranks).
bool RankOfNode(int rank, const JobShape& shape, int node_rank);

// Throws Error(kInvalidArgument) naming `what` for a rank outside [0, world_size).
void CheckRankInWorld(int rank, const JobShape& shape, const char* what);

// Throws Error(kInvalidArgument) unless `chunk` is for a rank of agent node `sender` (the node
// rank of the member whose credential came with it, 1..nnodes-1 of a multi-node job), names a
// plain file and stays within [0, kMaxPushedFileBytes).
void CheckFileChunk(const v1::FileChunk& chunk, const JobShape& shape, int sender);

// Writes a checked chunk into <run_dir>/rank<R>/<name> (rank_file push, file_push.h): appended
// bytes in place; a whole version into <name>.tmp.push, renamed over <name> with its last chunk;
// a removal removes both. Never through a symbolic link, never past the file's end (no holes).
// Throws Error(kInvalidArgument) for a refused chunk, Error(kInternal) when the file cannot be
// written.
void WritePushedChunk(const v1::FileChunk& chunk, const std::string& run_dir);

}  // namespace dlaunch::launcher
