// What the TSan build can see (deploy/tsan.sh). The disabled cases, each run alone by its own
// ctest (tests/tsan/CMakeLists.txt), pass only if ThreadSanitizer reports them: a counter written
// from two threads with no lock, under reader locks, under two different mutexes, and two
// mutexes taken in both orders. So the build is instrumented and Abseil's locks keep their
// meaning. The enabled cases guard a counter with Abseil's Mutex, Await on a Condition and a
// Notification, as our code does: they pass only if nothing is reported, which needs
// tests/tsan/absl_sync_annotations.cc (without it, Debian's uninstrumented Abseil makes every
// one of them a race).
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace {

TEST(TsanCanary, DISABLED_RaceCanary) {  // run by its own ctest (tests/tsan/CMakeLists.txt)
  int counter = 0;
  std::thread a([&] { for (int i = 0; i < 1000; ++i) ++counter; });
  std::thread b([&] { for (int i = 0; i < 1000; ++i) ++counter; });
  a.join();
  b.join();
  EXPECT_GT(counter, 0);
}

// Run alone too: a write under a reader lock races with the other reader's.
TEST(TsanCanary, DISABLED_WriteUnderReaderLocks) {
  absl::Mutex mu;
  int counter = 0;
  auto add = [&] {
    absl::ReaderMutexLock lock(&mu);
    ++counter;
  };
  std::thread a(add), b(add);
  a.join();
  b.join();
}

// Run alone too: one datum guarded by two different mutexes is not guarded.
TEST(TsanCanary, DISABLED_TwoLocksForOneDatum) {
  absl::Mutex one, two;
  int counter = 0;
  std::thread a([&] {
    absl::MutexLock lock(&one);
    ++counter;
  });
  std::thread b([&] {
    absl::MutexLock lock(&two);
    ++counter;
  });
  a.join();
  b.join();
}

// Run alone too: taking two mutexes in both orders is a potential deadlock.
TEST(TsanCanary, DISABLED_LockOrderInversion) {
  absl::Mutex first, second;
  {
    absl::MutexLock a(&first);
    absl::MutexLock b(&second);
  }
  {
    absl::MutexLock b(&second);
    absl::MutexLock a(&first);
  }
}

TEST(TsanCanary, MutexGuardedCounter) {
  absl::Mutex mu;
  int counter = 0;
  auto add = [&] {
    for (int i = 0; i < 1000; ++i) {
      absl::MutexLock lock(&mu);
      ++counter;
    }
  };
  std::thread a(add), b(add);
  a.join();
  b.join();
  EXPECT_EQ(counter, 2000);
}

TEST(TsanCanary, AwaitOnAConditionSeesTheWrite) {
  absl::Mutex mu;
  bool ready = false;
  int value = 0;
  std::thread writer([&] {
    absl::MutexLock lock(&mu);
    value = 42;
    ready = true;
  });
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(+[](bool* r) { return *r; }, &ready));
    EXPECT_EQ(value, 42);
    value = 7;  // written under the lock after the wait: no race with the writer's
  }
  writer.join();
}

TEST(TsanCanary, NotificationOrdersTheWrite) {
  absl::Notification done;
  int value = 0;
  std::thread writer([&] {
    value = 42;
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_EQ(value, 42);
  writer.join();
  absl::Notification polled;
  std::thread poller_writer([&] {
    value = 9;
    polled.Notify();
  });
  while (!polled.HasBeenNotified()) std::this_thread::yield();
  EXPECT_EQ(value, 9);
  poller_writer.join();
}

}  // namespace
