// Time sources. Reactors and timers take a Clock& so tests can drive time by hand
// (FakeClock) and stay deterministic. now_ns() is monotonic and never goes backwards.
#pragma once

#include <atomic>
#include <cstdint>

namespace nvmf {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual uint64_t now_ns() const noexcept = 0;
  uint64_t now_us() const noexcept { return now_ns() / 1000; }
  // Whether now_ns() may be at or past deadline_ns, answered without reading a dear clock:
  // false means it is certainly not; true means read now_ns() to know. A reactor asks this on
  // every iteration before it reads the time for its timers.
  virtual bool may_have_reached(uint64_t deadline_ns) const noexcept {
    return now_ns() >= deadline_ns;
  }
  // Whether now_ns() is certainly at or past deadline_ns, from the cheapest read: true is
  // right; false may be a tick of a coarse clock late. For work whose timing is loose (a
  // reactor's timed pollers): may_have_reached + now_ns() would read the dear clock on every
  // iteration of the two ticks before each deadline.
  virtual bool surely_reached(uint64_t deadline_ns) const noexcept {
    return now_ns() >= deadline_ns;
  }
};

// CLOCK_MONOTONIC. Through the vDSO, about 20 ns a call, where the kernel's clocksource can be
// read from user space (the TSC); otherwise every call is a system call (a guest on the HPET,
// as QEMU's TCG guests are: a system call and an emulated MMIO read each time).
class MonotonicClock final : public Clock {
 public:
  uint64_t now_ns() const noexcept override;
  // Asks CLOCK_MONOTONIC_COARSE first (monotonic time as of the last tick, always from the
  // vDSO): a deadline more than two ticks ahead of it has not come (coarse_may_have_reached).
  bool may_have_reached(uint64_t deadline_ns) const noexcept override;
  // CLOCK_MONOTONIC_COARSE alone (coarse_surely_reached).
  bool surely_reached(uint64_t deadline_ns) const noexcept override;
  static MonotonicClock& instance() noexcept;
};

// The time-stamp counter, calibrated against CLOCK_MONOTONIC once at construction. Cheaper
// than the vDSO on the poll loop; only used when the CPU reports an invariant TSC,
// otherwise falls back to CLOCK_MONOTONIC.
class TscClock final : public Clock {
 public:
  TscClock() noexcept;
  // One process-wide instance, calibrated at first use (10 ms): the default clock of
  // reactors and bdevs, read on every reactor iteration and twice per I/O.
  static TscClock& instance() noexcept;
  uint64_t now_ns() const noexcept override;
  // The TSC answers exactly; the CLOCK_MONOTONIC fallback as MonotonicClock does.
  bool may_have_reached(uint64_t deadline_ns) const noexcept override;
  bool surely_reached(uint64_t deadline_ns) const noexcept override;
  bool using_tsc() const noexcept { return use_tsc_; }
  uint64_t ticks_per_second() const noexcept { return ticks_per_second_; }
  static bool invariant_tsc_available() noexcept;

 private:
  bool use_tsc_ = false;
  uint64_t ticks_per_second_ = 0;
  uint64_t ns_per_tick_q32_ = 0;  // nanoseconds per tick, 32.32 fixed point
  uint64_t base_ticks_ = 0;
  uint64_t base_ns_ = 0;
};

// Time moves only when a test says so. Safe to read from several threads.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(uint64_t start_ns = 0) noexcept : now_ns_(start_ns) {}
  uint64_t now_ns() const noexcept override { return now_ns_.load(std::memory_order_acquire); }
  void advance_ns(uint64_t delta_ns) noexcept { now_ns_.fetch_add(delta_ns, std::memory_order_acq_rel); }
  void advance_us(uint64_t delta_us) noexcept { advance_ns(delta_us * 1000); }
  void advance_ms(uint64_t delta_ms) noexcept { advance_ns(delta_ms * 1000 * 1000); }
  void set_ns(uint64_t value_ns) noexcept { now_ns_.store(value_ns, std::memory_order_release); }

 private:
  std::atomic<uint64_t> now_ns_;
};

// Convenience for code that has no Clock to hand (logging, setup).
uint64_t monotonic_now_ns() noexcept;

// For clocks on CLOCK_MONOTONIC: false when deadline_ns is more than two ticks past
// CLOCK_MONOTONIC_COARSE, so CLOCK_MONOTONIC cannot have reached it (coarse lags it by at most
// a tick while any CPU runs; a lag beyond two only makes a timer fire that much later).
bool coarse_may_have_reached(uint64_t deadline_ns) noexcept;
// For clocks on CLOCK_MONOTONIC: true when CLOCK_MONOTONIC_COARSE is at or past deadline_ns,
// so CLOCK_MONOTONIC is too (the coarse clock is the same time as of the last tick).
bool coarse_surely_reached(uint64_t deadline_ns) noexcept;

}  // namespace nvmf
