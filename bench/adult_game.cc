// Adult encoded for the fair game (see adult_game.h).
#include "bench/adult_game.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/lib/csv.h"
#include "core/util/status_macros.h"

#ifndef FAIRVAULT_SOURCE_DIR
#error "FAIRVAULT_SOURCE_DIR must be defined by the build"
#endif

namespace fairvault::bench {
namespace {

const char* const kNumeric[] = {"age", "education-num", "capital-gain", "capital-loss",
                                "hours-per-week"};
const char* const kCategorical[] = {"workclass",  "education",    "marital-status",
                                    "occupation", "relationship", "native-country"};

}  // namespace

std::string AdultDataPath() {
  const char* env = std::getenv("FAIRVAULT_DATASETS");
  const std::string dir =
      env != nullptr ? std::string(env) : std::string(FAIRVAULT_SOURCE_DIR) + "/../shared/datasets";
  return dir + "/adult/adult.data";
}

absl::StatusOr<AdultGame> LoadAdultGame(const std::string& path) {
  ASSIGN_OR_RETURN(client::CsvTable table, client::ReadCsvFile(path));
  const size_t n = table.rows.size();
  AdultGame game;
  // Numeric columns, standardised.
  std::vector<std::vector<double>> numeric;
  for (const char* name : kNumeric) {
    ASSIGN_OR_RETURN(size_t c, table.ColumnIndex(name));
    std::vector<double> values(n);
    double sum = 0, sum_sq = 0;
    for (size_t r = 0; r < n; ++r) {
      if (!absl::SimpleAtod(table.rows[r][c], &values[r])) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": bad number in ", name));
      }
      sum += values[r];
      sum_sq += values[r] * values[r];
    }
    const double mean = sum / n, sd = std::sqrt(std::max(0.0, sum_sq / n - mean * mean));
    for (double& v : values) v = (v - mean) / (sd > 1e-12 ? sd : 1.0);
    numeric.push_back(std::move(values));
    game.feature_names.push_back(name);
  }
  // Categorical columns, one-hot (one column per value seen, in sorted order).
  std::vector<std::pair<size_t, std::map<std::string, int>>> categorical;
  int width = static_cast<int>(numeric.size());
  for (const char* name : kCategorical) {
    ASSIGN_OR_RETURN(size_t c, table.ColumnIndex(name));
    std::map<std::string, int> offsets;
    for (const auto& row : table.rows) offsets.emplace(row[c], 0);
    for (auto& [value, offset] : offsets) {
      offset = width++;
      game.feature_names.push_back(absl::StrCat(name, "=", value));
    }
    categorical.emplace_back(c, std::move(offsets));
  }
  game.features = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(n), width);
  for (size_t j = 0; j < numeric.size(); ++j) {
    for (size_t r = 0; r < n; ++r) game.features(r, j) = numeric[j][r];
  }
  for (const auto& [c, offsets] : categorical) {
    for (size_t r = 0; r < n; ++r) game.features(r, offsets.at(table.rows[r][c])) = 1;
  }
  ASSIGN_OR_RETURN(size_t y_col, table.ColumnIndex("Y"));
  ASSIGN_OR_RETURN(size_t sex_col, table.ColumnIndex("sex"));
  for (const auto& row : table.rows) {
    game.labels.push_back(row[y_col] == ">50K" ? 1 : 0);
    if (row[sex_col] != "Female" && row[sex_col] != "Male") {
      return absl::InvalidArgumentError(absl::StrCat(path, ": unknown sex '", row[sex_col], "'"));
    }
    game.groups.push_back(row[sex_col] == "Male" ? 1 : 0);
  }
  return game;
}

const AdultGame& SharedAdultGame() {
  static const AdultGame* game = [] {
    auto loaded = LoadAdultGame(AdultDataPath());
    if (!loaded.ok()) {
      std::fprintf(stderr, "adult: %s\n", loaded.status().ToString().c_str());
      std::abort();
    }
    return new AdultGame(*std::move(loaded));
  }();
  return *game;
}

}  // namespace fairvault::bench
