// Builds the synthetic population and drives the regulator's set-up through the client.
#include "tests/vault_fixture.h"

#include <random>

#include "absl/strings/str_format.h"
#include "core/testing/status_matchers.h"

namespace fairvault::testing {

namespace v1 = ::fairvault::v1;

Population MakePopulation(int n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Population p;
  for (int i = 0; i < n; ++i) {
    p.keys.push_back(absl::StrFormat("s%07d", i));
    const int sex = u(gen) < 0.45 ? 0 : 1;
    const int race = u(gen) < 0.6 ? 0 : (u(gen) < 0.5 ? 1 : 2);
    const int label = u(gen) < (sex == 1 ? 0.35 : 0.2) ? 1 : 0;
    // The company's model is more accurate on group M: unequal error rates to post-process.
    const double accuracy = sex == 1 ? 0.88 : 0.72;
    const int prediction = u(gen) < accuracy ? label : 1 - label;
    p.sex.push_back(sex);
    p.race.push_back(race);
    p.region.push_back(u(gen) < 0.5 ? 0 : 1);
    p.label.push_back(label);
    p.prediction.push_back(prediction);
  }
  return p;
}

void SeedVault(client::Client& regulator, const ConnectFn& connect, const Population& population,
               double epsilon, double delta, const SeedNames& names, SeededVault* out) {
  v1::CreateDatasetRequest dataset;
  dataset.set_name(names.dataset);
  auto* sex = dataset.add_attributes();
  sex->set_name("sex");
  sex->add_categories("F");
  sex->add_categories("M");
  auto* race = dataset.add_attributes();
  race->set_name("race");
  for (const char* r : {"A", "B", "C"}) race->add_categories(r);
  ASSERT_OK(regulator.CreateDataset(dataset));

  v1::ImportHeader header;
  header.set_dataset(names.dataset);
  header.set_batch_id("batch-1");
  header.add_attributes("race");  // any order: the server maps columns to attributes
  header.add_attributes("sex");
  std::vector<std::string> categories;
  const char* kSex[] = {"F", "M"};
  const char* kRace[] = {"A", "B", "C"};
  for (size_t i = 0; i < population.keys.size(); ++i) {
    categories.push_back(kRace[population.race[i]]);
    categories.push_back(kSex[population.sex[i]]);
  }
  auto imported = regulator.ImportAttributes(header, population.keys, categories, 1000);
  ASSERT_OK(imported);
  ASSERT_EQ(imported->subject_count(), static_cast<int64_t>(population.keys.size()));

  for (auto [name, role, key] :
       {std::make_tuple(names.company, v1::ROLE_COMPANY, &out->company_key),
        std::make_tuple(names.auditor, v1::ROLE_AUDITOR, &out->auditor_key)}) {
    v1::CreateAccountRequest req;
    req.set_name(name);
    req.set_role(role);
    auto created = regulator.CreateAccount(req);
    ASSERT_OK(created);
    *key = created->api_key();
  }

  v1::GrantBudgetRequest grant;
  grant.set_company(names.company);
  grant.set_dataset(names.dataset);
  grant.set_epsilon(epsilon);
  grant.set_delta(delta);
  ASSERT_OK(regulator.GrantBudget(grant));

  v1::TableHeader table;
  table.set_dataset(names.dataset);
  auto add_column = [&](const char* name, v1::ColumnType type) {
    auto* c = table.add_columns();
    c->set_name(name);
    c->set_type(type);
  };
  add_column("region", v1::COLUMN_TYPE_CATEGORICAL);
  add_column("prediction", v1::COLUMN_TYPE_NUMERIC);
  add_column("label", v1::COLUMN_TYPE_NUMERIC);
  std::vector<v1::ColumnValues> columns(3);
  for (size_t i = 0; i < population.keys.size(); ++i) {
    columns[0].add_categorical(population.region[i] == 0 ? "north" : "south");
    columns[1].add_numeric(population.prediction[i]);
    columns[2].add_numeric(population.label[i]);
  }
  const std::unique_ptr<client::Client> company = connect(out->company_key);
  ASSERT_NE(company, nullptr);
  auto uploaded = company->UploadTable(table, population.keys, columns, 777);
  ASSERT_OK(uploaded);
  ASSERT_EQ(uploaded->rows_in_vault(), static_cast<int64_t>(population.keys.size()));
  out->table_handle = uploaded->table_handle();
}

void VaultFixture::StartVault(const Population& population, double epsilon, double delta) {
  server_ = std::make_unique<ServerProcess>(db_.empty() ? TempDatabasePath("e2e") : db_);
  auto key = server_->Bootstrap("regulator");
  ASSERT_OK(key);
  regulator_key_ = *key;
  server_->set_serve_flags(serve_flags_);
  if (!server_log_.empty()) server_->set_log_path(server_log_);
  ASSERT_OK(server_->Start());
  regulator_ = server_->Connect(regulator_key_);
  ASSERT_NE(regulator_, nullptr);

  SeededVault seeded;
  ASSERT_NO_FATAL_FAILURE(SeedVault(
      *regulator_, [&](const std::string& key) { return server_->Connect(key); }, population,
      epsilon, delta, SeedNames{}, &seeded));
  company_key_ = seeded.company_key;
  auditor_key_ = seeded.auditor_key;
  table_handle_ = seeded.table_handle;
  company_ = server_->Connect(company_key_);
  auditor_ = server_->Connect(auditor_key_);
}

void VaultFixture::TearDown() {
  regulator_.reset();
  company_.reset();
  auditor_.reset();
  server_.reset();
}

v1::FitFairModelRequest LongTrainingJob(const std::string& table_handle) {
  v1::FitFairModelRequest fit;
  fit.set_idempotency_key("long-job");
  fit.set_table_handle(table_handle);
  fit.set_algorithm(v1::FAIR_MODEL_ALGORITHM_DP_ORACLE_LEARNER);
  fit.add_feature_columns("prediction");
  fit.set_label_column("label");
  fit.add_attributes("sex");
  fit.set_epsilon(5);
  fit.set_gamma(0.01);
  fit.set_rounds(60000);
  return fit;
}

}  // namespace fairvault::testing
