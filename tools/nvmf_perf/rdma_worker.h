// One host worker: an I/O qpair of its own on the controller, `-q` tasks per namespace, each
// with a DMA buffer, kept busy until the deadline. Tasks are resubmitted from their
// completion callback; a submit answered `busy` (or refused while the qpair reconnects) waits
// on a pending list and is retried after the next process_completions(), never dropped.
//
// Threads: setup(), run() and teardown() run on the worker's own thread (it owns the qpair);
// live() is read by the main thread for the progress line (relaxed atomics, one writer).
// Everything else is read after the thread finished.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/intrusive_list.h"
#include "histogram.h"
#include "nvmf/host.h"
#include "options.h"
#include "report.h"
#include "unit_picker.h"
#include "verify.h"

namespace nvmf::perf {

// With --verify each worker keeps a generation (4 bytes) and a busy bit per I/O unit; above
// this many units per namespace (16 GiB of 4 KiB I/Os) only the start of the namespace is used,
// so the tables stay at 16 MiB per namespace across all workers.
inline constexpr uint64_t kVerifyUnitsMax = uint64_t{1} << 22;

// How long to wait for outstanding I/Os after the deadline before disconnecting the qpair
// (which completes them as aborted): longer than a reconnect (ControllerOpts'
// reconnect_delay_ms, 10 s) so a run that ends during one still drains.
inline constexpr uint64_t kDrainTimeoutNs = uint64_t{30} * 1000 * 1000 * 1000;

struct WorkerParams {
  uint32_t index = 0;
  uint32_t workers = 1;
  const Settings* settings = nullptr;
  host::Host* host = nullptr;
  host::Controller* controller = nullptr;
  std::vector<host::Namespace*> namespaces;
  uint16_t queue_entries = 0;  // IoQpairOpts::queue_size
  const Clock* clock = nullptr;
  // alloc_io_qpair() and the qpair's destruction run under it, and so does the main thread's
  // process_admin_completions(): host.h does not promise the controller's control path is
  // safe to enter from several threads at once.
  std::mutex* controller_mutex = nullptr;
  const std::atomic<bool>* stop_requested = nullptr;  // SIGINT: stop early, drain, report
};

// Progress counters: written by the worker only (relaxed), summed by the main thread.
struct alignas(64) LiveCounters {
  std::atomic<uint64_t> ios{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> errors{0};
};

// Called once per loop iteration of the main thread's worker (admin polling, progress line).
struct Ticker {
  void (*tick)(void* ctx, uint64_t now_ns) = nullptr;
  void* ctx = nullptr;
};

class Worker {
 public:
  explicit Worker(const WorkerParams& params);
  ~Worker();  // frees what teardown() did not
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Worker thread. Allocates the qpair and the buffers. "" or a one-line reason; *usage_error
  // says whether the reason is the command line's fault (exit 2) rather than the target's.
  std::string setup(bool* usage_error);
  // Worker thread. Submits everything, keeps the queue full until `deadline_ns` (or a stop
  // request), then drains.
  void run(uint64_t deadline_ns, const Ticker& ticker) noexcept;
  // Worker thread. Frees the qpair and the buffers.
  void teardown() noexcept;

  const LiveCounters& live() const noexcept { return live_; }
  uint32_t index() const noexcept { return params_.index; }

  // After the thread finished: one row per namespace, and the worker's busy retries.
  std::vector<ResultRow> rows() const;
  void merge_latency_into(LatencyHistogram* total) const noexcept;
  uint64_t busy_retries() const noexcept { return busy_retries_; }
  // The qpair's counters (QP errors, bind errors, ...) as teardown() read them just before
  // freeing it; all zero if the qpair was never allocated.
  const host::IoQpairStats& qpair_stats() const noexcept { return qpair_stats_; }
  double elapsed_s() const noexcept;

 private:
  struct NsState;
  struct Task {
    Worker* worker = nullptr;
    NsState* ns = nullptr;
    uint8_t* buffer = nullptr;
    uint64_t unit = 0;
    uint64_t lba = 0;
    uint64_t submit_ns = 0;
    uint32_t generation = 0;  // of a verified write
    bool is_read = true;
    ListNode pending_link;
  };
  struct NsState {
    NsState(host::Namespace* ns_in, uint32_t blocks, UnitSlice slice, bool verify, uint64_t seed);
    host::Namespace* ns;
    uint32_t nsid;
    uint32_t block_size;
    uint32_t blocks_per_io;
    UnitPicker picker;
    std::vector<uint32_t> generations;  // --verify: per unit of the slice
    uint32_t last_generation = kGenerationNone;  // of the last write submitted
    LatencyHistogram histogram;
    uint64_t ios = 0;
    uint64_t bytes = 0;
    uint64_t errors = 0;
    uint64_t verify_failures = 0;
  };

  static void on_complete(void* ctx, const spec::Status& status) noexcept;
  void complete(Task& task, const spec::Status& status) noexcept;
  // Picks the next unit and direction and submits; false when the slice has no free unit.
  bool start(Task& task) noexcept;
  // Submits the task as prepared. false: the queue is full or down, park it and retry later;
  // true: submitted, or refused for good (counted as an error, the task retires).
  bool try_submit(Task& task) noexcept;
  void retry_pending() noexcept;
  void drop_pending() noexcept;
  void check_read(Task& task) noexcept;
  void add_live(std::atomic<uint64_t>& counter, uint64_t delta) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  }

  WorkerParams params_;
  const Settings& settings_;
  std::unique_ptr<host::IoQpair> qpair_;
  std::vector<NsState> namespaces_;  // reserved up front: tasks point into it
  std::vector<Task> tasks_;          // likewise
  IntrusiveList<Task, &Task::pending_link> pending_;
  Xorshift64 rng_;  // read/write choice
  uint32_t in_flight_ = 0;
  bool stopping_ = false;
  uint64_t busy_retries_ = 0;
  host::IoQpairStats qpair_stats_{};
  uint64_t start_ns_ = 0;
  uint64_t end_ns_ = 0;
  LiveCounters live_;
};

}  // namespace nvmf::perf
