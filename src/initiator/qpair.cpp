// I/O qpairs and the namespace commands. Submission is the data path: no allocation, no lock,
// no exception; a full queue answers busy.
#include <cstring>

#include "common/log.h"
#include "common/util.h"
#include "initiator/host_internal.h"

NVMF_LOG_COMPONENT(host_io);

namespace nvmf::host {

namespace {

using transport_rdma::DataDirection;
using transport_rdma::HostCommand;
using transport_rdma::HostQueue;
using transport_rdma::HostQueueState;

// NLB is 16 bits, 0's based.
constexpr uint32_t kMaxBlocksPerCommand = 65536;

void io_done(HostCommand& command, const spec::Cqe& cqe) {
  auto* qpair = static_cast<IoQpair::Impl*>(command.owner);
  const spec::Status status = cqe.decoded_status();
  ++qpair->stats.completed;
  if (!status.is_success()) ++qpair->stats.errors;
  command.status_fn(command.cb_ctx, status);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// IoQpair::Impl

IoQpair::Impl::~Impl() {
  if (queue) queue->disconnect();
  queue.reset();
  release_qid();
  if (host != nullptr) {
    host->map->free(dsm_ranges);
    host->map->free(connect_data);
  }
}

void IoQpair::Impl::release_qid() noexcept {
  if (!registry) return;
  std::lock_guard<std::mutex> lock(registry->mutex);
  for (size_t i = 0; i < registry->live.size(); ++i) {
    if (registry->live[i] == this) {
      registry->live.erase(registry->live.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  if (qid >= 1 && qid <= registry->qid_used.size()) registry->qid_used[qid - 1] = false;
  registry.reset();
}

// ---------------------------------------------------------------------------------------
// Controller::alloc_io_qpair

Result<std::unique_ptr<IoQpair>> Controller::alloc_io_qpair(const IoQpairOpts& qpair_opts,
                                                             std::string* message) {
  Impl& ctrl = *impl_;
  if (!connected()) {
    set_message(message, "controller not connected");
    return Unexpected(Errc::bad_state, "controller not connected");
  }
  auto qpair = std::make_unique<IoQpair::Impl>();
  qpair->host = ctrl.host;
  {
    std::lock_guard<std::mutex> lock(ctrl.registry->mutex);
    for (size_t i = 0; i < ctrl.registry->qid_used.size(); ++i) {
      if (!ctrl.registry->qid_used[i]) {
        ctrl.registry->qid_used[i] = true;
        qpair->qid = static_cast<uint16_t>(i + 1);
        break;
      }
    }
    if (qpair->qid == 0) {
      set_message(message, "all " + std::to_string(ctrl.data.io_queues_granted) +
                               " I/O queues of the controller are in use");
      return Unexpected(Errc::busy, "no free I/O queue");
    }
    qpair->registry = ctrl.registry;
    ctrl.registry->live.push_back(qpair.get());
    ++ctrl.stats.io_qpairs_allocated;
  }

  const uint16_t entries = qpair_opts.queue_size != 0
                               ? std::min<uint16_t>(qpair_opts.queue_size, ctrl.data.io_queue_size)
                               : ctrl.data.io_queue_size;
  transport_rdma::HostQueueOpts queue_opts;
  queue_opts.address = ctrl.trid.traddr;
  queue_opts.port = ctrl.trid.port();
  queue_opts.qid = qpair->qid;
  queue_opts.entries = std::max<uint16_t>(entries, 2);
  queue_opts.cntlid = ctrl.data.cntlid;
  queue_opts.connect_timeout_ms = ctrl.opts.connect_timeout_ms;
  queue_opts.clock = ctrl.host->clock;
  qpair->max_transfer_bytes = ctrl.data.max_transfer_bytes;
  qpair->dsm_ranges = static_cast<spec::DsmRange*>(
      ctrl.host->map->allocate(size_t{queue_opts.entries} * sizeof(spec::DsmRange)));
  qpair->connect_data = ctrl.host->map->allocate(sizeof(spec::ConnectData));
  if (qpair->dsm_ranges == nullptr || qpair->connect_data == nullptr) {
    set_message(message, "cannot allocate DMA memory for the queue");
    return Unexpected(Errc::no_memory, "qpair buffers");
  }
  auto queue = HostQueue::create(*ctrl.host->provider, *ctrl.host->domains, queue_opts);
  if (!queue) {
    set_message(message, "cannot create I/O queue " + std::to_string(qpair->qid));
    return Unexpected(queue.error());
  }
  qpair->queue = std::move(*queue);
  auto up = wait_connected(*ctrl.host, *qpair->queue, ctrl.trid, message);
  if (!up) return Unexpected(up.error());
  auto connected_cqe = ctrl.fabrics_connect(*qpair->queue, qpair->connect_data, ctrl.data.cntlid,
                                            message);
  if (!connected_cqe) return Unexpected(connected_cqe.error());
  const uint32_t in_capsule = std::min(ctrl.opts.in_capsule_data_bytes,
                                       ctrl.data.in_capsule_data_bytes);
  qpair->queue->set_in_capsule_limit(in_capsule);
  NVMF_INFOLOG(host_io, "%s: I/O queue %u connected, depth %u, in-capsule %u bytes",
               ctrl.trid.subnqn.c_str(), qpair->qid, qpair->queue->depth(), in_capsule);
  return std::make_unique<IoQpair>(std::move(qpair));
}

// ---------------------------------------------------------------------------------------
// IoQpair

IoQpair::IoQpair(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IoQpair::~IoQpair() = default;

int IoQpair::process_completions(uint32_t max_completions) noexcept {
  return impl_->queue->poll(max_completions);
}
uint16_t IoQpair::qid() const noexcept { return impl_->qid; }
uint32_t IoQpair::depth() const noexcept { return impl_->queue->depth(); }
uint32_t IoQpair::outstanding() const noexcept { return impl_->queue->outstanding(); }
bool IoQpair::connected() const noexcept {
  return impl_->queue->state() == HostQueueState::connected;
}
IoQpairStats IoQpair::stats() const noexcept {
  IoQpairStats stats = impl_->stats;
  stats.in_capsule_writes = impl_->queue->in_capsule_writes();
  return stats;
}
void IoQpair::disconnect() noexcept { impl_->queue->disconnect(); }

// ---------------------------------------------------------------------------------------
// Namespace

namespace {

Result<void> submit(IoQpair& qpair, const spec::Sqe& sqe, DataDirection direction,
                    const iovec* iov, int iovcnt, IoCallback cb, void* cb_ctx) noexcept {
  IoQpair::Impl& q = qpair.impl();
  HostQueue& queue = *q.queue;
  if (queue.state() != HostQueueState::connected) {
    return Unexpected(Errc::bad_state, "qpair not connected");
  }
  HostCommand* command = queue.get_command();
  if (command == nullptr) {
    ++q.stats.busy;
    return Unexpected(Errc::busy, "qpair full");
  }
  command->sqe = sqe;
  command->callback = io_done;
  command->owner = &q;
  command->status_fn = cb;
  command->cb_ctx = cb_ctx;
  if (sqe.opcode == spec::nvm_opcode::dataset_management) {
    // The range list is the command's data; it lives in the slot's DMA range entry.
    q.dsm_ranges[command->cid] = *static_cast<const spec::DsmRange*>(iov[0].iov_base);
    const iovec range{&q.dsm_ranges[command->cid], sizeof(spec::DsmRange)};
    auto submitted = queue.submit(*command, direction, &range, 1);
    if (submitted) ++q.stats.submitted;
    return submitted;
  }
  auto submitted = queue.submit(*command, direction, iov, iovcnt);
  if (submitted) ++q.stats.submitted;
  return submitted;
}

}  // namespace

Result<void> Namespace::check_range(uint64_t lba, uint32_t blocks) const noexcept {
  if (blocks == 0 || blocks > kMaxBlocksPerCommand) {
    return Unexpected(Errc::invalid_argument, "1 to 65536 blocks per command");
  }
  if (!range_within(lba, blocks, block_count_)) {
    return Unexpected(Errc::invalid_argument, "range outside the namespace");
  }
  return {};
}

Result<void> Namespace::readv(IoQpair& qpair, const iovec* iov, int iovcnt, uint64_t lba,
                              uint32_t blocks, IoCallback cb, void* cb_ctx) noexcept {
  auto range = check_range(lba, blocks);
  if (!range) return range;
  uint64_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  if (iovcnt < 1 || total != uint64_t{blocks} * block_size_) {
    return Unexpected(Errc::invalid_argument, "iovecs must add up to blocks x block size");
  }
  const uint32_t limit = qpair.impl().max_transfer_bytes;
  if (limit != 0 && total > limit) {
    return Unexpected(Errc::invalid_argument, "larger than the controller's MDTS");
  }
  spec::Sqe sqe = spec::make_sqe(spec::nvm_opcode::read, 0, nsid_);
  spec::rw_set_range(sqe, lba, blocks);
  return submit(qpair, sqe, DataDirection::controller_to_host, iov, iovcnt, cb, cb_ctx);
}

Result<void> Namespace::writev(IoQpair& qpair, const iovec* iov, int iovcnt, uint64_t lba,
                               uint32_t blocks, IoCallback cb, void* cb_ctx) noexcept {
  auto range = check_range(lba, blocks);
  if (!range) return range;
  uint64_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  if (iovcnt < 1 || total != uint64_t{blocks} * block_size_) {
    return Unexpected(Errc::invalid_argument, "iovecs must add up to blocks x block size");
  }
  const uint32_t limit = qpair.impl().max_transfer_bytes;
  if (limit != 0 && total > limit) {
    return Unexpected(Errc::invalid_argument, "larger than the controller's MDTS");
  }
  spec::Sqe sqe = spec::make_sqe(spec::nvm_opcode::write, 0, nsid_);
  spec::rw_set_range(sqe, lba, blocks);
  return submit(qpair, sqe, DataDirection::host_to_controller, iov, iovcnt, cb, cb_ctx);
}

Result<void> Namespace::read(IoQpair& qpair, void* buffer, uint64_t lba, uint32_t blocks,
                             IoCallback cb, void* cb_ctx) noexcept {
  const iovec iov{buffer, size_t{blocks} * block_size_};
  return readv(qpair, &iov, 1, lba, blocks, cb, cb_ctx);
}

Result<void> Namespace::write(IoQpair& qpair, const void* buffer, uint64_t lba, uint32_t blocks,
                              IoCallback cb, void* cb_ctx) noexcept {
  const iovec iov{const_cast<void*>(buffer), size_t{blocks} * block_size_};
  return writev(qpair, &iov, 1, lba, blocks, cb, cb_ctx);
}

Result<void> Namespace::flush(IoQpair& qpair, IoCallback cb, void* cb_ctx) noexcept {
  const spec::Sqe sqe = spec::make_sqe(spec::nvm_opcode::flush, 0, nsid_);
  return submit(qpair, sqe, DataDirection::none, nullptr, 0, cb, cb_ctx);
}

Result<void> Namespace::write_zeroes(IoQpair& qpair, uint64_t lba, uint32_t blocks,
                                     IoCallback cb, void* cb_ctx) noexcept {
  auto range = check_range(lba, blocks);
  if (!range) return range;
  spec::Sqe sqe = spec::make_sqe(spec::nvm_opcode::write_zeroes, 0, nsid_);
  spec::rw_set_range(sqe, lba, blocks);
  return submit(qpair, sqe, DataDirection::none, nullptr, 0, cb, cb_ctx);
}

Result<void> Namespace::deallocate(IoQpair& qpair, uint64_t lba, uint32_t blocks, IoCallback cb,
                                   void* cb_ctx) noexcept {
  if (blocks == 0 || !range_within(lba, blocks, block_count_)) {
    return Unexpected(Errc::invalid_argument, "range outside the namespace");
  }
  spec::DsmRange range{};
  range.block_count = blocks;
  range.starting_lba = lba;
  spec::Sqe sqe = spec::make_sqe(spec::nvm_opcode::dataset_management, 0, nsid_);
  sqe.cdw10 = 0;        // NR: one range (0's based)
  sqe.cdw11 = 1u << 2;  // AD: deallocate
  const iovec iov{&range, sizeof(range)};
  return submit(qpair, sqe, DataDirection::host_to_controller, &iov, 1, cb, cb_ctx);
}

}  // namespace nvmf::host
