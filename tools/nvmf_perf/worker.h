// One nvmf_perf worker as run.cpp drives it, whatever the transport: setup, run and teardown
// on the worker's own thread, the results after it finished. The transport workers are
// RdmaWorker (rdma_worker.h: a host::IoQpair on an NVMe-oF controller) and PcieWorker
// (pcie_worker.h: an nvme_pcie::IoQueue on a local controller); both keep their tasks, verify
// bookkeeping and counters in a WorkerCore (worker_core.h). Virtual calls here are once per
// run, never per I/O.
#pragma once

#include <cstdint>
#include <string>

#include "report.h"
#include "worker_core.h"

namespace nvmf::perf {

class Worker {
 public:
  virtual ~Worker() = default;
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Worker thread. Allocates the queue and the buffers. "" or a one-line reason; *usage_error
  // says whether the reason is the command line's fault (exit 2) rather than the target's.
  virtual std::string setup(bool* usage_error) = 0;
  // Worker thread. Submits everything, keeps the queue full until `deadline_ns` (or a stop
  // request), then drains.
  virtual void run(uint64_t deadline_ns, const Ticker& ticker) noexcept = 0;
  // Worker thread. Frees the queue and the buffers; idempotent.
  virtual void teardown() noexcept = 0;
  // After the thread finished: the transport's own counters, added into *summary.
  virtual void add_counters(Summary* summary) const noexcept = 0;

  // Tasks, rows, latency, live counters.
  const WorkerCore& core() const noexcept { return core_; }

 protected:
  explicit Worker(const WorkerCoreParams& params) : core_(params) {}

  WorkerCore core_;
};

}  // namespace nvmf::perf
