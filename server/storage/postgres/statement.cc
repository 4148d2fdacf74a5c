#include "server/storage/postgres/statement.h"

#include "absl/strings/match.h"
#include "server/storage/ledger_chain.h"
#include "server/storage/store_common.h"

namespace fairvault::server::storage::postgres {

using core::accounting::Spend;

bool IsConnectionLoss(const char* sqlstate) {
  // 08: connection exceptions; 57P01-57P03: the server is shutting down or starting;
  // 53300: too many connections.
  return sqlstate != nullptr &&
         (absl::StartsWith(sqlstate, "08") || absl::StartsWith(sqlstate, "57P") ||
          std::strcmp(sqlstate, "53300") == 0);
}

AccountRecord ReadAccount(const Result& r, int i) {
  return AccountRecord{r.Int(i, 0),  r.Text(i, 1), static_cast<Role>(r.Int(i, 2)),
                       r.Text(i, 3), r.Text(i, 4), r.Int(i, 5)};
}

DatasetRecord ReadDataset(const Result& r, int i) {
  DatasetRecord d;
  d.id = r.Int(i, 0);
  d.name = r.Text(i, 1);
  d.attributes = r.Text(i, 2);
  d.created_micros = r.Int(i, 3);
  d.subject_count = r.Int(i, 4);
  if (!r.IsNull(i, 5)) d.cap_micro = r.Int(i, 5);
  d.cap_delta = r.Double(i, 6);
  return d;
}

absl::StatusOr<Spend> ReadSpend(const Result& r, int i, int first_col) {
  Spend spend;
  spend.releases = r.Int(i, first_col);
  spend.pure_micro = r.Int(i, first_col + 1);
  ASSIGN_OR_RETURN(spend.rdp_all_nano, DecodeInt64s(r.Text(i, first_col + 2)));
  ASSIGN_OR_RETURN(spend.rdp_nonpure_nano, DecodeInt64s(r.Text(i, first_col + 3)));
  return spend;
}

LedgerRow ReadLedger(const Result& r, int i) {
  LedgerRow row;
  row.seq = r.Int(i, 0);
  row.time_micros = r.Int(i, 1);
  row.kind = r.Text(i, 2);
  row.account = r.Text(i, 4);
  row.dataset = r.Text(i, 6);
  row.request_kind = r.Text(i, 7);
  row.idempotency_key = r.Text(i, 8);
  row.epsilon = r.Double(i, 9);
  row.delta = r.Double(i, 10);
  row.mechanism = r.Text(i, 11);
  if (!r.IsNull(i, 12)) row.pure_micro = r.Int(i, 12);
  auto rdp = DecodeInt64s(r.Text(i, 13));
  if (rdp.ok()) row.rdp_nano = *std::move(rdp);
  row.prev_hash = r.Text(i, 14);
  row.hash = r.Text(i, 15);
  row.actor = r.Text(i, 16);
  row.account_id = r.Int(i, 3);
  row.dataset_id = r.Int(i, 5);
  return row;
}

JobRecord ReadJob(const Result& r, int i) {
  JobRecord j;
  j.id = r.Text(i, 0);
  j.account_id = r.Int(i, 1);
  j.dataset_id = r.Int(i, 2);
  j.ledger_seq = r.Int(i, 3);
  j.idempotency_key = r.Text(i, 4);
  j.table_handle = r.Text(i, 5);
  j.algorithm = static_cast<int32_t>(r.Int(i, 6));
  j.request = r.Text(i, 7);
  j.plan = r.Text(i, 8);
  j.seed = r.Text(i, 9);
  j.subject_limit = r.Int(i, 10);
  j.state = static_cast<JobState>(r.Int(i, 11));
  j.done = r.Int(i, 12);
  j.total = r.Int(i, 13);
  j.submitted_micros = r.Int(i, 14);
  j.started_micros = r.Int(i, 15);
  j.finished_micros = r.Int(i, 16);
  j.attempts = static_cast<int32_t>(r.Int(i, 17));
  j.artifact_id = r.Text(i, 18);
  j.error = r.Text(i, 19);
  j.lease_owner = r.Text(i, 20);
  j.lease_expires_micros = r.Int(i, 21);
  return j;
}

absl::Status NotFoundIfEmpty(const Result& r, const std::string& what) {
  if (r.rows() == 0) return absl::NotFoundError(what);
  return absl::OkStatus();
}

absl::StatusOr<JobRecord> JobIn(Conn& c, const std::string& id, bool for_update) {
  ASSIGN_OR_RETURN(Result r, c.Exec(absl::StrCat("SELECT ", kJobCols, " FROM jobs WHERE id=$1",
                                                 for_update ? " FOR UPDATE" : "")
                                        .c_str(),
                                    Params().Text(id)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, UnknownJob(id)));
  return ReadJob(r, 0);
}

absl::StatusOr<DatasetRecord> DatasetById(Conn& c, int64_t id) {
  ASSIGN_OR_RETURN(
      Result r, c.Exec(absl::StrCat("SELECT ", kDatasetCols, " FROM datasets WHERE id=$1").c_str(),
                       Params().Int(id)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, absl::StrCat("no dataset with id ", id)));
  return ReadDataset(r, 0);
}

absl::Status RequireDatasetUntilCommit(Conn& c, int64_t id, const std::string& what) {
  ASSIGN_OR_RETURN(Result r, c.Exec("SELECT id FROM datasets WHERE id=$1 FOR KEY SHARE",
                                    Params().Int(id)));
  if (r.rows() == 0) return DeletedWithItsDataset(what);
  return absl::OkStatus();
}

absl::StatusOr<GrantRecord> GrantIn(Conn& c, int64_t account_id, int64_t dataset_id) {
  ASSIGN_OR_RETURN(Result r, c.Exec("SELECT epsilon_micro, delta FROM grants "
                                    "WHERE account_id=$1 AND dataset_id=$2",
                                    Params().Int(account_id).Int(dataset_id)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, "no grant"));
  return GrantRecord{account_id, dataset_id, r.Int(0, 0), r.Double(0, 1)};
}

absl::StatusOr<Spend> SpendIn(Conn& c, int64_t account_id, int64_t dataset_id) {
  ASSIGN_OR_RETURN(Result r, c.Exec("SELECT releases, pure_micro, rdp_all, rdp_nonpure FROM spend "
                                    "WHERE account_id=$1 AND dataset_id=$2",
                                    Params().Int(account_id).Int(dataset_id)));
  if (r.rows() == 0) return Spend{};
  return ReadSpend(r, 0, 0);
}

Query AdmissionQuery(int64_t account_id, int64_t dataset_id) {
  Params p;
  p.Int(account_id).Int(dataset_id);
  return Query{absl::StrCat("SELECT ", kDatasetColsOfD,
                            ", g.epsilon_micro, g.delta, s.releases, s.pure_micro, s.rdp_all, "
                            "s.rdp_nonpure FROM datasets d "
                            "LEFT JOIN grants g ON g.account_id=$1 AND g.dataset_id=d.id "
                            "LEFT JOIN spend s ON s.account_id=$1 AND s.dataset_id=d.id "
                            "WHERE d.id=$2"),
               std::move(p)};
}

AdmissionInputs ReadAdmission(const Result& r, int64_t account_id, int64_t dataset_id) {
  AdmissionInputs in;
  // No dataset, then no grant on it either (the grant's key refers to the dataset).
  if (r.rows() == 0) {
    in.dataset = absl::NotFoundError(absl::StrCat("no dataset with id ", dataset_id));
    in.grant = absl::NotFoundError("no grant");
    in.spend = Spend{};
    return in;
  }
  constexpr int kGrant = 7, kSpend = 9;  // after the dataset's 7 columns
  in.dataset = ReadDataset(r, 0);
  if (r.IsNull(0, kGrant)) {
    in.grant = absl::NotFoundError("no grant");
  } else {
    in.grant = GrantRecord{account_id, dataset_id, r.Int(0, kGrant), r.Double(0, kGrant + 1)};
  }
  in.spend = r.IsNull(0, kSpend) ? absl::StatusOr<Spend>(Spend{}) : ReadSpend(r, 0, kSpend);
  return in;
}

absl::StatusOr<Spend> DatasetSpendIn(Conn& c, int64_t dataset_id) {
  ASSIGN_OR_RETURN(Result r, c.Exec("SELECT releases, pure_micro, rdp_all, rdp_nonpure FROM spend "
                                    "WHERE dataset_id=$1",
                                    Params().Int(dataset_id)));
  Spend total;
  for (int i = 0; i < r.rows(); ++i) {
    ASSIGN_OR_RETURN(Spend one, ReadSpend(r, i, 0));
    total.Merge(one);  // saturating: a wrapped sum would look like no spend at all
  }
  return total;
}

absl::Status AppendLedger(Conn& c, LedgerRow& row, int64_t account_id, int64_t dataset_id) {
  ASSIGN_OR_RETURN(LedgerHead head, ReadLedgerHead(c));
  return AppendLedger(c, head, row, account_id, dataset_id);
}

Query LedgerHeadQuery() {
  return Query{"SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1", Params()};
}

LedgerHead ReadLedgerHead(const Result& head) {
  if (head.rows() == 0) return LedgerHead{0, std::string(kGenesisHash)};
  return LedgerHead{head.Int(0, 0), head.Text(0, 1)};
}

absl::StatusOr<LedgerHead> ReadLedgerHead(Conn& c) {
  Query q = LedgerHeadQuery();
  ASSIGN_OR_RETURN(Result head, c.Exec(q.sql.c_str(), q.params));
  return ReadLedgerHead(head);
}

absl::Status AppendLedger(Conn& c, const LedgerHead& head, LedgerRow& row, int64_t account_id,
                          int64_t dataset_id) {
  row.seq = head.seq + 1;
  row.prev_hash = head.hash;
  row.hash = LedgerRowHash(row, account_id, dataset_id);
  const std::string rdp = EncodeInt64s(row.rdp_nano);
  Params p;
  p.Int(row.seq).Int(row.time_micros).Text(row.kind).Int(account_id).Text(row.account);
  p.Int(dataset_id).Text(row.dataset).Text(row.request_kind).Text(row.idempotency_key);
  p.Double(row.epsilon).Double(row.delta).Text(row.mechanism).OptionalInt(row.pure_micro);
  p.Bytes(rdp).Text(row.prev_hash).Text(row.hash).Text(row.actor);
  RETURN_IF_ERROR(c.Defer(absl::StrCat("INSERT INTO ledger(", kLedgerCols,
                                       ") VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,"
                                       "$15,$16,$17)")
                              .c_str(),
                          p));
  return AppendTreeLeaf(c, row.seq, row.prev_hash, row.hash);
}

absl::StatusOr<std::string> TreeNode(Conn& c, int level, int64_t idx) {
  ASSIGN_OR_RETURN(Result r, c.Exec("SELECT hash FROM merkle_nodes WHERE level=$1 AND idx=$2",
                                    Params().Int(level).Int(idx)));
  if (r.rows() == 0) {
    return absl::NotFoundError(absl::StrCat("the Merkle tree has no node ", level, "/", idx));
  }
  return r.Text(0, 0);
}

absl::Status AppendTreeLeaf(Conn& c, int64_t seq, const std::string& prev_hash,
                            const std::string& hash) {
  ASSIGN_OR_RETURN(std::vector<core::transparency::StoredNode> nodes,
                   c.tree_frontier().NodesForRow(seq, prev_hash, hash, [&c](int level, int64_t idx) {
                     return TreeNode(c, level, idx);
                   }));
  // One statement for the leaf and the subtrees it completes.
  Params p;
  std::string sql = "INSERT INTO merkle_nodes(level, idx, hash) VALUES";
  for (size_t i = 0; i < nodes.size(); ++i) {
    p.Int(nodes[i].level).Int(nodes[i].index).Bytes(nodes[i].hash);
    absl::StrAppend(&sql, i == 0 ? "" : ",", "($", 3 * i + 1, ",$", 3 * i + 2, ",$", 3 * i + 3,
                    ")");
  }
  return c.Defer(sql.c_str(), p);
}

absl::Status BackfillTree(Conn& c) {
  ASSIGN_OR_RETURN(Result counts,
                   c.Exec("SELECT (SELECT COUNT(*) FROM merkle_nodes WHERE level=0), "
                          "(SELECT COALESCE(MAX(seq), 0) FROM ledger)"));
  if (counts.Int(0, 0) == counts.Int(0, 1)) return absl::OkStatus();  // every row has its leaf
  // No row is appended meanwhile (appends take the same lock).
  RETURN_IF_ERROR(c.LockHead("ledger"));
  ASSIGN_OR_RETURN(Result rows,
                   c.Exec("SELECT seq, prev_hash, hash FROM ledger l WHERE NOT EXISTS (SELECT 1 "
                          "FROM merkle_nodes m WHERE m.level = 0 AND m.idx = l.seq - 1) "
                          "ORDER BY seq"));
  for (int i = 0; i < rows.rows(); ++i) {
    RETURN_IF_ERROR(AppendTreeLeaf(c, rows.Int(i, 0), rows.Text(i, 1), rows.Text(i, 2)));
  }
  return c.Flush();
}

}  // namespace fairvault::server::storage::postgres

namespace fairvault::server::storage {

absl::StatusOr<std::vector<postgres::Result>> PgStore::Conn::Pipeline(
    std::vector<postgres::Query> queries) {
  if (broken_) return DatabaseUnavailable();
  std::vector<Query> all = std::exchange(deferred_, {});
  const size_t first_query = all.size();
  for (Query& q : queries) all.push_back(std::move(q));
  if (all.empty()) return std::vector<Result>();
  if (PQenterPipelineMode(c_) != 1) return Broken("could not start");
  // What each result read back belongs to: a statement, or the preparation of one.
  struct Sent {
    size_t statement;
    bool preparation;
    std::string key;  // for a preparation: what prepared_ records once it succeeded
    std::string name;
  };
  std::vector<Sent> sent;
  absl::flat_hash_map<std::string, std::string> preparing;
  for (size_t i = 0; i < all.size(); ++i) {
    const Query& q = all[i];
    const Params& p = q.params;
    std::string name;
    if (IsQuery(q.sql.c_str())) {
      std::string key = PreparedKey(q.sql.c_str(), p);
      if (auto it = prepared_.find(key); it != prepared_.end()) {
        name = it->second;
      } else if (auto it = preparing.find(key); it != preparing.end()) {
        name = it->second;
      } else if (prepared_.size() + preparing.size() < kMaxPrepared) {
        name = PreparedName(key);
        if (PQsendPrepare(c_, name.c_str(), q.sql.c_str(), p.size(), p.types()) != 1) {
          return Broken("could not send a statement");
        }
        preparing.emplace(key, name);
        sent.push_back(Sent{i, true, std::move(key), name});
      }
    }
    const int queued =
        name.empty()
            ? PQsendQueryParams(c_, q.sql.c_str(), p.size(), p.types(), p.values(), p.lengths(),
                                p.formats(), /*resultFormat=*/1)
            : PQsendQueryPrepared(c_, name.c_str(), p.size(), p.values(), p.lengths(),
                                  p.formats(), /*resultFormat=*/1);
    if (queued != 1) return Broken("could not send a statement");
    sent.push_back(Sent{i, false, "", ""});
  }
  if (PQpipelineSync(c_) != 1) return Broken("could not send its end");
  std::vector<Result> results;
  absl::Status first_error;
  for (Sent& s : sent) {
    // One result a command, then a null; after the first error, PGRES_PIPELINE_ABORTED for
    // each command left. Anything else: the pipeline's state is unknown.
    PGresult* raw = PQgetResult(c_);
    if (raw == nullptr) return Broken("ended before every result came back");
    if (PGresult* more = PQgetResult(c_); more != nullptr) {
      PQclear(more);
      PQclear(raw);
      return Broken("returned more results than statements");
    }
    if (PQresultStatus(raw) == PGRES_PIPELINE_ABORTED) {
      PQclear(raw);
      if (first_error.ok()) return Broken("was aborted by no error it returned");
      continue;
    }
    absl::StatusOr<Result> r = Check(raw);
    absl::Status status = r.status();
    if (r.ok() && s.preparation) prepared_.emplace(std::move(s.key), std::move(s.name));
    if (r.ok() && !s.preparation) status = Committed(all[s.statement].sql.c_str(), *r);
    if (!status.ok()) {
      if (first_error.ok()) first_error = status;
      continue;
    }
    if (!s.preparation && s.statement >= first_query) results.push_back(*std::move(r));
  }
  PGresult* sync = PQgetResult(c_);
  const bool synced = sync != nullptr && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
  PQclear(sync);
  if (!synced || PQexitPipelineMode(c_) != 1) return Broken("did not end where it should");
  RETURN_IF_ERROR(first_error);
  if (results.size() != all.size() - first_query) return Broken("returned too few results");
  return results;
}

}  // namespace fairvault::server::storage
