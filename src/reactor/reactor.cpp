#include "reactor/reactor.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

NVMF_LOG_COMPONENT(reactor);

namespace nvmf::reactor {

namespace {
thread_local Reactor* t_current_reactor = nullptr;

// epoll data tags for the reactor's own fds; pollers are tagged with their Poller*.
constexpr uint64_t kTagEventFd = 1;
constexpr uint64_t kTagTimerFd = 2;

// Sets the thread's current reactor for the duration of a scope.
class CurrentReactorScope {
 public:
  explicit CurrentReactorScope(Reactor* reactor) noexcept : previous_(t_current_reactor) {
    t_current_reactor = reactor;
  }
  ~CurrentReactorScope() { t_current_reactor = previous_; }

 private:
  Reactor* previous_;
};
}  // namespace

const char* mode_name(Mode mode) noexcept {
  switch (mode) {
    case Mode::poll: return "poll";
    case Mode::interrupt: return "interrupt";
    case Mode::adaptive: return "adaptive";
  }
  return "?";
}

bool mode_parse(const char* text, Mode* mode) noexcept {
  for (Mode candidate : {Mode::poll, Mode::interrupt, Mode::adaptive}) {
    if (strcmp(text, mode_name(candidate)) == 0) {
      *mode = candidate;
      return true;
    }
  }
  return false;
}

Poller::~Poller() {
  assert(reactor_ == nullptr && "a Poller must be removed from its reactor before destruction");
}

Timer::~Timer() {
  if (reactor_ != nullptr && link_.linked()) reactor_->cancel_timer(*this);
}

Reactor::Reactor(const ReactorOpts& opts)
    : opts_(opts),
      clock_(opts.clock != nullptr ? opts.clock : &TscClock::instance()),
      messages_(opts.message_ring_size) {}

Result<std::unique_ptr<Reactor>> Reactor::create(const ReactorOpts& opts) noexcept {
  if (opts.message_ring_size < 2 || opts.message_ring_size > (1u << 24)) {
    NVMF_ERRLOG(reactor, "%s: message_ring_size %u must be within [2, 16777216]", opts.name,
                opts.message_ring_size);
    return Unexpected(Errc::invalid_argument, "message_ring_size");
  }
  if (opts.message_budget == 0 || opts.poller_budget == 0) {
    NVMF_ERRLOG(reactor, "%s: message_budget and poller_budget must be > 0", opts.name);
    return Unexpected(Errc::invalid_argument, "message_budget/poller_budget");
  }
  std::unique_ptr<Reactor> reactor(new (std::nothrow) Reactor(opts));  // setup-path
  if (!reactor) return Unexpected(Errc::no_memory, "reactor");

  reactor->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (reactor->epoll_fd_ < 0) return Unexpected(make_system_error(errno, "epoll_create1"));
  reactor->event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (reactor->event_fd_ < 0) return Unexpected(make_system_error(errno, "eventfd"));
  reactor->timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (reactor->timer_fd_ < 0) return Unexpected(make_system_error(errno, "timerfd_create"));

  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kTagEventFd;
  if (epoll_ctl(reactor->epoll_fd_, EPOLL_CTL_ADD, reactor->event_fd_, &event) != 0) {
    return Unexpected(make_system_error(errno, "epoll_ctl eventfd"));
  }
  event.data.u64 = kTagTimerFd;
  if (epoll_ctl(reactor->epoll_fd_, EPOLL_CTL_ADD, reactor->timer_fd_, &event) != 0) {
    return Unexpected(make_system_error(errno, "epoll_ctl timerfd"));
  }
  reactor->idle_since_ns_ = reactor->clock_->now_ns();
  return reactor;
}

Reactor::~Reactor() {
  // Unlink whatever is still registered so the objects' destructors do not point back here.
  while (Poller* poller = pollers_.pop_front()) poller->reactor_ = nullptr;
  while (Timer* timer = timers_.pop_front()) timer->reactor_ = nullptr;
  if (timer_fd_ >= 0) close(timer_fd_);
  if (event_fd_ >= 0) close(event_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

Reactor* Reactor::current() noexcept { return t_current_reactor; }

Result<void> Reactor::send(MessageFn fn, void* ctx) noexcept {
  if (!messages_.try_push(Message{fn, ctx})) return Errc::busy;
  // Pairs with the fence in wait_for_events(): either the reactor sees the message when it
  // re-checks the ring, or this thread sees sleeping_ and writes the eventfd. Never neither.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_relaxed)) wake();
  return {};
}

void Reactor::request_stop() noexcept {
  stop_requested_.store(true, std::memory_order_release);
  wake();
}

void Reactor::wake() noexcept {
  uint64_t one = 1;
  // EAGAIN means the counter is already non-zero: the reactor will wake anyway.
  ssize_t written = write(event_fd_, &one, sizeof(one));
  (void)written;
}

ReactorStats Reactor::stats() const noexcept {
  ReactorStats stats;
  stats.iterations = iterations_.load(std::memory_order_relaxed);
  stats.busy_iterations = busy_iterations_.load(std::memory_order_relaxed);
  stats.idle_iterations = stats.iterations - stats.busy_iterations;
  stats.messages = messages_handled_.load(std::memory_order_relaxed);
  stats.timer_fires = timer_fires_.load(std::memory_order_relaxed);
  stats.sleeps = sleeps_.load(std::memory_order_relaxed);
  return stats;
}

Result<void> Reactor::add_poller(Poller& poller, int interrupt_fd, uint64_t period_ns) noexcept {
  owner_.check();
  if (poller.reactor_ != nullptr) return Unexpected(Errc::already_exists, "poller already registered");
  if (interrupt_fd >= 0) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.ptr = &poller;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, interrupt_fd, &event) != 0) {
      int saved = errno;
      NVMF_ERRLOG(reactor, "%s: cannot watch fd %d of poller %s: %s", opts_.name, interrupt_fd,
                  poller.name_, strerror(saved));
      return Unexpected(make_system_error(saved, "epoll_ctl poller fd"));
    }
  }
  poller.reactor_ = this;
  poller.interrupt_fd_ = interrupt_fd;
  poller.period_ns_ = period_ns;
  poller.next_run_ns_ = 0;  // a timed poller's first run is its first iteration
  poller.fd_ready_ = false;
  pollers_.push_back(poller);
  return {};
}

void Reactor::remove_poller(Poller& poller) noexcept {
  owner_.check();
  if (poller.reactor_ != this) return;  // idempotent
  if (next_poller_ == &poller) {
    // The loop in run_pollers() would visit it next: step the cursor past it first.
    next_poller_ = pollers_.next_of(poller);
  }
  if (poller.interrupt_fd_ >= 0) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, poller.interrupt_fd_, nullptr);
    poller.interrupt_fd_ = -1;
  }
  pollers_.remove(poller);
  poller.reactor_ = nullptr;
}

void Reactor::insert_timer(Timer& timer) noexcept {
  // Timers are few (keep-alive, reconnect, statistics); a sorted list keeps the earliest at
  // the front and costs O(n) only when a timer is armed.
  for (auto& other : timers_) {
    if (timer.deadline_ns_ < other.deadline_ns_) {
      timers_.insert_before(other, timer);
      return;
    }
  }
  timers_.push_back(timer);
}

void Reactor::start_timer(Timer& timer, uint64_t delay_ns, uint64_t period_ns) noexcept {
  owner_.check();
  if (timer.link_.linked()) timers_.remove(timer);
  timer.reactor_ = this;
  timer.deadline_ns_ = clock_->now_ns() + delay_ns;
  timer.period_ns_ = period_ns;
  insert_timer(timer);
}

void Reactor::cancel_timer(Timer& timer) noexcept {
  owner_.check();
  if (timer.reactor_ == this && timer.link_.linked()) timers_.remove(timer);
}

int Reactor::process_messages(unsigned budget) noexcept {
  int handled = 0;
  Message message{};
  while (static_cast<unsigned>(handled) < budget && messages_.try_pop(&message)) {
    message.fn(message.ctx);
    ++handled;
  }
  if (handled > 0) messages_handled_.fetch_add(handled, std::memory_order_relaxed);
  return handled;
}

int Reactor::run_pollers() noexcept {
  int work = 0;
  Poller* poller = pollers_.empty() ? nullptr : &pollers_.front();
  while (poller != nullptr) {
    // Find the successor before the call: the poller may remove itself or others.
    next_poller_ = pollers_.next_of(*poller);
    if (poller->period_ns_ != 0 && !timed_poller_due(*poller)) {
      poller = next_poller_;
      continue;
    }
    // Read before the call, which may remove the poller.
    const bool announced = poller->interrupt_fd_ >= 0 && poller->arm_ != nullptr;
    int done = poller->fn_(poller->ctx_, opts_.poller_budget);
    poller->run_count_.fetch_add(1, std::memory_order_relaxed);
    if (done > 0) {
      poller->busy_count_.fetch_add(1, std::memory_order_relaxed);
      work += done;
      if (!announced) unannounced_work_ += done;
    }
    poller = next_poller_;
  }
  next_poller_ = nullptr;
  return work;
}

bool Reactor::timed_poller_due(Poller& poller) noexcept {
  // Clock::surely_reached: on a guest without a readable TSC an exact read is a system call,
  // which this check would otherwise make on every iteration; a period a tick long is fine.
  if (!poller.fd_ready_ && !clock_->surely_reached(poller.next_run_ns_)) return false;
  poller.fd_ready_ = false;
  poller.next_run_ns_ = clock_->now_ns() + poller.period_ns_;  // once per run
  return true;
}

int Reactor::arm_pollers() noexcept {
  int armed = 0;
  for (Poller& poller : pollers_) {
    if (poller.arm_ == nullptr) continue;
    poller.arm_(poller.ctx_);
    poller.arm_count_.fetch_add(1, std::memory_order_relaxed);
    ++armed;
  }
  return armed;
}

int Reactor::run_expired_timers() noexcept {
  // The clock is read only when the earliest timer may be due: on a guest whose clocksource
  // user space cannot read, each read is a system call (Clock::may_have_reached).
  if (timers_.empty() || !clock_->may_have_reached(timers_.front().deadline_ns_)) return 0;
  int fired = 0;
  uint64_t now = clock_->now_ns();
  // Bounded by the number of timers due now, so a zero-period timer cannot loop forever.
  size_t due_limit = timers_.size();
  while (!timers_.empty() && timers_.front().deadline_ns_ <= now && due_limit-- > 0) {
    Timer& timer = *timers_.pop_front();
    if (timer.period_ns_ != 0) {
      // Re-arm before the callback so the callback may cancel or restart it. A reactor that
      // fell behind skips missed periods instead of firing a burst.
      uint64_t next = timer.deadline_ns_ + timer.period_ns_;
      timer.deadline_ns_ = next > now ? next : now + timer.period_ns_;
      insert_timer(timer);
    }
    ++timer.fire_count_;
    timer.fn_(timer.ctx_);
    ++fired;
  }
  if (fired > 0) timer_fires_.fetch_add(fired, std::memory_order_relaxed);
  return fired;
}

int Reactor::poll_once() noexcept {
  owner_.check();
  CurrentReactorScope scope(this);
  int work = process_messages(opts_.message_budget);
  unannounced_work_ = work;
  work += run_pollers();
  const int fired = run_expired_timers();
  unannounced_work_ += fired;
  work += fired;
  iterations_.fetch_add(1, std::memory_order_relaxed);
  if (work > 0) busy_iterations_.fetch_add(1, std::memory_order_relaxed);
  return work;
}

void Reactor::arm_timerfd() noexcept {
  const uint64_t deadline = timers_.empty() ? UINT64_MAX : timers_.front().deadline_ns_;
  if (deadline == timerfd_deadline_ns_) return;  // armed for it, and it has not fired
  timerfd_deadline_ns_ = deadline;
  itimerspec spec{};
  if (deadline != UINT64_MAX) {
    uint64_t now = clock_->now_ns();
    // A relative timeout: the reactor's clock may be the TSC, not CLOCK_MONOTONIC. 1 ns is
    // the smallest non-zero value (zero would disarm the timerfd).
    uint64_t delay = deadline > now ? deadline - now : 1;
    spec.it_value.tv_sec = static_cast<time_t>(delay / 1000000000ull);
    spec.it_value.tv_nsec = static_cast<long>(delay % 1000000000ull);
  }
  timerfd_settime(timer_fd_, 0, &spec, nullptr);
}

void Reactor::drain_fd(int fd) noexcept {
  uint64_t value = 0;
  ssize_t got = read(fd, &value, sizeof(value));
  (void)got;
}

bool Reactor::wait_for_events(uint64_t max_wait_ns) noexcept {
  owner_.check();
  sleeping_.store(true, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with send()
  if (!messages_.empty() || stop_requested()) {
    sleeping_.store(false, std::memory_order_relaxed);
    return false;
  }
  arm_timerfd();
  sleeps_.fetch_add(1, std::memory_order_relaxed);
  // epoll_wait takes milliseconds; round up so a short wait is not a busy spin.
  int timeout_ms = -1;
  if (max_wait_ns != UINT64_MAX) {
    uint64_t ms = (max_wait_ns + 999999) / 1000000;
    timeout_ms = ms > 1000000 ? 1000000 : static_cast<int>(ms);
  }
  constexpr int kMaxEvents = 16;
  epoll_event events[kMaxEvents];
  int count = epoll_wait(epoll_fd_, events, kMaxEvents, timeout_ms);
  sleeping_.store(false, std::memory_order_relaxed);
  for (int i = 0; i < count; ++i) {
    if (events[i].data.u64 == kTagEventFd) {
      drain_fd(event_fd_);
    } else if (events[i].data.u64 == kTagTimerFd) {
      drain_fd(timer_fd_);
      timerfd_deadline_ns_ = UINT64_MAX;  // fired: disarmed until set again
    } else {
      // A poller's fd: the poller consumes the readiness itself when it runs; a timed poller
      // runs in the next iteration whatever its period says.
      static_cast<Poller*>(events[i].data.ptr)->fd_ready_ = true;
    }
  }
  return true;
}

bool Reactor::ready_to_sleep(int work) noexcept {
  if (opts_.mode == Mode::interrupt) return unannounced_work_ == 0;
  // Adaptive: keep polling until idle for adaptive_idle_ns.
  if (work > 0) {
    idle_since_ns_ = 0;
    return false;
  }
  const uint64_t now = clock_->now_ns();
  if (idle_since_ns_ == 0) idle_since_ns_ = now;
  return now - idle_since_ns_ >= opts_.adaptive_idle_ns;
}

void Reactor::run() noexcept {
  take_ownership();
  CurrentReactorScope scope(this);
  NVMF_INFOLOG(reactor, "%s: running in %s mode", opts_.name, mode_name(opts_.mode));
  idle_since_ns_ = clock_->now_ns();
  while (!stop_requested()) {
    const int work = poll_once();
    if (opts_.mode == Mode::poll || !ready_to_sleep(work)) continue;
    // Arm only now, about to sleep: arming is a system call per CQ on most providers, too
    // dear for every iteration of a busy reactor. What came in before the arm took effect
    // raises no event, and a poller that used its whole budget has more: poll once more, and
    // sleep only if that found nothing.
    const int armed = arm_pollers();
    if ((armed > 0 || work > 0) && poll_once() > 0) {
      idle_since_ns_ = 0;
      continue;
    }
    wait_for_events(UINT64_MAX);
    idle_since_ns_ = 0;
  }
  // Run what was queued before the stop so that no message's context is leaked.
  while (process_messages(opts_.message_budget) > 0) {
  }
  NVMF_INFOLOG(reactor, "%s: stopped", opts_.name);
}

}  // namespace nvmf::reactor
