#include "server/app/finish_gate.h"

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace fairvault::server {
namespace {

// Waits (up to 10 s) for `done`; the tests check states that other threads reach.
bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 10'000 && !done(); ++i) absl::SleepFor(absl::Milliseconds(1));
  return done();
}

TEST(FinishGateTest, ARetryWaitsForTheFinishOfItsReleaseAndIsToldSo) {
  FinishGate gate(4);
  EXPECT_FALSE(gate.Enter("acme/k1"));
  std::atomic<int> stage{0};
  bool told = false;
  std::thread retry([&] {
    told = gate.Enter("acme/k1");
    stage = 1;
    gate.Leave("acme/k1");
  });
  // Another release goes ahead meanwhile.
  EXPECT_FALSE(gate.Enter("acme/k2"));
  gate.Leave("acme/k2");
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(stage, 0);  // still waiting for the first finish of k1
  gate.Leave("acme/k1");
  retry.join();
  EXPECT_EQ(stage, 1);
  EXPECT_TRUE(told);
  EXPECT_EQ(gate.Running(), 0);
}

TEST(FinishGateTest, AtMostTheLimitRunAtOnce) {
  FinishGate gate(2);
  std::atomic<int> inside{0}, most{0};
  absl::Notification release;
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      const std::string key = "acme/k" + std::to_string(i);
      EXPECT_FALSE(gate.Enter(key));
      const int now = ++inside;
      int seen = most;
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      release.WaitForNotification();
      --inside;
      gate.Leave(key);
    });
  }
  ASSERT_TRUE(Eventually([&] { return gate.Running() == 2; }));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(gate.Running(), 2);  // four wait for a slot
  release.Notify();
  for (auto& t : threads) t.join();
  EXPECT_EQ(most, 2);
  EXPECT_EQ(gate.Running(), 0);
}

}  // namespace
}  // namespace fairvault::server
