// NoisyCounts: the contingency table of the company's columns x protected groups, with integer
// noise per cell and its confidence interval, through the one charge path (vault_charge_impl.h).
#include <cmath>
#include <cstdlib>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/accounting/accountant.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "server/app/vault.h"
#include "server/app/vault_charge_impl.h"
#include "server/app/vault_internal.h"
#include "server/util/crypto.h"

namespace fairvault::server {

using internal::RequireRole;
using storage::Role;
namespace accounting = core::accounting;

namespace {

constexpr int64_t kMaxCells = 100'000;
// Level of the confidence interval each noisy count comes with.
constexpr double kCountConfidence = 0.95;

}  // namespace

// ---- NoisyCounts -----------------------------------------------------------------------------

absl::StatusOr<v1::NoisyCountsResponse> Vault::NoisyCounts(const Caller& caller,
                                                           const v1::NoisyCountsRequest& req) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kCompany}));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndPositive(req.epsilon(), "epsilon"));
  if (req.columns_size() > 4) {
    return absl::InvalidArgumentError("columns: at most 4 columns may be crossed");
  }
  PreparedRelease release = PreparedRelease::Of("NoisyCounts", req);
  switch (req.noise()) {
    case v1::NOISE_KIND_UNSPECIFIED:
    case v1::NOISE_KIND_DISCRETE_LAPLACE:
      release.noise = v1::NOISE_KIND_DISCRETE_LAPLACE;
      break;
    case v1::NOISE_KIND_DISCRETE_GAUSSIAN:
      release.noise = v1::NOISE_KIND_DISCRETE_GAUSSIAN;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "noise: unknown value ", static_cast<int>(req.noise()),
          "; use NOISE_KIND_DISCRETE_LAPLACE (1) or NOISE_KIND_DISCRETE_GAUSSIAN (2)"));
  }
  // Moving one subject between groups changes two cells by one.
  release.parts = {
      {"counts", release.noise == v1::NOISE_KIND_DISCRETE_GAUSSIAN ? std::sqrt(2.0) : 2.0}};
  ASSIGN_OR_RETURN(auto replay, Replay<v1::NoisyCountsResponse>(caller, release));
  if (replay) return *std::move(replay);
  // Checks added after releases were stored come after the replay: a stored release replays.
  RETURN_IF_ERROR(internal::ValidateColumns(req.columns(), "columns", 0, 4));

  ASSIGN_OR_RETURN(ResolvedTable table, ResolveTable(caller, req.table_handle()));
  release.dataset_id = table.dataset.id;
  release.dataset_name = table.dataset.name;
  std::vector<int> columns;
  for (const std::string& name : req.columns()) {
    ASSIGN_OR_RETURN(int c, internal::ColumnIndex(*table.table, name, "columns"));
    columns.push_back(c);
  }
  ASSIGN_OR_RETURN(JoinedRows joined, Join(table, req.attributes(), req.unmatched()));
  release.SizesFrom(joined);

  // Domains of the company's columns are the company's own (public) values: those of the
  // used rows, in string order, from the table's cached dictionary of each column.
  const int64_t n = static_cast<int64_t>(joined.table_rows.size());
  std::vector<std::vector<std::string>> domains;
  std::vector<std::vector<int>> value_codes;
  for (int c : columns) {
    std::shared_ptr<const ColumnDictionary> dict = Dictionary(table, c);
    std::vector<int> used(dict->domain.size(), -1);
    for (int64_t i = 0; i < n; ++i) used[dict->code[joined.table_rows[i]]] = 0;
    std::vector<std::string> domain;
    for (size_t v = 0; v < used.size(); ++v) {
      if (used[v] < 0) continue;
      used[v] = static_cast<int>(domain.size());
      domain.push_back(dict->domain[v]);
    }
    std::vector<int> codes(n);
    for (int64_t i = 0; i < n; ++i) codes[i] = used[dict->code[joined.table_rows[i]]];
    domains.push_back(std::move(domain));
    value_codes.push_back(std::move(codes));
  }
  int64_t cells = joined.num_groups;
  for (const auto& d : domains) {
    cells *= static_cast<int64_t>(d.size());
    if (cells > kMaxCells) {
      return absl::InvalidArgumentError(absl::StrCat("columns: the table would have more than ",
                                                     kMaxCells,
                                                     " cells; cross fewer or coarser columns"));
    }
  }
  // Cell index: column values (first most significant), then the group.
  std::vector<int64_t> counts(cells, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t cell = 0;
    for (size_t k = 0; k < columns.size(); ++k) cell = cell * domains[k].size() + value_codes[k][i];
    counts[cell * joined.num_groups + joined.group[i]]++;
  }

  return ChargeAndRelease<v1::NoisyCountsResponse>(
      caller, release,
      [&](const Noises& noises, int64_t,
          v1::NoisyCountsResponse* resp) -> absl::StatusOr<std::optional<storage::ArtifactRecord>> {
        const core::dp::IntegerNoise& noise = *noises[0];
        // Intervals from the public noise scale alone: post-processing of each noisy count.
        const int64_t half_width = noise.HalfWidth(kCountConfidence);
        resp->set_confidence(kCountConfidence);
        resp->set_noise_half_width(half_width);
        *resp->mutable_columns() = req.columns();
        for (const auto& a : joined.attributes) resp->add_attributes(a);
        resp->set_rows_used(n);
        resp->set_rows_dropped(joined.dropped);
        resp->set_table_handle(req.table_handle());
        for (int64_t cell = 0; cell < cells; ++cell) {
          v1::CountCell* out = resp->add_cells();
          int64_t rest = cell / joined.num_groups;
          std::vector<std::string> values(columns.size());
          for (int k = static_cast<int>(columns.size()) - 1; k >= 0; --k) {
            values[k] = domains[k][rest % domains[k].size()];
            rest /= domains[k].size();
          }
          for (auto& v : values) out->add_values(std::move(v));
          out->set_group(joined.group_labels[cell % joined.num_groups]);
          const int64_t noisy = noise.AddNoise(counts[cell], gen_);
          out->set_noisy_count(noisy);
          out->set_ci_low(std::max<int64_t>(0, noisy - half_width));
          out->set_ci_high(noisy > INT64_MAX - half_width ? INT64_MAX : noisy + half_width);
        }
        return std::optional<storage::ArtifactRecord>();
      });
}

}  // namespace fairvault::server
