// A small CSV reader and writer for the company's files (RFC 4180 quoting, trimmed fields).
#ifndef FAIRVAULT_CLIENT_LIB_CSV_H_
#define FAIRVAULT_CLIENT_LIB_CSV_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fairvault::client {

// Index of the column `name` in `header`; InvalidArgument listing the header when absent.
absl::StatusOr<size_t> ColumnIndexIn(const std::vector<std::string>& header,
                                     absl::string_view name);

// A parsed CSV file: one header row, then data rows of the same width.
struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  // 1-based line of the file on which each data row starts (for error messages).
  std::vector<int64_t> row_lines;
  // Non-empty when the file had no header row and the reader named its columns (see
  // CsvReader::header_note).
  std::string header_note;

  // Index of the header column `name`; InvalidArgument listing the header when absent.
  absl::StatusOr<size_t> ColumnIndex(absl::string_view name) const;
  // Values of the column `name`, one per data row.
  absl::StatusOr<std::vector<std::string>> Column(absl::string_view name) const;
};

// Reads a CSV record by record in bounded memory (a 1 MiB block and the longest record): the
// header when opened, then one data row per Next. The dialect and errors are ParseCsv's, and
// every field must be valid UTF-8 (the error names the line and the column). Not thread-safe.
class CsvReader {
 public:
  // Sees every byte of the file once, in order, as it is read (e.g. to hash the file in the
  // same pass).
  using ByteObserver = std::function<void(absl::string_view)>;
  // NotFound if the file cannot be opened; the header's errors as ParseCsv.
  static absl::StatusOr<std::unique_ptr<CsvReader>> Open(const std::string& path,
                                                         ByteObserver observer = nullptr);
  // Over `text`, which must outlive the reader; `source` names it in errors.
  static absl::StatusOr<std::unique_ptr<CsvReader>> FromString(absl::string_view text,
                                                               absl::string_view source);
  ~CsvReader();

  const std::vector<std::string>& header() const { return header_; }
  // Non-empty when the file has no header row but is a known public file whose columns the
  // reader named: the UCI Adult files as published (adult.data and adult.test, whose first
  // line "|1x3 Cross validator" is skipped) get the columns of adult.names, the label being
  // "Y" as in the copies with a header. Says so in words, for the CLI to print.
  const std::string& header_note() const { return header_note_; }
  const std::string& source() const { return source_; }
  // Index of the header column `name`; InvalidArgument listing the header when absent.
  absl::StatusOr<size_t> ColumnIndex(absl::string_view name) const;
  // Reads the next data row (as wide as the header) and the line it starts on; false at the
  // end of the input; DataLoss on a read error.
  absl::StatusOr<bool> Next(std::vector<std::string>* fields, int64_t* line);

 private:
  struct Parser;
  CsvReader(std::unique_ptr<Parser> parser, std::string source);
  absl::Status ReadHeader();
  absl::Status CheckUtf8(const std::vector<std::string>& fields, int64_t line) const;
  absl::Status ReadError() const;

  std::string source_;
  std::unique_ptr<Parser> parser_;
  std::vector<std::string> header_;
  std::string header_note_;
  // A data row read while looking for the header (a headerless file's first row).
  bool has_pending_ = false;
  std::vector<std::string> pending_;
  int64_t pending_line_ = 0;
};

// Parses CSV text: the first non-blank record is the header (but see
// CsvReader::header_note for the UCI Adult files as published; an empty name is replaced by
// "@<1-based column position>", as for a pandas index column); comma separator; whitespace
// around each field is trimmed (so "a, b" reads as "a","b", as in the UCI Adult files);
// a field may be double-quoted, with "" standing for one quote and commas and newlines
// allowed inside (whitespace inside quotes is kept). Blank lines are skipped. Every record
// must have as many fields as the header, and every field must be valid UTF-8. Errors are
// InvalidArgument and start with
// "<source>:<line>: ", `source` naming the input (e.g. the file path).
absl::StatusOr<CsvTable> ParseCsv(absl::string_view text, absl::string_view source = "csv");

// Reads and parses a file; NotFound if it cannot be opened.
absl::StatusOr<CsvTable> ReadCsvFile(const std::string& path);

// Reads a whole file into memory; NotFound if it cannot be opened.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);
// Every file the CLI writes holds subject keys, vault decisions, released results or an API
// key, so a new one is created with mode 0600 (rw for its owner only, whatever the umask);
// an existing file is replaced in place and keeps its mode.
//
// Writes (replaces) a file; FailedPrecondition if it cannot be opened, DataLoss if a write
// fails.
absl::Status WriteStringToFile(const std::string& path, absl::string_view content);
// Opens `path` for writing as WriteStringToFile does (new: mode 0600; existing: truncated),
// for output streamed through an std::ofstream opened on it afterwards.
absl::Status PrepareOutputFile(const std::string& path);
// Creates `path` as a new, empty file with mode 0600; AlreadyExists (naming the path) if
// anything exists there, so that a key shown once never replaces another file. The caller
// fills it with WriteStringToFile.
absl::Status CreateNewPrivateFile(const std::string& path);

// One field as CSV: quoted (with "" escapes) when it contains a comma, quote, CR/LF or
// surrounding whitespace (which the reader would trim), or is empty; verbatim otherwise.
std::string CsvEscape(absl::string_view field);
// One record: escaped fields joined by commas, terminated by "\n".
std::string FormatCsvRecord(const std::vector<std::string>& fields);
// A whole table: header then rows.
std::string FormatCsv(const std::vector<std::string>& header,
                      const std::vector<std::vector<std::string>>& rows);

}  // namespace fairvault::client

#endif  // FAIRVAULT_CLIENT_LIB_CSV_H_
