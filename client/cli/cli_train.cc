// `fairvault train-logreg`: the company's local, non-private baseline model. Categorical
// columns are one-hot encoded with the training file's categories, numeric ones standardised
// with the training mean and standard deviation; the fitted model's 0/1 predictions are
// written as key,prediction,label for uploading and post-processing.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>

#include "Eigen/Dense"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/cli_common.h"
#include "core/learn/logistic_regression.h"
#include "core/util/status_macros.h"

namespace fairvault::client::cli {
namespace {

// Feature encoding learned from the training file.
struct Encoder {
  struct Numeric {
    std::string name;
    double mean = 0, scale = 1;
  };
  struct Categorical {
    std::string name;
    std::map<std::string, int> offset;  // category → feature column (relative)
  };
  std::vector<Numeric> numeric;
  std::vector<Categorical> categorical;
  int width = 0;
};

absl::StatusOr<Encoder> FitEncoder(const CsvTable& table, const std::string& path,
                                   const std::vector<std::string>& numeric,
                                   const std::vector<std::string>& categorical) {
  Encoder encoder;
  const double n = static_cast<double>(table.rows.size());
  for (const std::string& name : numeric) {
    ASSIGN_OR_RETURN(const size_t c, table.ColumnIndex(name));
    double sum = 0, sum_sq = 0;
    for (size_t r = 0; r < table.rows.size(); ++r) {
      ASSIGN_OR_RETURN(const double v, ParseCell(table, path, r, c));
      sum += v;
      sum_sq += v * v;
    }
    const double mean = sum / n;
    const double sd = std::sqrt(std::max(0.0, sum_sq / n - mean * mean));
    encoder.numeric.push_back({name, mean, sd > 1e-12 ? sd : 1.0});
    ++encoder.width;
  }
  for (const std::string& name : categorical) {
    ASSIGN_OR_RETURN(const size_t c, table.ColumnIndex(name));
    Encoder::Categorical cat{name, {}};
    for (const auto& row : table.rows) cat.offset.emplace(row[c], 0);
    int k = 0;
    for (auto& [value, offset] : cat.offset) offset = k++;
    encoder.width += k;
    encoder.categorical.push_back(std::move(cat));
  }
  return encoder;
}

// The encoded features' names, in column order: "<numeric>_z" (standardised) and
// "<categorical>=<value>" (one-hot).
std::vector<std::string> EncodedNames(const Encoder& encoder) {
  std::vector<std::string> names(encoder.width);
  int base = 0;
  for (const Encoder::Numeric& num : encoder.numeric) names[base++] = absl::StrCat(num.name, "_z");
  for (const Encoder::Categorical& cat : encoder.categorical) {
    for (const auto& [value, offset] : cat.offset) {
      names[base + offset] = absl::StrCat(cat.name, "=", value);
    }
    base += static_cast<int>(cat.offset.size());
  }
  return names;
}

// Rows of `table` as features; categories unseen in training encode as all zeros.
absl::StatusOr<Eigen::MatrixXd> Encode(const Encoder& encoder, const CsvTable& table,
                                       const std::string& path) {
  Eigen::MatrixXd x =
      Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(table.rows.size()), encoder.width);
  int base = 0;
  for (const Encoder::Numeric& num : encoder.numeric) {
    ASSIGN_OR_RETURN(const size_t c, table.ColumnIndex(num.name));
    for (size_t r = 0; r < table.rows.size(); ++r) {
      ASSIGN_OR_RETURN(const double v, ParseCell(table, path, r, c));
      x(static_cast<Eigen::Index>(r), base) = (v - num.mean) / num.scale;
    }
    ++base;
  }
  for (const Encoder::Categorical& cat : encoder.categorical) {
    ASSIGN_OR_RETURN(const size_t c, table.ColumnIndex(cat.name));
    for (size_t r = 0; r < table.rows.size(); ++r) {
      auto it = cat.offset.find(table.rows[r][c]);
      if (it != cat.offset.end()) x(static_cast<Eigen::Index>(r), base + it->second) = 1.0;
    }
    base += static_cast<int>(cat.offset.size());
  }
  return x;
}

absl::StatusOr<std::vector<int>> Labels(const CsvTable& table, const std::string& column,
                                        const std::vector<std::string>& positive) {
  ASSIGN_OR_RETURN(const std::vector<std::string> values, table.Column(column));
  std::vector<int> y;
  y.reserve(values.size());
  for (const std::string& v : values) {
    y.push_back(std::find(positive.begin(), positive.end(), v) != positive.end() ? 1 : 0);
  }
  return y;
}

double Accuracy(const std::vector<int>& prediction, const std::vector<int>& label) {
  if (label.empty()) return 0;
  size_t right = 0;
  for (size_t i = 0; i < label.size(); ++i) right += prediction[i] == label[i];
  return static_cast<double>(right) / static_cast<double>(label.size());
}

absl::Status TrainLogreg(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  const std::string train_path = flags.Get("csv");
  const std::string label_column = flags.Get("label-column");
  const std::vector<std::string> positive = flags.GetList("positive-label");
  const std::vector<std::string> numeric = flags.GetList("numeric");
  const std::vector<std::string> categorical = flags.GetList("categorical");
  const std::vector<std::string> keep = flags.GetList("keep-columns");
  const std::string key_column = flags.Get("key-column", "@row");
  if (numeric.empty() && categorical.empty()) {
    return UsageError("name the feature columns with --numeric and/or --categorical");
  }
  if (positive.empty()) return UsageError("--positive-label must name at least one value");
  core::learn::LogisticRegressionOptions options;
  ASSIGN_OR_RETURN(options.l2, flags.GetDouble("l2", options.l2));
  ASSIGN_OR_RETURN(const double threshold, flags.GetDouble("threshold", 0.5));
  RETURN_IF_ERROR(options.Validate());

  ASSIGN_OR_RETURN(const CsvTable train, ReadCsvFile(train_path));
  if (!train.header_note.empty()) std::cerr << "note: " << train.header_note << "\n";
  if (train.rows.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(train_path, ": no data rows"));
  }
  ASSIGN_OR_RETURN(const Encoder encoder, FitEncoder(train, train_path, numeric, categorical));
  ASSIGN_OR_RETURN(const Eigen::MatrixXd x_train, Encode(encoder, train, train_path));
  ASSIGN_OR_RETURN(const std::vector<int> y_train, Labels(train, label_column, positive));
  ASSIGN_OR_RETURN(const core::learn::LogisticRegressionModel model,
                   core::learn::FitLogisticRegression(x_train, y_train, options));
  const std::vector<int> p_train = model.Predict(x_train, threshold);
  std::cout << "features: " << encoder.width << " (" << numeric.size() << " numeric, "
            << categorical.size() << " categorical one-hot)\n"
            << absl::StrFormat("train accuracy: %.4f (%d rows)\n", Accuracy(p_train, y_train),
                               train.rows.size());

  // The rows whose predictions are written: the test file if given, else the training file.
  const std::string eval_path = flags.Get("test-csv", train_path);
  CsvTable test;
  const CsvTable* eval = &train;
  std::vector<int> p_eval = p_train, y_eval = y_train;
  Eigen::MatrixXd x_eval = x_train;
  if (flags.Has("test-csv")) {
    ASSIGN_OR_RETURN(test, ReadCsvFile(eval_path));
    if (!test.header_note.empty()) std::cerr << "note: " << test.header_note << "\n";
    ASSIGN_OR_RETURN(x_eval, Encode(encoder, test, eval_path));
    ASSIGN_OR_RETURN(y_eval, Labels(test, label_column, positive));
    p_eval = model.Predict(x_eval, threshold);
    eval = &test;
    std::cout << absl::StrFormat("test accuracy: %.4f (%d rows)\n", Accuracy(p_eval, y_eval),
                                 test.rows.size());
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> keys,
                   SubjectKeys(*eval, eval_path, key_column, ""));
  std::vector<size_t> keep_index;
  std::vector<std::string> header = {"key", "prediction", "label"};
  for (const std::string& name : keep) {
    ASSIGN_OR_RETURN(const size_t c, eval->ColumnIndex(name));
    keep_index.push_back(c);
    header.push_back(name);
  }
  const bool keep_features = flags.GetBool("keep-features");
  if (keep_features) {
    for (const std::string& name : EncodedNames(encoder)) header.push_back(name);
  }
  std::vector<std::vector<std::string>> rows;
  rows.reserve(keys.size());
  for (size_t r = 0; r < keys.size(); ++r) {
    std::vector<std::string> row = {keys[r], absl::StrCat(p_eval[r]), absl::StrCat(y_eval[r])};
    for (size_t c : keep_index) row.push_back(eval->rows[r][c]);
    if (keep_features) {
      for (int j = 0; j < encoder.width; ++j) {
        row.push_back(absl::StrCat(x_eval(static_cast<Eigen::Index>(r), j)));
      }
    }
    rows.push_back(std::move(row));
  }
  const std::string out_path = flags.Get("out");
  RETURN_IF_ERROR(WriteStringToFile(out_path, FormatCsv(header, rows)));
  std::cout << "wrote " << rows.size() << " predictions of " << eval_path << " to " << out_path
            << "\n";
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> TrainCommands() {
  return {
      {"train-logreg",
       "fit a logistic-regression baseline locally and write its predictions",
       "Not private and never sees protected attributes unless you name them as features.\n"
       "Example (Adult): --csv adult.data --test-csv adult.test --label-column Y\n"
       "  --positive-label '>50K,>50K.' --numeric age,education-num,hours-per-week\n"
       "  --categorical workclass,occupation --out predictions.csv",
       {{"csv", "FILE", "training CSV with a header row", true},
        {"label-column", "COL", "label column", true},
        {"positive-label", "V[,V...]", "label values counted as 1 (all others are 0)", true, true},
        {"numeric", "COL,...", "numeric features (standardised)", false, true},
        {"categorical", "COL,...", "categorical features (one-hot)", false, true},
        {"key-column", "COLUMN|@row",
         "key written to the output; @row = row-<0-based data row index> (default @row)"},
        {"test-csv", "FILE", "write predictions for this file's rows instead of the training rows"},
        {"keep-columns", "COL,...", "copy these columns into the output too", false, true},
        {"keep-features", "",
         "also write the encoded features the model uses, fitted on the training rows: "
         "<numeric>_z (standardised) and <categorical>=<value> (one-hot)"},
        {"l2", "LAMBDA", "ridge penalty (default 1e-4)"},
        {"threshold", "T", "predict 1 when P(y=1|x) >= T (default 0.5)"},
        {"out", "FILE", "output CSV: key,prediction,label[,kept columns]", true}},
       false,
       TrainLogreg},
  };
}

}  // namespace fairvault::client::cli
