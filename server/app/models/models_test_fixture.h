// The fixture of the fair-model use-cases' tests (best_response_test.cc, fit_fair_model_test.cc):
// the vault of VaultTest with a company table of features, labels and hypothesis columns, and
// the requests and waits those tests share.
#ifndef FAIRVAULT_SERVER_APP_MODELS_MODELS_TEST_FIXTURE_H_
#define FAIRVAULT_SERVER_APP_MODELS_MODELS_TEST_FIXTURE_H_

#include <chrono>
#include <thread>

#include "absl/strings/ascii.h"
#include "server/app/vault_test_fixture.h"

namespace fairvault::server::testing {

class VaultModelsTest : public VaultTest {
 protected:
  void SetUp() override {
    VaultTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_OK(vault_->StartJobs());
    // Features f1 (tracks the label), f2 (noise), the label, and five hypothesis columns:
    // h0 = the label itself, h1 = all ones, h2..h4 = arbitrary patterns.
    v1::TableHeader header;
    header.set_dataset("census");
    for (const char* name : {"f1", "f2", "label", "h0", "h1", "h2", "h3", "h4"}) {
      v1::ColumnSpec* c = header.add_columns();
      c->set_name(name);
      c->set_type(v1::COLUMN_TYPE_NUMERIC);
    }
    v1::TableChunk chunk;
    std::vector<v1::ColumnValues*> cols;
    for (int c = 0; c < 8; ++c) cols.push_back(chunk.add_columns());
    for (size_t i = 0; i < subjects_.size(); ++i) {
      chunk.add_subject_keys(subjects_[i].key);
      const double label = rows_[i].label;
      cols[0]->add_numeric(label + 0.3 * static_cast<double>(i % 3) - 0.3);
      cols[1]->add_numeric(static_cast<double>((i * 7) % 5) / 5);
      cols[2]->add_numeric(label);
      cols[3]->add_numeric(label);
      cols[4]->add_numeric(1);
      cols[5]->add_numeric(static_cast<double>(i % 2));
      cols[6]->add_numeric(static_cast<double>(i % 3 == 0));
      cols[7]->add_numeric(1 - label);
    }
    auto uploaded = Upload(acme_, header, {chunk});
    ASSERT_OK(uploaded);
    handle_ = uploaded->table_handle();
    header_ = header;
    chunk_ = chunk;
    v1::NoisyCountsRequest masses;
    masses.set_idempotency_key("masses");
    masses.set_table_handle(handle_);
    masses.add_columns("label");
    masses.add_attributes("sex");
    masses.set_epsilon(kHugeEpsilon);
    ASSERT_OK(vault_->NoisyCounts(acme_, masses));
  }

  v1::BestResponseRequest BestResponseRequest(const std::string& key) {
    v1::BestResponseRequest req;
    req.set_idempotency_key(key);
    req.set_table_handle(handle_);
    req.add_feature_columns("f1");
    req.add_feature_columns("f2");
    req.set_label_column("label");
    req.add_attributes("sex");
    req.set_masses_key("masses");
    for (double l : {0.5, 0.0, 0.25, 0.0}) req.add_lambda(l);
    req.set_lambda_bound(1);
    req.set_gamma(0.05);
    req.set_oracle(v1::BEST_RESPONSE_ORACLE_LEAST_SQUARES);
    req.set_epsilon(1);
    req.set_clip_l1(2);
    return req;
  }

  v1::FitFairModelRequest FitRequest(const std::string& key, v1::FairModelAlgorithm algorithm) {
    v1::FitFairModelRequest req;
    req.set_idempotency_key(key);
    req.set_table_handle(handle_);
    req.set_algorithm(algorithm);
    req.set_label_column("label");
    req.add_attributes("sex");
    req.set_epsilon(2);
    if (algorithm == v1::FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM) {
      for (const char* h : {"h0", "h1", "h2", "h3", "h4"}) req.add_hypothesis_columns(h);
      req.set_em_delta(0.01);
      req.set_epsilon(kHugeEpsilon);
    } else {
      req.add_feature_columns("f1");
      req.add_feature_columns("f2");
      req.set_rounds(20);
      req.set_gamma(0.02);
    }
    return req;
  }

  // Polls acme's job until it is finished (at most 60 s).
  v1::Job WaitFor(const std::string& job_id) { return WaitForJob(acme_, job_id); }

  std::string handle_;
  v1::TableHeader header_;  // the table above, for other companies' uploads
  v1::TableChunk chunk_;
};

}  // namespace fairvault::server::testing

#endif  // FAIRVAULT_SERVER_APP_MODELS_MODELS_TEST_FIXTURE_H_
