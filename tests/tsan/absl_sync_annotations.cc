// ThreadSanitizer sees a lock only where the lock's code is instrumented. Debian's Abseil is not
// (libabsl_synchronization.so is built without -fsanitize=thread), so in a TSan build every
// absl::Mutex and absl::Notification would look like no synchronisation at all, and each datum
// they guard like a race. Linked into each executable of the TSan build (deploy/tsan.sh; never
// into a shipped binary), these definitions take the place of the library's for every caller
// (an executable's symbol comes first), call the library's own (dlsym RTLD_NEXT) and describe
// each step to TSan with its mutex annotations: a lock taken (shared or exclusive, tried or
// not), let go, let go and taken back around Await, LockWhen's wait, a mutex destroyed. So TSan
// keeps its own semantics: a write under a reader lock races with other readers, data guarded
// by two different mutexes races, lock-order inversions are reported. A Condition is evaluated
// by the library with the lock held but outside Lock and Unlock (by the waiter taking the lock
// back, or by the thread unlocking), so each one handed to the library is wrapped: its
// evaluation acquires the mutex's history before reading and releases into it after. Nothing is
// suppressed.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

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

void* Addr(const void* p) { return const_cast<void*>(p); }

// The mutexes this thread holds and how (shared or not): Await lets go and takes back in the
// same mode.
std::vector<std::pair<const void*, unsigned>>& Held() {
  thread_local std::vector<std::pair<const void*, unsigned>> held;
  return held;
}

void Locked(const void* mu, unsigned flags) {
  __tsan_mutex_post_lock(Addr(mu), flags, 0);
  Held().emplace_back(mu, flags & __tsan_mutex_read_lock);
}

unsigned Unlocking(const void* mu, unsigned flags) {
  auto& held = Held();
  auto it = std::find_if(held.rbegin(), held.rend(), [mu](const auto& h) { return h.first == mu; });
  if (it != held.rend()) {
    flags = it->second;
    held.erase(std::next(it).base());
  }
  __tsan_mutex_pre_unlock(Addr(mu), flags);
  return flags;
}

// The mode this thread holds `mu` in (for a wait that lets it go and takes it back).
unsigned ModeOf(const void* mu) {
  for (const auto& [m, mode] : Held()) {
    if (m == mu) return mode;
  }
  return 0;
}

// The library calls some of these from inside others (AwaitWithTimeout calls AwaitWithDeadline,
// a wait takes and lets go its lock): such inner calls are the outer one's business, described
// already, and go straight through.
int& Depth() {
  thread_local int depth = 0;
  return depth;
}
struct Nest {
  Nest() { ++Depth(); }
  ~Nest() { --Depth(); }
};

struct Guarded {
  const absl::Condition* cond;
  const absl::Mutex* mu;
};

bool EvalUnder(void* arg) {
  const auto* g = static_cast<const Guarded*>(arg);
  __tsan_acquire(Addr(g->mu));
  const bool holds = g->cond->Eval();
  __tsan_release(Addr(g->mu));
  return holds;
}

// Notification keeps `std::atomic<bool> notified_yet_` right after its Mutex; HasBeenNotified()
// (inline, so instrumented) acquire-loads it. Notify's store is in the library: release there.
void* NotifiedFlag(const absl::Notification* n) {
  static_assert(sizeof(absl::Notification) == 2 * sizeof(absl::Mutex), "layout changed");
  return Addr(reinterpret_cast<const char*>(n) + sizeof(absl::Mutex));
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

#define FV_REAL(type, name) static const auto real = Real<type>(name)
// Inside another of these: straight to the library.
#define FV_PASS(...)                                  \
  if (Depth() > 0) return real(__VA_ARGS__);          \
  Nest nest

Mutex::~Mutex() {
  FV_REAL(void (*)(Mutex*), "_ZN4absl7debian35MutexD1Ev");
  __tsan_mutex_destroy(this, 0);
  real(this);
}

void Mutex::Lock() {
  FV_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  FV_PASS(this);
  __tsan_mutex_pre_lock(this, 0);
  real(this);
  Locked(this, 0);
}
void Mutex::ReaderLock() {
  FV_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  FV_PASS(this);
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this);
  Locked(this, __tsan_mutex_read_lock);
}
bool Mutex::TryLock() {
  FV_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  FV_PASS(this);
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = real(this);
  if (locked) {
    Locked(this, __tsan_mutex_try_lock);
  } else {
    __tsan_mutex_post_lock(this, __tsan_mutex_try_lock | __tsan_mutex_try_lock_failed, 0);
  }
  return locked;
}
bool Mutex::ReaderTryLock() {
  FV_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  FV_PASS(this);
  const unsigned flags = __tsan_mutex_read_lock | __tsan_mutex_try_lock;
  __tsan_mutex_pre_lock(this, flags);
  const bool locked = real(this);
  if (locked) {
    Locked(this, flags);
  } else {
    __tsan_mutex_post_lock(this, flags | __tsan_mutex_try_lock_failed, 0);
  }
  return locked;
}
void Mutex::Unlock() {
  FV_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  FV_PASS(this);
  const unsigned flags = Unlocking(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, flags);
}
void Mutex::ReaderUnlock() {
  FV_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  FV_PASS(this);
  const unsigned flags = Unlocking(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_unlock(this, flags);
}
void Mutex::LockWhen(const Condition& cond) {
  FV_REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  FV_PASS(this, cond);
  Guarded g{&cond, this};
  __tsan_mutex_pre_lock(this, 0);
  real(this, Condition(&EvalUnder, &g));
  Locked(this, 0);
}
void Mutex::ReaderLockWhen(const Condition& cond) {
  FV_REAL(void (*)(Mutex*, const Condition&),
          "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  FV_PASS(this, cond);
  Guarded g{&cond, this};
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this, Condition(&EvalUnder, &g));
  Locked(this, __tsan_mutex_read_lock);
}
bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  FV_REAL(bool (*)(Mutex*, const Condition&, Duration),
          "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  FV_PASS(this, cond, timeout);
  Guarded g{&cond, this};
  __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, Condition(&EvalUnder, &g), timeout);
  Locked(this, 0);  // held either way
  return met;
}

// The waits let the lock go and take it back in the mode it was held.
#define FV_AWAIT(call)                                 \
  Guarded g{&cond, this};                              \
  const unsigned mode = Unlocking(this, ModeOf(this)); \
  __tsan_mutex_post_unlock(this, mode);                \
  __tsan_mutex_pre_lock(this, mode);                   \
  auto result = call;                                  \
  Locked(this, mode)

void Mutex::Await(const Condition& cond) {
  FV_REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  FV_PASS(this, cond);
  FV_AWAIT((real(this, Condition(&EvalUnder, &g)), 0));
  (void)result;
}
bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  FV_REAL(bool (*)(Mutex*, const Condition&, Duration),
          "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  FV_PASS(this, cond, timeout);
  FV_AWAIT(real(this, Condition(&EvalUnder, &g), timeout));
  return result;
}
bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  FV_REAL(bool (*)(Mutex*, const Condition&, Time),
          "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  FV_PASS(this, cond, deadline);
  FV_AWAIT(real(this, Condition(&EvalUnder, &g), deadline));
  return result;
}

void Notification::Notify() {
  FV_REAL(void (*)(Notification*), "_ZN4absl7debian312Notification6NotifyEv");
  __tsan_release(NotifiedFlag(this));
  real(this);
}
void Notification::WaitForNotification() const {
  FV_REAL(void (*)(const Notification*), "_ZNK4absl7debian312Notification19WaitForNotificationEv");
  real(this);
  __tsan_acquire(NotifiedFlag(this));
}
bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  FV_REAL(bool (*)(const Notification*, Duration),
          "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(NotifiedFlag(this));
  return notified;
}

#undef FV_AWAIT
#undef FV_PASS
#undef FV_REAL

ABSL_NAMESPACE_END
}  // namespace absl
