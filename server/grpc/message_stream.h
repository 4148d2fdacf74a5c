// A client stream of `Request`s (a header, data chunks, then StreamEnd) as a ChunkSource: what
// the ImportAttributes and UploadTable handlers hand their use-cases. Free of gRPC types (the
// handler passes its reader's Read and its context's early-stop check), so that fuzz_streams
// drives this very code with made-up message sequences.
#ifndef FAIRVAULT_SERVER_GRPC_MESSAGE_STREAM_H_
#define FAIRVAULT_SERVER_GRPC_MESSAGE_STREAM_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/util/status_macros.h"
#include "server/app/chunk_source.h"

namespace fairvault::server {

// The sync API's Read() returns false both at the end of the stream and for a message it
// cannot parse, so the explicit StreamEnd is what tells a finished stream from a broken one.
template <typename Request, typename Chunk>
class MessageStream {
 public:
  using HasChunk = bool (Request::*)() const;
  using MutableChunk = Chunk* (Request::*)();
  // `read`: the next message, false at the stream's end or for one that could not be parsed.
  // `stopped`: why the call stopped early (cancelled, deadline passed) while doing `what`, or
  // OK while the caller still waits.
  MessageStream(std::function<bool(Request*)> read,
                std::function<absl::Status(absl::string_view what)> stopped, HasChunk has,
                MutableChunk mutable_chunk)
      : read_(std::move(read)),
        stopped_(std::move(stopped)),
        has_(has),
        mutable_chunk_(mutable_chunk) {}
  // Source()'s callbacks point at this object: it stays where it was made.
  MessageStream(const MessageStream&) = delete;
  MessageStream& operator=(const MessageStream&) = delete;

  // Reads the first message, which must be the header.
  template <typename Header>
  absl::Status ReadHeader(Header* header, bool (Request::*has)() const,
                          Header* (Request::*mutable_header)()) {
    Request first;
    if (!read_(&first)) {
      RETURN_IF_ERROR(stopped_("reading the stream's header"));
      return absl::InvalidArgumentError(
          "the stream must start with a header message (none arrived, or it could not be "
          "parsed: every string must be valid UTF-8)");
    }
    if (!(first.*has)()) {
      return absl::InvalidArgumentError("the stream must start with a header message");
    }
    header->Swap((first.*mutable_header)());
    return absl::OkStatus();
  }

  ChunkSource<Chunk> Source() {
    ChunkSource<Chunk> source;
    source.next = [this](Chunk* chunk) { return Next(chunk); };
    source.live = [this] { return stopped_("the server was storing the stream"); };
    return source;
  }

 private:
  absl::StatusOr<bool> Next(Chunk* chunk) {
    if (ended_) return false;
    Request message;
    if (!read_(&message)) {
      const std::string where = absl::StrCat("after chunk ", chunks_, " (", rows_, " rows)");
      RETURN_IF_ERROR(stopped_(absl::StrCat("reading the stream ", where)));
      return absl::InvalidArgumentError(absl::StrCat(
          "the stream stopped ", where, " without its end message: chunk ", chunks_ + 1,
          " (rows from ", rows_ + 1,
          ") could not be parsed (every string must be valid UTF-8) or the client stopped "
          "sending; nothing was stored, send the whole stream again"));
    }
    if (message.has_end()) {
      const auto& end = message.end();
      if (end.chunks() != chunks_ || end.rows() != rows_) {
        return absl::InvalidArgumentError(
            absl::StrCat("end: the client sent ", end.chunks(), " chunks with ", end.rows(),
                         " rows but the server received ", chunks_, " chunks with ", rows_,
                         " rows; nothing was stored, send the whole stream again"));
      }
      Request extra;
      if (read_(&extra)) {
        return absl::InvalidArgumentError(
            "a message followed the stream's end message; nothing was stored");
      }
      ended_ = true;
      return false;
    }
    if (!(message.*has_)()) {
      return absl::InvalidArgumentError(
          absl::StrCat("message ", chunks_ + 2,
                       " of the stream is not a data chunk or the end message (a second header, "
                       "or nothing set); send one header, the chunks, then the end message"));
    }
    chunk->Swap((message.*mutable_chunk_)());
    ++chunks_;
    rows_ += chunk->subject_keys_size();
    return true;
  }

  std::function<bool(Request*)> read_;
  std::function<absl::Status(absl::string_view)> stopped_;
  HasChunk has_;
  MutableChunk mutable_chunk_;
  int64_t chunks_ = 0;
  int64_t rows_ = 0;
  bool ended_ = false;
};

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_GRPC_MESSAGE_STREAM_H_
