#include "reactor/harness.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace nvmf::reactor {

ReactorHarness::ReactorHarness(unsigned reactor_count, ReactorOpts opts) : clock_(1000000000ull) {
  opts.clock = &clock_;
  names_.reserve(reactor_count);
  for (unsigned i = 0; i < reactor_count; ++i) {
    names_.push_back("harness." + std::to_string(i));
    opts.name = names_.back().c_str();
    auto reactor = Reactor::create(opts);
    if (!reactor) {
      // Test support: failing to make an eventfd means the test cannot run at all.
      fprintf(stderr, "ReactorHarness: cannot create reactor %u: %s\n", i,
              errc_name(reactor.error().code));
      abort();
    }
    reactors_.push_back(std::move(*reactor));
    reactors_.back()->take_ownership();
  }
}

ReactorHarness::~ReactorHarness() = default;

int ReactorHarness::poll_round() noexcept {
  int work = 0;
  for (auto& reactor : reactors_) work += reactor->poll_once();
  return work;
}

int ReactorHarness::poll_until_idle(int max_rounds) noexcept {
  for (int round = 1; round <= max_rounds; ++round) {
    if (poll_round() == 0) return round;
  }
  return -1;
}

bool ReactorHarness::poll_until(const std::function<bool()>& predicate, int max_rounds) noexcept {
  for (int round = 0; round < max_rounds; ++round) {
    if (predicate()) return true;
    poll_round();
  }
  return predicate();
}

void ReactorHarness::advance_ms(uint64_t delta_ms) noexcept {
  clock_.advance_ms(delta_ms);
  poll_until_idle();
}

}  // namespace nvmf::reactor
