// Fuzzes the assembly of the two client streams, ImportAttributes (the regulator's subjects)
// and UploadTable (a company's table): the handlers' MessageStream (header, chunks, StreamEnd
// with its counts) feeding the use-cases, on the real SQLite store of fuzz_vault.h. The input's
// first byte picks the stream (bit 0: import, else upload) and whether the caller is gone by the
// time the use-case would store (bit 1); the rest is the stream, messages of two length bytes
// (little endian) then the message's protobuf bytes, one that does not parse ending the stream
// as gRPC's Read() does. What the messages alone say decides the outcome, not what the server
// read: only a whole stream (one header, chunks, an end message counting them, nothing after)
// may be accepted. Bytes that do not parse end the stream where they stand, as gRPC's Read()
// does: before the end message the stream is not whole; after it the server cannot tell them
// from the caller's half-close (Read() returns false either way), so the stream is whole. So:
//   * refused: with a status a caller can act on (never Internal, DataLoss or Unknown), and the
//     database exactly as before (tables, rows, batches, subjects, ledger, stored responses);
//   * accepted: a whole stream, read to its end, whose caller still waits (or an import that
//     replays a stored batch), storing exactly its rows (an upload: one table of every row,
//     read back whole; an import: one batch of every row); nothing on the ledger.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/app/company_table.h"
#include "server/grpc/message_stream.h"
#include "tests/fuzz/fuzz_vault.h"

namespace {

using fairvault::fuzz::ExpectActionable;
using fairvault::fuzz::Fail;
using fairvault::fuzz::FuzzVault;
namespace server = fairvault::server;
namespace v1 = fairvault::v1;

// The subjects the vault holds, as the regulator lists them.
int64_t SubjectCount(fairvault::fuzz::FuzzVault& world) {
  auto listed = world.vault().ListDatasets(world.regulator());
  if (!listed.ok()) Fail("ListDatasets", listed.status().ToString());
  int64_t subjects = 0;
  for (const auto& d : listed->datasets()) subjects += d.subject_count();
  return subjects;
}

// Everything a stream may add (tables, rows, batches), and what it must never touch (ledger
// and stored responses).
std::vector<int64_t> State(fairvault::fuzz::FuzzVault& world) {
  return {world.Count("SELECT count(*) FROM company_tables"),
          world.Count("SELECT coalesce(sum(rows), 0) FROM company_tables"),
          world.Count("SELECT count(*) FROM subject_batches"),
          world.Count("SELECT count(*) FROM ledger"), world.Count("SELECT count(*) FROM responses"),
          SubjectCount(world)};
}

// The stream's messages, up to bytes that do not parse (gRPC's Read() returns false there, as at
// the end).
template <typename Request>
std::vector<Request> Messages(const uint8_t* data, size_t size) {
  std::vector<Request> out;
  while (size >= 2) {
    const size_t n = data[0] | size_t{data[1]} << 8;
    data += 2;
    size -= 2;
    if (n > size) break;
    Request message;
    if (!message.ParseFromArray(data, static_cast<int>(n))) break;
    out.push_back(std::move(message));
    data += n;
    size -= n;
  }
  return out;
}

// What the messages alone say, whatever the server does: a whole stream is one header, data
// chunks, then an end message counting them, nothing after it. `rows`: the rows its chunks carry.
template <typename Request, typename Chunk>
bool Whole(const std::vector<Request>& messages, bool (Request::*has_chunk)() const,
           const Chunk& (Request::*chunk)() const, bool (Request::*has_header)() const,
           int64_t* rows) {
  *rows = 0;
  if (messages.empty() || !(messages[0].*has_header)()) return false;
  int64_t chunks = 0;
  for (size_t i = 1; i < messages.size(); ++i) {
    const Request& m = messages[i];
    if (m.has_end()) {
      return i + 1 == messages.size() && m.end().chunks() == chunks && m.end().rows() == *rows;
    }
    if (!(m.*has_chunk)()) return false;
    ++chunks;
    *rows += (m.*chunk)().subject_keys_size();
  }
  return false;  // no end message
}

template <typename Request, typename Chunk, typename Header, typename UseCase>
void Drive(const uint8_t* data, size_t size, bool gone, bool (Request::*has_chunk)() const,
           Chunk* (Request::*mutable_chunk)(), const Chunk& (Request::*chunk)() const,
           bool (Request::*has_header)() const, Header* (Request::*mutable_header)(),
           UseCase use_case) {
  FuzzVault& world = FuzzVault::Get();
  const std::vector<Request> messages = Messages<Request>(data, size);
  int64_t rows = 0;
  const bool whole = Whole(messages, has_chunk, chunk, has_header, &rows);
  size_t next = 0;
  server::MessageStream<Request, Chunk> stream(
      [&](Request* out) {
        if (next >= messages.size()) return false;
        *out = messages[next++];
        return true;
      },
      [&](absl::string_view what) {
        // Gone: the call was cancelled by the time the use-case checks before storing.
        return gone && next >= messages.size()
                   ? absl::CancelledError(absl::StrCat("cancelled while ", what))
                   : absl::OkStatus();
      },
      has_chunk, mutable_chunk);
  const std::vector<int64_t> before = State(world);
  Header header;
  absl::Status status = stream.ReadHeader(&header, has_header, mutable_header);
  bool replayed = false;
  if (status.ok()) {
    absl::StatusOr<bool> r = use_case(header, stream.Source(), rows);
    status = r.status();
    replayed = r.ok() && *r;
  }
  const std::vector<int64_t> after = State(world);
  if (std::getenv("FAIRVAULT_FUZZ_VERBOSE") != nullptr) {  // what each input did
    std::fprintf(stderr, "%s (%s, %lld rows%s): %s\n", Header::descriptor()->name().c_str(),
                 whole ? "whole" : "not whole", static_cast<long long>(rows),
                 gone ? ", caller gone" : "", status.ToString().substr(0, 300).c_str());
  }
  if (after[3] != before[3] || after[4] != before[4]) Fail("a stream", "wrote to the ledger");
  if (status.ok()) {
    if (!whole) Fail("a stream that is not whole", "was accepted");
    if (next != messages.size()) Fail("an accepted stream", "was not read to its end");
    if (gone && !replayed) Fail("a stream whose caller was gone", "was stored");
  } else {
    ExpectActionable(status, "a refused stream's status");
    if (after != before) Fail("a refused stream", "changed the database");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 16 * 1024) return 0;
  FuzzVault& world = FuzzVault::Get();
  const bool import = data[0] & 1;
  const bool gone = data[0] & 2;
  if (import) {
    using Request = v1::ImportAttributesRequest;
    Drive<Request, v1::SubjectRows, v1::ImportHeader>(
        data + 1, size - 1, gone, &Request::has_rows, &Request::mutable_rows, &Request::rows,
        &Request::has_header, &Request::mutable_header,
        [&](const v1::ImportHeader& header, const server::ChunkSource<v1::SubjectRows>& source,
            int64_t rows_sent) -> absl::StatusOr<bool> {
          const int64_t batches = world.Count("SELECT count(*) FROM subject_batches");
          absl::StatusOr<v1::ImportAttributesResponse> r =
              world.vault().ImportAttributes(world.regulator(), header, source);
          if (!r.ok()) return r.status();
          const int64_t added = world.Count("SELECT count(*) FROM subject_batches") - batches;
          if (r->replayed() ? added != 0 : added != 1) {
            Fail("an accepted import", absl::StrCat("added ", added, " batches"));
          }
          if (!r->replayed() && r->rows_imported() != rows_sent) {
            Fail("an accepted import", absl::StrCat(r->rows_imported(), " rows of ", rows_sent));
          }
          return r->replayed();
        });
  } else {
    using Request = v1::UploadTableRequest;
    Drive<Request, v1::TableChunk, v1::TableHeader>(
        data + 1, size - 1, gone, &Request::has_chunk, &Request::mutable_chunk, &Request::chunk,
        &Request::has_header, &Request::mutable_header,
        [&](const v1::TableHeader& header, const server::ChunkSource<v1::TableChunk>& source,
            int64_t rows_sent) -> absl::StatusOr<bool> {
          absl::StatusOr<v1::UploadTableResponse> r =
              world.vault().UploadTable(world.company(), header, source);
          if (!r.ok()) return r.status();
          if (r->row_count() != rows_sent || r->rows_in_vault() > r->row_count()) {
            Fail("an accepted upload", absl::StrCat(r->row_count(), " rows of ", rows_sent));
          }
          auto stored = world.store().GetTable(r->table_handle());
          if (!stored.ok() || stored->rows != rows_sent) Fail("the stored table", "");
          auto table = server::CompanyTable::Parse(stored->payload, stored->rows,
                                                   [](absl::Span<const absl::string_view>) {});
          if (!table.ok() || table->rows() != rows_sent ||
              table->num_columns() != header.columns_size()) {
            Fail("the stored table", "does not read back whole");
          }
          // Keep the database small over a long run (the vault's cache may keep the table).
          world.Exec(absl::StrCat("DELETE FROM company_tables WHERE handle = '",
                                  r->table_handle(), "'")
                         .c_str());
          return false;
        });
  }
  return 0;
}
