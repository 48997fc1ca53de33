// Reactors: one polled event loop per thread (optionally pinned to a core), running pollers
// with a budget, timers, and a bounded message ring through which other threads hand it work.
// Everything registered on a reactor is owned by that reactor's thread; other threads talk to
// it only by send(). No EAL is needed: threads are plain std::threads.
//
// Modes (ReactorOpts::mode):
//   poll       spin forever; lowest latency, one core at 100% (benchmarks).
//   interrupt  sleep in epoll_wait on the message eventfd, a timerfd armed for the next timer,
//              and every fd a poller registered (CQ channels, io_uring eventfds), after any
//              iteration in which no message or timer ran and only pollers whose armed fd
//              announces all their work (ArmFn) did any: what is left is what they will
//              announce (the kernel's nvmet drains a CQ, re-arms it and returns the same way).
//              For laptops, VMs and CI. Pollers whose fd signals only once asked (an RDMA CQ:
//              ibv_req_notify_cq) are asked just before the sleep, not on every iteration,
//              and polled once more after it: a sleep takes that one empty poll.
//   adaptive   poll while there is work; sleep as in interrupt mode once idle for
//              adaptive_idle_ns.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "common/clock.h"
#include "common/intrusive_list.h"
#include "common/result.h"
#include "common/util.h"
#include "env/ring.h"

namespace nvmf::reactor {

enum class Mode { poll, interrupt, adaptive };
const char* mode_name(Mode mode) noexcept;
bool mode_parse(const char* text, Mode* mode) noexcept;

// Returns the amount of work done (completions reaped, requests advanced); 0 means idle.
// `budget` is the most work items a poller should handle in one call (STYLE point 4: reap at
// most a budget of completions per poll).
using PollFn = int (*)(void* ctx, unsigned budget);
// Interrupt and adaptive modes: called just before the reactor sleeps, never while it keeps
// polling, to make the poller's fd signal its next work (arm an RDMA CQ's channel). The
// reactor polls once more after arming, so work that came in between is not slept on. It must
// not add or remove pollers. A poller registered with an fd and an ArmFn promises that, once
// armed, the fd announces all of its work: interrupt mode then sleeps after an iteration in
// which only such pollers did work. Others (no fd, or an fd that announces part of the work,
// like nvmf_hostd's NBD socket beside its RDMA completions) keep the reactor polling while
// they report work.
using ArmFn = void (*)(void* ctx);
using MessageFn = void (*)(void* ctx);
using TimerFn = void (*)(void* ctx);

class Reactor;

// A function the reactor calls on every iteration. Owned by the caller, linked into the
// reactor (no allocation); must outlive its registration.
class Poller {
 public:
  Poller(const char* name, PollFn fn, void* ctx, ArmFn arm = nullptr) noexcept
      : name_(name), fn_(fn), arm_(arm), ctx_(ctx) {}
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;
  ~Poller();

  const char* name() const noexcept { return name_; }
  bool registered() const noexcept { return reactor_ != nullptr; }
  uint64_t run_count() const noexcept { return run_count_.load(std::memory_order_relaxed); }
  uint64_t busy_count() const noexcept { return busy_count_.load(std::memory_order_relaxed); }
  uint64_t arm_count() const noexcept { return arm_count_.load(std::memory_order_relaxed); }

 private:
  friend class Reactor;
  const char* name_;
  PollFn fn_;
  ArmFn arm_;
  void* ctx_;
  Reactor* reactor_ = nullptr;
  int interrupt_fd_ = -1;
  // Timed pollers (add_poller's period_ns): when the poller runs next, and whether epoll
  // reported its fd readable since it last ran.
  uint64_t period_ns_ = 0;
  uint64_t next_run_ns_ = 0;
  bool fd_ready_ = false;
  ListNode link_;
  // Written by the owner thread only; atomic so a stats reader on another thread is race-free.
  std::atomic<uint64_t> run_count_{0};
  std::atomic<uint64_t> busy_count_{0};
  std::atomic<uint64_t> arm_count_{0};
};

// A one-shot or periodic callback on the reactor's clock. Owned by the caller.
class Timer {
 public:
  Timer(const char* name, TimerFn fn, void* ctx) noexcept : name_(name), fn_(fn), ctx_(ctx) {}
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  ~Timer();

  const char* name() const noexcept { return name_; }
  bool armed() const noexcept { return link_.linked(); }
  uint64_t deadline_ns() const noexcept { return deadline_ns_; }
  uint64_t fire_count() const noexcept { return fire_count_; }

 private:
  friend class Reactor;
  const char* name_;
  TimerFn fn_;
  void* ctx_;
  Reactor* reactor_ = nullptr;
  uint64_t deadline_ns_ = 0;
  uint64_t period_ns_ = 0;  // 0 = one-shot
  uint64_t fire_count_ = 0;
  ListNode link_;
};

struct ReactorOpts {
  const char* name = "reactor";
  Mode mode = Mode::poll;
  // Messages in flight to this reactor at once; a full ring makes send() answer busy.
  unsigned message_ring_size = 4096;
  // Messages handled per iteration, so a flood of messages cannot starve the pollers.
  unsigned message_budget = 64;
  // Passed to each poller; 32 = SPDK's and the kernel's completion batch per poll.
  unsigned poller_budget = 32;
  // Adaptive mode: how long the reactor stays idle before it sleeps. 1 ms keeps a busy
  // reactor polling between bursts yet lets an idle one sleep within a millisecond.
  uint64_t adaptive_idle_ns = 1000 * 1000;
  // Time source for timers and statistics; nullptr = TscClock::instance() (CLOCK_MONOTONIC
  // when the CPU has no invariant TSC). Tests pass a FakeClock.
  const Clock* clock = nullptr;
};

struct ReactorStats {
  uint64_t iterations = 0;
  uint64_t busy_iterations = 0;
  uint64_t idle_iterations = 0;
  uint64_t messages = 0;
  uint64_t timer_fires = 0;
  uint64_t sleeps = 0;  // times the reactor went to epoll_wait
};

class Reactor {
 public:
  // Creates the reactor's eventfd, timerfd and epoll fd. Does not start a thread: either
  // run() it on a thread (ReactorGroup) or poll_once() it from a test (ReactorHarness).
  static Result<std::unique_ptr<Reactor>> create(const ReactorOpts& opts) noexcept;
  ~Reactor();
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  // --- any thread ---
  // Queues fn(ctx) to run on this reactor. Errc::busy when the ring is full (the caller
  // retries after polling its own reactor); never blocks, never allocates.
  Result<void> send(MessageFn fn, void* ctx) noexcept;
  // Asks run() to return after draining queued messages; wakes a sleeping reactor.
  void request_stop() noexcept;
  bool stop_requested() const noexcept { return stop_requested_.load(std::memory_order_acquire); }
  ReactorStats stats() const noexcept;
  const char* name() const noexcept { return opts_.name; }
  Mode mode() const noexcept { return opts_.mode; }
  const Clock& clock() const noexcept { return *clock_; }
  // The reactor whose poll_once() or run() is executing on the calling thread, or nullptr.
  static Reactor* current() noexcept;

  // --- owner thread ---
  // Registers a poller; with interrupt_fd >= 0 the reactor also wakes when that fd is
  // readable (level-triggered: the poller must consume the readiness).
  // period_ns > 0 makes it a timed poller (SPDK's spdk_poller_register period): it runs at
  // most once per period on the reactor's clock, and at once after a sleep from which epoll
  // reported its fd readable. For fds whose every check is a system call and whose events are
  // rare (the RDMA CM channel, a device's async events): a polling reactor would otherwise make
  // that call on every iteration. A sleeping reactor does not wake for a timed poller's period,
  // only for its fd: work that must happen on time belongs in a Timer.
  Result<void> add_poller(Poller& poller, int interrupt_fd = -1, uint64_t period_ns = 0) noexcept;
  // Safe from inside any poller, including the one being removed.
  void remove_poller(Poller& poller) noexcept;
  // Arms (or re-arms) a timer to fire after delay_ns, then every period_ns if non-zero.
  void start_timer(Timer& timer, uint64_t delay_ns, uint64_t period_ns = 0) noexcept;
  void cancel_timer(Timer& timer) noexcept;

  // One iteration: messages (up to message_budget), every poller once, expired timers.
  // Returns the work done; 0 = idle.
  int poll_once() noexcept;
  // Of the last poll_once()'s work, what no poller fd announces: messages, timers and the
  // work of pollers without both an interrupt fd and an ArmFn. Interrupt mode sleeps when it
  // is 0.
  int unannounced_work() const noexcept { return unannounced_work_; }
  // Loops poll_once() until request_stop(), sleeping when idle as the mode says. Takes
  // ownership of the reactor for the calling thread. Messages still queued at stop run
  // before it returns, so no sender's context is leaked.
  void run() noexcept;
  // Sleeps in epoll_wait until a message, a timer or a poller fd wakes the reactor, or
  // max_wait_ns passes. Returns false when it did not sleep because work was pending.
  bool wait_for_events(uint64_t max_wait_ns) noexcept;

  // Makes the calling thread the owner (the harness and run() do this).
  void take_ownership() noexcept { owner_.reset_to_current(); }
  size_t poller_count() const noexcept { return pollers_.size(); }
  size_t armed_timer_count() const noexcept { return timers_.size(); }

 private:
  struct Message {
    MessageFn fn;
    void* ctx;
  };
  explicit Reactor(const ReactorOpts& opts);
  int process_messages(unsigned budget) noexcept;
  // Adds the work of pollers whose fd does not announce it to unannounced_work_.
  int run_pollers() noexcept;
  // Interrupt and adaptive modes, after an iteration that did `work`: whether to sleep now.
  bool ready_to_sleep(int work) noexcept;
  // Timed pollers: whether this one should run now; if so, sets its next run.
  bool timed_poller_due(Poller& poller) noexcept;
  // Calls every poller's ArmFn; returns how many pollers have one.
  int arm_pollers() noexcept;
  int run_expired_timers() noexcept;
  void insert_timer(Timer& timer) noexcept;
  void arm_timerfd() noexcept;
  void drain_fd(int fd) noexcept;
  void wake() noexcept;

  ReactorOpts opts_;
  const Clock* clock_;
  ThreadOwner owner_;
  env::MpscRing<Message> messages_;
  IntrusiveList<Poller, &Poller::link_> pollers_;
  IntrusiveList<Timer, &Timer::link_> timers_;  // sorted by deadline, earliest first
  Poller* next_poller_ = nullptr;  // iteration cursor, so a poller may remove any poller
  int epoll_fd_ = -1;
  int event_fd_ = -1;  // written by send()/request_stop() when the reactor sleeps
  int timer_fd_ = -1;
  uint64_t idle_since_ns_ = 0;
  int unannounced_work_ = 0;
  // The deadline the timerfd is armed for (UINT64_MAX: disarmed), so that a reactor sleeping
  // often does not make the same timerfd_settime call before every sleep.
  uint64_t timerfd_deadline_ns_ = UINT64_MAX;
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> stop_requested_{false};

  // Statistics: written by the owner only, read by anyone (relaxed).
  std::atomic<uint64_t> iterations_{0};
  std::atomic<uint64_t> busy_iterations_{0};
  std::atomic<uint64_t> messages_handled_{0};
  std::atomic<uint64_t> timer_fires_{0};
  std::atomic<uint64_t> sleeps_{0};
};

}  // namespace nvmf::reactor
