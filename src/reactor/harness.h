// Test support: N reactors polled from the calling (test) thread, in index order, on a
// FakeClock. Deterministic: the same test does the same interleaving every run, and time
// moves only when the test advances it. Used by unit and e2e tests of every layer above.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "common/clock.h"
#include "reactor/reactor.h"

namespace nvmf::reactor {

class ReactorHarness {
 public:
  explicit ReactorHarness(unsigned reactor_count, ReactorOpts opts = {});
  ~ReactorHarness();

  size_t size() const noexcept { return reactors_.size(); }
  Reactor& reactor(size_t index) noexcept { return *reactors_[index]; }
  FakeClock& clock() noexcept { return clock_; }

  // Polls every reactor once, in index order. Returns the work done by all of them.
  int poll_round() noexcept;
  // Polls rounds until one does no work; returns the number of rounds, or -1 if still busy
  // after max_rounds (a livelock in the code under test).
  int poll_until_idle(int max_rounds = 10000) noexcept;
  // Polls until predicate() is true; false if max_rounds pass first.
  bool poll_until(const std::function<bool()>& predicate, int max_rounds = 10000) noexcept;
  // Advances the fake clock, then polls until idle so due timers fire.
  void advance_ms(uint64_t delta_ms) noexcept;

 private:
  FakeClock clock_;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<Reactor>> reactors_;
};

}  // namespace nvmf::reactor
