// SpinLock: a test-and-test-and-set lock for critical sections of a few hundred nanoseconds
// shared by polling threads (the simulated HCA's fabric lock). A std::mutex there parks the
// loser in futex_wait and costs two system calls and a wake-up per collision; two polling
// threads collide all the time. After kSpinsBeforeYield failed rounds the waiter yields the
// CPU, so an oversubscribed machine (or valgrind, which runs one thread at a time) still
// makes progress. Meets BasicLockable and Lockable: use with std::lock_guard.
#pragma once

#include <sched.h>

#include <atomic>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace nvmf {

class SpinLock {
 public:
  void lock() noexcept {
    for (;;) {
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
      uint32_t spins = 0;
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < kSpinsBeforeYield) {
          relax();
        } else {
          spins = 0;
          sched_yield();
        }
      }
    }
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  static constexpr uint32_t kSpinsBeforeYield = 1024;
  static void relax() noexcept {
#if defined(__x86_64__)
    _mm_pause();
#endif
  }
  std::atomic<bool> locked_{false};
};

}  // namespace nvmf
