// What a rank killed in the middle of an atomic write leaves in its folder: <name>.tmp.<suffix>
// (base::WriteFileAtomically, the Python agent's write_atomically) or <name>.tmp, beside or
// instead of <name>. Once the rank ended nobody renames it: an error.json it wrote whole but had
// no time to rename is the rank's own account of its failure, so it is kept as error.json; every
// other temporary file is removed.
#pragma once

#include <string>
#include <vector>

namespace dlaunch::rundir {

struct LeftoverSweep {
  int removed = 0;                     // temporary files deleted
  std::vector<std::string> recovered;  // file names renamed into place ("error.json")
};

// Sweeps the rank folder `rank_dir` of a rank that has ended (never one that runs: its writes in
// flight would be lost). Never follows a symbolic link, never throws; blocks for the folder's
// listing and a read of at most kMaxErrorBytes per error.json candidate.
LeftoverSweep SweepLeftoverTemps(const std::string& rank_dir);

}  // namespace dlaunch::rundir
