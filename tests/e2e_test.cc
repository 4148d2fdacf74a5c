// End to end: the real server binary on a loopback port with a temporary SQLite file, driven
// through the client library as a regulator, a company and an auditor would.
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "core/testing/status_matchers.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/reflection.grpc.pb.h"
#include "tests/vault_fixture.h"

namespace fairvault::testing {
namespace {

namespace v1 = ::fairvault::v1;
using ::testing::SizeIs;

class EndToEndTest : public VaultFixture {
 protected:
  void SetUp() override {
    population_ = MakePopulation(6000, 7);
    StartVault(population_, /*epsilon=*/5, /*delta=*/1e-6);
  }
  v1::Budget Budget() {
    auto b = company_->GetBudget();
    EXPECT_OK(b);
    EXPECT_THAT(b->budgets(), SizeIs(1));
    return b->budgets(0);
  }
  int CountCharges() {
    auto rows = company_->ListLedger();
    EXPECT_OK(rows);
    int n = 0;
    for (const auto& r : rows->entries()) n += r.kind() == "charge";
    return n;
  }
  Population population_;
};

// The empty name and each of the vault's services by name report SERVING, to a client
// without an API key; an unknown name is NOT_FOUND (the standard protocol's answer).
TEST_F(EndToEndTest, HealthServiceReportsServingPerService) {
  std::unique_ptr<client::Client> anonymous = server_->Connect("");
  for (const char* name : {"", "fairvault.v1.RegulatorService", "fairvault.v1.CompanyService",
                           "fairvault.v1.AuditorService"}) {
    auto status = anonymous->CheckHealth(name);
    ASSERT_OK(status) << name;
    EXPECT_EQ(*status, grpc::health::v1::HealthCheckResponse::SERVING) << name;
  }
  EXPECT_THAT(anonymous->CheckHealth("fairvault.v1.NoSuchService"),
              StatusIs(absl::StatusCode::kNotFound));
}

// Server reflection lists the vault's services (and the health service), and describes them.
TEST_F(EndToEndTest, ReflectionListsAndDescribesTheVaultsServices) {
  auto channel = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
  auto stub = grpc::reflection::v1alpha::ServerReflection::NewStub(channel);
  grpc::ClientContext ctx;
  auto stream = stub->ServerReflectionInfo(&ctx);
  grpc::reflection::v1alpha::ServerReflectionRequest req;
  req.set_list_services("*");
  ASSERT_TRUE(stream->Write(req));
  grpc::reflection::v1alpha::ServerReflectionResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  std::set<std::string> names;
  for (const auto& service : resp.list_services_response().service()) names.insert(service.name());
  for (const char* name : {"fairvault.v1.RegulatorService", "fairvault.v1.CompanyService",
                           "fairvault.v1.AuditorService", "grpc.health.v1.Health"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
  req.set_file_containing_symbol("fairvault.v1.CompanyService");
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_GT(resp.file_descriptor_response().file_descriptor_proto_size(), 0);
  EXPECT_NE(resp.file_descriptor_response().file_descriptor_proto(0).find("FitFairModel"),
            std::string::npos);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// Both binaries say their version (the build's project version).
TEST(VersionTest, BothBinariesPrintTheirVersion) {
  for (const auto& [binary, name] : {std::pair{FAIRVAULT_SERVER_BINARY, "fairvault-server"},
                                     std::pair{FAIRVAULT_CLI_BINARY, "fairvault"}}) {
    FILE* pipe = popen((std::string(binary) + " --version").c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    char buf[256] = {};
    const size_t n = fread(buf, 1, sizeof(buf) - 1, pipe);
    EXPECT_EQ(pclose(pipe), 0) << name;
    EXPECT_EQ(std::string(buf, n), std::string(name) + " " + FAIRVAULT_VERSION + "\n");
  }
}

TEST_F(EndToEndTest, NoisyCountsAreChargedAndCloseToTheTruth) {
  v1::NoisyCountsRequest req;
  req.set_idempotency_key("counts-1");
  req.set_table_handle(table_handle_);
  req.add_columns("region");
  req.add_attributes("sex");
  req.set_epsilon(1);
  req.set_noise(v1::NOISE_KIND_DISCRETE_LAPLACE);
  auto resp = company_->NoisyCounts(req);
  ASSERT_OK(resp);
  ASSERT_THAT(resp->cells(), SizeIs(4));  // {north, south} x {F, M}
  std::map<std::pair<std::string, std::string>, int64_t> truth;
  for (size_t i = 0; i < population_.keys.size(); ++i) {
    truth[{population_.region[i] == 0 ? "north" : "south", population_.sex[i] ? "M" : "F"}]++;
  }
  // Discrete Laplace with scale 2: |noise| > 40 has probability < 2e-9 per cell.
  for (const auto& cell : resp->cells()) {
    EXPECT_NEAR(cell.noisy_count(), (truth[{cell.values(0), cell.group()}]), 40);
  }
  EXPECT_DOUBLE_EQ(resp->charge().cost().epsilon(), 1);
  EXPECT_EQ(resp->charge().cost().mechanism(), "discrete_laplace");
  EXPECT_DOUBLE_EQ(resp->charge().cost().noise_scale(), 2);
  EXPECT_DOUBLE_EQ(resp->charge().budget_after().epsilon_spent(), 1);
  EXPECT_DOUBLE_EQ(resp->charge().budget_after().epsilon_remaining(), 4);
  EXPECT_DOUBLE_EQ(Budget().epsilon_spent(), 1);
  EXPECT_EQ(CountCharges(), 1);
}

TEST_F(EndToEndTest, EqualizedOddsPostProcessorNarrowsTheGap) {
  v1::FitEqualizedOddsRequest req;
  req.set_idempotency_key("eo-1");
  req.set_table_handle(table_handle_);
  req.set_prediction_column("prediction");
  req.set_label_column("label");
  req.add_attributes("sex");
  // The slack bound below holds with probability 1 - beta: beta 1e-6 (the default 0.05 made
  // this test fail about once in a hundred runs), at epsilon 4 so that the slack stays well
  // under the gap before (about 0.16) and the test still tells a narrowed gap from none.
  req.set_epsilon(4);
  req.set_beta(1e-6);
  req.set_gamma(0.02);
  auto resp = company_->FitEqualizedOddsPostProcessor(req);
  ASSERT_OK(resp);
  const v1::Artifact& artifact = resp->artifact();
  ASSERT_EQ(artifact.equalized_odds().groups_size(), 2);
  EXPECT_EQ(artifact.company(), "acme");
  EXPECT_EQ(artifact.ledger_seq(), resp->charge().ledger_seq());

  // The derived predictor's true rates, by expectation over its randomization.
  double tpr[2], fpr[2];
  for (int g = 0; g < 2; ++g) {
    const auto& p = artifact.equalized_odds().groups(g);
    double pos = 0, neg = 0, tp = 0, fp = 0;
    for (size_t i = 0; i < population_.keys.size(); ++i) {
      if (population_.sex[i] != g) continue;
      const double q = population_.prediction[i] ? p.p_keep_1_given_1() : p.p_flip_to_1_given_0();
      (population_.label[i] ? pos : neg) += 1;
      (population_.label[i] ? tp : fp) += q;
    }
    tpr[g] = tp / pos;
    fpr[g] = fp / neg;
  }
  // Before: TPR gap is ~0.16 and FPR gap ~0.16 by construction. After: within gamma plus the
  // noise allowance the artifact reports (slack), plus sampling slop of 0.02.
  const auto& g1 = artifact.equalized_odds().groups(1);
  EXPECT_LE(std::abs(tpr[0] - tpr[1]), 0.02 + g1.tpr_slack() + 0.02);
  EXPECT_LE(std::abs(fpr[0] - fpr[1]), 0.02 + g1.fpr_slack() + 0.02);
  EXPECT_LT(0.02 + g1.tpr_slack() + 0.02, 0.12);  // well below the gap before
  EXPECT_LT(0.02 + g1.fpr_slack() + 0.02, 0.12);

  v1::GetArtifactRequest get;
  get.set_artifact_id(artifact.id());
  auto again = company_->GetArtifact(get);
  ASSERT_OK(again);
  EXPECT_EQ(again->artifact().SerializeAsString(), artifact.SerializeAsString());
}

TEST_F(EndToEndTest, AuditorSeesEveryCompanyAndTheChainVerifies) {
  v1::NoisyCountsRequest req;
  req.set_idempotency_key("k");
  req.set_table_handle(table_handle_);
  req.set_epsilon(0.5);
  ASSERT_OK(company_->NoisyCounts(req));
  auto ledger = auditor_->AuditorListLedger();
  ASSERT_OK(ledger);
  ASSERT_THAT(ledger->entries(), SizeIs(2));  // the grant and the charge
  EXPECT_EQ(ledger->entries(1).kind(), "charge");
  EXPECT_EQ(ledger->entries(1).prev_hash(), ledger->entries(0).hash());
  auto budgets = auditor_->AuditorListBudgets();
  ASSERT_OK(budgets);
  ASSERT_THAT(budgets->budgets(), SizeIs(1));
  EXPECT_DOUBLE_EQ(budgets->budgets(0).epsilon_spent(), 0.5);
  auto verify = auditor_->AuditorVerifyLedger();
  ASSERT_OK(verify);
  EXPECT_TRUE(verify->ok());
  EXPECT_EQ(verify->head_hash(), ledger->entries(1).hash());
  // A company cannot use the auditor's view.
  EXPECT_THAT(company_->AuditorListLedger(), StatusIs(absl::StatusCode::kPermissionDenied));
}

TEST_F(EndToEndTest, BadRequestsGetClearStatusesAndAreNeverCharged) {
  const double spent_before = Budget().epsilon_spent();
  v1::NoisyCountsRequest good;
  good.set_idempotency_key("bad-1");
  good.set_table_handle(table_handle_);
  good.set_epsilon(1);

  auto with = [&](auto mutate) {
    v1::NoisyCountsRequest r = good;
    mutate(r);
    return company_->NoisyCounts(r);
  };
  EXPECT_THAT(with([](auto& r) { r.set_epsilon(-1); }),
              StatusIs(absl::StatusCode::kInvalidArgument, "epsilon"));
  EXPECT_THAT(with([](auto& r) { r.set_epsilon(NAN); }),
              StatusIs(absl::StatusCode::kInvalidArgument, "epsilon"));
  EXPECT_THAT(with([](auto& r) { r.add_columns("zip"); }),
              StatusIs(absl::StatusCode::kInvalidArgument, "zip"));
  EXPECT_THAT(with([](auto& r) { r.add_attributes("religion"); }),
              StatusIs(absl::StatusCode::kInvalidArgument, "religion"));
  EXPECT_THAT(with([](auto& r) { r.set_table_handle("tbl_nope"); }),
              StatusIs(absl::StatusCode::kNotFound, "tbl_nope"));
  EXPECT_THAT(with([](auto& r) { r.set_epsilon(5.5); }),
              StatusIs(absl::StatusCode::kResourceExhausted, "left"));

  // Wrong or missing keys, and the wrong role.
  auto nobody = server_->Connect("");
  EXPECT_THAT(nobody->NoisyCounts(good), StatusIs(absl::StatusCode::kUnauthenticated));
  // The real key with its last character changed (keys are random: it may end in '0').
  std::string forged_key = company_key_;
  forged_key.back() = forged_key.back() == '0' ? '1' : '0';
  auto forged = server_->Connect(forged_key);
  EXPECT_THAT(forged->GetBudget(), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(regulator_->NoisyCounts(good), StatusIs(absl::StatusCode::kPermissionDenied));
  v1::GrantBudgetRequest grant;
  grant.set_company("acme");
  grant.set_dataset("pop");
  grant.set_epsilon(100);
  EXPECT_THAT(company_->GrantBudget(grant), StatusIs(absl::StatusCode::kPermissionDenied));

  EXPECT_DOUBLE_EQ(Budget().epsilon_spent(), spent_before);
  EXPECT_EQ(CountCharges(), 0);

  // Replays: same key and parameters -> same bytes, charged once; other parameters refused.
  auto first = company_->NoisyCounts(good);
  ASSERT_OK(first);
  auto second = company_->NoisyCounts(good);
  ASSERT_OK(second);
  EXPECT_EQ(first->SerializeAsString(), second->SerializeAsString());
  EXPECT_THAT(with([](auto& r) { r.set_epsilon(0.5); }),
              StatusIs(absl::StatusCode::kFailedPrecondition, "idempotency_key"));
  EXPECT_DOUBLE_EQ(Budget().epsilon_spent(), spent_before + 1);
  EXPECT_EQ(CountCharges(), 1);
}

}  // namespace
}  // namespace fairvault::testing
