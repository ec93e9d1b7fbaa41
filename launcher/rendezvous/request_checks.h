// What a job-token holder may ask of the coordinator. Every rank holds the token (it is in the
// ranks' environment), so it proves membership of the job, not a role: these checks keep a rank,
// or anything it started, from speaking for a node, for a rank outside the world, or from
// writing anywhere but a rank folder of the run directory.
#pragma once

#include <cstdint>
#include <string>

#include "dlaunch.pb.h"
#include "launcher/rendezvous/node_roster.h"

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

// Throws Error(kInvalidArgument) naming `what` for a rank outside [0, world_size).
void CheckRankInWorld(int rank, const JobShape& shape, const char* what);

// Node notices (status, stream) are taken only from an agent node (1..nnodes-1) of a multi-node
// job that registered. `roster` is read under the coordinator's lock.
bool AcceptsNodeNotice(int node_rank, const JobShape& shape, const NodeRoster& roster);

// Throws Error(kInvalidArgument) unless `chunk` is for a rank of a registered agent node, names a
// plain file and stays within [0, kMaxPushedFileBytes).
void CheckFileChunk(const v1::FileChunk& chunk, const JobShape& shape, const NodeRoster& roster);

// Writes a checked chunk into <run_dir>/rank<R>/<name> (rank_file push, file_push.h): appended
// bytes in place; a whole version into <name>.tmp.push, renamed over <name> with its last chunk;
// a removal removes both. Never through a symbolic link, never past the file's end (no holes).
// Throws Error(kInvalidArgument) for a refused chunk, Error(kInternal) when the file cannot be
// written.
void WritePushedChunk(const v1::FileChunk& chunk, const std::string& run_dir);

}  // namespace dlaunch::launcher
