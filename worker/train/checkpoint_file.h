// The checkpoint file without torch: torch's zip archive with dlaunch's manifest as the zip
// comment, so the launcher can refuse a damaged or mismatched checkpoint (exit 2) before any rank
// starts, and the ranks load exactly the bytes that were checked.
//
// Checked: a regular file (a FIFO or device would block the reader), at most kMaxCheckpointBytes,
// a well-formed zip (end record, central directory, local headers inside the file), every entry
// stored uncompressed as torch writes it and matching its CRC-32, and the manifest (schema 1).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dlaunch::worker {

inline constexpr int64_t kMaxCheckpointBytes = int64_t{64} << 30;

// <dir>/checkpoint.pt
inline std::string CheckpointPath(const std::string& dir) { return dir + "/checkpoint.pt"; }

// What the model's shapes follow from; the launcher knows these from the options and the data
// headers. 0 = not known (classes of IDX data before the labels are read).
struct ShapeKey {
  std::string model;
  int64_t feature_dim = 0;
  int64_t classes = 0;
  int64_t hidden = 0;  // mlp only; 0 for the others
};

struct CheckpointManifest {
  int schema = 1;
  int64_t step = 0;             // optimizer steps completed
  int64_t total_steps = 0;      // of the run that wrote it
  int64_t steps_per_epoch = 0;  // at its world size
  int64_t world_size = 0;
  int64_t per_rank_batch = 0;  // --batch-size x --grad-accum
  int64_t global_batch = 0;    // per_rank_batch x world_size
  int64_t steps_option = 0;    // its --steps (0: --epochs), so a resume keeps its converted total
  uint64_t seed = 0;
  ShapeKey key;
  // Every parameter and buffer: "0.weight" -> {32, 1, 3, 3}.
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
};

struct CheckpointBytes {
  std::string bytes;                           // the whole file, checked
  std::optional<CheckpointManifest> manifest;  // absent in a checkpoint of an older dlaunch
};

// Returns the zip `torch_zip` (as OutputArchive::save_to writes it, no comment) with `manifest` as
// its comment. Throws Error(kInternal) when it is not such a zip. Does not block.
std::string AttachManifest(std::string torch_zip, const CheckpointManifest& manifest);

// Reads and checks `path` (see the top of the file). Throws UsageError ("checkpoint PATH: what is
// wrong") when it is damaged or not a checkpoint. Blocks for reading the whole file.
CheckpointBytes ReadCheckpointFile(const std::string& path);

// Why a checkpoint with `m` cannot continue a run of `key` with `per_rank_batch` samples per rank
// and step, or "" when it can: another model or shape, or neither the per-rank nor the global batch
// kept (`global_batch` 0: not known yet, the launcher before an elastic rendezvous). Does not
// block.
std::string CheckpointMismatch(const CheckpointManifest& m, const ShapeKey& key,
                               int64_t per_rank_batch, int64_t global_batch);

// Where a run resumes from checkpoint `m` with `world_size` ranks of `per_rank_batch` samples and
// `steps_per_epoch` steps an epoch. The same world and batch: the checkpoint's step. Otherwise the
// position in the epoch is carried over in samples (rounded down to a whole step of the new global
// batch), as the sampler's permutation does not depend on the world; a --steps run keeps the
// samples it has left. `total_steps` is this run's own count (--epochs x steps_per_epoch, or
// --steps = `steps_option`). `change` says what changed, "" when nothing did. Does not block.
struct ResumePoint {
  int64_t step = 0;
  int64_t total_steps = 0;
  std::string change;
};
ResumePoint MapResume(const CheckpointManifest& m, int64_t world_size, int64_t per_rank_batch,
                      int64_t steps_per_epoch, int64_t total_steps, int64_t steps_option);

// Removes `checkpoint.pt.tmp.<pid>` files in `dir` whose writer is gone (a killed rank 0): another
// live process's are kept. Returns how many were removed. Blocks for a directory scan.
int RemoveStaleCheckpointTemps(const std::string& dir);

// Writes `bytes` to `path` atomically: PATH.tmp.<pid>, fsync, rename, fsync of the directory.
// Throws Error(kInternal) naming the path; the temporary file is then removed and `path`
// untouched. Blocks for the write.
void WriteFileAtomically(const std::string& path, const std::string& bytes);

}  // namespace dlaunch::worker
