// torchrun's FileTimer for this node's ranks (TORCHELASTIC_ENABLE_FILE_TIMER=1): the server's
// FIFO goes into every rank's TORCHELASTIC_TIMER_FILE, and the ranks it killed are named in the
// attempt's outcome.
#pragma once

#include <memory>

#include "launcher/job/attempt_listener.h"
#include "launcher/supervision/file_timer.h"

namespace dlaunch::launcher {

class FileTimerListener : public AttemptListener {
 public:
  // Starts the server over `supervisor`'s running ranks. Throws UsageError or Error as
  // FileTimerServer does.
  explicit FileTimerListener(const Supervisor* supervisor);

  void OnRankProcess(ProcessSpec* process) override;
  void OnRanksGone(AttemptResult* result) override;

 private:
  FileTimerServer server_;
};

// Whether the ranks asked for the file timer: TORCHELASTIC_ENABLE_FILE_TIMER=1 in dlaunch's own
// environment, as torchrun reads it. Does not block.
bool FileTimerWanted();

}  // namespace dlaunch::launcher
