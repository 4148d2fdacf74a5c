// CSV reading and writing; see csv.h for the dialect.
#include "client/csv.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fairvault::client {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Splits `text` into records of fields. Each record remembers the line it starts on.
class CsvParser {
 public:
  CsvParser(absl::string_view text, absl::string_view source) : text_(text), source_(source) {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") text_.remove_prefix(3);  // UTF-8 BOM
  }

  bool AtEnd() const { return pos_ >= text_.size(); }

  // Reads the next record into `fields` and its first line into `line`. Blank lines come
  // back as one empty unquoted field with `blank` set.
  absl::Status Next(std::vector<std::string>& fields, int64_t& line, bool& blank) {
    fields.clear();
    line = line_;
    blank = false;
    bool any_quoted = false;
    while (true) {
      std::string field;
      while (!AtEnd() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
      if (!AtEnd() && text_[pos_] == '"') {
        any_quoted = true;
        const int64_t open_line = line_;
        ++pos_;
        while (true) {
          if (AtEnd()) {
            return Error(open_line,
                         "unterminated quoted field (a field opened with \" "
                         "must close with \"; write \"\" for a literal quote)");
          }
          const char c = text_[pos_++];
          if (c == '"') {
            if (!AtEnd() && text_[pos_] == '"') {
              field.push_back('"');
              ++pos_;
            } else {
              break;
            }
          } else {
            if (c == '\n') ++line_;
            field.push_back(c);
          }
        }
        while (!AtEnd() && IsBlank(text_[pos_])) ++pos_;
        if (!AtEnd() && text_[pos_] != ',' && text_[pos_] != '\n') {
          return Error(line_, absl::StrCat("unexpected character '", text_.substr(pos_, 1),
                                           "' after a closing quote (expected ',' or end "
                                           "of line)"));
        }
      } else {
        const size_t start = pos_;
        while (!AtEnd() && text_[pos_] != ',' && text_[pos_] != '\n') ++pos_;
        absl::string_view raw = text_.substr(start, pos_ - start);
        while (!raw.empty() && IsBlank(raw.back())) raw.remove_suffix(1);
        field.assign(raw.data(), raw.size());
      }
      fields.push_back(std::move(field));
      if (AtEnd()) break;
      const char sep = text_[pos_++];
      if (sep == '\n') {
        ++line_;
        break;
      }
      // sep == ',': another field follows (possibly empty, even at end of input).
      if (AtEnd()) {
        fields.emplace_back();
        break;
      }
    }
    blank = fields.size() == 1 && fields[0].empty() && !any_quoted;
    return absl::OkStatus();
  }

  absl::Status Error(int64_t line, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ":", line, ": ", what));
  }

 private:
  absl::string_view text_;
  absl::string_view source_;
  size_t pos_ = 0;
  int64_t line_ = 1;
};

bool NeedsQuotes(absl::string_view field) {
  if (field.empty()) return false;
  if (IsBlank(field.front()) || IsBlank(field.back())) return true;
  return field.find_first_of(",\"\r\n") != absl::string_view::npos;
}

}  // namespace

absl::StatusOr<size_t> CsvTable::ColumnIndex(absl::string_view name) const {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return i;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no column named '", name, "' (columns: ", absl::StrJoin(header, ", "), ")"));
}

absl::StatusOr<std::vector<std::string>> CsvTable::Column(absl::string_view name) const {
  absl::StatusOr<size_t> index = ColumnIndex(name);
  if (!index.ok()) return index.status();
  std::vector<std::string> values;
  values.reserve(rows.size());
  for (const auto& row : rows) values.push_back(row[*index]);
  return values;
}

absl::StatusOr<CsvTable> ParseCsv(absl::string_view text, absl::string_view source) {
  CsvParser parser(text, source);
  CsvTable table;
  std::vector<std::string> fields;
  int64_t line = 0;
  bool blank = false;
  bool have_header = false;
  while (!parser.AtEnd()) {
    absl::Status status = parser.Next(fields, line, blank);
    if (!status.ok()) return status;
    if (blank) continue;
    if (!have_header) {
      for (size_t i = 0; i < fields.size(); ++i) {
        // An unnamed column (a pandas index, say) is called @<1-based position>.
        if (fields[i].empty()) fields[i] = absl::StrCat("@", i + 1);
        for (size_t j = 0; j < i; ++j) {
          if (fields[j] == fields[i]) {
            return parser.Error(line, absl::StrCat("header names column '", fields[i], "' twice"));
          }
        }
      }
      table.header = fields;
      have_header = true;
      continue;
    }
    if (fields.size() != table.header.size()) {
      return parser.Error(line, absl::StrCat("expected ", table.header.size(),
                                             " fields as in the header, got ", fields.size()));
    }
    table.rows.push_back(fields);
    table.row_lines.push_back(line);
  }
  if (!have_header) {
    return absl::InvalidArgumentError(absl::StrCat(source,
                                                   ": empty file (expected a header "
                                                   "row naming the columns)"));
  }
  return table;
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "' for reading"));
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("error while reading '", path, "'"));
  return content.str();
}

absl::Status WriteStringToFile(const std::string& path, absl::string_view content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return absl::FailedPreconditionError(absl::StrCat("cannot open '", path, "' for writing"));
  }
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("error while writing '", path, "'"));
  return absl::OkStatus();
}

absl::StatusOr<CsvTable> ReadCsvFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  return ParseCsv(*text, path);
}

std::string CsvEscape(absl::string_view field) {
  if (!NeedsQuotes(field)) return std::string(field);
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string FormatCsvRecord(const std::vector<std::string>& fields) {
  // A lone empty field would read back as a blank line, which the reader skips.
  if (fields.size() == 1 && fields[0].empty()) return "\"\"\n";
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out.push_back(',');
    out += CsvEscape(fields[i]);
  }
  out.push_back('\n');
  return out;
}

std::string FormatCsv(const std::vector<std::string>& header,
                      const std::vector<std::vector<std::string>>& rows) {
  std::string out = FormatCsvRecord(header);
  for (const auto& row : rows) out += FormatCsvRecord(row);
  return out;
}

}  // namespace fairvault::client
