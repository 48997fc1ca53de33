// A worker on a local NVMe PCIe controller (nvme_pcie::Controller): an I/O queue of its own
// (IoQueue: one SQ + CQ pair, created on the worker's thread, which alone submits and polls
// it), `-q` tasks per namespace, their buffers cut from one region of the controller's DMA
// memory so every I/O goes to the device without a copy (IoQueueStats::bytes_copied stays 0).
// The tasks, the pending list and the verify bookkeeping are WorkerCore's; this class submits
// through the queue and maps its answers: busy (queue full, controller resetting) -> retry,
// anything else (disconnected: removed, failed or shut down; a bad range) -> an error.
//
// Threads: setup(), run() and teardown() on the worker's own thread (it owns the queue).
#pragma once

#include <sys/uio.h>

#include <memory>
#include <vector>

#include "env/memory.h"
#include "nvme_pcie/controller.h"
#include "worker.h"

namespace nvmf::perf {

// Completions reaped per IoQueue::poll() (STYLE.md 4: a budget of 32 per poll).
inline constexpr unsigned kPciePollBudget = 32;

struct PcieWorkerParams {
  WorkerCoreParams core;
  nvme_pcie::Controller* controller = nullptr;
  std::vector<NamespaceShape> namespaces;  // the controller's, checked against -o by run
};

// The copies and splits of one worker's queue, read by teardown() before the queue goes.
struct PcieQueueCounters {
  uint64_t bytes_copied = 0;    // through bounce buffers: 0 when every buffer is DMA memory
  uint64_t commands_split = 0;  // requests the driver split at the transfer limit (MDTS)
};

class PcieWorker final : public Worker {
 public:
  explicit PcieWorker(const PcieWorkerParams& params);
  ~PcieWorker() override;  // frees what teardown() did not (on the owner thread only)

  std::string setup(bool* usage_error) override;
  void run(uint64_t deadline_ns, const Ticker& ticker) noexcept override;
  void teardown() noexcept override;
  // Bytes copied through bounce buffers and requests split (IoQueueStats), as teardown()
  // read them before deleting the queue.
  void add_counters(Summary* summary) const noexcept override;

 private:
  friend class WorkerCore;  // the Path calls below
  using Task = WorkerCore::Task;

  SubmitOutcome submit(Task& task, Error* error) noexcept;
  void poll() noexcept { queue_->poll(kPciePollBudget); }
  // Nothing to do now: teardown() deletes the queue, which completes the rest as aborted.
  void abandon() noexcept {}
  static void on_complete(void* ctx, const spec::Status& status) noexcept;
  std::string allocate_buffers();

  PcieWorkerParams params_;
  std::unique_ptr<nvme_pcie::IoQueue> queue_;
  env::DmaRegion buffers_;  // every task's buffer, one after the other, page-aligned each
  // Each task's buffer as the one iovec of its IoCommand: a bounced read writes through it
  // at completion, so it lives as long as the task (indexed like core_.tasks()).
  std::vector<iovec> iovecs_;
  PcieQueueCounters counters_;
};

}  // namespace nvmf::perf
