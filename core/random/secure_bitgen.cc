// SecureBitGen: 64-bit words from getrandom(2), fetched 4 KiB at a time into a
// per-thread buffer so the syscall cost is amortised over 512 draws.
#include "core/random/secure_bitgen.h"

#include <pthread.h>
#include <sys/random.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fairvault::core {
namespace {

constexpr size_t kWordsPerBlock = 512;  // 4 KiB

// Each word is handed out once and then zeroed, so no output stays readable in
// memory. Constant-initialised (no TLS guard); `next == kWordsPerBlock` means
// "empty".
struct Block {
  uint64_t words[kWordsPerBlock] = {};
  size_t next = kWordsPerBlock;
};

thread_local Block tls_block;

[[noreturn]] void DieWithErrno(const char* what, int err) {
  std::fprintf(stderr, "fairvault: SecureBitGen: %s: %s; aborting (no secure randomness)\n", what,
               std::strerror(err));
  std::abort();
}

// A forked child inherits the forking thread's buffer; without this both
// processes would hand out the same words. Only the forking thread survives a
// fork, and this handler runs on it.
void DiscardBlockInChild() {
  std::memset(tls_block.words, 0, sizeof(tls_block.words));
  tls_block.next = kWordsPerBlock;
}

void RegisterForkHandlerOnce() {
  static const int registered = [] {
    const int rc = pthread_atfork(nullptr, nullptr, &DiscardBlockInChild);
    if (rc != 0) DieWithErrno("pthread_atfork failed", rc);
    return 0;
  }();
  (void)registered;
}

// Fills the whole block from the kernel CSPRNG. getrandom with flags 0 blocks
// until the pool is initialised; a signal can interrupt it (EINTR) or shorten a
// large read.
void Refill(Block& block) {
  RegisterForkHandlerOnce();
  auto* out = reinterpret_cast<unsigned char*>(block.words);
  size_t remaining = sizeof(block.words);
  while (remaining > 0) {
    const ssize_t got = getrandom(out, remaining, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      DieWithErrno("getrandom failed", errno);
    }
    if (got == 0) DieWithErrno("getrandom returned no bytes", EIO);
    out += got;
    remaining -= static_cast<size_t>(got);
  }
  block.next = 0;
}

}  // namespace

SecureBitGen::result_type SecureBitGen::operator()() {
  Block& block = tls_block;
  if (block.next == kWordsPerBlock) Refill(block);
  const uint64_t word = block.words[block.next];
  block.words[block.next] = 0;
  ++block.next;
  return word;
}

}  // namespace fairvault::core
