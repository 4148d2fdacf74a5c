// The benchmark tables of the fair-learning studies; see datasets.h.
#include "experiments/common/datasets.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/apply/model_apply.h"
#include "client/lib/csv.h"
#include "core/util/status_macros.h"

namespace fairvault::experiments {
namespace {

// Which columns of a benchmark table are standardised numbers and which are one-hot categories.
struct ColumnRoles {
  std::vector<std::string> numeric, categorical;
};

struct Encoding {
  std::vector<std::pair<double, double>> moments;   // mean, sd per numeric column
  std::vector<std::map<std::string, int>> offsets;  // column of each category value
  std::vector<std::string> names;
};

// (label, group) of a table row.
using RowLabeler = std::function<absl::StatusOr<std::pair<int, int>>(
    const std::vector<std::string>& row, const std::string& where)>;

std::vector<int> AllRows(const client::CsvTable& table) {
  std::vector<int> rows(table.rows.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int>(i);
  return rows;
}

std::string Where(const client::CsvTable& table, int row, const std::string& path) {
  return absl::StrCat(path, ":", table.row_lines[static_cast<size_t>(row)]);
}

absl::StatusOr<double> NumberAt(const client::CsvTable& table, int row, size_t col,
                                const std::string& path) {
  double v = 0;
  if (!absl::SimpleAtod(table.rows[static_cast<size_t>(row)][col], &v) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(table, row, path), ": bad number in ", table.header[col]));
  }
  return v;
}

// The encoding learned from rows `rows` of `table` (the train rows only).
absl::StatusOr<Encoding> LearnEncoding(const ColumnRoles& roles, const client::CsvTable& table,
                                       const std::vector<int>& rows, const std::string& path) {
  Encoding e;
  for (const std::string& name : roles.numeric) {
    ASSIGN_OR_RETURN(size_t c, table.ColumnIndex(name));
    double sum = 0, sum_sq = 0;
    for (int r : rows) {
      ASSIGN_OR_RETURN(const double v, NumberAt(table, r, c, path));
      sum += v;
      sum_sq += v * v;
    }
    const double n = static_cast<double>(rows.size());
    const double mean = sum / n, sd = std::sqrt(std::max(0.0, sum_sq / n - mean * mean));
    e.moments.emplace_back(mean, sd > 1e-12 ? sd : 1.0);
    e.names.push_back(name);
  }
  int width = static_cast<int>(roles.numeric.size());
  for (const std::string& name : roles.categorical) {
    ASSIGN_OR_RETURN(size_t c, table.ColumnIndex(name));
    std::map<std::string, int> offsets;
    for (int r : rows) offsets.emplace(table.rows[static_cast<size_t>(r)][c], 0);
    for (auto& [value, offset] : offsets) {
      offset = width++;
      e.names.push_back(absl::StrCat(name, "=", value));
    }
    e.offsets.push_back(std::move(offsets));
  }
  return e;
}

// Rows `rows` of `table` encoded with `e`, labelled by `labeler`.
absl::StatusOr<LabeledRows> Apply(const Encoding& e, const ColumnRoles& roles,
                                  const client::CsvTable& table, const std::vector<int>& rows,
                                  const RowLabeler& labeler, const std::string& path) {
  LabeledRows out;
  const auto n = static_cast<Eigen::Index>(rows.size());
  out.x = Eigen::MatrixXd::Zero(n, static_cast<Eigen::Index>(e.names.size()));
  for (size_t k = 0; k < roles.numeric.size(); ++k) {
    ASSIGN_OR_RETURN(size_t c, table.ColumnIndex(roles.numeric[k]));
    for (Eigen::Index i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(const double v, NumberAt(table, rows[static_cast<size_t>(i)], c, path));
      out.x(i, static_cast<Eigen::Index>(k)) = (v - e.moments[k].first) / e.moments[k].second;
    }
  }
  for (size_t k = 0; k < roles.categorical.size(); ++k) {
    ASSIGN_OR_RETURN(size_t c, table.ColumnIndex(roles.categorical[k]));
    for (Eigen::Index i = 0; i < n; ++i) {
      auto it = e.offsets[k].find(table.rows[static_cast<size_t>(rows[static_cast<size_t>(i)])][c]);
      if (it != e.offsets[k].end()) out.x(i, it->second) = 1;
    }
  }
  for (int r : rows) {
    ASSIGN_OR_RETURN(const auto label_group,
                     labeler(table.rows[static_cast<size_t>(r)], Where(table, r, path)));
    out.y.push_back(label_group.first);
    out.group.push_back(label_group.second);
  }
  return out;
}

// The rows whose numeric columns all hold finite numbers (the others have a missing value).
absl::StatusOr<std::vector<int>> CompleteRows(const ColumnRoles& roles,
                                              const client::CsvTable& table) {
  std::vector<size_t> cols;
  for (const std::string& name : roles.numeric) {
    ASSIGN_OR_RETURN(const size_t c, table.ColumnIndex(name));
    cols.push_back(c);
  }
  std::vector<int> rows;
  for (size_t r = 0; r < table.rows.size(); ++r) {
    bool complete = true;
    for (size_t c : cols) {
      double v = 0;
      complete = complete && absl::SimpleAtod(table.rows[r][c], &v) && std::isfinite(v);
    }
    if (complete) rows.push_back(static_cast<int>(r));
  }
  return rows;
}

// Rows `rows` split by SplitIndices (25% test), by position in `rows`.
std::pair<std::vector<int>, std::vector<int>> SplitRows(const std::vector<int>& rows,
                                                        uint64_t seed) {
  auto [a, b] = SplitIndices(static_cast<int>(rows.size()), 0.25, seed);
  for (int& i : a) i = rows[static_cast<size_t>(i)];
  for (int& i : b) i = rows[static_cast<size_t>(i)];
  return {a, b};
}

// A whole data set from one file: the train rows learn the encoding, both parts use it.
absl::StatusOr<FairDataset> EncodeSplit(const ColumnRoles& roles, const client::CsvTable& table,
                                        const std::vector<int>& train_rows,
                                        const std::vector<int>& test_rows,
                                        const RowLabeler& labeler, const std::string& path) {
  FairDataset data;
  data.categories = {"Female", "Male"};
  ASSIGN_OR_RETURN(Encoding e, LearnEncoding(roles, table, train_rows, path));
  ASSIGN_OR_RETURN(data.train, Apply(e, roles, table, train_rows, labeler, path));
  ASSIGN_OR_RETURN(data.test, Apply(e, roles, table, test_rows, labeler, path));
  data.feature_names = e.names;
  return data;
}

}  // namespace

absl::StatusOr<AdultData> LoadAdult(const std::string& datasets_dir) {
  const ColumnRoles roles = {
      {"age", "education-num", "capital-gain", "capital-loss", "hours-per-week"},
      {"workclass", "education", "marital-status", "occupation", "relationship", "native-country"}};
  const std::string train_path = datasets_dir + "/adult/adult.data";
  const std::string test_path = datasets_dir + "/adult/adult.test";
  ASSIGN_OR_RETURN(client::CsvTable train, client::ReadCsvFile(train_path));
  ASSIGN_OR_RETURN(client::CsvTable test, client::ReadCsvFile(test_path));
  ASSIGN_OR_RETURN(const size_t y_col, train.ColumnIndex("Y"));
  ASSIGN_OR_RETURN(const size_t sex_col, train.ColumnIndex("sex"));
  ASSIGN_OR_RETURN(const size_t test_y_col, test.ColumnIndex("Y"));
  ASSIGN_OR_RETURN(const size_t test_sex_col, test.ColumnIndex("sex"));
  const auto labeler = [](size_t y, size_t sex) -> RowLabeler {
    return [y, sex](const std::vector<std::string>& row,
                    const std::string& where) -> absl::StatusOr<std::pair<int, int>> {
      if (row[sex] != "Female" && row[sex] != "Male") {
        return absl::InvalidArgumentError(absl::StrCat(where, ": unknown sex '", row[sex], "'"));
      }
      return std::make_pair(row[y] == ">50K" || row[y] == ">50K." ? 1 : 0,
                            row[sex] == "Male" ? 1 : 0);
    };
  };
  AdultData data;
  data.name = "adult";
  data.categories = {"Female", "Male"};
  const std::vector<int> train_rows = AllRows(train);
  ASSIGN_OR_RETURN(Encoding e, LearnEncoding(roles, train, train_rows, train_path));
  ASSIGN_OR_RETURN(data.train,
                   Apply(e, roles, train, train_rows, labeler(y_col, sex_col), train_path));
  ASSIGN_OR_RETURN(data.test, Apply(e, roles, test, AllRows(test),
                                    labeler(test_y_col, test_sex_col), test_path));
  data.feature_names = e.names;
  data.description = absl::StrCat(
      "adult/adult.data (train, ", data.train.y.size(), " rows) and adult.test (test, ",
      data.test.y.size(),
      " rows); label income > 50K; 5 standardised numeric and 6 one-hot categorical columns (",
      data.feature_names.size(), " features, no sex, race or fnlwgt)");
  return data;
}

absl::StatusOr<FairDataset> LoadCreditCard(const std::string& datasets_dir, uint64_t split_seed) {
  ColumnRoles roles;
  roles.numeric = {"LIMIT_BAL", "AGE"};
  for (int m = 1; m <= 6; ++m) roles.numeric.push_back(absl::StrCat("BILL_AMT", m));
  for (int m = 1; m <= 6; ++m) roles.numeric.push_back(absl::StrCat("PAY_AMT", m));
  roles.categorical = {"EDUCATION", "MARRIAGE", "PAY_0", "PAY_2",
                       "PAY_3",     "PAY_4",    "PAY_5", "PAY_6"};
  const std::string path = datasets_dir + "/credit/UCI_Credit_Card.csv";
  ASSIGN_OR_RETURN(client::CsvTable table, client::ReadCsvFile(path));
  ASSIGN_OR_RETURN(const size_t y, table.ColumnIndex("default.payment.next.month"));
  ASSIGN_OR_RETURN(const size_t sex, table.ColumnIndex("SEX"));
  const RowLabeler labeler = [y, sex](
                                 const std::vector<std::string>& row,
                                 const std::string& where) -> absl::StatusOr<std::pair<int, int>> {
    if ((row[sex] != "1" && row[sex] != "2") || (row[y] != "0" && row[y] != "1")) {
      return absl::InvalidArgumentError(absl::StrCat(where,
                                                     ": SEX must be 1 or 2 and "
                                                     "default.payment.next.month 0 or 1"));
    }
    return std::make_pair(row[y] == "1" ? 1 : 0, row[sex] == "1" ? 1 : 0);
  };
  ASSIGN_OR_RETURN(const std::vector<int> complete, CompleteRows(roles, table));
  const auto [train_rows, test_rows] = SplitRows(complete, split_seed);
  ASSIGN_OR_RETURN(FairDataset data,
                   EncodeSplit(roles, table, train_rows, test_rows, labeler, path));
  data.name = "credit";
  data.description = absl::StrCat(
      "credit/UCI_Credit_Card.csv without the ", table.rows.size() - complete.size(),
      " rows with a missing number (AGE 'nan' in this copy), seeded 75/25 split (seed ", split_seed,
      ": ", train_rows.size(), " train, ", test_rows.size(),
      " test rows); label default.payment.next.month; 14 standardised numeric (LIMIT_BAL, AGE, "
      "BILL_AMT1-6, PAY_AMT1-6) and 8 one-hot categorical columns (EDUCATION, MARRIAGE, PAY_0, "
      "PAY_2-6): ",
      data.feature_names.size(), " features, no ID, no SEX");
  return data;
}

absl::StatusOr<FairDataset> LoadParkinsons(const std::string& datasets_dir, uint64_t split_seed,
                                           bool motor_updrs) {
  ColumnRoles roles;
  roles.numeric = {"age", "test_time"};
  if (motor_updrs) roles.numeric.push_back("motor_UPDRS");
  for (const char* voice : {"Jitter(%)", "Jitter(Abs)", "Jitter:RAP", "Jitter:PPQ5", "Jitter:DDP",
                            "Shimmer", "Shimmer(dB)", "Shimmer:APQ3", "Shimmer:APQ5",
                            "Shimmer:APQ11", "Shimmer:DDA", "NHR", "HNR", "RPDE", "DFA", "PPE"}) {
    roles.numeric.push_back(voice);
  }
  const std::string path = datasets_dir + "/parkinsons/parkinsons_updrs.csv";
  ASSIGN_OR_RETURN(client::CsvTable table, client::ReadCsvFile(path));
  ASSIGN_OR_RETURN(const size_t total, table.ColumnIndex("total_UPDRS"));
  ASSIGN_OR_RETURN(const size_t sex, table.ColumnIndex("sex"));
  // The label's threshold: the median of total_UPDRS over the whole file (the data set's label
  // definition, fixed before any split).
  std::vector<double> totals;
  for (size_t r = 0; r < table.rows.size(); ++r) {
    ASSIGN_OR_RETURN(const double v, NumberAt(table, static_cast<int>(r), total, path));
    totals.push_back(v);
  }
  if (totals.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no rows"));
  std::vector<double> sorted = totals;
  std::sort(sorted.begin(), sorted.end());
  const size_t mid = sorted.size() / 2;
  const double median = sorted.size() % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  const RowLabeler labeler = [total, sex, median](
                                 const std::vector<std::string>& row,
                                 const std::string& where) -> absl::StatusOr<std::pair<int, int>> {
    double v = 0;
    if (!absl::SimpleAtod(row[total], &v) || (row[sex] != "0" && row[sex] != "1")) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": total_UPDRS must be a number and sex 0 or 1"));
    }
    return std::make_pair(v > median ? 1 : 0, row[sex] == "0" ? 1 : 0);
  };
  ASSIGN_OR_RETURN(const std::vector<int> complete, CompleteRows(roles, table));
  if (complete.size() != table.rows.size()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": a feature value is missing"));
  }
  const auto [train_rows, test_rows] = SplitRows(complete, split_seed);
  ASSIGN_OR_RETURN(FairDataset data,
                   EncodeSplit(roles, table, train_rows, test_rows, labeler, path));
  data.name = motor_updrs ? "parkinsons" : "parkinsons_no_motor";
  data.description = absl::StrCat(
      "parkinsons/parkinsons_updrs.csv, seeded 75/25 row split (seed ", split_seed, ": ",
      train_rows.size(), " train, ", test_rows.size(), " test rows); label total_UPDRS > ", median,
      " (the median of all rows); ", data.feature_names.size(),
      " standardised numeric features: age, test_time, ", motor_updrs ? "motor_UPDRS, " : "",
      "the 16 voice measures (no subject#, sex", motor_updrs ? "" : " or motor_UPDRS", ")");
  return data;
}

absl::StatusOr<FairDataset> LoadFairDataset(const std::string& name,
                                            const std::string& datasets_dir, uint64_t split_seed) {
  if (name == "adult") return LoadAdult(datasets_dir);
  if (name == "credit") return LoadCreditCard(datasets_dir, split_seed);
  if (name == "parkinsons") return LoadParkinsons(datasets_dir, split_seed, true);
  if (name == "parkinsons_no_motor") return LoadParkinsons(datasets_dir, split_seed, false);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown data set '", name, "': use adult, credit, parkinsons or parkinsons_no_motor"));
}

std::pair<std::vector<int>, std::vector<int>> SplitIndices(int n, double second_fraction,
                                                           uint64_t seed) {
  std::vector<int> perm(static_cast<size_t>(std::max(n, 0)));
  for (int i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = i;
  client::ModelRng gen(seed);
  for (int i = n - 1; i > 0; --i) {
    const auto j = static_cast<size_t>(client::DrawComponent(static_cast<uint64_t>(i) + 1, gen));
    std::swap(perm[static_cast<size_t>(i)], perm[j]);
  }
  const auto second = static_cast<size_t>(std::llround(n * second_fraction));
  std::vector<int> b(perm.begin(), perm.begin() + static_cast<std::ptrdiff_t>(second));
  std::vector<int> a(perm.begin() + static_cast<std::ptrdiff_t>(second), perm.end());
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return {a, b};
}

LabeledRows TakeRows(const LabeledRows& rows, const std::vector<int>& indices) {
  LabeledRows out;
  out.x.resize(static_cast<Eigen::Index>(indices.size()), rows.x.cols());
  for (size_t i = 0; i < indices.size(); ++i) {
    out.x.row(static_cast<Eigen::Index>(i)) = rows.x.row(indices[i]);
    out.y.push_back(rows.y[static_cast<size_t>(indices[i])]);
    out.group.push_back(rows.group[static_cast<size_t>(indices[i])]);
  }
  return out;
}

}  // namespace fairvault::experiments
