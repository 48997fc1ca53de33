// Pollers and messages on reactors polled deterministically from the test thread.
#include <sys/eventfd.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <vector>

#include "reactor/harness.h"
#include "reactor/reactor.h"

namespace nvmf::reactor {
namespace {

struct CountingPoller {
  int calls = 0;
  int work_per_call = 0;
  unsigned last_budget = 0;
  static int poll(void* ctx, unsigned budget) {
    auto* self = static_cast<CountingPoller*>(ctx);
    ++self->calls;
    self->last_budget = budget;
    return self->work_per_call;
  }
};

TEST(Reactor, CreateRejectsBadOpts) {
  ReactorOpts opts;
  opts.message_ring_size = 1;
  auto bad_ring = Reactor::create(opts);
  ASSERT_FALSE(bad_ring);
  EXPECT_EQ(bad_ring.error().code, Errc::invalid_argument);
  opts = ReactorOpts{};
  opts.poller_budget = 0;
  EXPECT_FALSE(Reactor::create(opts));
}

TEST(Reactor, ModeNamesRoundTrip) {
  for (Mode mode : {Mode::poll, Mode::interrupt, Mode::adaptive}) {
    Mode parsed = Mode::poll;
    ASSERT_TRUE(mode_parse(mode_name(mode), &parsed));
    EXPECT_EQ(parsed, mode);
  }
  Mode unchanged = Mode::adaptive;
  EXPECT_FALSE(mode_parse("spin", &unchanged));
  EXPECT_EQ(unchanged, Mode::adaptive);
}

TEST(Reactor, PollerRunsEveryIterationWithBudgetAndCountsBusy) {
  ReactorOpts opts;
  opts.poller_budget = 17;
  ReactorHarness harness(1, opts);
  CountingPoller counting;
  Poller poller("counting", &CountingPoller::poll, &counting);
  ASSERT_TRUE(harness.reactor(0).add_poller(poller));
  EXPECT_EQ(harness.reactor(0).poll_once(), 0);
  counting.work_per_call = 3;
  EXPECT_EQ(harness.reactor(0).poll_once(), 3);
  EXPECT_EQ(counting.calls, 2);
  EXPECT_EQ(counting.last_budget, 17u);
  EXPECT_EQ(poller.run_count(), 2u);
  EXPECT_EQ(poller.busy_count(), 1u);
  auto stats = harness.reactor(0).stats();
  EXPECT_EQ(stats.iterations, 2u);
  EXPECT_EQ(stats.busy_iterations, 1u);
  EXPECT_EQ(stats.idle_iterations, 1u);
  harness.reactor(0).remove_poller(poller);
  harness.reactor(0).remove_poller(poller);  // idempotent
  EXPECT_FALSE(poller.registered());
}

TEST(Reactor, ATimedPollerRunsOncePerPeriodOfTheReactorsClock) {
  constexpr uint64_t kPeriodNs = 10 * 1000 * 1000;
  ReactorHarness harness(1);
  Reactor& reactor = harness.reactor(0);
  CountingPoller counting;
  Poller timed("timed", &CountingPoller::poll, &counting);
  CountingPoller every;
  Poller untimed("untimed", &CountingPoller::poll, &every);
  ASSERT_TRUE(reactor.add_poller(timed, -1, kPeriodNs));
  ASSERT_TRUE(reactor.add_poller(untimed));
  for (int i = 0; i < 5; ++i) reactor.poll_once();
  EXPECT_EQ(counting.calls, 1) << "a timed poller runs at its first iteration, then waits";
  EXPECT_EQ(every.calls, 5);
  harness.clock().advance_ns(kPeriodNs - 1);
  for (int i = 0; i < 5; ++i) reactor.poll_once();
  EXPECT_EQ(counting.calls, 1) << "1 ns short of the period";
  harness.clock().advance_ns(1);
  for (int i = 0; i < 5; ++i) reactor.poll_once();
  EXPECT_EQ(counting.calls, 2) << "once when the period has passed, not on every iteration after";
  EXPECT_EQ(timed.run_count(), 2u);
  harness.clock().advance_ns(3 * kPeriodNs);
  for (int i = 0; i < 5; ++i) reactor.poll_once();
  EXPECT_EQ(counting.calls, 3) << "missed periods do not make a burst";
  reactor.remove_poller(timed);
  reactor.remove_poller(untimed);
}

// Interrupt mode sleeps after an iteration whose work only armed fds will announce. That is
// the work of pollers registered with both an fd and an ArmFn; messages, timers and the work
// of any other poller (no fd, or an fd without an ArmFn, like nvmf_hostd's NBD socket whose
// RDMA completions have no fd) keep the reactor polling.
TEST(Reactor, UnannouncedWorkIsWhatNoArmedFdWillAnnounce) {
  ReactorHarness harness(1);
  Reactor& reactor = harness.reactor(0);
  const int fds[2] = {eventfd(0, EFD_NONBLOCK), eventfd(0, EFD_NONBLOCK)};
  ASSERT_GE(fds[0], 0);
  ASSERT_GE(fds[1], 0);
  auto no_arm = [](void*) {};
  CountingPoller armed_state, fd_only_state, plain_state;
  Poller armed("armed fd", &CountingPoller::poll, &armed_state, no_arm);
  Poller fd_only("fd, no ArmFn", &CountingPoller::poll, &fd_only_state);
  Poller plain("no fd", &CountingPoller::poll, &plain_state, no_arm);
  ASSERT_TRUE(reactor.add_poller(armed, fds[0]));
  ASSERT_TRUE(reactor.add_poller(fd_only, fds[1]));
  ASSERT_TRUE(reactor.add_poller(plain));

  armed_state.work_per_call = 5;
  EXPECT_EQ(reactor.poll_once(), 5);
  EXPECT_EQ(reactor.unannounced_work(), 0);
  fd_only_state.work_per_call = 2;
  EXPECT_EQ(reactor.poll_once(), 7);
  EXPECT_EQ(reactor.unannounced_work(), 2);
  fd_only_state.work_per_call = 0;
  plain_state.work_per_call = 3;
  EXPECT_EQ(reactor.poll_once(), 8);
  EXPECT_EQ(reactor.unannounced_work(), 3);
  plain_state.work_per_call = 0;

  int ran = 0;
  ASSERT_TRUE(reactor.send([](void* ctx) { ++*static_cast<int*>(ctx); }, &ran));
  EXPECT_EQ(reactor.poll_once(), 6);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(reactor.unannounced_work(), 1) << "a message";
  Timer timer("t", [](void*) {}, nullptr);
  reactor.start_timer(timer, 1000);
  harness.clock().advance_ns(1000);
  EXPECT_EQ(reactor.poll_once(), 6);
  EXPECT_EQ(reactor.unannounced_work(), 1) << "a timer";
  EXPECT_EQ(reactor.poll_once(), 5);
  EXPECT_EQ(reactor.unannounced_work(), 0);

  reactor.remove_poller(armed);
  reactor.remove_poller(fd_only);
  reactor.remove_poller(plain);
  for (int fd : fds) close(fd);
}

TEST(Reactor, AddingAPollerTwiceFails) {
  ReactorHarness harness(2);
  CountingPoller counting;
  Poller poller("p", &CountingPoller::poll, &counting);
  ASSERT_TRUE(harness.reactor(0).add_poller(poller));
  auto again = harness.reactor(0).add_poller(poller);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, Errc::already_exists);
  harness.reactor(0).remove_poller(poller);
}

struct SelfRemovingPoller {
  Reactor* reactor = nullptr;
  Poller* self = nullptr;
  Poller* victim = nullptr;  // removed instead of self when set
  int calls = 0;
  static int poll(void* ctx, unsigned) {
    auto* state = static_cast<SelfRemovingPoller*>(ctx);
    ++state->calls;
    state->reactor->remove_poller(state->victim != nullptr ? *state->victim : *state->self);
    return 1;
  }
};

TEST(Reactor, PollerMayRemoveItselfDuringIteration) {
  ReactorHarness harness(1);
  Reactor& reactor = harness.reactor(0);
  CountingPoller before, after;
  SelfRemovingPoller remover_state;
  Poller first("before", &CountingPoller::poll, &before);
  Poller remover("remover", &SelfRemovingPoller::poll, &remover_state);
  Poller last("after", &CountingPoller::poll, &after);
  remover_state.reactor = &reactor;
  remover_state.self = &remover;
  ASSERT_TRUE(reactor.add_poller(first));
  ASSERT_TRUE(reactor.add_poller(remover));
  ASSERT_TRUE(reactor.add_poller(last));
  reactor.poll_once();
  reactor.poll_once();
  EXPECT_EQ(remover_state.calls, 1);
  EXPECT_EQ(before.calls, 2);
  EXPECT_EQ(after.calls, 2) << "the poller after a self-removed one must still run";
  EXPECT_EQ(reactor.poller_count(), 2u);
  reactor.remove_poller(first);
  reactor.remove_poller(last);
}

TEST(Reactor, PollerMayRemoveTheNextPoller) {
  ReactorHarness harness(1);
  Reactor& reactor = harness.reactor(0);
  CountingPoller victim_state, tail_state;
  SelfRemovingPoller remover_state;
  Poller remover("remover", &SelfRemovingPoller::poll, &remover_state);
  Poller victim("victim", &CountingPoller::poll, &victim_state);
  Poller tail("tail", &CountingPoller::poll, &tail_state);
  remover_state.reactor = &reactor;
  remover_state.victim = &victim;
  ASSERT_TRUE(reactor.add_poller(remover));
  ASSERT_TRUE(reactor.add_poller(victim));
  ASSERT_TRUE(reactor.add_poller(tail));
  reactor.poll_once();
  EXPECT_EQ(victim_state.calls, 0) << "a poller removed before its turn must not run";
  EXPECT_EQ(tail_state.calls, 1);
  reactor.remove_poller(remover);
  reactor.remove_poller(tail);
}

struct Recorder {
  std::vector<int> seen;
  Reactor* seen_on = nullptr;
};
struct Note {
  Recorder* recorder;
  int value;
  static void run(void* ctx) {
    auto* note = static_cast<Note*>(ctx);
    note->recorder->seen.push_back(note->value);
    note->recorder->seen_on = Reactor::current();
  }
};

TEST(Reactor, MessagesRunInOrderOnTheTargetReactor) {
  ReactorHarness harness(2);
  Recorder recorder;
  std::vector<Note> notes;
  for (int i = 0; i < 10; ++i) notes.push_back(Note{&recorder, i});
  for (auto& note : notes) ASSERT_TRUE(harness.reactor(1).send(&Note::run, &note));
  EXPECT_EQ(harness.reactor(0).poll_once(), 0) << "messages for reactor 1 must not run on 0";
  EXPECT_TRUE(recorder.seen.empty());
  EXPECT_EQ(harness.reactor(1).poll_once(), 10);
  EXPECT_EQ(recorder.seen, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(recorder.seen_on, &harness.reactor(1));
  EXPECT_EQ(Reactor::current(), nullptr) << "current() is only set while polling";
  EXPECT_EQ(harness.reactor(1).stats().messages, 10u);
}

TEST(Reactor, MessageBudgetBoundsOneIteration) {
  ReactorOpts opts;
  opts.message_budget = 4;
  ReactorHarness harness(1, opts);
  Recorder recorder;
  std::vector<Note> notes(10, Note{&recorder, 0});
  for (auto& note : notes) ASSERT_TRUE(harness.reactor(0).send(&Note::run, &note));
  EXPECT_EQ(harness.reactor(0).poll_once(), 4);
  EXPECT_EQ(harness.reactor(0).poll_once(), 4);
  EXPECT_EQ(harness.reactor(0).poll_once(), 2);
  EXPECT_EQ(recorder.seen.size(), 10u);
}

TEST(Reactor, SendAnswersBusyWhenTheRingIsFull) {
  ReactorOpts opts;
  opts.message_ring_size = 8;
  ReactorHarness harness(1, opts);
  Recorder recorder;
  Note note{&recorder, 1};
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(harness.reactor(0).send(&Note::run, &note));
  auto full = harness.reactor(0).send(&Note::run, &note);
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, Errc::busy);
  harness.poll_until_idle();
  EXPECT_EQ(recorder.seen.size(), 8u);
  EXPECT_TRUE(harness.reactor(0).send(&Note::run, &note)) << "room again after a poll";
  harness.poll_until_idle();
}

// A ball bounces between two reactors; each hop is a message to the other one.
struct PingPong {
  Reactor* reactors[2];
  int hops_left;
  int hops_on[2] = {0, 0};
  static void hop(void* ctx) {
    auto* game = static_cast<PingPong*>(ctx);
    int here = Reactor::current() == game->reactors[0] ? 0 : 1;
    ++game->hops_on[here];
    if (--game->hops_left > 0) {
      auto sent = game->reactors[1 - here]->send(&PingPong::hop, game);
      ASSERT_TRUE(sent);
    }
  }
};

TEST(Reactor, MessagesAcrossReactorsInTheHarness) {
  ReactorHarness harness(2);
  PingPong game{{&harness.reactor(0), &harness.reactor(1)}, 100};
  ASSERT_TRUE(harness.reactor(0).send(&PingPong::hop, &game));
  int rounds = harness.poll_until_idle();
  EXPECT_GT(rounds, 0);
  EXPECT_EQ(game.hops_left, 0);
  EXPECT_EQ(game.hops_on[0], 50);
  EXPECT_EQ(game.hops_on[1], 50);
}

int busy_forever(void*, unsigned) { return 1; }

TEST(ReactorHarness, ReportsALivelock) {
  ReactorHarness harness(1);
  Poller poller("spinner", &busy_forever, nullptr);
  ASSERT_TRUE(harness.reactor(0).add_poller(poller));
  EXPECT_EQ(harness.poll_until_idle(50), -1);
  harness.reactor(0).remove_poller(poller);
  EXPECT_EQ(harness.poll_until_idle(50), 1);
}

TEST(ReactorHarness, PollUntilPredicate) {
  ReactorHarness harness(1);
  CountingPoller counting;
  Poller poller("counting", &CountingPoller::poll, &counting);
  ASSERT_TRUE(harness.reactor(0).add_poller(poller));
  EXPECT_TRUE(harness.poll_until([&] { return counting.calls >= 5; }));
  EXPECT_EQ(counting.calls, 5);
  EXPECT_FALSE(harness.poll_until([] { return false; }, 3));
  harness.reactor(0).remove_poller(poller);
}

}  // namespace
}  // namespace nvmf::reactor
