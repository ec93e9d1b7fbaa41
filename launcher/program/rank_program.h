// What a rank runs, as a type: the job agent asks a RankProgram for the argv, environment, process
// shape and verdicts of its ranks, and never asks what kind of program it is (torchelastic's
// WorkerSpec: the agent does not know the entrypoint). MakeRankProgram is the one place that
// decides the kind; a new kind is one file and one line there.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/options.h"
#include "launcher/supervision/process_spawner.h"
#include "launcher/supervision/supervisor.h"

namespace dlaunch::launcher {

class RankProgram {
 public:
  using Env = std::map<std::string, std::string>;

  // What to print and record instead of a crashed rank's report when a rank failed on purpose.
  struct Verdict {
    std::string report;  // printed on stderr, each line ending in '\n'
    std::string error;   // the attempt's one-line error ("preflight verdict FAIL")
  };

  virtual ~RankProgram() = default;

  // When the program's own arguments ask for its help (`preflight --help`): prints it once and
  // returns true, before any rank, coordinator or run directory exists (help is an answer, not a
  // job). Throws UsageError for bad arguments.
  virtual bool PrintHelp() const { return false; }
  // argv of every rank, found and checked before anything starts. Throws UsageError. Blocks for
  // file lookups and, for some kinds, short runs of an interpreter.
  virtual std::vector<std::string> ResolveArgv() const = 0;
  // Checks of the machine this kind needs before any rank starts. Throws UsageError with the fix.
  // Blocks for those checks (none for most kinds).
  virtual void CheckBeforeStart() const {}

  // Job variables the user's --env may replace: they go in first. Pure; does not block.
  virtual void AddJobDefaults(const Env& launcher_env, Env* env) const {}
  // Job variables over the user's --env (a PYTHONPATH=... of the user's must not hide the rank
  // agent). Pure; does not block.
  virtual void AddJobOverrides(Env* env) const {}
  // The variables of the rank whose folder is `rank_dir`. Pure; does not block.
  virtual void AddRankEnv(const std::string& rank_dir, const Env& launcher_env, Env* env) const {}
  // Whether every rank is expected to load the Python rank agent, so that one that does not is
  // worth a warning. `job_env`: the job's variables; `launcher_env`: dlaunch's own. Pure.
  virtual bool ExpectsAgent(const Env& job_env, const Env& launcher_env) const { return false; }

  // Before each attempt: clears what an earlier attempt of the rank left in `rank_dir` that the
  // next one must not be judged by. Blocks for file removals; never throws.
  virtual void BeforeAttempt(const std::string& rank_dir) const {}
  // Shapes each rank's process: its ignored signals, the agent's pipe. Does not block.
  virtual void ShapeProcess(ProcessSpec* process) const {}
  // Whether rank 0 prints a machine-readable document on its stdout, which then passes alone.
  virtual bool PrintsDocument() const { return false; }
  // After each attempt, once its ranks are gone. Blocks for a directory scan; never throws.
  virtual void AfterAttempt() const {}
  // After the last attempt, on the node that hosts the coordinator. Blocks for reading the run
  // directory's logs.
  virtual void AfterJob(const std::string& run_dir) const {}

  // The verdict of a rank that failed on purpose, read from `run_dir`; nullopt for a crash.
  // Blocks for reading files.
  virtual std::optional<Verdict> FailureVerdict(const RankOutcome& failed,
                                                const std::string& run_dir) const {
    return std::nullopt;
  }
  // Whether a rank's own exit code says the verdict (ExitCode reads it), so that this node keeps
  // its own rank's report even when another node's rank failed first.
  virtual bool ExitSaysVerdict() const { return false; }
  // dlaunch's exit code when the attempt's first failed rank ended like `failed`. Pure.
  virtual int ExitCode(const RankOutcome& failed) const;
};

// Where the rank programs' helpers are: dlaunch's own binary (the built-ins' worker sits beside
// it) and the Python rank agent's folder ("" = none).
struct ProgramSite {
  std::string self_exe;
  std::string agent_dir;
};

// The site of the binary `self_exe`: the agent's folder found beside it
// (launcher/python/python_launch.h's FindAgentDir). Blocks for a few stat calls.
ProgramSite FindProgramSite(const std::string& self_exe);

// The program every rank of `options` runs: the one place that asks what kind it is. Pure (the
// argv is found later, by ResolveArgv); does not block.
std::shared_ptr<const RankProgram> MakeRankProgram(const LaunchOptions& options,
                                                   const ProgramSite& site);

// Whether `command` runs ranks at all (a job), rather than answering on its own (help, doctor).
bool RunsRanks(Command command);

}  // namespace dlaunch::launcher
