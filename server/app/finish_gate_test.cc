#include "server/app/finish_gate.h"

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace fairvault::server {
namespace {

// Waits (up to 60 s) for `done`: the tests check states other threads reach.
bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 60'000 && !done(); ++i) absl::SleepFor(absl::Milliseconds(1));
  return done();
}

TEST(FinishGateTest, ARetryWaitsForTheCallHoldingItsReleaseAndOthersDoNot) {
  FinishGate gate(4);
  gate.Hold("acme/k1");
  std::atomic<bool> entered{false};
  std::thread retry([&] {
    gate.Hold("acme/k1");
    entered = true;
    gate.Drop("acme/k1");
  });
  ASSERT_TRUE(Eventually([&] { return gate.Waiting() == 1; }));
  gate.Hold("acme/k2");  // another release does not wait
  gate.Drop("acme/k2");
  EXPECT_FALSE(entered);
  EXPECT_EQ(gate.Waiting(), 1);
  gate.Drop("acme/k1");
  retry.join();
  EXPECT_TRUE(entered);
  EXPECT_EQ(gate.Waiting(), 0);
}

TEST(FinishGateTest, SlotsAreBoundedAndGrantedInTheOrderAsked) {
  FinishGate gate(2);
  gate.AcquireSlot();
  gate.AcquireSlot();
  absl::Mutex mu;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    // One after another into the queue, so that the order asked is 0, 1, 2, 3.
    threads.emplace_back([&, i] {
      gate.AcquireSlot();
      {
        absl::MutexLock lock(&mu);
        order.push_back(i);
      }
    });
    ASSERT_TRUE(Eventually([&] { return gate.Waiting() == i + 1; }));
  }
  EXPECT_EQ(gate.SlotsTaken(), 2);
  for (int freed = 0; freed < 4; ++freed) {
    gate.ReleaseSlot();
    ASSERT_TRUE(Eventually([&] { return gate.Waiting() == 3 - freed; }));
    EXPECT_EQ(gate.SlotsTaken(), 2);  // never more than the limit
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  gate.ReleaseSlot();
  gate.ReleaseSlot();
  EXPECT_EQ(gate.SlotsTaken(), 0);
}

TEST(FinishGateTest, AWaitForAHeldReleaseEndsBeforeItsDeadlineHoldingNothing) {
  FinishGate gate(4);
  gate.Hold("acme/k1");
  // The wait ends a second before the deadline, so that the answer still reaches the client.
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + FinishGate::kAnswerMargin + absl::Milliseconds(300);
  EXPECT_FALSE(gate.Hold("acme/k1", {deadline}));
  EXPECT_LT(absl::Now(), deadline);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  EXPECT_FALSE(gate.Hold("acme/k1", {absl::Now() - absl::Seconds(1)}));  // already passed
  EXPECT_EQ(gate.Waiting(), 0);
  gate.Drop("acme/k1");
  // The calls that gave up hold nothing: the release is free at once.
  EXPECT_TRUE(gate.Hold("acme/k1", {absl::Now() - absl::Seconds(1)}));
  gate.Drop("acme/k1");
}

TEST(FinishGateTest, ACallThatGivesUpItsPlaceInTheQueueDoesNotHoldUpTheOnesBehindIt) {
  FinishGate gate(1);
  ASSERT_TRUE(gate.AcquireSlot());
  // Ticket 1 waits until its client cancels; ticket 2 behind it waits for good.
  std::atomic<bool> cancel_first{false};
  std::atomic<bool> first_granted{true};
  std::thread first([&] {
    first_granted = gate.AcquireSlot({absl::InfiniteFuture(), [&] { return cancel_first.load(); }});
  });
  ASSERT_TRUE(Eventually([&] { return gate.Waiting() == 1; }));
  std::atomic<bool> second_granted{false};
  std::thread second(
      [&] { second_granted = gate.AcquireSlot({absl::Now() + absl::Seconds(60)}); });
  ASSERT_TRUE(Eventually([&] { return gate.Waiting() == 2; }));
  cancel_first = true;
  first.join();  // its client cancelled while the only slot was taken
  EXPECT_FALSE(first_granted);
  EXPECT_EQ(gate.Waiting(), 1);
  EXPECT_EQ(gate.SlotsTaken(), 1);
  gate.ReleaseSlot();
  second.join();  // served although the ticket before it was never served
  EXPECT_TRUE(second_granted);
  EXPECT_EQ(gate.SlotsTaken(), 1);
  gate.ReleaseSlot();
  // A ticket given up at the head of the queue is skipped too.
  ASSERT_TRUE(gate.AcquireSlot());
  EXPECT_FALSE(gate.AcquireSlot({absl::Now()}));
  gate.ReleaseSlot();
  EXPECT_TRUE(gate.AcquireSlot({absl::Now() + absl::Seconds(60)}));
  gate.ReleaseSlot();
  EXPECT_EQ(gate.SlotsTaken(), 0);
}

}  // namespace
}  // namespace fairvault::server
