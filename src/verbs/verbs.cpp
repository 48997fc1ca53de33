#include "verbs/verbs.h"

namespace nvmf::verbs {

const char* wc_status_name(WcStatus status) noexcept {
  switch (status) {
    case WcStatus::success: return "success";
    case WcStatus::local_length_error: return "local length error";
    case WcStatus::local_qp_op_error: return "local QP operation error";
    case WcStatus::local_protection_error: return "local protection error";
    case WcStatus::wr_flush_error: return "WR flushed";
    case WcStatus::mw_bind_error: return "memory management operation error";
    case WcStatus::bad_response_error: return "bad response error";
    case WcStatus::local_access_error: return "local access error";
    case WcStatus::remote_invalid_request_error: return "remote invalid request error";
    case WcStatus::remote_access_error: return "remote access error";
    case WcStatus::remote_operation_error: return "remote operation error";
    case WcStatus::retry_exceeded_error: return "transport retry counter exceeded";
    case WcStatus::rnr_retry_exceeded_error: return "RNR retry counter exceeded";
    case WcStatus::general_error: return "general error";
  }
  return "unknown status";
}

const char* wc_opcode_name(WcOpcode opcode) noexcept {
  switch (opcode) {
    case WcOpcode::send: return "SEND";
    case WcOpcode::rdma_write: return "RDMA_WRITE";
    case WcOpcode::rdma_read: return "RDMA_READ";
    case WcOpcode::local_inv: return "LOCAL_INV";
    case WcOpcode::bind_mw: return "BIND_MW";
    case WcOpcode::recv: return "RECV";
  }
  return "unknown opcode";
}

const char* wr_opcode_name(WrOpcode opcode) noexcept {
  switch (opcode) {
    case WrOpcode::send: return "SEND";
    case WrOpcode::send_with_inv: return "SEND_WITH_INV";
    case WrOpcode::rdma_write: return "RDMA_WRITE";
    case WrOpcode::rdma_read: return "RDMA_READ";
    case WrOpcode::local_inv: return "LOCAL_INV";
    case WrOpcode::bind_mw: return "BIND_MW";
  }
  return "unknown opcode";
}

const char* qp_state_name(QpState state) noexcept {
  switch (state) {
    case QpState::reset: return "RESET";
    case QpState::init: return "INIT";
    case QpState::ready_to_receive: return "RTR";
    case QpState::ready_to_send: return "RTS";
    case QpState::error: return "ERR";
  }
  return "unknown state";
}

const char* cm_event_type_name(CmEventType type) noexcept {
  switch (type) {
    case CmEventType::route_resolved: return "ROUTE_RESOLVED";
    case CmEventType::connect_request: return "CONNECT_REQUEST";
    case CmEventType::established: return "ESTABLISHED";
    case CmEventType::rejected: return "REJECTED";
    case CmEventType::unreachable: return "UNREACHABLE";
    case CmEventType::connect_error: return "CONNECT_ERROR";
    case CmEventType::disconnected: return "DISCONNECTED";
    case CmEventType::device_removal: return "DEVICE_REMOVAL";
  }
  return "unknown event";
}

const char* async_event_type_name(AsyncEventType type) noexcept {
  switch (type) {
    case AsyncEventType::cq_error: return "CQ_ERR";
    case AsyncEventType::qp_fatal: return "QP_FATAL";
    case AsyncEventType::qp_request_error: return "QP_REQ_ERR";
    case AsyncEventType::qp_access_error: return "QP_ACCESS_ERR";
    case AsyncEventType::comm_established: return "COMM_EST";
    case AsyncEventType::sq_drained: return "SQ_DRAINED";
    case AsyncEventType::path_migrated: return "PATH_MIG";
    case AsyncEventType::path_migration_error: return "PATH_MIG_ERR";
    case AsyncEventType::device_fatal: return "DEVICE_FATAL";
    case AsyncEventType::port_active: return "PORT_ACTIVE";
    case AsyncEventType::port_error: return "PORT_ERR";
    case AsyncEventType::lid_change: return "LID_CHANGE";
    case AsyncEventType::pkey_change: return "PKEY_CHANGE";
    case AsyncEventType::sm_change: return "SM_CHANGE";
    case AsyncEventType::srq_error: return "SRQ_ERR";
    case AsyncEventType::srq_limit_reached: return "SRQ_LIMIT_REACHED";
    case AsyncEventType::qp_last_wqe_reached: return "QP_LAST_WQE_REACHED";
    case AsyncEventType::client_reregister: return "CLIENT_REREGISTER";
    case AsyncEventType::gid_change: return "GID_CHANGE";
    case AsyncEventType::wq_fatal: return "WQ_FATAL";
  }
  return "unknown async event";
}

AsyncEventSubject async_event_subject(AsyncEventType type) noexcept {
  switch (type) {
    case AsyncEventType::cq_error:
      return AsyncEventSubject::cq;
    case AsyncEventType::qp_fatal:
    case AsyncEventType::qp_request_error:
    case AsyncEventType::qp_access_error:
    case AsyncEventType::comm_established:
    case AsyncEventType::sq_drained:
    case AsyncEventType::path_migrated:
    case AsyncEventType::path_migration_error:
    case AsyncEventType::qp_last_wqe_reached:
      return AsyncEventSubject::qp;
    case AsyncEventType::srq_error:
    case AsyncEventType::srq_limit_reached:
      return AsyncEventSubject::srq;
    case AsyncEventType::port_active:
    case AsyncEventType::port_error:
    case AsyncEventType::lid_change:
    case AsyncEventType::pkey_change:
    case AsyncEventType::sm_change:
    case AsyncEventType::client_reregister:
    case AsyncEventType::gid_change:
      return AsyncEventSubject::port;
    case AsyncEventType::wq_fatal:
      return AsyncEventSubject::wq;
    case AsyncEventType::device_fatal:
      return AsyncEventSubject::device;
  }
  return AsyncEventSubject::device;
}

}  // namespace nvmf::verbs
