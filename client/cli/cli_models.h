// Pieces shared by the fair-model commands (cli_models.cc: best-response, model fit;
// cli_jobs.cc: job status|wait|list|cancel; cli_predict.cc: predict; cli_sweep.cc: sweep model).
#ifndef FAIRVAULT_CLIENT_CLI_CLI_MODELS_H_
#define FAIRVAULT_CLIENT_CLI_CLI_MODELS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cli/cli_common.h"

namespace fairvault::client::cli {

// The command tables of cli_predict.cc and cli_jobs.cc (ModelCommands() includes them).
std::vector<Command> PredictCommands();
std::vector<Command> JobCommands();

// "dp_oracle_learner", …; "unknown(<n>)" for a value this client does not know.
std::string AlgorithmName(v1::FairModelAlgorithm algorithm);
// "QUEUED", "RUNNING", …; "UNKNOWN(<n>)" likewise.
std::string StateName(v1::JobState state);
// How to apply a fair-model artifact with `fairvault predict`.
std::string PredictHint(const std::string& artifact_id);

// The flags of `model fit` without --wait (the learner, its parameters, --epsilon and
// --idempotency-key), and the request they describe; without `with_epsilon` --epsilon is not
// read (the caller sets it: `sweep model`, cli_sweep.cc).
std::vector<FlagSpec> ModelFitFlags();
absl::StatusOr<v1::FitFairModelRequest> ReadModelFitRequest(const ParsedFlags& flags,
                                                            bool with_epsilon);

// --timeout and --interval of `job wait` and `model fit --wait`.
struct WaitOptions {
  double timeout_seconds = 0;  // 0: wait until the job ends
  double interval_seconds = 2;
  // When the job ends: print it (--json) or, on success, its artifact and how to apply it.
  // `sweep model` waits for many jobs and prints its own summary.
  bool print_result = true;
};
std::vector<FlagSpec> WaitFlags();
// Usage errors for a negative --timeout or an --interval below 0.05 s.
absl::StatusOr<WaitOptions> ReadWaitOptions(const ParsedFlags& flags);

// Polls the job (through the auditor service when `auditor`) until it ends or the timeout
// passes, with a progress line on stderr whenever the state or round changes. OK, with the
// artifact id printed, on SUCCEEDED; Aborted with the job's error on FAILED or CANCELLED;
// DeadlineExceeded on the timeout (or the last poll's error if the vault never answered).
// A few consecutive UNAVAILABLE polls (a restarting vault) are retried.
absl::Status WaitForJob(Context& ctx, Client* client, const std::string& job_id, bool auditor,
                        const WaitOptions& options);

}  // namespace fairvault::client::cli

#endif  // FAIRVAULT_CLIENT_CLI_CLI_MODELS_H_
