// Training jobs (issue 9): `job status|wait|list|cancel` through the company service, or the
// auditor service with --auditor (auditors and the regulator see every company's jobs).
#include <algorithm>
#include <chrono>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/cli_models.h"
#include "core/util/status_macros.h"

namespace fairvault::client::cli {

std::string AlgorithmName(v1::FairModelAlgorithm algorithm) {
  switch (algorithm) {
    case v1::FAIR_MODEL_ALGORITHM_DP_ORACLE_LEARNER:
      return "dp_oracle_learner";
    case v1::FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM:
      return "exponential_mechanism";
    case v1::FAIR_MODEL_ALGORITHM_PRIVATE_FAIR_NR:
      return "private_fair_nr";
    case v1::FAIR_MODEL_ALGORITHM_DP_FERMI:
      return "dp_fermi";
    case v1::FAIR_MODEL_ALGORITHM_PF_LD:
      return "pf_ld";
    case v1::FAIR_MODEL_ALGORITHM_EXPONENTIATED_GRADIENT:
      return "exponentiated_gradient";
    default:
      return absl::StrCat("unknown(", static_cast<int>(algorithm), ")");
  }
}

std::string StateName(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_QUEUED:
      return "QUEUED";
    case v1::JOB_STATE_RUNNING:
      return "RUNNING";
    case v1::JOB_STATE_SUCCEEDED:
      return "SUCCEEDED";
    case v1::JOB_STATE_FAILED:
      return "FAILED";
    case v1::JOB_STATE_CANCELLED:
      return "CANCELLED";
    default:
      return absl::StrCat("UNKNOWN(", static_cast<int>(state), ")");
  }
}

absl::StatusOr<WaitOptions> ReadWaitOptions(const ParsedFlags& flags) {
  WaitOptions options;
  ASSIGN_OR_RETURN(options.timeout_seconds, flags.GetDouble("timeout", 0));
  if (options.timeout_seconds < 0) {
    return UsageError(
        absl::StrCat("--timeout must be >= 0 (0: no timeout; got ", flags.Get("timeout"), ")"));
  }
  ASSIGN_OR_RETURN(options.interval_seconds, flags.GetDouble("interval", 2));
  if (options.interval_seconds < 0.05) {
    return UsageError(
        absl::StrCat("--interval must be >= 0.05 seconds (got ", flags.Get("interval"), ")"));
  }
  return options;
}

std::vector<FlagSpec> WaitFlags() {
  return {{"timeout", "SECONDS", "give up waiting after this long (default 0: wait until it ends)"},
          {"interval", "SECONDS", "time between polls (default 2)"}};
}

namespace {

bool IsFinal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

std::string Progress(const v1::Job& job) {
  return absl::StrCat("round ", job.done(), " of ", job.total(), ", elapsed ",
                      absl::StrFormat("%.1f", job.elapsed_seconds()), " s");
}

std::string FormatJob(const v1::Job& job) {
  std::string out = absl::StrCat("job: ", job.id(), "\nstate: ", StateName(job.state()),
                                 "\nalgorithm: ", AlgorithmName(job.algorithm()),
                                 "\ndataset: ", job.dataset(), "  company: ", job.company(),
                                 "\nsubmitted: ", FormatUnixSeconds(job.submitted_unix()),
                                 "\nprogress: ", Progress(job), "\nledger seq: ", job.ledger_seq(),
                                 "  idempotency key: ", job.idempotency_key(), "\n");
  if (!job.artifact_id().empty()) absl::StrAppend(&out, "artifact: ", job.artifact_id(), "\n");
  if (!job.error().empty()) absl::StrAppend(&out, "error: ", job.error(), "\n");
  return out;
}

// --auditor (or --company on `job list`): the auditor service, which sees every company's
// jobs; otherwise the company service (the caller's own).
bool UseAuditor(const ParsedFlags& flags) {
  return flags.GetBool("auditor") || flags.Has("company");
}

// The company service refuses auditors and the regulator: say which flag they need.
absl::Status WithAuditorHint(absl::Status status, bool auditor) {
  if (auditor || status.code() != absl::StatusCode::kPermissionDenied) return status;
  return absl::PermissionDeniedError(
      absl::StrCat(status.message(), " (auditors and the regulator: pass --auditor)"));
}

absl::StatusOr<v1::Job> FetchJob(Client* client, const std::string& job_id, bool auditor) {
  v1::GetJobRequest req;
  req.set_job_id(job_id);
  absl::StatusOr<v1::GetJobResponse> resp =
      auditor ? client->AuditorGetJob(req) : client->GetJob(req);
  if (!resp.ok()) return WithAuditorHint(resp.status(), auditor);
  return resp->job();
}

absl::Status JobStatus(Context& ctx) {
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(const v1::Job job,
                   FetchJob(client, ctx.flags().Get("job"), UseAuditor(ctx.flags())));
  if (ctx.json()) {
    v1::GetJobResponse resp;
    *resp.mutable_job() = job;
    PrintJson(resp);
  } else {
    std::cout << FormatJob(job);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WaitForJob(Context& ctx, Client* client, const std::string& job_id, bool auditor,
                        const WaitOptions& options) {
  const double timeout_seconds = options.timeout_seconds;
  const double interval_seconds = options.interval_seconds;
  const auto start = std::chrono::steady_clock::now();
  std::string last_line;
  int unavailable = 0;
  absl::Status last_error;
  while (true) {
    absl::StatusOr<v1::Job> job = FetchJob(client, job_id, auditor);
    last_error = job.status();
    if (!job.ok()) {
      // A restarting vault: keep polling for a while (jobs survive restarts).
      if (job.status().code() != absl::StatusCode::kUnavailable || ++unavailable > 10) {
        return job.status();
      }
    } else {
      unavailable = 0;
      const std::string line =
          absl::StrCat("job ", job_id, ": ", StateName(job->state()), ", ", Progress(*job));
      if (line != last_line) std::cerr << line << "\n";
      last_line = line;
      if (IsFinal(job->state())) {
        if (ctx.json() && options.print_result) {
          v1::GetJobResponse resp;
          *resp.mutable_job() = *job;
          PrintJson(resp);
        }
        if (job->state() == v1::JOB_STATE_SUCCEEDED) {
          if (!ctx.json() && options.print_result) {
            std::cout << "artifact: " << job->artifact_id() << "\n"
                      << PredictHint(job->artifact_id());
          }
          return absl::OkStatus();
        }
        return absl::AbortedError(
            absl::StrCat("job ", job_id, " ", StateName(job->state()),
                         job->error().empty() ? "" : absl::StrCat(": ", job->error()),
                         " (its charge stays; ledger seq ", job->ledger_seq(), ")"));
      }
    }
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (timeout_seconds > 0 && elapsed >= timeout_seconds) {
      if (!last_error.ok()) return last_error;  // the vault never answered: say why
      return absl::DeadlineExceededError(
          absl::StrCat("job ", job_id, " has not ended after ", Num(timeout_seconds),
                       " s; it keeps running: wait again with `fairvault job wait ", job_id,
                       "` or stop it with `fairvault job cancel ", job_id, "`"));
    }
    double sleep = interval_seconds;
    if (timeout_seconds > 0) sleep = std::min(sleep, timeout_seconds - elapsed);
    std::this_thread::sleep_for(std::chrono::duration<double>(std::max(sleep, 0.0)));
  }
}

namespace {

absl::Status JobWait(Context& ctx) {
  ASSIGN_OR_RETURN(const WaitOptions options, ReadWaitOptions(ctx.flags()));
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  return WaitForJob(ctx, client, ctx.flags().Get("job"), UseAuditor(ctx.flags()), options);
}

absl::Status JobList(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  v1::ListJobsRequest req;
  req.set_dataset(flags.Get("dataset"));
  req.set_company(flags.Get("company"));
  ASSIGN_OR_RETURN(const int64_t limit, flags.GetInt("limit", 0));
  if (limit < 0 || limit > 1000) return UsageError("--limit must be in 1..1000");
  req.set_limit(static_cast<int32_t>(limit));
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  absl::StatusOr<v1::ListJobsResponse> listed =
      UseAuditor(flags) ? client->AuditorListJobs(req) : client->ListJobs(req);
  if (!listed.ok()) return WithAuditorHint(listed.status(), UseAuditor(flags));
  const v1::ListJobsResponse& resp = *listed;
  if (ctx.json()) {
    PrintJson(resp);
    return absl::OkStatus();
  }
  if (resp.jobs().empty()) {
    std::cout << "(no jobs)\n";
    return absl::OkStatus();
  }
  TextTable table({"JOB", "STATE", "ALGORITHM", "DATASET", "COMPANY", "ROUNDS", "ELAPSED_S",
                   "SUBMITTED", "ARTIFACT/ERROR"});
  for (const v1::Job& j : resp.jobs()) {
    table.AddRow({j.id(), StateName(j.state()), AlgorithmName(j.algorithm()), j.dataset(),
                  j.company(), absl::StrCat(j.done(), "/", j.total()),
                  absl::StrFormat("%.1f", j.elapsed_seconds()),
                  FormatUnixSeconds(j.submitted_unix()),
                  j.artifact_id().empty() ? j.error() : j.artifact_id()});
  }
  std::cout << table.Render();
  return absl::OkStatus();
}

absl::Status JobCancel(Context& ctx) {
  v1::CancelJobRequest req;
  req.set_job_id(ctx.flags().Get("job"));
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(const v1::CancelJobResponse resp, client->CancelJob(req));
  if (ctx.json()) {
    PrintJson(resp);
  } else {
    std::cout << FormatJob(resp.job())
              << (resp.job().state() == v1::JOB_STATE_CANCELLED
                      ? "(cancelled; the job's charge stays)\n"
                      : "(the job had already ended: nothing was cancelled)\n");
  }
  return absl::OkStatus();
}

FlagSpec JobFlag() { return {"job", "JOB_ID", "job id, e.g. job_3f2c...", true, false, true}; }
FlagSpec AuditorFlag() {
  return {"auditor", "",
          "through the auditor service (auditor, regulator roles): any company's jobs"};
}

}  // namespace

std::vector<Command> JobCommands() {
  std::vector<FlagSpec> wait = {JobFlag(), AuditorFlag()};
  for (FlagSpec& f : WaitFlags()) wait.push_back(std::move(f));
  return {
      {"job status",
       "show a training job: state, rounds done, artifact or error (company; --auditor)",
       "",
       {JobFlag(), AuditorFlag()},
       true,
       JobStatus},
      {"job wait", "wait for a training job to end (company; --auditor)",
       "Polls the job, with a progress line on stderr (\"round t of T, elapsed\"). Exit status\n"
       "0 on SUCCEEDED (prints the artifact id), 1 with the job's error on FAILED or\n"
       "CANCELLED, 6 when --timeout passes (the job keeps running).",
       wait, true, JobWait},
      {"job list",
       "list training jobs, newest first (company: your own; auditor, regulator: --auditor)",
       "",
       {{"dataset", "NAME", "only jobs on this dataset"},
        {"company", "NAME", "only this company's jobs (auditor service; implies --auditor)"},
        {"limit", "N", "at most N jobs, 1..1000 (default: server's 100)"},
        AuditorFlag()},
       true,
       JobList},
      {"job cancel",
       "stop a queued or running training job of yours; its charge stays (company)",
       "",
       {JobFlag()},
       true,
       JobCancel},
  };
}

}  // namespace fairvault::client::cli
