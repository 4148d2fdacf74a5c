// A client stream (ImportAttributes, UploadTable) as the use-cases see it, free of gRPC types.
// Streams are all or nothing: a use-case reads every chunk, validates, checks that the caller is
// still waiting, and only then stores anything.
#ifndef FAIRVAULT_SERVER_APP_CHUNK_SOURCE_H_
#define FAIRVAULT_SERVER_APP_CHUNK_SOURCE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fairvault::server {

template <typename Chunk>
struct ChunkSource {
  // Fills the next data chunk and returns true; false at the stream's clean end (the client's
  // StreamEnd arrived and agreed with what was received); an error when the stream broke (a
  // chunk that could not be parsed, a cancelled call, a passed deadline, a wrong end count).
  std::function<absl::StatusOr<bool>(Chunk*)> next;
  // OK while the caller still waits for the answer; called right before anything is stored.
  std::function<absl::Status()> live = [] { return absl::OkStatus(); };
};

// A source handing out `chunks` one by one, then the clean end: a stream already in memory (the
// use-cases' tests and the fuzz targets).
template <typename Chunk>
ChunkSource<Chunk> Feed(std::vector<Chunk> chunks) {
  auto next = std::make_shared<size_t>(0);
  ChunkSource<Chunk> source;
  source.next = [chunks = std::move(chunks), next](Chunk* out) -> absl::StatusOr<bool> {
    if (*next >= chunks.size()) return false;
    *out = chunks[(*next)++];
    return true;
  };
  return source;
}

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_APP_CHUNK_SOURCE_H_
