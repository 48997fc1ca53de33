#include "common/clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace nvmf {
namespace {

TEST(FakeClock, MovesOnlyWhenAdvanced) {
  FakeClock clock(1000);
  EXPECT_EQ(clock.now_ns(), 1000u);
  EXPECT_EQ(clock.now_ns(), 1000u);
  clock.advance_us(2);
  EXPECT_EQ(clock.now_ns(), 3000u);
  clock.advance_ms(1);
  EXPECT_EQ(clock.now_ns(), 1003000u);
  EXPECT_EQ(clock.now_us(), 1003u);
  clock.set_ns(5);
  EXPECT_EQ(clock.now_ns(), 5u);
}

TEST(MonotonicClock, NeverGoesBackwards) {
  auto& clock = MonotonicClock::instance();
  uint64_t previous = clock.now_ns();
  for (int i = 0; i < 10000; ++i) {
    uint64_t now = clock.now_ns();
    ASSERT_GE(now, previous);
    previous = now;
  }
}

// may_have_reached() may say yes early (it is a cheap lower bound) but never no when the
// deadline has come: a "no" for a deadline that now_ns() already reached would delay a timer.
TEST(MonotonicClock, MayHaveReachedNeverDeniesAReachedDeadline) {
  auto& clock = MonotonicClock::instance();
  const uint64_t start = clock.now_ns();
  EXPECT_TRUE(clock.may_have_reached(start));
  EXPECT_TRUE(clock.may_have_reached(start - 1));
  EXPECT_FALSE(clock.may_have_reached(start + 10ull * 1000 * 1000 * 1000))
      << "a deadline 10 s ahead has not come";
  for (int i = 0; i < 10000; ++i) {
    const uint64_t deadline = start + static_cast<uint64_t>(i) * 10000;  // up to 100 ms ahead
    // Read before asking: a deadline the clock had reached then must get a yes. (A read
    // after the answer may have crossed the deadline in between and proves nothing.)
    const uint64_t before = clock.now_ns();
    if (!clock.may_have_reached(deadline)) {
      ASSERT_LT(before, deadline);
    }
  }
}

// surely_reached() may say no late (a tick of the coarse clock) but never yes early: a "yes"
// before now_ns() reached the deadline would run a timed poller before its period.
TEST(MonotonicClock, SurelyReachedNeverClaimsADeadlineNotReached) {
  auto& clock = MonotonicClock::instance();
  const uint64_t start = clock.now_ns();
  EXPECT_FALSE(clock.surely_reached(start + 10ull * 1000 * 1000 * 1000));
  for (int i = 0; i < 10000; ++i) {
    const uint64_t deadline = start + static_cast<uint64_t>(i) * 10000;  // up to 100 ms ahead
    if (clock.surely_reached(deadline)) {
      ASSERT_GE(clock.now_ns(), deadline);
    }
  }
  // The coarse clock's resolution is a tick (at most 10 ms at HZ=100): 50 ms later it has.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(clock.surely_reached(start));
}

TEST(TscClock, SurelyReachedNeverClaimsADeadlineNotReached) {
  TscClock tsc;
  const uint64_t start = tsc.now_ns();
  EXPECT_FALSE(tsc.surely_reached(start + 10ull * 1000 * 1000 * 1000));
  for (int i = 0; i < 10000; ++i) {
    const uint64_t deadline = start + static_cast<uint64_t>(i) * 10000;
    if (tsc.surely_reached(deadline)) {
      ASSERT_GE(tsc.now_ns(), deadline);
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(tsc.surely_reached(start));
}

TEST(TscClock, MayHaveReachedNeverDeniesAReachedDeadline) {
  TscClock tsc;
  const uint64_t start = tsc.now_ns();
  EXPECT_TRUE(tsc.may_have_reached(start));
  EXPECT_FALSE(tsc.may_have_reached(start + 10ull * 1000 * 1000 * 1000));
  for (int i = 0; i < 10000; ++i) {
    const uint64_t deadline = start + static_cast<uint64_t>(i) * 10000;
    const uint64_t before = tsc.now_ns();  // as in MonotonicClock's test: read, then ask
    if (!tsc.may_have_reached(deadline)) {
      ASSERT_LT(before, deadline);
    }
  }
}

TEST(TscClock, TracksMonotonicClock) {
  TscClock tsc;
  if (!tsc.using_tsc()) {
    GTEST_SKIP() << "no invariant TSC on this CPU; TscClock falls back to CLOCK_MONOTONIC";
  }
  EXPECT_GT(tsc.ticks_per_second(), 100000000u);  // any x86 of this century ticks > 100 MHz
  // Each reading of the two clocks is bracketed by monotonic reads and the tightest bracket of
  // many kept: a preemption between two reads (a loaded CI machine) would otherwise count
  // against the TSC.
  struct Reading {
    uint64_t tsc_ns;
    uint64_t mono_ns;
  };
  auto read_both = [&tsc] {
    Reading best{0, 0};
    uint64_t best_bracket = UINT64_MAX;
    for (int i = 0; i < 1000; ++i) {
      const uint64_t before = monotonic_now_ns();
      const uint64_t tsc_ns = tsc.now_ns();
      const uint64_t after = monotonic_now_ns();
      if (after - before < best_bracket) {
        best_bracket = after - before;
        best = Reading{tsc_ns, before + (after - before) / 2};
      }
    }
    return best;
  };
  const Reading start = read_both();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const Reading end = read_both();
  const uint64_t tsc_elapsed = end.tsc_ns - start.tsc_ns;
  const uint64_t mono_elapsed = end.mono_ns - start.mono_ns;
  // Calibration error is well under 1%; allow 5% for a loaded CI machine.
  double ratio = static_cast<double>(tsc_elapsed) / static_cast<double>(mono_elapsed);
  EXPECT_NEAR(ratio, 1.0, 0.05);
}

}  // namespace
}  // namespace nvmf
