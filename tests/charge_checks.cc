// The ledger checks and calls the fault tests share.
#include "tests/charge_checks.h"

#include <thread>

#include "absl/strings/str_cat.h"

#include "core/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace fairvault::testing {

namespace v1 = ::fairvault::v1;

v1::NoisyCountsRequest CountsBySex(const std::string& table_handle, const std::string& key,
                                   double epsilon) {
  v1::NoisyCountsRequest req;
  req.set_idempotency_key(key);
  req.set_table_handle(table_handle);
  req.add_attributes("sex");
  req.set_epsilon(epsilon);
  return req;
}

Outcome Charge(client::Client& client, const v1::NoisyCountsRequest& req) {
  Outcome out;
  out.key = req.idempotency_key();
  auto resp = client.NoisyCounts(req);
  out.status = resp.status();
  if (resp.ok()) {
    out.bytes = resp->SerializeAsString();
    out.ledger_seq = resp->charge().ledger_seq();
  }
  return out;
}

std::vector<v1::LedgerEntry> ReadLedger(client::Client& auditor) {
  std::vector<v1::LedgerEntry> rows;
  v1::ListLedgerRequest req;
  req.set_limit(10000);
  while (true) {
    auto page = auditor.AuditorListLedger(req);
    EXPECT_OK(page);
    if (!page.ok() || page->entries().empty()) break;
    rows.insert(rows.end(), page->entries().begin(), page->entries().end());
    req.set_after_seq(rows.back().seq());
  }
  return rows;
}

std::map<std::string, int64_t> CheckLedger(client::Client& auditor, client::Client& regulator,
                                           const std::vector<Outcome>& outcomes) {
  auto verify = auditor.AuditorVerifyLedger();
  EXPECT_OK(verify);
  if (verify.ok()) {
    EXPECT_TRUE(verify->ok()) << verify->message();
  }
  auto verify2 = regulator.VerifyLedger();
  EXPECT_OK(verify2);
  if (verify2.ok()) {
    EXPECT_TRUE(verify2->ok()) << verify2->message();
  }

  const std::vector<v1::LedgerEntry> rows = ReadLedger(auditor);
  std::map<std::string, int64_t> charges;
  std::map<int64_t, std::string> by_seq;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].seq(), static_cast<int64_t>(i + 1)) << "a seq is missing or repeated";
    if (rows[i].kind() != "charge") continue;
    EXPECT_TRUE(charges.emplace(rows[i].idempotency_key(), rows[i].seq()).second)
        << "key charged twice: " << rows[i].idempotency_key();
    by_seq[rows[i].seq()] = rows[i].idempotency_key();
  }
  for (const Outcome& o : outcomes) {
    if (!o.status.ok()) continue;
    auto row = by_seq.find(o.ledger_seq);
    EXPECT_TRUE(row != by_seq.end() && row->second == o.key)
        << "no ledger row for the response to " << o.key << " (seq " << o.ledger_seq << ")";
  }
  return charges;
}

TwoReplicaLoad::TwoReplicaLoad(int threads, const ClientFor& client_for,
                               std::string table_handle, double epsilon)
    : outcomes_(threads) {
  for (int t = 0; t < threads; ++t) {
    const bool on_a = t % 2 == 0;
    threads_.emplace_back([this, t, on_a, table_handle, epsilon,
                           client = std::shared_ptr<client::Client>(client_for(on_a))] {
      for (int i = 0; !stop_.load(); ++i) {
        outcomes_[t].push_back(
            Charge(*client, CountsBySex(table_handle, absl::StrCat("k", t, "-", i), epsilon)));
        if (outcomes_[t].back().status.ok()) {
          ++ok_;
        } else if (on_a) {
          return;  // replica A is gone
        }
      }
    });
  }
}

TwoReplicaLoad::~TwoReplicaLoad() {
  stop_ = true;
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

bool TwoReplicaLoad::WaitForOk(int n, std::chrono::milliseconds limit) const {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (ok_.load() < n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

TwoReplicaLoad::Tally TwoReplicaLoad::Stop() {
  stop_ = true;
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  Tally tally;
  for (size_t t = 0; t < outcomes_.size(); ++t) {
    for (const Outcome& o : outcomes_[t]) {
      tally.all.push_back(o);
      if (o.status.ok()) {
        ++(t % 2 == 0 ? tally.ok_a : tally.ok_b);
      } else {
        // Only replica A's clients fail, and only because A is gone.
        EXPECT_EQ(t % 2, 0u) << o.key << ": " << o.status;
        EXPECT_TRUE(absl::IsUnavailable(o.status)) << o.key << ": " << o.status;
        ++tally.lost_a;
      }
    }
  }
  return tally;
}

v1::Job WaitForJob(client::Client& company, const std::string& id, std::chrono::seconds limit) {
  v1::GetJobRequest get;
  get.set_job_id(id);
  v1::Job job;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    auto got = company.GetJob(get);
    if (!got.ok()) {
      ADD_FAILURE() << got.status();
      return job;
    }
    job = got->job();
    if (job.state() != v1::JOB_STATE_QUEUED && job.state() != v1::JOB_STATE_RUNNING) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return job;
}

std::string ArtifactBytes(client::Client& company, const std::string& id) {
  v1::GetArtifactRequest get;
  get.set_artifact_id(id);
  auto artifact = company.GetArtifact(get);
  EXPECT_OK(artifact);
  return artifact.ok() ? artifact->artifact().SerializeAsString() : "";
}

double MillisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace fairvault::testing
