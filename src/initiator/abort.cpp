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

// Under registry.mutex: the live qpair with QID `sqid`, or nullptr (freed meanwhile).
IoQpair::Impl* find_qpair(QpairRegistry& registry, uint16_t sqid) {
  for (IoQpair::Impl* qpair : registry.live) {
    if (qpair->qid == sqid) return qpair;
  }
  return nullptr;
}

// Under registry.mutex: tells the qpair with QID `sqid` (if still live) that an Abort it asked
// for failed, so that its next timeout scan resets its queue.
void count_failed_abort(QpairRegistry& registry, uint16_t sqid) {
  IoQpair::Impl* qpair = find_qpair(registry, sqid);
  if (qpair != nullptr) qpair->aborts_failed.fetch_add(1, std::memory_order_release);
}

void report_failed(QpairRegistry& registry, uint16_t sqid) {
  std::lock_guard<std::mutex> lock(registry.mutex);
  count_failed_abort(registry, sqid);
}

void abort_done(HostCommand& command, const spec::Cqe& cqe) {
  auto* ctrl = static_cast<Controller::Impl*>(command.owner);
  QpairRegistry& registry = *ctrl->registry;
  --registry.aborts_in_flight;
  const uint16_t sqid = spec::abort_sqid(command.sqe.cdw10);
  const uint16_t cid = spec::abort_cid(command.sqe.cdw10);
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
  command->sqe.cdw10 = spec::abort_cdw10(request.sqid, request.cid);
  command->callback = abort_done;
  command->status_fn = nullptr;
  command->owner = &ctrl;
  QpairRegistry& registry = *ctrl.registry;
  if (!ctrl.admin->submit(*command, DataDirection::none, nullptr, 0)) {
    count_failed_abort(registry, request.sqid);
    return true;  // the request is answered: failed
  }
  IoQpair::Impl* qpair = find_qpair(registry, request.sqid);
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
      // The controller's Abort Command Limit: one more would be refused with Abort Command
      // Limit Exceeded and reset its queue for nothing.
      if (registry.aborts_in_flight >= uint32_t{ctrl.data.acl} + 1) break;
      if (!send_abort(ctrl, request)) break;  // no admin slot: the next poll tries again
    } else {
      count_failed_abort(registry, request.sqid);
    }
    registry.abort_ring_head = (registry.abort_ring_head + 1) % kAbortRequestsMax;
    --waiting;
  }
  registry.aborts_requested.store(waiting, std::memory_order_release);
}

}  // namespace nvmf::host
