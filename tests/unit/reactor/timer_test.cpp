// Timers on a FakeClock: deadlines, periods, ordering, cancellation.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "reactor/harness.h"
#include "reactor/reactor.h"

namespace nvmf::reactor {
namespace {

constexpr uint64_t kMs = 1000 * 1000;

struct Fired {
  std::vector<std::string> order;
};
struct NamedTimer {
  Fired* fired;
  const char* name;
  static void fire(void* ctx) {
    auto* self = static_cast<NamedTimer*>(ctx);
    self->fired->order.push_back(self->name);
  }
};

TEST(Timer, OneShotFiresOnceAtItsDeadline) {
  ReactorHarness harness(1);
  Fired fired;
  NamedTimer state{&fired, "a"};
  Timer timer("a", &NamedTimer::fire, &state);
  harness.reactor(0).start_timer(timer, 10 * kMs);
  EXPECT_TRUE(timer.armed());
  harness.advance_ms(9);
  EXPECT_TRUE(fired.order.empty());
  harness.advance_ms(1);
  EXPECT_EQ(fired.order.size(), 1u);
  EXPECT_FALSE(timer.armed());
  harness.advance_ms(100);
  EXPECT_EQ(fired.order.size(), 1u);
  EXPECT_EQ(timer.fire_count(), 1u);
}

TEST(Timer, PeriodicFiresEveryPeriodAndSkipsMissedOnes) {
  ReactorHarness harness(1);
  Fired fired;
  NamedTimer state{&fired, "p"};
  Timer timer("p", &NamedTimer::fire, &state);
  harness.reactor(0).start_timer(timer, 5 * kMs, 5 * kMs);
  for (int i = 0; i < 4; ++i) harness.advance_ms(5);
  EXPECT_EQ(timer.fire_count(), 4u);
  // The reactor stalls for 50 ms: one late firing, not ten in a burst.
  harness.advance_ms(50);
  EXPECT_EQ(timer.fire_count(), 5u);
  harness.advance_ms(5);
  EXPECT_EQ(timer.fire_count(), 6u);
  harness.reactor(0).cancel_timer(timer);
  harness.advance_ms(50);
  EXPECT_EQ(timer.fire_count(), 6u);
}

TEST(Timer, FireInDeadlineOrderRegardlessOfStartOrder) {
  ReactorHarness harness(1);
  Fired fired;
  NamedTimer sc{&fired, "c"}, sa{&fired, "a"}, sb{&fired, "b"}, sd{&fired, "d"};
  Timer c("c", &NamedTimer::fire, &sc), a("a", &NamedTimer::fire, &sa);
  Timer b("b", &NamedTimer::fire, &sb), d("d", &NamedTimer::fire, &sd);
  harness.reactor(0).start_timer(c, 30 * kMs);
  harness.reactor(0).start_timer(a, 10 * kMs);
  harness.reactor(0).start_timer(d, 40 * kMs);
  harness.reactor(0).start_timer(b, 20 * kMs);
  EXPECT_EQ(harness.reactor(0).armed_timer_count(), 4u);
  harness.advance_ms(100);
  EXPECT_EQ(fired.order, (std::vector<std::string>{"a", "b", "c", "d"}));
}

TEST(Timer, CancelAndRestart) {
  ReactorHarness harness(1);
  Fired fired;
  NamedTimer state{&fired, "t"};
  Timer timer("t", &NamedTimer::fire, &state);
  harness.reactor(0).start_timer(timer, 10 * kMs);
  harness.advance_ms(5);
  harness.reactor(0).start_timer(timer, 10 * kMs);  // restart: deadline moves out
  harness.advance_ms(6);
  EXPECT_TRUE(fired.order.empty()) << "a restarted timer must use the new deadline";
  harness.advance_ms(4);
  EXPECT_EQ(fired.order.size(), 1u);
  harness.reactor(0).start_timer(timer, 10 * kMs);
  harness.reactor(0).cancel_timer(timer);
  harness.reactor(0).cancel_timer(timer);  // idempotent
  harness.advance_ms(20);
  EXPECT_EQ(fired.order.size(), 1u);
}

struct SelfCancelling {
  Reactor* reactor;
  Timer* timer;
  int fires = 0;
  static void fire(void* ctx) {
    auto* self = static_cast<SelfCancelling*>(ctx);
    if (++self->fires == 3) self->reactor->cancel_timer(*self->timer);
  }
};

TEST(Timer, PeriodicTimerMayCancelItselfInItsCallback) {
  ReactorHarness harness(1);
  SelfCancelling state{&harness.reactor(0), nullptr};
  Timer timer("self", &SelfCancelling::fire, &state);
  state.timer = &timer;
  harness.reactor(0).start_timer(timer, kMs, kMs);
  for (int i = 0; i < 10; ++i) harness.advance_ms(1);
  EXPECT_EQ(state.fires, 3);
  EXPECT_FALSE(timer.armed());
}

TEST(Timer, DestroyingAnArmedTimerUnlinksIt) {
  ReactorHarness harness(1);
  Fired fired;
  NamedTimer state{&fired, "gone"};
  {
    Timer timer("gone", &NamedTimer::fire, &state);
    harness.reactor(0).start_timer(timer, kMs);
  }
  EXPECT_EQ(harness.reactor(0).armed_timer_count(), 0u);
  harness.advance_ms(5);
  EXPECT_TRUE(fired.order.empty());
}

TEST(Timer, ZeroDelayFiresOnTheNextPoll) {
  ReactorHarness harness(1);
  Fired fired;
  NamedTimer state{&fired, "now"};
  Timer timer("now", &NamedTimer::fire, &state);
  harness.reactor(0).start_timer(timer, 0);
  EXPECT_EQ(harness.reactor(0).poll_once(), 1);
  EXPECT_EQ(harness.reactor(0).stats().timer_fires, 1u);
}

// A clock whose exact reading is dear (a guest on the HPET: a system call each) and whose
// lower bound is free, as MonotonicClock's CLOCK_MONOTONIC_COARSE is: now_ns() counts.
class DearClock final : public Clock {
 public:
  uint64_t now_ns() const noexcept override {
    ++reads;
    return time_ns;
  }
  bool may_have_reached(uint64_t deadline_ns) const noexcept override {
    return time_ns + slack_ns >= deadline_ns;
  }
  bool surely_reached(uint64_t deadline_ns) const noexcept override {
    return time_ns >= deadline_ns;  // a coarse read that happens to be exact here
  }
  uint64_t time_ns = 1000 * kMs;
  uint64_t slack_ns = 8 * kMs;
  mutable uint64_t reads = 0;
};

std::unique_ptr<Reactor> reactor_on(const Clock& clock) {
  ReactorOpts opts;
  opts.clock = &clock;
  auto made = Reactor::create(opts);
  return made ? std::move(*made) : nullptr;
}

TEST(Timer, AReactorReadsADearClockOnlyWhenATimerMayBeDue) {
  DearClock clock;
  std::unique_ptr<Reactor> made = reactor_on(clock);
  ASSERT_TRUE(made);
  Reactor& reactor = *made;
  clock.reads = 0;  // creation reads it once
  for (int i = 0; i < 100; ++i) reactor.poll_once();
  EXPECT_EQ(clock.reads, 0u) << "no timer: an iteration needs no time";
  Fired fired;
  NamedTimer state{&fired, "k"};
  Timer timer("k", &NamedTimer::fire, &state);
  reactor.start_timer(timer, 100 * kMs);
  clock.reads = 0;
  clock.time_ns += 91 * kMs;  // 9 ms before the deadline, more than the slack
  for (int i = 0; i < 100; ++i) reactor.poll_once();
  EXPECT_EQ(clock.reads, 0u) << "a timer not yet within the slack: still no read";
  clock.time_ns += 2 * kMs;  // 7 ms before: within the slack, so each iteration reads
  for (int i = 0; i < 10; ++i) reactor.poll_once();
  EXPECT_EQ(clock.reads, 10u);
  EXPECT_TRUE(fired.order.empty());
  clock.time_ns += 7 * kMs;  // the deadline: it fires on the next iteration, not later
  reactor.poll_once();
  EXPECT_EQ(fired.order.size(), 1u);
  clock.reads = 0;
  for (int i = 0; i < 100; ++i) reactor.poll_once();
  EXPECT_EQ(clock.reads, 0u) << "the timer is gone";
}

struct CountingRuns {
  int runs = 0;
  static int poll(void* ctx, unsigned) {
    ++static_cast<CountingRuns*>(ctx)->runs;
    return 0;
  }
};

// A timed poller's period is checked with Clock::surely_reached: the dear exact read happens
// once per run (to set the next one), not on the iterations in between, nor on those of the
// last ticks before each run as may_have_reached would have it.
TEST(Timer, ATimedPollerReadsADearClockOncePerRun) {
  DearClock clock;
  std::unique_ptr<Reactor> made = reactor_on(clock);
  ASSERT_TRUE(made);
  Reactor& reactor = *made;
  CountingRuns counting;
  Poller poller("timed", &CountingRuns::poll, &counting);
  ASSERT_TRUE(reactor.add_poller(poller, -1, 10 * kMs));
  clock.reads = 0;
  reactor.poll_once();
  EXPECT_EQ(counting.runs, 1);
  EXPECT_EQ(clock.reads, 1u);
  clock.time_ns += 9 * kMs;  // within may_have_reached's slack of the next run
  for (int i = 0; i < 100; ++i) reactor.poll_once();
  EXPECT_EQ(counting.runs, 1);
  EXPECT_EQ(clock.reads, 1u) << "iterations between runs read no clock";
  clock.time_ns += 1 * kMs;
  for (int i = 0; i < 100; ++i) reactor.poll_once();
  EXPECT_EQ(counting.runs, 2);
  EXPECT_EQ(clock.reads, 2u);
  reactor.remove_poller(poller);
}

}  // namespace
}  // namespace nvmf::reactor
