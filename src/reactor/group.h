// A set of reactors, each on its own thread, optionally pinned to a core. The creating
// thread keeps the group; every other interaction with a running reactor is a message.
#pragma once

#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "reactor/reactor.h"

namespace nvmf::reactor {

struct ReactorGroupOpts {
  // Cores to pin reactor i to (cores[i]); empty = as many reactors as reactor_count, not
  // pinned. Pinning failure (core offline, not in the cpuset) is an error, not a warning:
  // a reactor silently sharing a core halves its throughput.
  std::vector<int> cores;
  unsigned reactor_count = 1;  // used when cores is empty
  ReactorOpts reactor;         // applied to each reactor; name gets the index appended
};

class ReactorGroup {
 public:
  // Creates the reactors and starts their threads.
  static Result<std::unique_ptr<ReactorGroup>> start(const ReactorGroupOpts& opts) noexcept;
  ~ReactorGroup();  // stops and joins if still running

  size_t size() const noexcept { return reactors_.size(); }
  Reactor& reactor(size_t index) noexcept { return *reactors_[index]; }

  // Asks every reactor to stop, then joins all threads. Idempotent.
  void stop() noexcept;

 private:
  ReactorGroup() = default;
  std::vector<std::unique_ptr<Reactor>> reactors_;
  std::vector<std::thread> threads_;
  std::vector<std::string> names_;
};

// Runs fn() on the reactor's thread and waits for it to finish. Control path only (setup,
// shutdown, tests): it blocks the caller, which must not be that reactor's own thread.
template <typename Fn>
void run_and_wait(Reactor& reactor, Fn&& fn) {
  struct Call {
    Fn* fn;
    std::promise<void> done;
    static void run(void* ctx) {
      auto* call = static_cast<Call*>(ctx);
      (*call->fn)();
      call->done.set_value();
    }
  } call{&fn, {}};
  auto done = call.done.get_future();
  while (!reactor.send(&Call::run, &call)) std::this_thread::yield();  // ring full: retry
  done.wait();
}

}  // namespace nvmf::reactor
