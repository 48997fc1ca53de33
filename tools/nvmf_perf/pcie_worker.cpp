#include "pcie_worker.h"

#include "spec/nvme.h"

namespace nvmf::perf {

namespace {

// Each buffer starts on a page of its own: PRPs describe it with no offset, and one I/O's
// buffer never shares a page with another's.
constexpr size_t kBufferAlignmentBytes = 4096;

size_t buffer_stride(uint32_t io_size_bytes) noexcept {
  return (size_t{io_size_bytes} + kBufferAlignmentBytes - 1) / kBufferAlignmentBytes *
         kBufferAlignmentBytes;
}

}  // namespace

PcieWorker::PcieWorker(const PcieWorkerParams& params) : Worker(params.core), params_(params) {}

PcieWorker::~PcieWorker() { teardown(); }

std::string PcieWorker::setup(bool* usage_error) {
  *usage_error = false;
  core_.reserve_namespaces(params_.namespaces.size());
  for (const NamespaceShape& shape : params_.namespaces) {
    std::string reason = core_.add_namespace(shape, usage_error);
    if (!reason.empty()) return reason;
  }
  auto queue = params_.controller->create_io_queue();
  if (!queue) {
    return core_.who() + "cannot create an I/O queue on " + params_.controller->address() + ": " +
           errc_name(queue.error().code) + " (" + queue.error().detail + ")";
  }
  queue_ = std::move(*queue);
  std::string reason =
      core_.check_queue_depth(queue_->commands_max(), "the controller's I/O queues hold");
  if (!reason.empty()) {
    *usage_error = true;
    return reason + " (the queue size is capped by CAP.MQES)";
  }
  return allocate_buffers();
}

std::string PcieWorker::allocate_buffers() {
  const Settings& s = *params_.core.settings;
  const size_t stride = buffer_stride(s.io_size_bytes);
  const uint64_t tasks = core_.tasks_needed();
  auto region =
      params_.controller->device().dma_memory().allocate(stride * tasks, kBufferAlignmentBytes);
  if (!region) {
    return core_.who() + "cannot allocate " + std::to_string(stride * tasks) +
           " bytes of DMA memory for the buffers: " + errc_name(region.error().code) + " (" +
           region.error().detail + "): lower -q, -o, -c or --ns-count";
  }
  buffers_ = std::move(*region);
  iovecs_.reserve(tasks);
  auto* next = static_cast<uint8_t*>(buffers_.addr());
  for (WorkerCore::NsState& ns : core_.namespaces()) {
    for (uint32_t i = 0; i < s.queue_depth; ++i, next += stride) {
      core_.add_task(ns, next, this);
      iovecs_.push_back(iovec{next, s.io_size_bytes});
    }
  }
  return "";
}

void PcieWorker::run(uint64_t deadline_ns, const Ticker& ticker) noexcept {
  core_.run(*this, deadline_ns, ticker);
}

SubmitOutcome PcieWorker::submit(Task& task, Error* error) noexcept {
  const WorkerCore::NsState& ns = *task.ns;
  nvme_pcie::IoCommand command;
  command.opcode = task.is_read ? spec::nvm_opcode::read : spec::nvm_opcode::write;
  command.nsid = ns.nsid;
  command.lba = task.lba;
  command.block_count = ns.blocks_per_io;
  command.iov = &iovecs_[static_cast<size_t>(&task - core_.tasks().data())];
  command.iovcnt = 1;
  const Result<void> submitted = queue_->submit(command, &on_complete, &task);
  if (submitted) return SubmitOutcome::submitted;
  // busy: the queue is full, out of bounce buffers, or the controller is being reset.
  if (submitted.error().code == Errc::busy) return SubmitOutcome::busy;
  *error = submitted.error();
  return SubmitOutcome::refused;
}

void PcieWorker::on_complete(void* ctx, const spec::Status& status) noexcept {
  auto& task = *static_cast<Task*>(ctx);
  auto& worker = *static_cast<PcieWorker*>(task.owner);
  worker.core_.complete(worker, task, status);
}

void PcieWorker::teardown() noexcept {
  core_.stop();  // the aborted completions of the queue's deletion must not start new I/O
  if (queue_) {
    counters_.bytes_copied = queue_->stats().bytes_copied.load(std::memory_order_relaxed);
    counters_.commands_split = queue_->stats().commands_split.load(std::memory_order_relaxed);
    queue_.reset();  // outstanding requests complete as aborted, through on_complete
  }
  for (Task& task : core_.tasks()) task.buffer = nullptr;
  buffers_.reset();  // after the queue: the device may write into it until then
}

void PcieWorker::add_counters(Summary* summary) const noexcept {
  summary->bytes_copied += counters_.bytes_copied;
  summary->commands_split += counters_.commands_split;
}

}  // namespace nvmf::perf
