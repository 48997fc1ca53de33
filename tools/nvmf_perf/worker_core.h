// The transport-neutral half of an nvmf_perf worker: the tasks (`-q` per namespace, each with a
// buffer), where each I/O goes (UnitPicker), the --verify bookkeeping (patterns, generations),
// the pending list of submits the queue could not take, the counters and latency histograms,
// and the run loop. A transport worker (RdmaWorker over a host::IoQpair, PcieWorker over an
// nvme_pcie::IoQueue) supplies the queue, the buffers and a "Path" with three calls:
//
//   SubmitOutcome submit(WorkerCore::Task& task, Error* error) noexcept;  // read or write it
//   void poll() noexcept;     // reap completions: each one calls WorkerCore::complete()
//   void abandon() noexcept;  // the drain timed out: give the outstanding I/Os up
//
// The Path is a template parameter, so the per-I/O calls are concrete (no virtual dispatch).
//
// A task is a small state machine (TaskState below): idle -> pending (unit picked, buffer
// prepared) -> in_flight (submitted) -> idle (completed, and started again until the run
// stops). A submit answered busy, or refused while the queue is down, leaves the task pending
// on the pending list, retried after the next poll in order, never dropped; a submit refused
// for good counts an error and the task retires (idle).
//
// Threads: everything runs on the worker's own thread except live(), read by the main thread
// for the progress line (relaxed atomics, one writer); rows() and the other results are read
// after the thread finished.
#pragma once

#include <atomic>
#include <cassert>
#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/intrusive_list.h"
#include "common/result.h"
#include "histogram.h"
#include "options.h"
#include "report.h"
#include "spec/status.h"
#include "unit_picker.h"
#include "verify.h"

namespace nvmf::perf {

// With --verify each worker keeps two generations (4 bytes each: acknowledged, newest failed)
// and a busy bit per I/O unit; above this many units per namespace (16 GiB of 4 KiB I/Os) only
// the start of the namespace is used, so the tables stay at 32 MiB per namespace across all
// workers.
inline constexpr uint64_t kVerifyUnitsMax = uint64_t{1} << 22;

// How long to wait for outstanding I/Os after the deadline before abandoning them (an RDMA
// qpair is disconnected, a PCIe queue deleted: they complete as aborted): longer than a
// reconnect (ControllerOpts' reconnect_delay_ms, 10 s) or a PCIe controller reset, so a run
// that ends during one still drains.
inline constexpr uint64_t kDrainTimeoutNs = uint64_t{30} * 1000 * 1000 * 1000;

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

// A namespace as the worker needs to know it, whatever the transport calls it.
struct NamespaceShape {
  uint32_t nsid = 0;
  uint32_t block_size_bytes = 0;
  uint64_t block_count = 0;
};

// What a transport answered to one submit.
enum class SubmitOutcome : uint8_t {
  submitted,  // in flight: its completion will come through complete()
  busy,       // the queue is full: retried after the next poll (counted in busy_retries)
  down,       // the queue is down for now (reconnecting): retried likewise, not counted
  refused,    // refused for good (*error says why): an I/O error, the task retires
};

// CPU seconds (user + system) the calling thread has used so far: getrusage(RUSAGE_THREAD).
double thread_cpu_s() noexcept;

struct WorkerCoreParams {
  uint32_t index = 0;    // this worker
  uint32_t workers = 1;  // all of them (--verify slices the namespaces among them)
  const Settings* settings = nullptr;
  const Clock* clock = nullptr;
  const std::atomic<bool>* stop_requested = nullptr;  // SIGINT: stop early, drain, report
};

class WorkerCore {
 public:
  enum class TaskState : uint8_t {
    idle,       // holds no unit: waits for start() (the run's first, or its I/O completed)
    pending,    // unit picked, buffer prepared: waits for the queue to take it
    in_flight,  // submitted: waits for complete()
  };
  struct NsState;
  struct Task {
    void* owner = nullptr;  // the transport worker (how its completion callback gets back)
    NsState* ns = nullptr;
    uint8_t* buffer = nullptr;  // settings.io_size_bytes, from the transport's DMA memory
    uint64_t unit = 0;
    uint64_t lba = 0;
    uint64_t submit_ns = 0;
    uint32_t generation = 0;  // of a verified write
    uint32_t queue = 0;       // which of the transport worker's queues takes it (RDMA's -P)
    bool is_read = true;
    TaskState state = TaskState::idle;
    ListNode pending_link;
  };
  struct NsState {
    NsState(const NamespaceShape& shape, uint32_t index_in, uint32_t blocks, UnitSlice slice,
            bool verify, uint64_t seed);
    uint32_t index;  // in the order of add_namespace()
    uint32_t nsid;
    uint32_t block_size;
    uint32_t blocks_per_io;
    UnitPicker picker;
    std::vector<uint32_t> generations;  // --verify: per unit of the slice, its last acked write
    // --verify: per unit, the newest write that failed since that one (kGenerationNone: none);
    // until the next acknowledged write a read may find either (verify.h).
    std::vector<uint32_t> failed_through;
    uint32_t last_generation = kGenerationNone;  // of the last write submitted
    LatencyHistogram histogram;
    // -d: I/Os this namespace may still start (UINT64_MAX without -d: never runs out).
    uint64_t ios_to_start = UINT64_MAX;
    uint64_t ios = 0;
    uint64_t bytes = 0;
    uint64_t errors = 0;
    uint64_t verify_failures = 0;
  };

  explicit WorkerCore(const WorkerCoreParams& params);
  WorkerCore(const WorkerCore&) = delete;
  WorkerCore& operator=(const WorkerCore&) = delete;

  // --- Setup (worker thread) ---
  // Makes room for `count` namespaces; call once, before add_namespace().
  void reserve_namespaces(size_t count);
  // The next namespace. "" or a one-line reason (*usage_error: the command line's fault):
  // with --verify the worker's slice must hold at least -q units.
  std::string add_namespace(const NamespaceShape& shape, bool* usage_error);
  // "" or a reason (a usage error) when a queue of `commands` cannot hold -q x namespaces.
  // `what` names the queue for the message ("the target granted I/O queues of depth").
  std::string check_queue_depth(uint64_t commands, const char* what) const;
  // I/Os in flight at most: -q x namespaces.
  uint64_t tasks_needed() const noexcept;
  // One task on `ns` with `buffer` (io_size_bytes, zeroed by the caller or here). Tasks are
  // reserved for tasks_needed() up front: their addresses never change.
  Task& add_task(NsState& ns, uint8_t* buffer, void* owner);
  std::vector<NsState>& namespaces() noexcept { return namespaces_; }
  std::vector<Task>& tasks() noexcept { return tasks_; }
  // "worker 3: ", the prefix of every message.
  std::string who() const;

  // --- Data path (worker thread) ---
  // Submits every task, keeps the queue full until `deadline_ns` (or a stop request, or with
  // -d until each namespace started its number of I/Os and none is pending), then drains;
  // abandons what is still outstanding after kDrainTimeoutNs.
  template <typename Path>
  void run(Path& path, uint64_t deadline_ns, const Ticker& ticker) noexcept;
  // A completion, from the transport's callback: books it, then starts the task again unless
  // the run is stopping.
  template <typename Path>
  void complete(Path& path, Task& task, const spec::Status& status) noexcept {
    record_completion(task, status);
    if (!stopping_) start(path, task);
  }
  // No new I/O from now on (teardown: callbacks of a disconnect must not start any); pending
  // tasks go back to idle.
  void stop() noexcept;
  bool stopping() const noexcept { return stopping_; }
  uint32_t in_flight() const noexcept { return in_flight_; }

  // --- Results ---
  const LiveCounters& live() const noexcept { return live_; }
  uint32_t index() const noexcept { return params_.index; }
  // After the thread finished: one row per namespace.
  std::vector<ResultRow> rows() const;
  void merge_latency_into(LatencyHistogram* total) const noexcept;
  uint64_t busy_retries() const noexcept { return busy_retries_; }
  double elapsed_s() const noexcept;
  // CPU seconds of the worker's thread over run() (thread_cpu_s()).
  double cpu_s() const noexcept { return cpu_s_; }
  // Every I/O handed to the queue, and how it ended; in_flight: those still outstanding.
  IoAccount account() const noexcept {
    IoAccount account = account_;
    account.in_flight = in_flight_;
    return account;
  }

 private:
  // Picks the next unit and direction and prepares the buffer (idle -> pending); false when
  // the slice has no free unit (add_namespace() made the slices large enough).
  bool prepare(Task& task) noexcept;
  template <typename Path>
  void start(Path& path, Task& task) noexcept {
    NsState& ns = *task.ns;
    if (ns.ios_to_start == 0) return;  // -d: this namespace had its I/Os; the task rests
    if (!prepare(task)) return;
    if (--ns.ios_to_start == 0) ++namespaces_started_all_;
    if (!submit(path, task)) pending_.push_back(task);
  }
  // Submits a pending task. false: the queue cannot take it now, keep it pending; true: in
  // flight, or refused for good (counted, the task retired).
  template <typename Path>
  bool submit(Path& path, Task& task) noexcept;
  template <typename Path>
  void retry_pending(Path& path) noexcept;
  void drop_pending() noexcept;
  void retire_refused(Task& task, const Error& error) noexcept;
  void record_completion(Task& task, const spec::Status& status) noexcept;
  void check_read(Task& task) noexcept;
  bool stop_due(uint64_t now_ns, uint64_t deadline_ns) const noexcept;
  void log_drain_timeout() const noexcept;
  void add_live(std::atomic<uint64_t>& counter, uint64_t delta) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  }

  WorkerCoreParams params_;
  const Settings& settings_;
  const Clock& clock_;
  std::vector<NsState> namespaces_;  // reserved up front: tasks point into it
  std::vector<Task> tasks_;          // likewise: completion contexts point into it
  IntrusiveList<Task, &Task::pending_link> pending_;
  Xorshift64 rng_;  // read/write choice
  uint32_t in_flight_ = 0;
  size_t namespaces_started_all_ = 0;  // -d: those whose ios_to_start reached 0
  bool stopping_ = false;
  uint64_t busy_retries_ = 0;
  IoAccount account_;  // in_flight comes from in_flight_
  uint64_t start_ns_ = 0;
  uint64_t end_ns_ = 0;
  double cpu_s_ = 0;
  LiveCounters live_;
};

template <typename Path>
void WorkerCore::run(Path& path, uint64_t deadline_ns, const Ticker& ticker) noexcept {
  start_ns_ = clock_.now_ns();
  const double cpu_start_s = thread_cpu_s();
  for (Task& task : tasks_) start(path, task);
  uint64_t drain_deadline_ns = 0;
  for (;;) {
    path.poll();
    const uint64_t now = clock_.now_ns();
    if (!stopping_ && stop_due(now, deadline_ns)) {
      stop();
      drain_deadline_ns = now + kDrainTimeoutNs;
    }
    if (!stopping_) retry_pending(path);
    if (ticker.tick != nullptr) ticker.tick(ticker.ctx, now);
    if (stopping_ && in_flight_ == 0) break;
    if (stopping_ && now >= drain_deadline_ns) {
      log_drain_timeout();
      path.abandon();
      break;
    }
  }
  end_ns_ = clock_.now_ns();
  cpu_s_ = thread_cpu_s() - cpu_start_s;
}

template <typename Path>
bool WorkerCore::submit(Path& path, Task& task) noexcept {
  assert(task.state == TaskState::pending);
  task.submit_ns = clock_.now_ns();
  Error error;
  switch (path.submit(task, &error)) {
    case SubmitOutcome::submitted:
      task.state = TaskState::in_flight;
      ++in_flight_;
      ++account_.submitted;
      return true;
    case SubmitOutcome::busy:
      ++busy_retries_;
      return false;
    case SubmitOutcome::down:
      return false;
    case SubmitOutcome::refused:
      break;
  }
  ++account_.submitted;  // and failed, by retire_refused()
  retire_refused(task, error);
  return true;
}

template <typename Path>
void WorkerCore::retry_pending(Path& path) noexcept {
  while (!pending_.empty()) {
    Task* task = pending_.pop_front();
    if (!submit(path, *task)) {
      pending_.push_front(*task);  // still full: keep the order, try after the next poll
      return;
    }
  }
}

}  // namespace nvmf::perf
