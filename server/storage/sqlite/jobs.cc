// The SQLite backend: training jobs, their leases and outcomes.
#include "server/storage/sqlite/sqlite_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "core/util/truncate.h"
#include "server/storage/ledger_chain.h"
#include "server/storage/sqlite/statement.h"
#include "server/storage/store_common.h"

namespace fairvault::server::storage {

using sqlite::Stmt;
using sqlite::Transaction;
using sqlite::NotFoundIfNoRow;
using sqlite::kJobCols;
using sqlite::ReadJob;

// ---- jobs ----------------------------------------------------------------------------------

absl::StatusOr<JobRecord> SqliteStore::JobLocked(const std::string& id) {
  Stmt s(*cache_, absl::StrCat("SELECT ", kJobCols, " FROM jobs WHERE id=?").c_str());
  s.Bind(1, id);
  RETURN_IF_ERROR(NotFoundIfNoRow(s.Step(), UnknownJob(id)));
  return ReadJob(s);
}

absl::Status SqliteStore::RequireLeaseHolderLocked(const std::string& id, const std::string& owner,
                                                   const char* action) {
  ASSIGN_OR_RETURN(JobRecord job, JobLocked(id));
  return RequireLeaseHolder(job, owner, action);
}

absl::StatusOr<JobRecord> SqliteStore::GetJob(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return JobLocked(id);
}

// On a listing connection, as ListLedger.
absl::StatusOr<std::vector<JobRecord>> SqliteStore::ListJobs(const JobFilter& filter) {
  return Listing([&](sqlite::StmtCache& cache) -> absl::StatusOr<std::vector<JobRecord>> {
    // ledger_seq orders jobs by creation (each has its own charge row), unlike a wall clock.
    const JobListingQuery q = JobsNewestFirst(filter, '?');
    Stmt s(cache, absl::StrCat("SELECT ", kJobCols, " FROM jobs", q.sql).c_str());
    for (size_t i = 0; i < q.params.size(); ++i) s.Bind(static_cast<int>(i + 1), q.params[i]);
    return AllRows(s, ReadJob);
  });
}

absl::StatusOr<std::vector<JobRecord>> SqliteStore::ListUnfinishedJobs() {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_,
         absl::StrCat("SELECT ", kJobCols, " FROM jobs WHERE state IN (1, 2) ORDER BY ledger_seq")
             .c_str());
  return AllRows(s, ReadJob);
}

absl::StatusOr<JobRecord> SqliteStore::StartJob(const std::string& id, const JobLease& lease) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  // The claimability test and the change are one statement: of two claimants, one changes the
  // row. A re-run starts from scratch (from the same stored randomness), so its progress does.
  Stmt s(*cache_,
         "UPDATE jobs SET state=2, attempts=attempts+1, started_micros=?1, finished_micros=0, "
         "done=0, lease_owner=?2, lease_expires_micros=?3 "
         "WHERE id=?4 AND (state=1 OR (state=2 AND lease_expires_micros < ?1))");
  s.Bind(1, lease.now_micros).Bind(2, lease.owner).Bind(3, lease.expires_micros).Bind(4, id);
  RETURN_IF_ERROR(s.Run());
  const bool claimed = sqlite3_changes(db_) > 0;
  ASSIGN_OR_RETURN(JobRecord job, JobLocked(id));
  if (!claimed) return NotClaimable(job, lease.now_micros);
  RETURN_IF_ERROR(txn.Commit());
  return job;
}

absl::Status SqliteStore::WithoutSyncLocked(const std::function<absl::Status()>& write) {
  // In WAL mode with synchronous=NORMAL a commit is not synced; the next synced commit (or
  // checkpoint) makes it durable with itself, in order.
  RETURN_IF_ERROR(Exec("PRAGMA synchronous=NORMAL"));
  absl::Status written = write();
  absl::Status restored = Exec("PRAGMA synchronous=FULL");
  return written.ok() ? restored : written;
}

absl::Status SqliteStore::RenewJobLease(const std::string& id, const JobLease& lease) {
  absl::MutexLock lock(&mu_);
  // A renewal lost in a crash only lets the job be taken over sooner, which a crash calls for.
  return WithoutSyncLocked([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS -> absl::Status {
    Stmt s(*cache_,
           "UPDATE jobs SET lease_expires_micros=? WHERE id=? AND state=2 AND lease_owner=?");
    s.Bind(1, lease.expires_micros).Bind(2, id).Bind(3, lease.owner);
    RETURN_IF_ERROR(s.Run());
    if (sqlite3_changes(db_) > 0) return absl::OkStatus();
    return RequireLeaseHolderLocked(id, lease.owner, "renew the lease of");
  });
}

absl::Status SqliteStore::UpdateJobProgress(const std::string& id, const std::string& owner,
                                            int64_t done, int64_t total) {
  absl::MutexLock lock(&mu_);
  // Progress is advisory (a re-run starts from zero): not worth a sync of its own.
  return WithoutSyncLocked([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Stmt s(*cache_, "UPDATE jobs SET done=?, total=? WHERE id=? AND state=2 AND lease_owner=?");
    s.Bind(1, done).Bind(2, total).Bind(3, id).Bind(4, owner);
    return s.Run();
  });
}

absl::Status SqliteStore::FinishJob(const std::string& id, const std::string& owner,
                                    const ArtifactRecord& artifact, int64_t now_micros) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  RETURN_IF_ERROR(RequireLeaseHolderLocked(id, owner, "finish"));
  {
    // The artifact was paid for by the job's charge.
    Stmt s(*cache_,
           "INSERT INTO artifacts(id, account_id, dataset_id, ledger_seq, created_micros, payload) "
           "SELECT ?, ?, ?, ledger_seq, ?, ? FROM jobs WHERE id=?");
    s.Bind(1, artifact.id).Bind(2, artifact.account_id).Bind(3, artifact.dataset_id);
    s.Bind(4, artifact.created_micros).BindBlob(5, artifact.payload).Bind(6, id);
    RETURN_IF_ERROR(s.Run());
  }
  Stmt u(*cache_,
         "UPDATE jobs SET state=3, artifact_id=?, finished_micros=?, "
         "done=CASE WHEN total > 0 THEN total ELSE done END WHERE id=?");
  u.Bind(1, artifact.id).Bind(2, now_micros).Bind(3, id);
  RETURN_IF_ERROR(u.Run());
  return txn.Commit();
}

absl::Status SqliteStore::FailJob(const std::string& id, const std::string& owner,
                                  const std::string& error, int64_t now_micros) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  RETURN_IF_ERROR(RequireLeaseHolderLocked(id, owner, "fail"));
  Stmt u(*cache_, "UPDATE jobs SET state=4, error=?, finished_micros=? WHERE id=?");
  u.Bind(1, error).Bind(2, now_micros).Bind(3, id);
  RETURN_IF_ERROR(u.Run());
  return txn.Commit();
}

absl::StatusOr<JobRecord> SqliteStore::CancelJob(const std::string& id, int64_t now_micros) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  Stmt u(*cache_, "UPDATE jobs SET state=5, finished_micros=?, error=? WHERE id=? AND state IN (1, 2)");
  u.Bind(1, now_micros).Bind(2, std::string(kCancelledByCompany)).Bind(3, id);
  RETURN_IF_ERROR(u.Run());
  ASSIGN_OR_RETURN(JobRecord job, JobLocked(id));
  RETURN_IF_ERROR(txn.Commit());
  return job;
}

}  // namespace fairvault::server::storage
