// The mismatch step of the inference layer: the lowest collective at which the ranks' flight
// recorders disagree (op, dtype, size, root), the side taken as right and why (the majority; a
// tie broken by each rank's own earlier calls at the same call site, by the calls before it, or
// by Gloo's size abort; else undecided). dlaunch's records and torch's dumps alike (torch's as
// records: diagnose/torch_flight/torch_records.h). Pure computation; never throws.
#pragma once

#include <string>
#include <vector>

#include "launcher/diagnose/inference.h"

namespace dlaunch::launcher {

// What ranks compare of one entry (alltoallv's counts differ by design and are left out).
Signature SignatureOf(const FlightEntry& e);

// Fills `m` for the lowest mismatched collective and returns the entry of the right side's first
// rank (the collective in question); nullptr when the ranks agree. Sets `*p2p_not_compared` when
// point-to-point calls without collective_seq keep the ranks' records from lining up.
const FlightEntry* FindFirstMismatch(const std::vector<RankFacts>& facts, Mismatch* m,
                                     bool* p2p_not_compared);

// Fills `m` for the first send whose dtype or size differs from the receive it pairs with (per
// group, sender and receiver, in call order; only ranks whose record is whole take part), and
// returns the receive; nullptr when every pair agrees.
const FlightEntry* FindFirstP2PMismatch(const std::vector<RankFacts>& facts, Mismatch* m);

}  // namespace dlaunch::launcher
