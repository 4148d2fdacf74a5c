// Tests for SecureBitGen: output looks uniform, refills correctly, is usable
// through absl::BitGenRef, and is safe to share across threads and across
// fork().
#include "core/random/secure_bitgen.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/random/distributions.h"
#include "gtest/gtest.h"

namespace fairvault::core {
namespace {

TEST(SecureBitGenTest, SatisfiesUrbgRequirements) {
  static_assert(SecureBitGen::min() == 0);
  static_assert(SecureBitGen::max() == UINT64_MAX);
  SecureBitGen gen;
  const uint64_t v = gen();
  EXPECT_GE(v, SecureBitGen::min());
}

// 20k words span ~40 refills of the 512-word buffer. Two equal 64-bit words
// among them has probability ~2e-11 for a uniform source; a buffer reused or
// not refilled would repeat.
TEST(SecureBitGenTest, WordsAreDistinctAcrossRefills) {
  SecureBitGen gen;
  std::set<uint64_t> seen;
  constexpr int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) seen.insert(gen());
  EXPECT_EQ(seen.size(), static_cast<size_t>(kDraws));
}

// Each of the 64 bit positions is set in a fraction ~1/2 of 100k words.
// Tolerance: 6 standard deviations (sd = sqrt(n/4) = 158) per position, so a
// correct generator fails with probability < 64 * 2e-9.
TEST(SecureBitGenTest, BitFrequenciesAreRoughlyUniform) {
  SecureBitGen gen;
  constexpr int kDraws = 100000;
  std::array<int, 64> ones{};
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t v = gen();
    for (int b = 0; b < 64; ++b) ones[b] += static_cast<int>((v >> b) & 1);
  }
  const double sd = std::sqrt(kDraws * 0.25);
  for (int b = 0; b < 64; ++b) {
    EXPECT_NEAR(ones[b], kDraws / 2.0, 6 * sd) << "bit " << b;
  }
}

// Through BitGenRef with absl::Uniform: values stay in range and every value of
// {0..9} occurs in 2000 draws (a missing value has probability < 10 * 0.9^2000,
// i.e. never).
TEST(SecureBitGenTest, WorksWithAbslUniformThroughBitGenRef) {
  SecureBitGen secure;
  absl::BitGenRef gen(secure);
  std::array<int, 10> counts{};
  for (int i = 0; i < 2000; ++i) {
    const int v = absl::Uniform<int>(gen, 0, 10);
    ASSERT_GE(v, 0);
    ASSERT_LT(v, 10);
    ++counts[v];
  }
  for (int c : counts) EXPECT_GT(c, 0);
}

// One shared object used from 8 threads: each thread has its own buffer, so no
// word is handed out twice (a collision among 80k uniform words has probability
// ~2e-10).
TEST(SecureBitGenTest, SharedObjectIsSafeAcrossThreads) {
  SecureBitGen gen;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 10000;
  std::vector<std::vector<uint64_t>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&gen, &results, t] {
      results[t].reserve(kPerThread);
      for (int i = 0; i < kPerThread; ++i) results[t].push_back(gen());
    });
  }
  for (auto& th : threads) th.join();
  std::set<uint64_t> all;
  for (const auto& r : results) all.insert(r.begin(), r.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kPerThread));
}

// After fork() the child must not replay the rest of the parent's buffered
// block.
TEST(SecureBitGenTest, ForkedChildDoesNotReplayParentWords) {
  SecureBitGen gen;
  (void)gen();  // The buffer now holds 511 unread words.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    uint64_t child_words[4];
    for (uint64_t& w : child_words) w = gen();
    const ssize_t n = write(fds[1], child_words, sizeof(child_words));
    _exit(n == static_cast<ssize_t>(sizeof(child_words)) ? 0 : 1);
  }
  close(fds[1]);
  uint64_t child_words[4];
  ASSERT_EQ(read(fds[0], child_words, sizeof(child_words)),
            static_cast<ssize_t>(sizeof(child_words)));
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (uint64_t w : child_words) {
    const uint64_t parent_word = gen();
    EXPECT_NE(w, parent_word);
  }
}

}  // namespace
}  // namespace fairvault::core
