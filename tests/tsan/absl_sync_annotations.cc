// ThreadSanitizer sees the happens-before of a lock only where the lock's code is instrumented.
// Debian's Abseil is not (libabsl_synchronization.so is built without -fsanitize=thread), so in
// a TSan build every absl::Mutex, and every absl::Notification, would look like no
// synchronisation at all and each datum they guard like a race. Linked into each executable of
// the TSan build (deploy/tsan.sh; never into a shipped binary), these definitions take the
// place of the library's for every caller (an executable's symbol comes first), call the
// library's own (dlsym RTLD_NEXT) and tell TSan what happened: acquire after a lock is taken,
// release before it is let go, both around a wait that lets it go meanwhile, and around each
// evaluation of a Condition. Nothing is suppressed: a race on data that no lock guards, or that
// two threads guard with different locks, is reported as before.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace {

template <typename Fn>
Fn Real(const char* mangled) {
  void* f = dlsym(RTLD_NEXT, mangled);
  if (f == nullptr) {
    std::fprintf(stderr, "absl_sync_annotations: %s not found in Abseil\n", mangled);
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}

void Acquire(const void* addr) { __tsan_acquire(const_cast<void*>(addr)); }
void Release(const void* addr) { __tsan_release(const_cast<void*>(addr)); }

// Notification keeps `std::atomic<bool> notified_yet_` right after its Mutex; HasBeenNotified()
// (inline, so instrumented) acquire-loads it. Notify's store is in the library: release there.
const void* NotifiedFlag(const absl::Notification* n) {
  static_assert(sizeof(absl::Notification) == 2 * sizeof(absl::Mutex), "layout changed");
  return reinterpret_cast<const char*>(n) + sizeof(absl::Mutex);
}

// A Condition is evaluated by the library with its mutex held: by the waiter after taking the
// lock back inside Await or LockWhen, or by the thread that is unlocking. Neither goes through
// Lock or Unlock, so each condition handed to the library is wrapped: its evaluation acquires
// the mutex before reading and releases it after.
struct Guarded {
  const absl::Condition* cond;
  const absl::Mutex* mu;
};

bool EvalUnder(void* arg) {
  const auto* g = static_cast<const Guarded*>(arg);
  Acquire(g->mu);
  const bool holds = g->cond->Eval();
  Release(g->mu);
  return holds;
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

#define FV_REAL(type, name) static const auto real = Real<type>(name)

void Mutex::Lock() {
  FV_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  real(this);
  Acquire(this);
}
void Mutex::ReaderLock() {
  FV_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  real(this);
  Acquire(this);
}
bool Mutex::TryLock() {
  FV_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) Acquire(this);
  return locked;
}
bool Mutex::ReaderTryLock() {
  FV_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) Acquire(this);
  return locked;
}
void Mutex::Unlock() {
  FV_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  Release(this);
  real(this);
}
void Mutex::ReaderUnlock() {
  FV_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  Release(this);
  real(this);
}
void Mutex::LockWhen(const Condition& cond) {
  FV_REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  Guarded g{&cond, this};
  real(this, Condition(&EvalUnder, &g));
  Acquire(this);
}
void Mutex::ReaderLockWhen(const Condition& cond) {
  FV_REAL(void (*)(Mutex*, const Condition&),
          "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  Guarded g{&cond, this};
  real(this, Condition(&EvalUnder, &g));
  Acquire(this);
}
bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  FV_REAL(bool (*)(Mutex*, const Condition&, Duration),
          "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  Guarded g{&cond, this};
  const bool met = real(this, Condition(&EvalUnder, &g), timeout);
  Acquire(this);  // held either way
  return met;
}
void Mutex::Await(const Condition& cond) {
  FV_REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  Guarded g{&cond, this};
  Release(this);
  real(this, Condition(&EvalUnder, &g));
  Acquire(this);
}
bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  FV_REAL(bool (*)(Mutex*, const Condition&, Duration),
          "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  Guarded g{&cond, this};
  Release(this);
  const bool met = real(this, Condition(&EvalUnder, &g), timeout);
  Acquire(this);
  return met;
}
bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  FV_REAL(bool (*)(Mutex*, const Condition&, Time),
          "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  Guarded g{&cond, this};
  Release(this);
  const bool met = real(this, Condition(&EvalUnder, &g), deadline);
  Acquire(this);
  return met;
}

void Notification::Notify() {
  FV_REAL(void (*)(Notification*), "_ZN4absl7debian312Notification6NotifyEv");
  Release(NotifiedFlag(this));
  real(this);
}
void Notification::WaitForNotification() const {
  FV_REAL(void (*)(const Notification*), "_ZNK4absl7debian312Notification19WaitForNotificationEv");
  real(this);
  Acquire(NotifiedFlag(this));
}
bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  FV_REAL(bool (*)(const Notification*, Duration),
          "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const bool notified = real(this, timeout);
  if (notified) Acquire(NotifiedFlag(this));
  return notified;
}

#undef FV_REAL

ABSL_NAMESPACE_END
}  // namespace absl
