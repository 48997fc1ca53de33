#include "rdma_worker.h"

namespace nvmf::perf {

RdmaWorker::RdmaWorker(const RdmaWorkerParams& params) : Worker(params.core), params_(params) {}

RdmaWorker::~RdmaWorker() { teardown(); }

std::string RdmaWorker::setup(bool* usage_error) {
  *usage_error = false;
  const Settings& s = *params_.core.settings;
  core_.reserve_namespaces(params_.namespaces.size());
  for (host::Namespace* ns : params_.namespaces) {
    const NamespaceShape shape{ns->id(), ns->block_size(), ns->block_count()};
    std::string reason = core_.add_namespace(shape, usage_error);
    if (!reason.empty()) return reason;
  }
  if (std::string reason = allocate_qpair(); !reason.empty()) return reason;
  std::string reason =
      core_.check_queue_depth(qpair_->depth(), "the target granted I/O queues of depth");
  if (!reason.empty()) {
    *usage_error = true;
    return reason;
  }
  for (WorkerCore::NsState& ns : core_.namespaces()) {
    for (uint32_t i = 0; i < s.queue_depth; ++i) {
      void* buffer = params_.host->dma_alloc(s.io_size_bytes);
      if (buffer == nullptr) {
        return core_.who() + "Host::dma_alloc(" + std::to_string(s.io_size_bytes) +
               ") failed after " + std::to_string(core_.tasks().size()) +
               " buffers: lower -q, -o, -c or --ns-count";
      }
      core_.add_task(ns, static_cast<uint8_t*>(buffer), this);
    }
  }
  return "";
}

std::string RdmaWorker::allocate_qpair() {
  std::lock_guard<std::mutex> lock(*params_.controller_mutex);
  std::string message;
  host::IoQpairOpts opts;
  opts.queue_size = params_.queue_entries;
  auto qpair = params_.controller->alloc_io_qpair(opts, &message);
  if (!qpair) {
    return core_.who() + "cannot allocate an I/O qpair: " +
           (message.empty() ? std::string(errc_name(qpair.error().code)) : message);
  }
  qpair_ = std::move(*qpair);
  return "";
}

void RdmaWorker::run(uint64_t deadline_ns, const Ticker& ticker) noexcept {
  core_.run(*this, deadline_ns, ticker);
}

SubmitOutcome RdmaWorker::submit(Task& task, Error* error) noexcept {
  const WorkerCore::NsState& ns = *task.ns;
  host::Namespace& host_ns = *params_.namespaces[ns.index];
  const Result<void> submitted =
      task.is_read
          ? host_ns.read(*qpair_, task.buffer, task.lba, ns.blocks_per_io, &on_complete, &task)
          : host_ns.write(*qpair_, task.buffer, task.lba, ns.blocks_per_io, &on_complete, &task);
  if (submitted) return SubmitOutcome::submitted;
  switch (submitted.error().code) {
    case Errc::busy:
      return SubmitOutcome::busy;
    case Errc::bad_state:
    case Errc::disconnected:
      // The qpair is down (the controller is reconnecting it): try again after a poll.
      return SubmitOutcome::down;
    default:
      // A range or buffer the library rejects: retrying cannot help.
      *error = submitted.error();
      return SubmitOutcome::refused;
  }
}

void RdmaWorker::on_complete(void* ctx, const spec::Status& status) noexcept {
  auto& task = *static_cast<Task*>(ctx);
  auto& worker = *static_cast<RdmaWorker*>(task.owner);
  worker.core_.complete(worker, task, status);
}

void RdmaWorker::teardown() noexcept {
  core_.stop();  // callbacks of a disconnect must not start new I/O
  if (qpair_) {
    qpair_stats_ = qpair_->stats();  // the counters go with the qpair
    std::lock_guard<std::mutex> lock(*params_.controller_mutex);
    qpair_.reset();
  }
  for (Task& task : core_.tasks()) {
    if (task.buffer != nullptr) {
      params_.host->dma_free(task.buffer);
      task.buffer = nullptr;
    }
  }
}

void RdmaWorker::add_counters(Summary* summary) const noexcept {
  summary->qp_errors += qpair_stats_.qp_errors;
  summary->mw_bind_errors += qpair_stats_.bind_errors;
}

}  // namespace nvmf::perf
