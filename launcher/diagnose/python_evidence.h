// Evidence that Python ranks leave beside the files every rank writes, folded into the analysis:
// the agent's flight_tail.jsonl (its last flight-recorder entries, written as they change, so
// they survive a rank that Gloo aborted before its next flight.json), and the mark Gloo leaves
// in a rank it aborted because a peer sent more bytes than it expected.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "launcher/diagnose/rank_facts.h"
#include "launcher/diagnose/run_snapshot.h"

namespace dlaunch::launcher {

// rank<R>/flight_tail.jsonl over `rank`'s flight.json: an entry of the tail replaces the one with
// its seq (the tail is never older for the seqs it holds); without a readable flight.json the
// tail alone becomes the rank's flight recorder. Bounded read; never throws.
void MergeFlightTail(const rundir::RankDir& dir, rundir::RankFiles* rank,
                     std::vector<std::string>* problems);

// Gloo's "op.preamble.length <= op.nbytes. SENT vs EXPECTED" enforce message in `lines`.
struct PeerSizeAbort {
  int64_t sent_bytes = -1;      // what a peer sent
  int64_t expected_bytes = -1;  // at most what this rank expected
};
std::optional<PeerSizeAbort> FindGlooSizeAbort(const std::vector<std::string>& lines);

// The facts the evidence above adds to a rank (a FactsEnricher).
void AddPythonEvidence(const RankRecord& record, RankFacts& facts);

}  // namespace dlaunch::launcher
