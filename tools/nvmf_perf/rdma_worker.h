// A worker on an NVMe-oF controller: I/O qpairs of its own (host::IoQpair; -P of them, one by
// default), `-q` tasks per namespace dealt to them in turn (task k on qpair k mod P, for good),
// each with a buffer carved from one Host::dma_alloc block per worker (one range for
// --sim-payload skip to mark). The tasks, the pending list and the
// verify bookkeeping are WorkerCore's; this class submits through the qpair and maps its
// answers: busy -> retry, bad_state / disconnected (the qpair reconnects) -> retry, anything
// else -> an error. With --memreg-switch-every the worker asks its qpairs for the next memreg
// policy of the cycle every so often, with --memreg-switch-every-ios each qpair once N more
// I/Os completed on it, from the run loop's tick (a submit refused while a qpair drains for
// its switch is retried like one refused while it reconnects). With --mode interrupt
// or adaptive the qpairs are in event mode (IoQpairOpts::completion_events) and a poll that
// finds nothing sleeps (poll_or_sleep()): on the one qpair's wait_for_completions(), or with -P 2
// or more on the worker's own epoll set of the qpairs' event fds, after arming each.
//
// Threads: setup(), run() and teardown() on the worker's own thread (it owns the qpairs).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "nvmf/host.h"
#include "worker.h"

namespace nvmf::verbs::sim {
class SimProvider;
}

namespace nvmf::perf {

struct RdmaWorkerParams {
  WorkerCoreParams core;
  host::Host* host = nullptr;
  host::Controller* controller = nullptr;
  std::vector<host::Namespace*> namespaces;
  uint16_t queue_entries = 0;  // IoQpairOpts::queue_size
  // alloc_io_qpair() and the qpair's destruction run under it, and so does the main thread's
  // process_admin_completions(): host.h does not promise the controller's control path is
  // safe to enter from several threads at once.
  std::mutex* controller_mutex = nullptr;
  // --sim-payload skip: the host's simulated HCA, told to move no payload to or from the
  // worker's buffers (SimProvider::skip_payloads). nullptr: payloads are copied.
  verbs::sim::SimProvider* skip_payloads_of = nullptr;
};

class RdmaWorker final : public Worker {
 public:
  explicit RdmaWorker(const RdmaWorkerParams& params);
  ~RdmaWorker() override;  // frees what teardown() did not

  std::string setup(bool* usage_error) override;
  void run(uint64_t deadline_ns, const Ticker& ticker) noexcept override;
  void teardown() noexcept override;
  // QP errors, memory window bind errors and the work counts (HostWorkCounts), as teardown()
  // read them before freeing the qpairs (all zero if none was allocated).
  void add_counters(Summary* summary) const noexcept override;

 private:
  friend class WorkerCore;  // the Path calls below
  using Task = WorkerCore::Task;

  SubmitOutcome submit(Task& task, Error* error) noexcept;
  void poll() noexcept {
    if (sleeper_.mode != CompletionMode::poll) {
      poll_or_sleep();
      return;
    }
    for (const std::unique_ptr<host::IoQpair>& qpair : qpairs_) qpair->process_completions();
  }
  void abandon() noexcept {  // completes the rest as aborted
    for (const std::unique_ptr<host::IoQpair>& qpair : qpairs_) qpair->disconnect();
  }
  static void on_complete(void* ctx, const spec::Status& status) noexcept;
  std::string allocate_qpairs();
  std::string allocate_buffers();
  std::string check_qpair_depth() const;
  void add_qpair_stats(const host::IoQpairStats& stats) noexcept;

  // --memreg-switch-every(-ios): the cycle of policies and where each qpair is in it.
  struct MemregCycle {
    std::vector<host::MemregPolicy> policies;  // empty: no switching
    uint64_t every_ns = 0;        // by time: every qpair is asked at once (0: by count)
    uint64_t every_ios = 0;       // by count: each qpair after this many more completions
    uint64_t next_switch_ns = 0;  // by time
    struct Position {
      size_t current = 0;            // index of the policy asked for last
      uint64_t asked_ns = 0;         // when it was asked for
      uint64_t next_switch_ios = 0;  // by count: IoQpairStats::completed that asks again
    };
    std::vector<Position> qpairs;  // parallel to qpairs_
    // Per entry of `policies`: time it was the one asked for, summed over the qpairs.
    std::vector<uint64_t> asked_for_ns;
    bool refusal_logged = false;
  };
  std::string plan_memreg_cycle();

  // --mode interrupt / adaptive. Polls every qpair; when none completed anything (adaptive:
  // for adaptive_idle_ns), sleeps until a completion or kWaitSliceMs.
  void poll_or_sleep() noexcept;
  void sleep_until_completion() noexcept;
  int wait_on(host::IoQpair& qpair, int timeout_ms) noexcept;  // callbacks run; 0 on error
  std::string open_worker_epoll();
  struct Sleeper {
    CompletionMode mode = CompletionMode::poll;
    uint64_t adaptive_idle_ns = 0;
    uint64_t idle_since_ns = 0;  // adaptive: when the polls began to find nothing; 0: busy
    int epoll_fd = -1;           // -P 2 or more: every qpair's event_fd()
    uint64_t worker_sleeps = 0;  // epoll_wait() calls on epoll_fd
    bool wait_error_logged = false;
  };
  // The run loop's tick with switching on: switches when due, then the caller's tick.
  static void tick(void* ctx, uint64_t now_ns) noexcept;
  void switch_memreg_if_due(uint64_t now_ns) noexcept;
  void switch_memreg(size_t qpair_index, uint64_t now_ns) noexcept;  // to its next policy

  RdmaWorkerParams params_;
  std::vector<std::unique_ptr<host::IoQpair>> qpairs_;  // -P
  uint8_t* buffers_ = nullptr;  // every task's buffer, -o bytes each, from Host::dma_alloc
  host::IoQpairStats qpair_stats_{};                    // summed over qpairs_ by teardown()
  MemregCycle cycle_;
  Sleeper sleeper_;
  Ticker outer_ticker_;  // run()'s ticker, called by tick()
};

}  // namespace nvmf::perf
