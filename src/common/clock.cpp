#include "common/clock.h"

#include <time.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

namespace nvmf {
namespace {

uint64_t to_ns(const timespec& ts) noexcept {
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t clock_now_ns(clockid_t clock) noexcept {
  timespec ts{};
  clock_gettime(clock, &ts);
  return to_ns(ts);
}

// Two ticks of the coarse clock (its resolution is the tick: 4 ms at HZ=250).
uint64_t coarse_slack_ns() noexcept {
  static const uint64_t slack = []() -> uint64_t {
    timespec resolution{};
    if (clock_getres(CLOCK_MONOTONIC_COARSE, &resolution) != 0) return 20000000;
    return 2 * to_ns(resolution);
  }();
  return slack;
}

}  // namespace

uint64_t monotonic_now_ns() noexcept { return clock_now_ns(CLOCK_MONOTONIC); }

bool coarse_may_have_reached(uint64_t deadline_ns) noexcept {
  return clock_now_ns(CLOCK_MONOTONIC_COARSE) + coarse_slack_ns() >= deadline_ns;
}

bool coarse_surely_reached(uint64_t deadline_ns) noexcept {
  return clock_now_ns(CLOCK_MONOTONIC_COARSE) >= deadline_ns;
}

uint64_t MonotonicClock::now_ns() const noexcept { return monotonic_now_ns(); }

bool MonotonicClock::surely_reached(uint64_t deadline_ns) const noexcept {
  return coarse_surely_reached(deadline_ns);
}

bool MonotonicClock::may_have_reached(uint64_t deadline_ns) const noexcept {
  return coarse_may_have_reached(deadline_ns);
}

MonotonicClock& MonotonicClock::instance() noexcept {
  static MonotonicClock clock;
  return clock;
}

TscClock& TscClock::instance() noexcept {
  static TscClock clock;
  return clock;
}

bool TscClock::invariant_tsc_available() noexcept {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // int in clang's cpuid.h, unsigned in gcc's.
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000, nullptr)) < 0x80000007u) return false;
  __cpuid(0x80000007, eax, ebx, ecx, edx);
  return (edx & (1u << 8)) != 0;  // CPUID.80000007H:EDX[8] = invariant TSC
#else
  return false;
#endif
}

TscClock::TscClock() noexcept {
#if defined(__x86_64__)
  if (!invariant_tsc_available()) return;
  // Calibrate over 10 ms: long enough for < 0.1% error, short enough for start-up.
  constexpr uint64_t kCalibrationNs = 10 * 1000 * 1000;
  uint64_t start_ns = monotonic_now_ns();
  uint64_t start_ticks = __rdtsc();
  uint64_t end_ns = start_ns;
  while (end_ns - start_ns < kCalibrationNs) end_ns = monotonic_now_ns();
  uint64_t end_ticks = __rdtsc();
  if (end_ticks <= start_ticks) return;
  ticks_per_second_ = (end_ticks - start_ticks) * 1000000000ull / (end_ns - start_ns);
  if (ticks_per_second_ == 0) return;
  ns_per_tick_q32_ = (1000000000ull << 32) / ticks_per_second_;
  base_ticks_ = end_ticks;
  base_ns_ = end_ns;
  use_tsc_ = true;
#endif
}

uint64_t TscClock::now_ns() const noexcept {
#if defined(__x86_64__)
  if (use_tsc_) {
    // One multiply and a shift (32.32 fixed point), no division: this runs on every reactor
    // iteration and twice per I/O in nvmf_perf. The 128-bit product cannot overflow.
    const uint64_t ticks = __rdtsc() - base_ticks_;
    return base_ns_ + static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) *
                                             ns_per_tick_q32_) >> 32);
  }
#endif
  return monotonic_now_ns();
}

bool TscClock::may_have_reached(uint64_t deadline_ns) const noexcept {
  if (use_tsc_) return now_ns() >= deadline_ns;
  return coarse_may_have_reached(deadline_ns);
}

bool TscClock::surely_reached(uint64_t deadline_ns) const noexcept {
  if (use_tsc_) return now_ns() >= deadline_ns;
  return coarse_surely_reached(deadline_ns);
}

}  // namespace nvmf
