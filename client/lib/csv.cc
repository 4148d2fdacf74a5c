// CSV reading and writing; see csv.h for the dialect.
#include "client/lib/csv.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <istream>
#include <iterator>
#include <memory>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/util/status_macros.h"

namespace fairvault::client {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Splits text into records of fields, reading either a whole string or a stream in blocks
// (memory bounded by the block and the longest record). Each record remembers the line it
// starts on.
class CsvParser {
 public:
  CsvParser(absl::string_view text, absl::string_view source) : text_(text), source_(source) {
    StripBom();
  }
  CsvParser(std::unique_ptr<std::istream> in, absl::string_view source,
            CsvReader::ByteObserver observer)
      : in_(std::move(in)), observer_(std::move(observer)), source_(source) {
    Fill();
    StripBom();
  }

  // Whether the input is exhausted; reads the next block when the current one is used up.
  bool AtEnd() { return pos_ >= text_.size() && !Fill(); }
  // A read error of the stream (not its end).
  bool Failed() const { return in_ != nullptr && in_->bad(); }

  // Reads the next record into `fields` and its first line into `line`. Blank lines come
  // back as one empty unquoted field with `blank` set. The strings of `fields` are reused, so
  // that reading row after row allocates nothing once they are long enough.
  absl::Status Next(std::vector<std::string>& fields, int64_t& line, bool& blank) {
    size_t count = 0;
    line = line_;
    blank = false;
    bool any_quoted = false;
    while (true) {
      if (count == fields.size()) fields.emplace_back();
      std::string& field = fields[count++];
      field.clear();
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
        // The field may straddle two blocks: take what this block has, then read on.
        do {
          const size_t start = pos_;
          while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '\n') ++pos_;
          field.append(text_.data() + start, pos_ - start);
        } while (pos_ >= text_.size() && Fill());
        while (!field.empty() && IsBlank(field.back())) field.pop_back();
      }
      if (AtEnd()) break;
      const char sep = text_[pos_++];
      if (sep == '\n') {
        ++line_;
        break;
      }
      // sep == ',': another field follows (possibly empty, even at end of input).
      if (AtEnd()) {
        if (count == fields.size()) fields.emplace_back();
        fields[count++].clear();
        break;
      }
    }
    fields.resize(count);
    blank = fields.size() == 1 && fields[0].empty() && !any_quoted;
    return absl::OkStatus();
  }

  absl::Status Error(int64_t line, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ":", line, ": ", what));
  }
  absl::string_view source() const { return source_; }

 private:
  static constexpr size_t kBlockBytes = 1 << 20;

  void StripBom() {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ += 3;  // UTF-8 byte order mark
  }
  // Drops the consumed part of the buffer and appends the next block; false at the end.
  bool Fill() {
    if (in_ == nullptr || !in_->good()) return false;
    buffer_.erase(0, pos_);
    pos_ = 0;
    const size_t kept = buffer_.size();
    buffer_.resize(kept + kBlockBytes);
    in_->read(buffer_.data() + kept, static_cast<std::streamsize>(kBlockBytes));
    buffer_.resize(kept + static_cast<size_t>(in_->gcount()));
    if (observer_) observer_(absl::string_view(buffer_).substr(kept));
    text_ = buffer_;
    return buffer_.size() > kept;
  }

  std::unique_ptr<std::istream> in_;
  CsvReader::ByteObserver observer_;
  std::string buffer_;
  absl::string_view text_;
  absl::string_view source_;
  size_t pos_ = 0;
  int64_t line_ = 1;
};

// Where `text` stops being UTF-8 (RFC 3629: no overlongs, surrogates or code points past
// U+10FFFF), or npos.
size_t InvalidUtf8At(absl::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  // ASCII fast path, eight bytes at a time (most CSV fields are plain ASCII).
  for (uint64_t word; i + 8 <= n; i += 8) {
    std::memcpy(&word, s + i, 8);
    if (word & 0x8080808080808080ULL) break;
  }
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (i + len > n || s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
    }
    i += len;
  }
  return absl::string_view::npos;
}

bool NeedsQuotes(absl::string_view field) {
  if (field.empty()) return false;
  if (IsBlank(field.front()) || IsBlank(field.back())) return true;
  // A leading byte-order mark would be taken for the file's own at the start of a file.
  if (absl::StartsWith(field, "\xef\xbb\xbf")) return true;
  return field.find_first_of(",\"\r\n") != absl::string_view::npos;
}

}  // namespace

absl::StatusOr<size_t> ColumnIndexIn(const std::vector<std::string>& header,
                                     absl::string_view name) {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return i;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no column named '", name, "' (columns: ", absl::StrJoin(header, ", "), ")"));
}

absl::StatusOr<size_t> CsvTable::ColumnIndex(absl::string_view name) const {
  return ColumnIndexIn(header, name);
}

absl::StatusOr<std::vector<std::string>> CsvTable::Column(absl::string_view name) const {
  absl::StatusOr<size_t> index = ColumnIndex(name);
  if (!index.ok()) return index.status();
  std::vector<std::string> values;
  values.reserve(rows.size());
  for (const auto& row : rows) values.push_back(row[*index]);
  return values;
}

struct CsvReader::Parser : CsvParser {
  using CsvParser::CsvParser;
};

CsvReader::CsvReader(std::unique_ptr<Parser> parser, std::string source)
    : source_(std::move(source)), parser_(std::move(parser)) {}
CsvReader::~CsvReader() = default;

absl::StatusOr<std::unique_ptr<CsvReader>> CsvReader::Open(const std::string& path,
                                                           ByteObserver observer) {
  auto in = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!*in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "' for reading"));
  std::unique_ptr<CsvReader> reader(new CsvReader(nullptr, path));
  reader->parser_ = std::make_unique<Parser>(std::move(in), reader->source_, std::move(observer));
  RETURN_IF_ERROR(reader->ReadHeader());
  return reader;
}

absl::StatusOr<std::unique_ptr<CsvReader>> CsvReader::FromString(absl::string_view text,
                                                                 absl::string_view source) {
  std::unique_ptr<CsvReader> reader(new CsvReader(nullptr, std::string(source)));
  reader->parser_ = std::make_unique<Parser>(text, reader->source_);
  RETURN_IF_ERROR(reader->ReadHeader());
  return reader;
}

absl::StatusOr<size_t> CsvReader::ColumnIndex(absl::string_view name) const {
  return ColumnIndexIn(header_, name);
}

absl::Status CsvReader::CheckUtf8(const std::vector<std::string>& fields, int64_t line) const {
  for (size_t i = 0; i < fields.size(); ++i) {
    const size_t bad = InvalidUtf8At(fields[i]);
    if (bad == absl::string_view::npos) continue;
    const std::string column = i < header_.size() ? absl::StrCat("column '", header_[i], "'")
                                                  : absl::StrCat("field ", i + 1);
    return parser_->Error(
        line, absl::StrCat(column, " is not valid UTF-8 (byte 0x",
                           absl::Hex(static_cast<unsigned char>(fields[i][bad]), absl::kZeroPad2),
                           " at offset ", bad, "); save the file as UTF-8"));
  }
  return absl::OkStatus();
}

namespace {

// The UCI Adult files as published have no header row (adult.names lists the columns).
constexpr const char* kAdultColumns[] = {
    "age",          "workclass",    "fnlwgt",       "education",      "education-num",
    "marital-status", "occupation", "relationship", "race",           "sex",
    "capital-gain", "capital-loss", "hours-per-week", "native-country", "Y"};

bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A record of adult.data or adult.test in its published column order: 15 fields, numeric
// age, weight and education-num, the sex column's values, an income label. (A reordered
// variant is not taken for Adult: its sex would be read from another column.)
bool IsAdultRecord(const std::vector<std::string>& fields) {
  if (fields.size() != std::size(kAdultColumns)) return false;
  const std::string& y = fields[14];
  return AllDigits(fields[0]) && AllDigits(fields[2]) && AllDigits(fields[4]) &&
         (fields[9] == "Male" || fields[9] == "Female") &&
         (y == "<=50K" || y == ">50K" || y == "<=50K." || y == ">50K.");
}

}  // namespace

absl::Status CsvReader::ReadHeader() {
  int64_t line = 0;
  bool blank = true;
  while (blank) {
    if (parser_->AtEnd()) {
      if (parser_->Failed()) return ReadError();
      return absl::InvalidArgumentError(
          absl::StrCat(source_, ": empty file (expected a header row naming the columns)"));
    }
    RETURN_IF_ERROR(parser_->Next(header_, line, blank));
  }
  // adult.test as published starts with "|1x3 Cross validator": skipped when Adult follows.
  if (header_.size() == 1 && absl::StartsWith(header_[0], "|")) {
    std::vector<std::string> next;
    int64_t next_line = 0;
    blank = true;
    while (blank && !parser_->AtEnd()) RETURN_IF_ERROR(parser_->Next(next, next_line, blank));
    if (!blank && IsAdultRecord(next)) {
      header_ = std::move(next);
      line = next_line;
    } else if (!blank) {
      has_pending_ = true;
      pending_ = std::move(next);
      pending_line_ = next_line;
    }
  }
  if (!has_pending_ && IsAdultRecord(header_)) {
    has_pending_ = true;
    pending_ = std::move(header_);
    pending_line_ = line;
    header_.assign(std::begin(kAdultColumns), std::end(kAdultColumns));
    header_note_ = absl::StrCat(
        source_, " has no header row; its rows are the UCI Adult file's, so its columns are "
                 "read as adult.names lists them: ", absl::StrJoin(header_, ", "),
        " (the label is 'Y')");
  }
  RETURN_IF_ERROR(CheckUtf8(header_, line));
  for (size_t i = 0; i < header_.size(); ++i) {
    // An unnamed column (a pandas index, say) is called @<1-based position>.
    if (header_[i].empty()) header_[i] = absl::StrCat("@", i + 1);
    for (size_t j = 0; j < i; ++j) {
      if (header_[j] == header_[i]) {
        return parser_->Error(line, absl::StrCat("header names column '", header_[i], "' twice"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CsvReader::ReadError() const {
  return absl::DataLossError(absl::StrCat("error while reading '", source_, "'"));
}

absl::StatusOr<bool> CsvReader::Next(std::vector<std::string>* fields, int64_t* line) {
  if (has_pending_) {  // a headerless file's first row, read with the header
    has_pending_ = false;
    *fields = std::move(pending_);
    *line = pending_line_;
  } else {
    bool blank = true;
    while (blank) {
      if (parser_->AtEnd()) {
        if (parser_->Failed()) return ReadError();
        return false;
      }
      RETURN_IF_ERROR(parser_->Next(*fields, *line, blank));
    }
  }
  if (fields->size() != header_.size()) {
    return parser_->Error(*line, absl::StrCat("expected ", header_.size(),
                                              " fields as in the header, got ", fields->size()));
  }
  RETURN_IF_ERROR(CheckUtf8(*fields, *line));
  return true;
}

namespace {
absl::StatusOr<CsvTable> ReadAll(CsvReader& reader) {
  CsvTable table;
  table.header = reader.header();
  table.header_note = reader.header_note();
  std::vector<std::string> fields;
  int64_t line = 0;
  while (true) {
    ASSIGN_OR_RETURN(const bool more, reader.Next(&fields, &line));
    if (!more) break;
    table.rows.push_back(std::move(fields));
    table.row_lines.push_back(line);
  }
  return table;
}
}  // namespace

absl::StatusOr<CsvTable> ParseCsv(absl::string_view text, absl::string_view source) {
  ASSIGN_OR_RETURN(std::unique_ptr<CsvReader> reader, CsvReader::FromString(text, source));
  return ReadAll(*reader);
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "' for reading"));
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("error while reading '", path, "'"));
  return content.str();
}

namespace {

constexpr mode_t kPrivateMode = 0600;

// open() for writing, creating the file with mode 0600 (a new file is then exactly 0600: the
// mode is set on the descriptor of a file this call created). `exclusive`: fail if it exists.
absl::StatusOr<int> OpenForWriting(const std::string& path, bool exclusive) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC);
  // Without O_EXCL, whether the file is new is known only from its size and mode afterwards;
  // with it, the file is certainly ours.
  struct stat before;
  const bool existed = !exclusive && stat(path.c_str(), &before) == 0;
  const int fd = open(path.c_str(), flags, kPrivateMode);
  if (fd < 0) {
    const int err = errno;
    if (err == EEXIST) {
      return absl::AlreadyExistsError(
          absl::StrCat("'", path, "' exists; choose a new file name (nothing was written)"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open '", path, "' for writing: ", std::strerror(err)));
  }
  if (!existed) fchmod(fd, kPrivateMode);  // the umask may have removed owner bits
  return fd;
}

}  // namespace

absl::Status WriteStringToFile(const std::string& path, absl::string_view content) {
  ASSIGN_OR_RETURN(const int fd, OpenForWriting(path, /*exclusive=*/false));
  size_t done = 0;
  int err = 0;
  while (done < content.size()) {
    const ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    return absl::DataLossError(
        absl::StrCat("error while writing '", path, "': ", std::strerror(err)));
  }
  return absl::OkStatus();
}

absl::Status PrepareOutputFile(const std::string& path) {
  ASSIGN_OR_RETURN(const int fd, OpenForWriting(path, /*exclusive=*/false));
  close(fd);
  return absl::OkStatus();
}

absl::Status CreateNewPrivateFile(const std::string& path) {
  ASSIGN_OR_RETURN(const int fd, OpenForWriting(path, /*exclusive=*/true));
  close(fd);
  return absl::OkStatus();
}

absl::StatusOr<CsvTable> ReadCsvFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<CsvReader> reader, CsvReader::Open(path));
  return ReadAll(*reader);
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
