#include "common/clock.h"

#include <gtest/gtest.h>

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

TEST(TscClock, TracksMonotonicClock) {
  TscClock tsc;
  if (!tsc.using_tsc()) {
    GTEST_SKIP() << "no invariant TSC on this CPU; TscClock falls back to CLOCK_MONOTONIC";
  }
  EXPECT_GT(tsc.ticks_per_second(), 100000000u);  // any x86 of this century ticks > 100 MHz
  uint64_t tsc_start = tsc.now_ns();
  uint64_t mono_start = monotonic_now_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  uint64_t tsc_elapsed = tsc.now_ns() - tsc_start;
  uint64_t mono_elapsed = monotonic_now_ns() - mono_start;
  // Calibration error is well under 1%; allow 5% for a loaded CI machine.
  double ratio = static_cast<double>(tsc_elapsed) / static_cast<double>(mono_elapsed);
  EXPECT_NEAR(ratio, 1.0, 0.05);
}

}  // namespace
}  // namespace nvmf
