// Reactors on real threads: cross-thread messages, interrupt and adaptive modes, clean stop.
#include <sys/eventfd.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include "reactor/group.h"

namespace nvmf::reactor {
namespace {

using namespace std::chrono_literals;

// Runs fn on the reactor's thread and waits for it (control path only: allocates).
void run_on(Reactor& reactor, std::function<void()> fn) {
  struct Call {
    std::function<void()> fn;
    std::promise<void> done;
    static void run(void* ctx) {
      auto* call = static_cast<Call*>(ctx);
      call->fn();
      call->done.set_value();
    }
  };
  Call call{std::move(fn), {}};
  auto done = call.done.get_future();
  while (!reactor.send(&Call::run, &call)) std::this_thread::yield();
  ASSERT_EQ(done.wait_for(10s), std::future_status::ready) << "reactor did not run the message";
}

// Waits (bounded) for a condition that another thread makes true.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit = 10s) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return condition();
}

ReactorGroupOpts group_opts(unsigned count, Mode mode) {
  ReactorGroupOpts opts;
  opts.reactor_count = count;
  opts.reactor.mode = mode;
  opts.reactor.adaptive_idle_ns = 2 * 1000 * 1000;
  return opts;
}

struct PingPong {
  Reactor* reactors[2];
  std::atomic<int> hops_left;
  std::atomic<int> wrong_thread{0};
  std::promise<void> finished;
  static void hop(void* ctx) {
    auto* game = static_cast<PingPong*>(ctx);
    Reactor* here = Reactor::current();
    if (here != game->reactors[0] && here != game->reactors[1]) ++game->wrong_thread;
    if (game->hops_left.fetch_sub(1) == 1) {
      game->finished.set_value();
      return;
    }
    Reactor* there = here == game->reactors[0] ? game->reactors[1] : game->reactors[0];
    while (!there->send(&PingPong::hop, game)) {
    }
  }
};

void play_ping_pong(Mode mode) {
  auto group = ReactorGroup::start(group_opts(2, mode));
  ASSERT_TRUE(group);
  // 2000 hops: enough to interleave the threads many times, and quick even when two
  // spinning poll-mode reactors share 2 cores with another test.
  PingPong game{{&(*group)->reactor(0), &(*group)->reactor(1)}, {2000}, {}, {}};
  auto finished = game.finished.get_future();
  ASSERT_TRUE((*group)->reactor(0).send(&PingPong::hop, &game));
  ASSERT_EQ(finished.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(game.wrong_thread.load(), 0);
  (*group)->stop();
  EXPECT_EQ((*group)->reactor(0).stats().messages + (*group)->reactor(1).stats().messages, 2000u);
}

TEST(ReactorThreads, PingPongInPollMode) { play_ping_pong(Mode::poll); }
TEST(ReactorThreads, PingPongInInterruptMode) { play_ping_pong(Mode::interrupt); }
TEST(ReactorThreads, PingPongInAdaptiveMode) { play_ping_pong(Mode::adaptive); }

TEST(ReactorThreads, InterruptModeSleepsWhenIdleAndWakesOnAMessage) {
  auto group = ReactorGroup::start(group_opts(1, Mode::interrupt));
  ASSERT_TRUE(group);
  Reactor& reactor = (*group)->reactor(0);
  ASSERT_TRUE(eventually([&] { return reactor.stats().sleeps >= 1; }));
  uint64_t iterations_before = reactor.stats().iterations;
  std::this_thread::sleep_for(50ms);
  // Asleep: an idle reactor in interrupt mode must not spin.
  EXPECT_LT(reactor.stats().iterations - iterations_before, 5u);
  std::atomic<bool> ran{false};
  run_on(reactor, [&] { ran = true; });
  EXPECT_TRUE(ran.load());
}

struct FdPoller {
  int fd;
  std::atomic<uint64_t> consumed{0};
  static int poll(void* ctx, unsigned) {
    auto* self = static_cast<FdPoller*>(ctx);
    uint64_t value = 0;
    if (read(self->fd, &value, sizeof(value)) == sizeof(value)) {
      self->consumed += value;
      return 1;
    }
    return 0;
  }
};

// Adds `poller` (watching `fd`) to an interrupt-mode reactor that has slept once, so that the
// adding message wakes it, and waits until it sleeps again with the poller in place.
void add_to_sleeping_reactor(Reactor& reactor, Poller& poller, int fd) {
  ASSERT_TRUE(eventually([&] { return reactor.stats().sleeps >= 1; }));
  run_on(reactor, [&] { ASSERT_TRUE(reactor.add_poller(poller, fd)); });
  ASSERT_TRUE(eventually([&] { return reactor.stats().sleeps >= 2; }));
}

TEST(ReactorThreads, InterruptModeWakesOnAPollerFd) {
  auto group = ReactorGroup::start(group_opts(1, Mode::interrupt));
  ASSERT_TRUE(group);
  Reactor& reactor = (*group)->reactor(0);
  FdPoller state{eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
  ASSERT_GE(state.fd, 0);
  Poller poller("fd", &FdPoller::poll, &state);
  ASSERT_NO_FATAL_FAILURE(add_to_sleeping_reactor(reactor, poller, state.fd));
  uint64_t sleeps_before = reactor.stats().sleeps;
  uint64_t seven = 7;
  ASSERT_EQ(write(state.fd, &seven, sizeof(seven)), static_cast<ssize_t>(sizeof(seven)));
  EXPECT_TRUE(eventually([&] { return state.consumed.load() == 7; }))
      << "the reactor did not wake for a readable poller fd";
  EXPECT_TRUE(eventually([&] { return reactor.stats().sleeps > sleeps_before; }))
      << "after the work the reactor should sleep again";
  run_on(reactor, [&] { reactor.remove_poller(poller); });
  close(state.fd);
}

// The kernel's way (nvmet drains a CQ, re-arms it, returns): after an iteration whose only work
// came from a poller whose armed fd announces all of it, arm, poll once more, sleep; not an
// idle iteration first (under a trickle of completions two empty polls in a row are rarer
// than one).
TEST(ReactorThreads, InterruptModeSleepsRightAfterWorkItsArmedFdAnnounced) {
  auto group = ReactorGroup::start(group_opts(1, Mode::interrupt));
  ASSERT_TRUE(group);
  Reactor& reactor = (*group)->reactor(0);
  FdPoller state{eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
  ASSERT_GE(state.fd, 0);
  Poller poller("armed fd", &FdPoller::poll, &state, [](void*) {});
  ASSERT_NO_FATAL_FAILURE(add_to_sleeping_reactor(reactor, poller, state.fd));
  const ReactorStats before = reactor.stats();
  const uint64_t arms_before = poller.arm_count();
  constexpr uint64_t kRounds = 20;
  for (uint64_t round = 1; round <= kRounds; ++round) {
    const uint64_t sleeps = reactor.stats().sleeps;
    uint64_t one = 1;
    ASSERT_EQ(write(state.fd, &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
    ASSERT_TRUE(eventually([&] { return state.consumed.load() == round; }));
    ASSERT_TRUE(eventually([&] { return reactor.stats().sleeps > sleeps; }));
  }
  const ReactorStats after = reactor.stats();
  // Per wake-up: the iteration that consumed the event, and the one after arming. Sleeping
  // only after an idle iteration would take three.
  EXPECT_LE(after.iterations - before.iterations, 2 * kRounds);
  EXPECT_EQ(after.busy_iterations - before.busy_iterations, kRounds);
  EXPECT_EQ(poller.arm_count() - arms_before, after.sleeps - before.sleeps)
      << "armed once before each sleep";
  run_on(reactor, [&] { reactor.remove_poller(poller); });
  close(state.fd);
}

TEST(ReactorThreads, InterruptModeRunsATimedPollerWhenItsFdIsReadableWhateverItsPeriod) {
  auto group = ReactorGroup::start(group_opts(1, Mode::interrupt));
  ASSERT_TRUE(group);
  Reactor& reactor = (*group)->reactor(0);
  FdPoller state{eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
  ASSERT_GE(state.fd, 0);
  Poller poller("timed_fd", &FdPoller::poll, &state);
  constexpr uint64_t kHourNs = 3600ull * 1000 * 1000 * 1000;
  run_on(reactor, [&] { ASSERT_TRUE(reactor.add_poller(poller, state.fd, kHourNs)); });
  ASSERT_TRUE(eventually([&] { return poller.run_count() >= 1; }));  // its first iteration
  for (uint64_t round = 1; round <= 3; ++round) {
    uint64_t value = round;
    ASSERT_EQ(write(state.fd, &value, sizeof(value)), static_cast<ssize_t>(sizeof(value)));
    const uint64_t want = round * (round + 1) / 2;
    EXPECT_TRUE(eventually([&] { return state.consumed.load() == want; }))
        << "round " << round << ": the readable fd did not run the poller, whose period is an hour";
  }
  EXPECT_EQ(poller.run_count(), 4u) << "it ran for its fd only, not on the other wake-ups";
  run_on(reactor, [&] { reactor.remove_poller(poller); });
  close(state.fd);
}

TEST(ReactorThreads, InterruptModeWakesForATimer) {
  auto group = ReactorGroup::start(group_opts(1, Mode::interrupt));
  ASSERT_TRUE(group);
  Reactor& reactor = (*group)->reactor(0);
  std::atomic<int> fired{0};
  Timer timer("t", [](void* ctx) { ++*static_cast<std::atomic<int>*>(ctx); }, &fired);
  auto start = std::chrono::steady_clock::now();
  run_on(reactor, [&] { reactor.start_timer(timer, 20 * 1000 * 1000); });
  ASSERT_TRUE(eventually([&] { return fired.load() == 1; }));
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, 19ms) << "fired before its deadline";
  EXPECT_GE(reactor.stats().sleeps, 1u) << "the reactor should sleep until the timerfd fires";
}

TEST(ReactorThreads, AdaptiveModePollsWhileBusyThenSleeps) {
  auto group = ReactorGroup::start(group_opts(1, Mode::adaptive));
  ASSERT_TRUE(group);
  Reactor& reactor = (*group)->reactor(0);
  ASSERT_TRUE(eventually([&] { return reactor.stats().sleeps >= 1; }));
  // The poller notes the reactor's sleep count when its work starts and when it runs out,
  // from the reactor thread itself, so the check does not race with the reactor.
  struct Work {
    Reactor* reactor;
    std::atomic<int> left{200000};
    std::atomic<uint64_t> sleeps_at_start{UINT64_MAX};
    std::atomic<uint64_t> sleeps_at_end{UINT64_MAX};
    static int poll(void* ctx, unsigned) {
      auto* work = static_cast<Work*>(ctx);
      int left = work->left.load();
      if (left <= 0) return 0;
      if (left == 200000) work->sleeps_at_start = work->reactor->stats().sleeps;
      if (left == 1) work->sleeps_at_end = work->reactor->stats().sleeps;
      work->left = left - 1;
      return 1;
    }
  } work{&reactor};
  Poller busy("busy", &Work::poll, &work);
  run_on(reactor, [&] { ASSERT_TRUE(reactor.add_poller(busy)); });
  ASSERT_TRUE(eventually([&] { return work.left.load() == 0; }));
  EXPECT_EQ(work.sleeps_at_end.load(), work.sleeps_at_start.load())
      << "the reactor slept while its poller had work";
  EXPECT_TRUE(eventually([&] { return reactor.stats().sleeps > work.sleeps_at_end.load(); }))
      << "idle for longer than adaptive_idle_ns, the reactor should sleep";
  run_on(reactor, [&] { reactor.remove_poller(busy); });
}

// A poller with an ArmFn, busy for `left` polls: it counts its arms, and those made while it
// still had work (from the reactor thread itself).
struct ArmedWork {
  std::atomic<int> left{0};
  std::atomic<uint64_t> arms_while_busy{0};
  std::atomic<uint64_t> arms{0};
  std::atomic<int> work_at_next_arm{0};  // work the next arm "finds" (a completion racing it)
  static int poll(void* ctx, unsigned) {
    auto* work = static_cast<ArmedWork*>(ctx);
    const int left = work->left.load();
    if (left <= 0) return 0;
    work->left = left - 1;
    return 1;
  }
  static void arm(void* ctx) {
    auto* work = static_cast<ArmedWork*>(ctx);
    if (work->left.load() > 0) ++work->arms_while_busy;
    ++work->arms;
    work->left += work->work_at_next_arm.exchange(0);
  }
};

void check_arms_only_before_sleeping(Mode mode) {
  auto group = ReactorGroup::start(group_opts(1, mode));
  ASSERT_TRUE(group);
  Reactor& reactor = (*group)->reactor(0);
  ArmedWork work;
  Poller poller("armed", &ArmedWork::poll, &work, &ArmedWork::arm);
  work.left = 100000;
  ASSERT_TRUE(eventually([&] { return reactor.stats().sleeps >= 1; }));  // idle before the work
  run_on(reactor, [&] { ASSERT_TRUE(reactor.add_poller(poller)); });
  ASSERT_TRUE(eventually([&] { return work.left.load() == 0; }));
  ASSERT_TRUE(eventually([&] { return reactor.stats().sleeps >= 2; }));
  EXPECT_EQ(work.arms_while_busy.load(), 0u) << "armed on an iteration that had work";
  EXPECT_GE(work.arms.load(), 1u) << "slept without arming the poller";
  EXPECT_EQ(poller.arm_count(), work.arms.load());
  // Work that shows up while arming is polled before the reactor sleeps: no event would wake
  // it for that work (it came before the arm).
  const uint64_t sleeps_before = reactor.stats().sleeps;
  const uint64_t arms_before = work.arms.load();
  work.work_at_next_arm = 3;
  run_on(reactor, [] {});  // wakes the reactor; it arms again before its next sleep
  ASSERT_TRUE(eventually([&] { return work.arms.load() > arms_before && work.left.load() == 0; }))
      << "the work found while arming was not polled (a sleep with work pending)";
  EXPECT_TRUE(eventually([&] { return reactor.stats().sleeps > sleeps_before; }));
  run_on(reactor, [&] { reactor.remove_poller(poller); });
}

TEST(ReactorThreads, InterruptModeArmsPollersOnlyBeforeSleeping) {
  check_arms_only_before_sleeping(Mode::interrupt);
}
TEST(ReactorThreads, AdaptiveModeArmsPollersOnlyBeforeSleeping) {
  check_arms_only_before_sleeping(Mode::adaptive);
}

TEST(ReactorThreads, PollModeNeverArmsAPoller) {
  auto group = ReactorGroup::start(group_opts(1, Mode::poll));
  ASSERT_TRUE(group);
  Reactor& reactor = (*group)->reactor(0);
  ArmedWork work;
  Poller poller("armed", &ArmedWork::poll, &work, &ArmedWork::arm);
  run_on(reactor, [&] { ASSERT_TRUE(reactor.add_poller(poller)); });
  const uint64_t runs_before = poller.run_count();
  ASSERT_TRUE(eventually([&] { return poller.run_count() > runs_before + 1000; }));
  EXPECT_EQ(work.arms.load(), 0u);
  run_on(reactor, [&] { reactor.remove_poller(poller); });
}

TEST(ReactorThreads, StopRunsMessagesQueuedBeforeIt) {
  auto group = ReactorGroup::start(group_opts(1, Mode::interrupt));
  ASSERT_TRUE(group);
  Reactor& reactor = (*group)->reactor(0);
  std::atomic<int> ran{0};
  auto count = [](void* ctx) { ++*static_cast<std::atomic<int>*>(ctx); };
  // Block the reactor so the messages below are still queued when stop is requested.
  std::promise<void> release;
  auto released = release.get_future().share();
  struct Blocker {
    std::shared_future<void> released;
    static void run(void* ctx) { static_cast<Blocker*>(ctx)->released.wait(); }
  } blocker{released};
  ASSERT_TRUE(reactor.send(&Blocker::run, &blocker));
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(reactor.send(count, &ran));
  reactor.request_stop();
  release.set_value();
  (*group)->stop();
  EXPECT_EQ(ran.load(), 100);
  (*group)->stop();  // idempotent
}

TEST(ReactorGroup, PinsToACoreAndRejectsABadOne) {
  ReactorGroupOpts opts = group_opts(1, Mode::interrupt);
  opts.cores = {0};
  auto group = ReactorGroup::start(opts);
  ASSERT_TRUE(group);
  int cpu = -1;
  run_on((*group)->reactor(0), [&] { cpu = sched_getcpu(); });
  EXPECT_EQ(cpu, 0);
  (*group)->stop();

  opts.cores = {4096};
  auto bad = ReactorGroup::start(opts);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, Errc::invalid_argument);

  ReactorGroupOpts none;
  none.reactor_count = 0;
  EXPECT_FALSE(ReactorGroup::start(none));
}

}  // namespace
}  // namespace nvmf::reactor
