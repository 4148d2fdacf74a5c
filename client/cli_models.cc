// Fair models the company runs itself, without the protected attribute (issue 9): one private
// best response (`best-response`), managed learners (`model fit`) and their training jobs
// (`job status|wait|list|cancel`), and applying a model artifact locally (`predict`).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli_common.h"
#include "client/model_apply.h"
#include "core/random/secure_bitgen.h"
#include "core/util/status_macros.h"

namespace fairvault::client::cli {
namespace {

// ---- Loading a model ----

absl::StatusOr<v1::FairModel> FairModelOf(const v1::Artifact& artifact, absl::string_view source) {
  if (artifact.has_fair_model()) return artifact.fair_model();
  return absl::InvalidArgumentError(absl::StrCat(
      source, ": artifact '", artifact.id(),
      "' is not a fair model (an attribute-aware post-processor: use `fairvault decide`, or "
      "`fairvault apply-eo` where the groups are known)"));
}

// Reads what `artifact get --out`, `best-response --out` or `--json` wrote (an Artifact, a
// GetArtifact or BestResponse response, or a bare FairModel, as JSON), or an Artifact as
// binary protobuf.
absl::StatusOr<v1::FairModel> LoadFairModelFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string content, ReadFileToString(path));
  const absl::string_view text = absl::StripLeadingAsciiWhitespace(content);
  if (absl::StartsWith(text, "{")) {
    v1::Artifact artifact;
    if (FromJson(content, path, artifact).ok()) return FairModelOf(artifact, path);
    v1::BestResponseResponse response;  // a superset of GetArtifactResponse
    if (FromJson(content, path, response).ok()) return FairModelOf(response.artifact(), path);
    v1::FairModel model;
    absl::Status status = FromJson(content, path, model);
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path,
          ": not a fair-model artifact in JSON (expected what `fairvault artifact get --out` "
          "writes): ",
          status.message()));
    }
    return model;
  }
  v1::Artifact artifact;
  if (!artifact.ParseFromString(content)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": neither JSON nor a binary fairvault.v1.Artifact (expected what `fairvault "
                     "artifact get --out` writes)"));
  }
  return FairModelOf(artifact, path);
}

absl::StatusOr<v1::FairModel> LoadFairModel(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  if (flags.Has("artifact-id") == flags.Has("artifact-file")) {
    return UsageError(
        "pass exactly one of --artifact-id (fetched once from the vault) and --artifact-file "
        "(written by `fairvault artifact get --out`; no vault call)");
  }
  if (flags.Has("artifact-file")) return LoadFairModelFile(flags.Get("artifact-file"));
  v1::GetArtifactRequest req;
  req.set_artifact_id(flags.Get("artifact-id"));
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(const v1::GetArtifactResponse resp, client->GetArtifact(req));
  return FairModelOf(resp.artifact(), req.artifact_id());
}

// The shortest decimal text that reads back as exactly `value` (p_positive = k/m).
std::string ExactNumber(double value) {
  for (int digits = 6; digits <= 17; ++digits) {
    std::string text = absl::StrFormat("%.*g", digits, value);
    double back = 0;
    if (absl::SimpleAtod(text, &back) && back == value) return text;
  }
  return absl::StrFormat("%.17g", value);
}

// ---- predict ----

absl::Status Predict(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  const std::string path = flags.Get("csv");
  const bool proba_only = flags.GetBool("proba-only");
  uint64_t seed = 0;
  if (flags.Has("seed")) {
    if (proba_only) return UsageError("--seed has no use with --proba-only (no draws are made)");
    if (!absl::SimpleAtoi(flags.Get("seed"), &seed)) {
      return UsageError(
          absl::StrCat("--seed must be an integer in 0..2^64-1 (got '", flags.Get("seed"), "')"));
    }
  } else {
    core::SecureBitGen secure;
    seed = secure();
  }
  ASSIGN_OR_RETURN(const v1::FairModel model, LoadFairModel(ctx));
  ASSIGN_OR_RETURN(const FairModelApplier applier, FairModelApplier::Create(model));
  ASSIGN_OR_RETURN(std::unique_ptr<CsvReader> reader, CsvReader::Open(path));
  const std::string key_column = flags.Get("key-column");
  ASSIGN_OR_RETURN(KeyColumn keys, KeyColumn::Resolve(reader->header(), path, key_column, ""));
  ASSIGN_OR_RETURN(FairModelRowReader rows,
                   FairModelRowReader::Bind(applier, reader->header(), path));

  // Rows stream from the input to the output; the output file appears only when complete.
  const std::string out_path = flags.Get("out");
  const std::string tmp_path = out_path.empty() ? "" : out_path + ".tmp";
  std::ofstream file;
  if (!out_path.empty()) {
    file.open(tmp_path, std::ios::binary | std::ios::trunc);
    if (!file) {
      return absl::FailedPreconditionError(absl::StrCat("cannot write ", tmp_path));
    }
  }
  std::ostream& out = out_path.empty() ? std::cout : file;
  auto fail = [&](absl::Status status) {
    if (!out_path.empty()) {
      file.close();
      std::remove(tmp_path.c_str());
    }
    return status;
  };
  std::vector<std::string> header = {key_column == "@row" ? "row" : key_column, "p_positive"};
  if (!proba_only) header.push_back("decision");
  out << FormatCsvRecord(header);

  ModelRng gen(seed);
  std::vector<std::string> fields, record(header.size());
  int64_t line = 0, n = 0, positives = 0;
  double p_sum = 0;
  while (true) {
    absl::StatusOr<bool> more = reader->Next(&fields, &line);
    if (!more.ok()) return fail(more.status());
    if (!*more) break;
    absl::StatusOr<std::string> key = keys.Next(fields, line, /*pseudonymise=*/false);
    if (!key.ok()) return fail(key.status());
    absl::StatusOr<ModelPrediction> p = rows.Predict(fields, line, proba_only ? nullptr : &gen);
    if (!p.ok()) return fail(p.status());
    record[0] = *std::move(key);
    record[1] = ExactNumber(p->p_positive);
    if (!proba_only) record[2] = absl::StrCat(p->decision);
    out << FormatCsvRecord(record);
    ++n;
    p_sum += p->p_positive;
    positives += p->decision == 1 ? 1 : 0;
  }
  out.flush();
  if (!out) return fail(absl::DataLossError(absl::StrCat("writing ", out_path, " failed")));
  if (!out_path.empty()) {
    file.close();
    if (std::rename(tmp_path.c_str(), out_path.c_str()) != 0) {
      return fail(absl::FailedPreconditionError(
          absl::StrCat("cannot rename ", tmp_path, " to ", out_path)));
    }
  }
  std::string summary = absl::StrCat(
      "predicted ", n, " rows with a ", model.algorithm(), " model (",
      applier.is_hypothesis() ? absl::StrCat("hypothesis column '", model.hypothesis_column(), "'")
                              : absl::StrCat(applier.num_components(), " component(s)"),
      ")\nmean p_positive: ", n > 0 ? Num(p_sum / static_cast<double>(n)) : "-", "\n");
  if (!proba_only) {
    absl::StrAppend(&summary, "positive decisions: ", positives, "\nseed: ", seed,
                    " (std::mt19937_64; pass --seed ", seed,
                    " to draw the same decisions again)\n");
  }
  if (out_path.empty()) {
    std::cerr << summary;
  } else {
    std::cout << summary << "wrote " << n << " rows to " << out_path << "\n";
  }
  return absl::OkStatus();
}

// ---- best-response ----

absl::StatusOr<double> OptionalNonNegative(const ParsedFlags& flags, absl::string_view name) {
  ASSIGN_OR_RETURN(const double value, flags.GetDouble(name, 0));
  if (value < 0) {
    return UsageError(absl::StrCat("--", name, " must be >= 0 (got ", flags.Get(name), ")"));
  }
  return value;
}

// The learner's shared flags onto a request: features, label, attributes, epsilon, gamma,
// clip, intercept, mass floor, unmatched keys, idempotency key.
template <typename Request>
absl::Status ReadLearnerFlags(const ParsedFlags& flags, Request* req) {
  req->set_idempotency_key(IdempotencyKey(flags));
  req->set_table_handle(flags.Get("table"));
  for (const std::string& f : flags.GetList("features")) req->add_feature_columns(f);
  req->set_label_column(flags.Get("label"));
  for (const std::string& a : flags.GetList("attributes")) req->add_attributes(a);
  ASSIGN_OR_RETURN(const double epsilon, RequiredEpsilon(flags));
  req->set_epsilon(epsilon);
  ASSIGN_OR_RETURN(const double gamma, OptionalNonNegative(flags, "gamma"));
  req->set_gamma(gamma);
  ASSIGN_OR_RETURN(const double clip, OptionalNonNegative(flags, "clip-l1"));
  req->set_clip_l1(clip);
  req->set_no_intercept(flags.GetBool("no-intercept"));
  ASSIGN_OR_RETURN(const double mass_floor, OptionalNonNegative(flags, "mass-floor"));
  req->set_mass_floor(mass_floor);
  req->set_unmatched(Unmatched(flags));
  return absl::OkStatus();
}

absl::StatusOr<v1::BestResponseOracle> Oracle(const ParsedFlags& flags) {
  const std::string oracle = absl::AsciiStrToLower(flags.Get("oracle"));
  if (oracle == "least_squares") return v1::BEST_RESPONSE_ORACLE_LEAST_SQUARES;
  if (oracle == "ftpl") return v1::BEST_RESPONSE_ORACLE_FTPL;
  return UsageError(
      absl::StrCat("--oracle must be least_squares or ftpl (got '", flags.Get("oracle"), "')"));
}

std::string PredictHint(const std::string& artifact_id) {
  return absl::StrCat("apply with: fairvault predict --artifact-id ", artifact_id,
                      " --csv FILE --key-column COL  (or fetch it once with `fairvault artifact "
                      "get --id ",
                      artifact_id, " --out model.json` and pass --artifact-file model.json)\n");
}

absl::Status BestResponse(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  v1::BestResponseRequest req;
  RETURN_IF_ERROR(ReadLearnerFlags(flags, &req));
  if (req.feature_columns().empty()) return UsageError("pass --features a,b,...");
  req.set_masses_key(flags.Get("masses-key"));
  for (const std::string& item : flags.GetList("lambda")) {
    double value = 0;
    if (!absl::SimpleAtod(item, &value) || !std::isfinite(value) || value < 0) {
      return UsageError(
          absl::StrCat("--lambda entries must be finite numbers >= 0 (got '", item, "')"));
    }
    req.add_lambda(value);
  }
  ASSIGN_OR_RETURN(const double bound, flags.GetDouble("lambda-bound", 0));
  if (bound <= 0) {
    return UsageError(
        absl::StrCat("--lambda-bound must be > 0 (got ", flags.Get("lambda-bound"), ")"));
  }
  req.set_lambda_bound(bound);
  ASSIGN_OR_RETURN(const v1::BestResponseOracle oracle, Oracle(flags));
  req.set_oracle(oracle);

  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(const v1::BestResponseResponse resp, client->BestResponse(req));
  const std::string out_path = flags.Get("out");
  if (!out_path.empty()) RETURN_IF_ERROR(WriteStringToFile(out_path, ToJson(resp.artifact())));
  if (ctx.json()) {
    PrintJson(resp);
    return absl::OkStatus();
  }
  std::cout << "artifact: " << resp.artifact().id() << "\nrows used: " << resp.rows_used()
            << "  rows dropped as unmatched: " << resp.rows_dropped()
            << "\nsensitivity (L1, of the noised vector): " << Num(resp.sensitivity())
            << "  (largest change of one row's cost: " << Num(resp.cost_change_bound())
            << ", largest row L1 norm: " << Num(resp.max_row_l1()) << ")\n"
            << FormatCharge(resp.charge()) << ReplayHint(req.idempotency_key())
            << PredictHint(resp.artifact().id());
  if (!out_path.empty()) std::cout << "wrote " << out_path << "\n";
  return absl::OkStatus();
}

// ---- jobs ----

std::string AlgorithmName(v1::FairModelAlgorithm algorithm) {
  switch (algorithm) {
    case v1::FAIR_MODEL_ALGORITHM_DP_ORACLE_LEARNER:
      return "dp_oracle_learner";
    case v1::FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM:
      return "exponential_mechanism";
    case v1::FAIR_MODEL_ALGORITHM_PRIVATE_FAIR_NR:
      return "private_fair_nr";
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

absl::StatusOr<v1::Job> FetchJob(Client* client, const std::string& job_id, bool auditor) {
  v1::GetJobRequest req;
  req.set_job_id(job_id);
  ASSIGN_OR_RETURN(const v1::GetJobResponse resp,
                   auditor ? client->AuditorGetJob(req) : client->GetJob(req));
  return resp.job();
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

// Polls the job until it ends (or `timeout_seconds` > 0 pass), with a progress line on stderr
// whenever the state or round changes. OK with the artifact id printed on SUCCEEDED; Aborted
// with the job's error on FAILED or CANCELLED; DeadlineExceeded on the timeout.
absl::Status WaitForJob(Context& ctx, Client* client, const std::string& job_id, bool auditor,
                        double timeout_seconds, double interval_seconds) {
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
        if (ctx.json()) {
          v1::GetJobResponse resp;
          *resp.mutable_job() = *job;
          PrintJson(resp);
        }
        if (job->state() == v1::JOB_STATE_SUCCEEDED) {
          if (!ctx.json()) {
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

struct WaitOptions {
  double timeout_seconds = 0;
  double interval_seconds = 2;
};

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

absl::Status JobWait(Context& ctx) {
  ASSIGN_OR_RETURN(const WaitOptions options, ReadWaitOptions(ctx.flags()));
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  return WaitForJob(ctx, client, ctx.flags().Get("job"), UseAuditor(ctx.flags()),
                    options.timeout_seconds, options.interval_seconds);
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
  ASSIGN_OR_RETURN(const v1::ListJobsResponse resp,
                   UseAuditor(flags) ? client->AuditorListJobs(req) : client->ListJobs(req));
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

// ---- model fit ----

absl::StatusOr<v1::FairModelAlgorithm> Algorithm(const ParsedFlags& flags) {
  const std::string name = absl::AsciiStrToLower(flags.Get("algorithm"));
  if (name == "dp_oracle_learner") return v1::FAIR_MODEL_ALGORITHM_DP_ORACLE_LEARNER;
  if (name == "exponential_mechanism") return v1::FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM;
  if (name == "private_fair_nr") return v1::FAIR_MODEL_ALGORITHM_PRIVATE_FAIR_NR;
  return UsageError(absl::StrCat(
      "--algorithm must be dp_oracle_learner, exponential_mechanism or private_fair_nr (got '",
      flags.Get("algorithm"), "')"));
}

// --hypotheses lists and --hypotheses-file (names separated by newlines or commas; blank lines
// and lines starting with '#' skipped), in that order.
absl::StatusOr<std::vector<std::string>> HypothesisColumns(const ParsedFlags& flags) {
  std::vector<std::string> names = flags.GetList("hypotheses");
  if (flags.Has("hypotheses-file")) {
    ASSIGN_OR_RETURN(const std::string content, ReadFileToString(flags.Get("hypotheses-file")));
    for (absl::string_view line : absl::StrSplit(content, '\n')) {
      line = absl::StripAsciiWhitespace(line);
      if (line.empty() || absl::StartsWith(line, "#")) continue;
      for (absl::string_view name : absl::StrSplit(line, ',')) {
        name = absl::StripAsciiWhitespace(name);
        if (!name.empty()) names.emplace_back(name);
      }
    }
  }
  return names;
}

absl::Status ModelFit(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  v1::FitFairModelRequest req;
  ASSIGN_OR_RETURN(const v1::FairModelAlgorithm algorithm, Algorithm(flags));
  req.set_algorithm(algorithm);
  RETURN_IF_ERROR(ReadLearnerFlags(flags, &req));
  ASSIGN_OR_RETURN(const std::vector<std::string> hypotheses, HypothesisColumns(flags));
  const bool em = algorithm == v1::FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM;
  if (em) {
    if (hypotheses.empty()) {
      return UsageError(
          "exponential_mechanism chooses among your hypothesis columns: pass --hypotheses "
          "c1,c2,... or --hypotheses-file FILE");
    }
    for (const std::string& h : hypotheses) req.add_hypothesis_columns(h);
    ASSIGN_OR_RETURN(const double em_delta, OptionalNonNegative(flags, "em-delta"));
    req.set_em_delta(em_delta);
  } else {
    if (!hypotheses.empty() || flags.Has("em-delta")) {
      return UsageError(
          "--hypotheses, --hypotheses-file and --em-delta are for "
          "--algorithm exponential_mechanism only");
    }
    if (req.feature_columns().empty()) {
      return UsageError(absl::StrCat("--algorithm ", flags.Get("algorithm"),
                                     " learns linear classifiers: pass --features a,b,..."));
    }
  }
  ASSIGN_OR_RETURN(const int64_t rounds, flags.GetInt("rounds", 0));
  if (rounds < 0 || rounds > 100000) {
    return UsageError(absl::StrCat("--rounds must be in 1..100000 (got ", rounds, ")"));
  }
  req.set_rounds(static_cast<int32_t>(rounds));
  ASSIGN_OR_RETURN(const double bound, OptionalNonNegative(flags, "lambda-bound"));
  req.set_lambda_bound(bound);
  ASSIGN_OR_RETURN(const double eta, OptionalNonNegative(flags, "learning-rate"));
  req.set_learning_rate(eta);
  ASSIGN_OR_RETURN(const double share, OptionalNonNegative(flags, "masses-share"));
  if (share >= 1) {
    return UsageError(
        absl::StrCat("--masses-share must be in (0, 1) (got ", flags.Get("masses-share"), ")"));
  }
  req.set_masses_share(share);
  WaitOptions wait;
  if (flags.GetBool("wait")) {
    ASSIGN_OR_RETURN(wait, ReadWaitOptions(flags));
  } else if (flags.Has("timeout") || flags.Has("interval")) {
    return UsageError("--timeout and --interval go with --wait");
  }

  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(const v1::FitFairModelResponse resp, client->FitFairModel(req));
  if (ctx.json()) {
    PrintJson(resp);
  } else {
    std::cout << "job: " << resp.job().id() << " (" << StateName(resp.job().state()) << ", "
              << AlgorithmName(resp.job().algorithm()) << ")\n"
              << FormatCharge(resp.charge()) << ReplayHint(req.idempotency_key());
    for (const std::string& note : resp.notes()) std::cout << "note: " << note << "\n";
    if (!flags.GetBool("wait")) {
      std::cout << "follow it with: fairvault job wait " << resp.job().id() << "\n";
    }
  }
  if (!flags.GetBool("wait")) return absl::OkStatus();
  std::cout.flush();
  return WaitForJob(ctx, client, resp.job().id(), /*auditor=*/false, wait.timeout_seconds,
                    wait.interval_seconds);
}

std::vector<FlagSpec> LearnerFlags() {
  return {
      {"table", "HANDLE", "table handle from `table upload`", true},
      {"features", "COL,...", "numeric feature columns of the table, in model order", false, true},
      {"label", "COL", "numeric 0/1 label column", true},
      AttributesFlag(),
      {"epsilon", "EPS", "privacy cost of this release (> 0)", true},
      {"clip-l1", "L", "public L1 bound each row's features are scaled to (default 0: none)"},
      {"no-intercept", "", "do not append the constant-1 feature"},
      {"mass-floor", "F", "public floor on each noisy count behind the masses (default 1)"},
      DropUnmatchedFlag(),
      IdempotencyFlag()};
}

FlagSpec JobFlag() { return {"job", "JOB_ID", "job id, e.g. job_3f2c...", true, false, true}; }
FlagSpec AuditorFlag() {
  return {"auditor", "",
          "through the auditor service (auditor, regulator roles): any company's jobs"};
}

}  // namespace

std::vector<Command> ModelCommands() {
  std::vector<FlagSpec> best_response = LearnerFlags();
  for (FlagSpec& f : std::vector<FlagSpec>{
           {"masses-key", "KEY",
            "idempotency key of your `counts --columns LABEL` release over the same table and "
            "attributes (the noisy group-label masses, reused)",
            true},
           {"lambda", "L1,L2,...",
            "the auditor's dual weights, 4 per non-reference group (finite, >= 0)", true, true},
           {"lambda-bound", "B", "bound B on the L1 norm of lambda (> 0)", true},
           {"gamma", "G", "equalized-odds slack (>= 0; recorded in the artifact)", true},
           {"oracle", "least_squares|ftpl",
            "least_squares: noise on the group-dependent part (Jagielski et al.); ftpl: noise "
            "on every row's cost (Cummings et al.)",
            true},
           {"out", "FILE", "also write the artifact as JSON (input of predict --artifact-file)"}}) {
    best_response.push_back(std::move(f));
  }
  std::vector<FlagSpec> fit = LearnerFlags();
  for (FlagSpec& f : std::vector<FlagSpec>{
           {"algorithm", "dp_oracle_learner|exponential_mechanism|private_fair_nr", "the learner",
            true},
           {"gamma", "G", "equalized-odds slack (>= 0; default 0)"},
           {"rounds", "T", "rounds of the game, 1..100000 (default: server's 100)"},
           {"lambda-bound", "B", "bound on the auditor's L1 norm of lambda (default: server's 10)"},
           {"learning-rate", "ETA", "the auditor's step (default: server's 1)"},
           {"masses-share", "S",
            "share of epsilon spent on the group-label masses, in (0,1) (default: server's 0.1)"},
           {"hypotheses", "C1,C2,...",
            "exponential_mechanism: your candidate classifiers' 0/1 columns in the table", false,
            true},
           {"hypotheses-file", "FILE",
            "exponential_mechanism: candidate column names, one per line or comma-separated "
            "('#' comments)"},
           {"em-delta", "D",
            "exponential_mechanism: delta of the released shift (default exp(-sqrt n))"},
           {"wait", "", "then wait for the job like `job wait` (exit status as there)"}}) {
    fit.push_back(std::move(f));
  }
  for (FlagSpec& f : WaitFlags()) fit.push_back(std::move(f));
  std::vector<FlagSpec> wait = {JobFlag(), AuditorFlag()};
  for (FlagSpec& f : WaitFlags()) wait.push_back(std::move(f));
  return {
      {"predict",
       "apply a fair-model artifact to your rows, locally (company)",
       "Needs no protected attribute. Each row's features are preprocessed as the artifact says\n"
       "(docs/api.md, \"Model artifact format\"); p_positive is the fraction of the mixture's\n"
       "components deciding 1, and the decision draws one component uniformly with\n"
       "std::mt19937_64 seeded by --seed (printed when drawn at random, so that the same\n"
       "decisions can be drawn again). The CSV is streamed: any size in constant memory.\n"
       "Writes the key column, p_positive and decision (not with --proba-only).\n"
       "--artifact-id fetches the artifact once; --artifact-file makes no vault call.",
       {{"artifact-id", "ARTIFACT_ID", "a fair-model artifact of yours (one GetArtifact call)"},
        {"artifact-file", "FILE",
         "the artifact as written by `artifact get --out` or `best-response --out` (JSON or "
         "binary protobuf)"},
        {"csv", "FILE", "CSV with a header row holding the model's columns", true},
        {"key-column", "COLUMN|@row",
         "column copied to the output to identify rows; @row writes row-<0-based data row index>",
         true},
        {"out", "FILE", "output CSV (default: stdout, summary on stderr)"},
        {"seed", "S", "seed of the decisions' generator, 0..2^64-1 (default: from the OS)"},
        {"proba-only", "", "write p_positive only: no decision, no draw"}},
       true,
       Predict},
      {"best-response",
       "one private best response to the auditor's lambda: a linear-classifier artifact (company)",
       "One charged release (ALGORITHMS.md section 3). Prints the artifact id, the rows used,\n"
       "the sensitivity the noise was calibrated to, and the charge.",
       best_response, true, BestResponse},
      {"model fit", "submit a managed fair learner; the model arrives as an artifact (company)",
       "Charged once at submission, whatever the outcome. Prints the job id and the charge;\n"
       "follow the job with `job wait`, or pass --wait. The CLI cannot see a table's columns,\n"
       "so exponential_mechanism's candidates are named explicitly (--hypotheses or\n"
       "--hypotheses-file).",
       fit, true, ModelFit},
      {"job status",
       "show a training job: state, rounds done, artifact or error (company; --auditor)",
       "",
       {JobFlag(), AuditorFlag()},
       true,
       JobStatus},
      {"job wait", "wait for a training job to end (company; --auditor)",
       "Polls the job, with a progress line on stderr (\"round t of T, elapsed\"). Exit status\n"
       "0 on SUCCEEDED (prints the artifact id), 1 with the job's error on FAILED or\n"
       "CANCELLED, or when --timeout passes (the job keeps running).",
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
