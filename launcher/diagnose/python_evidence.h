// Evidence that Python ranks leave beside the files every rank writes, folded into the analysis:
// the agent's flight_tail.jsonl (its last flight-recorder entries, written as they change, so
// they survive a rank that Gloo aborted before its next flight.json), and the mark Gloo leaves
// in a rank it aborted because a peer sent more bytes than it expected.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "launcher/diagnose/diagnosis.h"
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

// PyTorch's own flight-recorder dumps in the rank folder (rank<R>/torch_trace_<R>, see
// launcher/python/torch_flight.h) into record->torch_flight, within `budget`; one that is not
// read (unreadable, past the budget) is named in `skipped` with why. Never throws.
void ReadTorchFlight(const rundir::RankDir& dir, python::TorchReadBudget* budget,
                     RankRecord* record, std::vector<rundir::SkippedEvidence>* skipped);

// When no rank has a flight recorder of dlaunch's (the agent was off, or the ranks are not
// Python), the ranks' torch dumps stand in for it (torch_flight/torch_records.h): the default
// process group's collectives, seq = collective_seq_id, so the analysis compares ranks at the
// same depth.
void UseTorchFlightWithoutOther(RunSnapshot* run);

// torch's dumps in the diagnosis: each rank's last entries and what the mismatch engine finds in
// them across ranks (torch_flight/torch_findings.h: a size, dtype or op mismatch, a collective
// not every rank joined or completed), as detail lines and as
// diagnosis.json's "torch_flight", bounded (kMaxTorchDumpJsonBytes a dump, kMaxTorchFlightJsonBytes
// in all: a dump past them is left out, and named in skipped_evidence); and the run's skipped
// dumps as diagnosis->skipped_evidence.
inline constexpr size_t kMaxTorchDumpJsonBytes = 256 << 10;
inline constexpr size_t kMaxTorchFlightJsonBytes = 16 << 20;
void AttachTorchFlight(const RunSnapshot& run, Diagnosis* diagnosis);

}  // namespace dlaunch::launcher
