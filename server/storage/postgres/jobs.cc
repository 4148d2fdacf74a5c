// The PostgreSQL backend: training jobs, their leases and outcomes.
#include "server/storage/postgres/pg_store.h"

#include <libpq-fe.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/util/status_macros.h"
#include "server/storage/ledger_chain.h"
#include "server/storage/postgres/statement.h"
#include "server/storage/store_common.h"

namespace fairvault::server::storage {

namespace {
// For writes a crash may lose harmlessly: committed and visible at once, flushed with the next
// synced commit.
constexpr char kUnsyncedCommit[] = "SET LOCAL synchronous_commit TO OFF";
}  // namespace

using postgres::Params;
using postgres::Result;
using postgres::kJobCols;
using postgres::ReadJob;
using postgres::JobIn;

// ---- jobs ------------------------------------------------------------------------------------

absl::StatusOr<JobRecord> PgStore::GetJob(const std::string& id) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return JobIn(*c, id, /*for_update=*/false);
}

absl::StatusOr<std::vector<JobRecord>> PgStore::ListJobs(const JobFilter& filter) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  const JobListingQuery q = JobsNewestFirst(filter, '$');
  Params params;
  for (int64_t v : q.params) params.Int(v);
  ASSIGN_OR_RETURN(Result r,
                   c->Exec(absl::StrCat("SELECT ", kJobCols, " FROM jobs", q.sql).c_str(), params));
  std::vector<JobRecord> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(ReadJob(r, i));
  return out;
}

absl::StatusOr<std::vector<JobRecord>> PgStore::ListUnfinishedJobs() {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(Result r, c->Exec(absl::StrCat("SELECT ", kJobCols,
                                                  " FROM jobs WHERE state IN (1, 2) "
                                                  "ORDER BY ledger_seq")
                                         .c_str()));
  std::vector<JobRecord> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(ReadJob(r, i));
  return out;
}

absl::StatusOr<JobRecord> PgStore::StartJob(const std::string& id, const JobLease& lease) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  // One statement tests and claims: of two claimants (in any processes), one changes the row.
  ASSIGN_OR_RETURN(
      Result r,
      c->Exec(absl::StrCat("UPDATE jobs SET state=2, attempts=attempts+1, "
                           "started_micros=$1, finished_micros=0, done=0, "
                           "lease_owner=$2, lease_expires_micros=$3 WHERE id=$4 AND "
                           "(state=1 OR (state=2 AND lease_expires_micros < $1)) "
                           "RETURNING ",
                           kJobCols)
                  .c_str(),
              Params().Int(lease.now_micros).Text(lease.owner).Int(lease.expires_micros).Text(id)));
  if (r.rows() > 0) return ReadJob(r, 0);
  ASSIGN_OR_RETURN(JobRecord job, JobIn(*c, id, /*for_update=*/false));
  return NotClaimable(job, lease.now_micros);
}

absl::Status PgStore::RenewJobLease(const std::string& id, const JobLease& lease) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  // Visible to every replica at once; a server crash may lose it, which only lets the job be
  // taken over sooner.
  return c->InTransaction([&]() -> absl::Status {
    RETURN_IF_ERROR(c->Run(kUnsyncedCommit));
    ASSIGN_OR_RETURN(Result r,
                     c->Exec("UPDATE jobs SET lease_expires_micros=$1 WHERE id=$2 AND "
                             "state=2 AND lease_owner=$3",
                             Params().Int(lease.expires_micros).Text(id).Text(lease.owner)));
    if (r.changed() > 0) return absl::OkStatus();
    ASSIGN_OR_RETURN(JobRecord job, JobIn(*c, id, /*for_update=*/false));
    return RequireLeaseHolder(job, lease.owner, "renew the lease of");
  });
}

absl::Status PgStore::UpdateJobProgress(const std::string& id, const std::string& owner,
                                        int64_t done, int64_t total) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  // Progress is advisory (a re-run starts from zero): not worth a sync of its own.
  return c->InTransaction([&]() -> absl::Status {
    RETURN_IF_ERROR(c->Run(kUnsyncedCommit));
    return c->Run("UPDATE jobs SET done=$1, total=$2 WHERE id=$3 AND state=2 AND lease_owner=$4",
                  Params().Int(done).Int(total).Text(id).Text(owner));
  });
}

absl::Status PgStore::FinishJob(const std::string& id, const std::string& owner,
                                const ArtifactRecord& artifact, int64_t now_micros) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return c->InTransaction([&]() -> absl::Status {
    // The job's dataset first, key-share-locked in DeleteDataset's order (the dataset, then
    // its artifacts and jobs): a dataset deleted meanwhile took the job along and the artifact
    // is not stored (JobIn finds no job).
    RETURN_IF_ERROR(c->Run("SELECT d.id FROM datasets d JOIN jobs j ON j.dataset_id=d.id "
                           "WHERE j.id=$1 FOR KEY SHARE OF d",
                           Params().Text(id)));
    ASSIGN_OR_RETURN(JobRecord job, JobIn(*c, id, /*for_update=*/true));
    RETURN_IF_ERROR(RequireLeaseHolder(job, owner, "finish"));
    // The artifact was paid for by the job's charge.
    RETURN_IF_ERROR(
        c->Run("INSERT INTO artifacts(id, account_id, dataset_id, ledger_seq, "
               "created_micros, payload) VALUES($1,$2,$3,$4,$5,$6)",
               Params()
                   .Text(artifact.id)
                   .Int(artifact.account_id)
                   .Int(artifact.dataset_id)
                   .Int(job.ledger_seq)
                   .Int(artifact.created_micros)
                   .Bytes(artifact.payload)));
    return c->Run(
        "UPDATE jobs SET state=3, artifact_id=$1, finished_micros=$2, "
        "done=CASE WHEN total > 0 THEN total ELSE done END WHERE id=$3",
        Params().Text(artifact.id).Int(now_micros).Text(id));
  });
}

absl::Status PgStore::FailJob(const std::string& id, const std::string& owner,
                              const std::string& error, int64_t now_micros) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return c->InTransaction([&]() -> absl::Status {
    ASSIGN_OR_RETURN(JobRecord job, JobIn(*c, id, /*for_update=*/true));
    RETURN_IF_ERROR(RequireLeaseHolder(job, owner, "fail"));
    return c->Run("UPDATE jobs SET state=4, error=$1, finished_micros=$2 WHERE id=$3",
                  Params().Text(error).Int(now_micros).Text(id));
  });
}

absl::StatusOr<JobRecord> PgStore::CancelJob(const std::string& id, int64_t now_micros) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  RETURN_IF_ERROR(
      c->Run("UPDATE jobs SET state=5, finished_micros=$1, error=$2 WHERE id=$3 AND "
             "state IN (1, 2)",
             Params().Int(now_micros).Text(kCancelledByCompany).Text(id)));
  return JobIn(*c, id, /*for_update=*/false);
}

}  // namespace fairvault::server::storage
