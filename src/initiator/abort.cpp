// The admin side of the I/O timeout (ControllerOpts::io_timeout_ms): an I/O qpair's owner
// detects a command outstanding too long and queues an Abort request in the QpairRegistry
// (qpair.cpp); the admin thread sends it here, from process_admin_completions(), and tells the
// qpair when it failed so that the qpair resets its queue. Control path: rare, so a mutex.
#include "common/log.h"
#include "initiator/host_internal.h"

NVMF_LOG_COMPONENT_DECLARE(host);  // controller.cpp's: Aborts are admin commands

namespace nvmf::host {

namespace {

using transport_rdma::DataDirection;
using transport_rdma::HostCommand;
using transport_rdma::HostQueueState;

// Aborts outstanding at once: the NVMe base spec recommends an Abort Command Limit (ACL, 0's
// based) of at least 3, and this project's target and SPDK's take 4; one more would be
// refused with Abort Command Limit Exceeded and reset its queue for nothing.
constexpr uint32_t kAbortsInFlightMax = 4;

// Under registry.mutex: the live qpair with QID `sqid`, or nullptr (freed meanwhile).
IoQpair::Impl* find_qpair(QpairRegistry& registry, uint16_t sqid) {
  for (IoQpair::Impl* qpair : registry.live) {
    if (qpair->qid == sqid) return qpair;
  }
  return nullptr;
}

void report_failed(QpairRegistry& registry, uint16_t sqid) {
  std::lock_guard<std::mutex> lock(registry.mutex);
  IoQpair::Impl* qpair = find_qpair(registry, sqid);
  if (qpair != nullptr) qpair->aborts_failed.fetch_add(1, std::memory_order_release);
}

void abort_done(HostCommand& command, const spec::Cqe& cqe) {
  auto* ctrl = static_cast<Controller::Impl*>(command.owner);
  QpairRegistry& registry = *ctrl->registry;
  --registry.aborts_in_flight;
  const auto sqid = static_cast<uint16_t>(command.sqe.cdw10 & 0xFFFF);
  const auto cid = static_cast<uint16_t>(command.sqe.cdw10 >> 16);
  const spec::Status status = cqe.decoded_status();
  if (!status.is_success()) {
    if (status.sc != spec::sc_generic::aborted_sq_deletion) {  // not the admin queue's own end
      NVMF_ERRLOG(host, "%s: Abort of queue %u CID %u failed: %s", ctrl->trid.subnqn.c_str(), sqid,
                  cid, spec::status_name(status));
    }
    report_failed(registry, sqid);
    return;
  }
  // DW0 bit 0 clear: the controller aborted the command, whose completion (Command Abort
  // Requested) reaches its qpair; set: it did not, and the qpair's second timeout decides.
  NVMF_INFOLOG(host, "%s: Abort of queue %u CID %u: %s", ctrl->trid.subnqn.c_str(), sqid, cid,
               (cqe.cdw0 & 1u) == 0 ? "aborted" : "not aborted");
}

// Under registry.mutex: sends `request`; false when the admin queue has no free slot.
bool send_abort(Controller::Impl& ctrl, const AbortRequest& request) {
  HostCommand* command = ctrl.admin->get_command();
  if (command == nullptr) return false;
  command->sqe = spec::make_sqe(spec::admin_opcode::abort, 0);
  command->sqe.cdw10 = uint32_t{request.sqid} | (uint32_t{request.cid} << 16);
  command->callback = abort_done;
  command->status_fn = nullptr;
  command->owner = &ctrl;
  QpairRegistry& registry = *ctrl.registry;
  IoQpair::Impl* qpair = find_qpair(registry, request.sqid);
  if (!ctrl.admin->submit(*command, DataDirection::none, nullptr, 0)) {
    if (qpair != nullptr) qpair->aborts_failed.fetch_add(1, std::memory_order_release);
    return true;  // the request is answered: failed
  }
  ++registry.aborts_in_flight;
  if (qpair != nullptr) qpair->aborts_sent.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace

void send_requested_aborts(Controller::Impl& ctrl) noexcept {
  QpairRegistry& registry = *ctrl.registry;
  if (registry.aborts_requested.load(std::memory_order_acquire) == 0) return;
  const bool admin_usable = ctrl.admin && ctrl.admin->state() == HostQueueState::connected &&
                            !ctrl.admin->in_error() && !ctrl.shutting_down;
  std::lock_guard<std::mutex> lock(registry.mutex);
  uint32_t waiting = registry.aborts_requested.load(std::memory_order_relaxed);
  while (waiting > 0) {
    const AbortRequest request = registry.abort_ring[registry.abort_ring_head];
    if (admin_usable) {
      if (registry.aborts_in_flight >= kAbortsInFlightMax) break;
      if (!send_abort(ctrl, request)) break;  // no admin slot: the next poll tries again
    } else {
      IoQpair::Impl* qpair = find_qpair(registry, request.sqid);
      if (qpair != nullptr) qpair->aborts_failed.fetch_add(1, std::memory_order_release);
    }
    registry.abort_ring_head = (registry.abort_ring_head + 1) % kAbortRequestsMax;
    --waiting;
  }
  registry.aborts_requested.store(waiting, std::memory_order_release);
}

}  // namespace nvmf::host
