// PyTorch's flight-recorder dumps (launcher/python/torch_flight.h) as dlaunch's own flight
// records, so that one engine (mismatch_finder.h, inference.h) judges both. What torch records
// is not what ranks must agree on, op by op, so the semantics are explicit here:
//   - which tensors every rank of a collective carries: a scatter's inputs are on its source only
//     (the others pass no scatter_list), a gather's outputs on its destination only; broadcast
//     and scatter compare the outputs, everything else the inputs;
//   - all-to-all sizes differ by design (each rank's own splits): only the dtype is compared;
//   - send/recv pair by peer ("send 0->1", "recv 1<-0", group ranks made global), not by seq;
//   - completion is read from every signal a dump has: state "completed", retired (torch 2.15's
//     Gloo recorder leaves state at "scheduled" and retires the entry), a discovered completion
//     time, and pg_status' last_completed_collective of the entry's group.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/run_dir/flight_file.h"
#include "launcher/python/torch_flight.h"

namespace dlaunch::launcher::torch_flight {

// Which of an entry's tensors every rank of the collective carries, alike.
enum class Compared {
  kInputs,
  kOutputs,
  kDtypeOnly,  // sizes differ between ranks by design (all-to-all)
};

struct OpSemantics {
  std::string op;  // dlaunch's name: "allreduce", "scatter", "send"...
  Compared compared = Compared::kInputs;
  bool p2p = false;
};

// The semantics of torch's op name ("all_reduce", "scatter", "send 0->1", ...).
OpSemantics SemanticsOf(const std::string& torch_op);

// The state of `e` from every signal `dump` holds of it (see above).
rundir::OpState StateOf(const python::TorchFlightEntry& e, const python::TorchFlightDump& dump);

// Which entries become records, and how they are counted.
enum class Scope {
  // The default group's collectives, seq = collective_seq_id: the records of a rank without
  // dlaunch's own, lined up with its peers' at the same depth for the hang inference.
  kDefaultGroup,
  // Every group's collectives and send/recv, seq = record_id (one count per rank across groups),
  // pg_seq = collective_seq_id (send/recv do not count in it: pg_seq -1): for the mismatch engine,
  // which lines collectives up per group.
  kEveryGroup,
};

// The records of one rank's dump. `source`, when given, receives for each record the index of
// the dump entry it came from (same order as the records).
rundir::FlightDump ToFlightRecords(const python::TorchFlightDump& dump, Scope scope,
                                   std::vector<size_t>* source = nullptr);

}  // namespace dlaunch::launcher::torch_flight
