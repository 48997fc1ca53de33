// A worker on an NVMe-oF controller: an I/O qpair of its own (host::IoQpair), `-q` tasks per
// namespace, each with a buffer from Host::dma_alloc. The tasks, the pending list and the
// verify bookkeeping are WorkerCore's; this class submits through the qpair and maps its
// answers: busy -> retry, bad_state / disconnected (the qpair reconnects) -> retry, anything
// else -> an error.
//
// Threads: setup(), run() and teardown() on the worker's own thread (it owns the qpair).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "nvmf/host.h"
#include "worker.h"

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
};

class RdmaWorker final : public Worker {
 public:
  explicit RdmaWorker(const RdmaWorkerParams& params);
  ~RdmaWorker() override;  // frees what teardown() did not

  std::string setup(bool* usage_error) override;
  void run(uint64_t deadline_ns, const Ticker& ticker) noexcept override;
  void teardown() noexcept override;
  // QP errors and memory window bind errors, as teardown() read them before freeing the
  // qpair (all zero if it was never allocated).
  void add_counters(Summary* summary) const noexcept override;

 private:
  friend class WorkerCore;  // the Path calls below
  using Task = WorkerCore::Task;

  SubmitOutcome submit(Task& task, Error* error) noexcept;
  void poll() noexcept { qpair_->process_completions(); }
  void abandon() noexcept { qpair_->disconnect(); }  // completes the rest as aborted
  static void on_complete(void* ctx, const spec::Status& status) noexcept;
  std::string allocate_qpair();

  RdmaWorkerParams params_;
  std::unique_ptr<host::IoQpair> qpair_;
  host::IoQpairStats qpair_stats_{};
};

}  // namespace nvmf::perf
