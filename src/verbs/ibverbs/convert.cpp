// Pure conversions between verbs.h types and rdma-core's: completions, work requests,
// device attributes, CM events, socket addresses. No device, no system call.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "verbs/ibverbs/ibverbs_internal.h"

namespace nvmf::verbs::ibverbs {

WcQuirks wc_quirks_for(const char* name, const ibv_device_attr& attr) noexcept {
  WcQuirks quirks;
  // The vendor id is the reliable mark (rxe devices may be given any name); the name is a
  // second chance for the conventional "rxe0".
  quirks.invalidate_flag_in_bit2 =
      attr.vendor_id == kRxeVendorId || (name != nullptr && strncmp(name, "rxe", 3) == 0);
  return quirks;
}

WcStatus to_wc_status(int ibv_status) noexcept {
  switch (ibv_status) {
    case IBV_WC_SUCCESS:
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_LOC_QP_OP_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_WR_FLUSH_ERR:
    case IBV_WC_MW_BIND_ERR:
    case IBV_WC_BAD_RESP_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
    case IBV_WC_GENERAL_ERR:
      return static_cast<WcStatus>(ibv_status);
    default:
      // EEC/RDD (RD transport), fatal, response timeout, tag matching: none is expected on
      // an RC QP; the ibv_wc's vendor_err is kept for the log.
      return WcStatus::general_error;
  }
}

namespace {

WcOpcode to_wc_opcode(ibv_wc_opcode opcode) noexcept {
  switch (opcode) {
    case IBV_WC_SEND:
      return WcOpcode::send;
    case IBV_WC_RDMA_WRITE:
      return WcOpcode::rdma_write;
    case IBV_WC_RDMA_READ:
      return WcOpcode::rdma_read;
    case IBV_WC_LOCAL_INV:
      return WcOpcode::local_inv;
    case IBV_WC_BIND_MW:
      return WcOpcode::bind_mw;
    default:
      // RECV, RECV_RDMA_WITH_IMM and anything else on the receive side (bit 7 set) is a
      // receive; atomics and TSO are never posted by the stack.
      return (opcode & IBV_WC_RECV) != 0 ? WcOpcode::recv : WcOpcode::send;
  }
}

}  // namespace

WorkCompletion to_work_completion(const ibv_wc& wc, WcQuirks quirks) noexcept {
  WorkCompletion out;
  out.wr_id = wc.wr_id;
  out.status = to_wc_status(wc.status);
  out.opcode = to_wc_opcode(wc.opcode);
  out.byte_len = wc.byte_len;
  out.qp_num = wc.qp_num;
  out.vendor_error = wc.vendor_err;
  if (wc.status == IBV_WC_SUCCESS && out.opcode == WcOpcode::recv) {
    unsigned invalidate_bits = IBV_WC_WITH_INV;
    if (quirks.invalidate_flag_in_bit2) invalidate_bits |= IBV_WC_IP_CSUM_OK;  // bit 0x4
    out.remote_invalidated = (wc.wc_flags & invalidate_bits) != 0;
    if (out.remote_invalidated) out.invalidated_rkey = wc.invalidated_rkey;
  }
  return out;
}

WcOpcode wc_opcode_for(ibv_wr_opcode opcode) noexcept {
  switch (opcode) {
    case IBV_WR_RDMA_WRITE:
      return WcOpcode::rdma_write;
    case IBV_WR_RDMA_READ:
      return WcOpcode::rdma_read;
    case IBV_WR_LOCAL_INV:
      return WcOpcode::local_inv;
    case IBV_WR_BIND_MW:
      return WcOpcode::bind_mw;
    default:
      return WcOpcode::send;
  }
}

const char* ibv_wr_opcode_text(ibv_wr_opcode opcode) noexcept {
  switch (opcode) {
    case IBV_WR_SEND:
      return "SEND";
    case IBV_WR_SEND_WITH_INV:
      return "SEND_WITH_INV";
    case IBV_WR_RDMA_WRITE:
      return "RDMA_WRITE";
    case IBV_WR_RDMA_READ:
      return "RDMA_READ";
    case IBV_WR_LOCAL_INV:
      return "LOCAL_INV";
    case IBV_WR_BIND_MW:
      return "BIND_MW";
    default:
      return "other opcode";
  }
}

namespace {

Result<void> copy_sges(const Sge* sg_list, uint32_t num_sge, uint32_t max_sge, ibv_sge* sges,
                       uint64_t* total_length) noexcept {
  if (num_sge > max_sge) {
    return Unexpected(Errc::invalid_argument, "num_sge exceeds the queue's granted max_sge");
  }
  if (num_sge > 0 && sg_list == nullptr) {
    return Unexpected(Errc::invalid_argument, "num_sge > 0 without sg_list");
  }
  uint64_t total = 0;
  for (uint32_t i = 0; i < num_sge; ++i) {
    sges[i].addr = sg_list[i].addr;
    sges[i].length = sg_list[i].length;
    sges[i].lkey = sg_list[i].lkey;
    total += sg_list[i].length;
  }
  *total_length = total;
  return {};
}

}  // namespace

Result<void> to_ibv_send_wr(const SendWr& wr, const SendLimits& limits, const BindTarget& bind,
                            ibv_send_wr* out, ibv_sge* sges, ibv_mw* shadow_mw) noexcept {
  *out = ibv_send_wr{};
  out->wr_id = wr.wr_id;
  out->next = nullptr;
  out->send_flags = wr.flags & (kWrFenced | kWrSignaled | kWrSolicited | kWrInline);

  const bool has_payload = wr.opcode == WrOpcode::send || wr.opcode == WrOpcode::send_with_inv ||
                           wr.opcode == WrOpcode::rdma_write || wr.opcode == WrOpcode::rdma_read;
  if (has_payload) {
    uint64_t total = 0;
    Result<void> copied = copy_sges(wr.sg_list, wr.num_sge, limits.max_sge, sges, &total);
    if (!copied) return copied;
    out->sg_list = wr.num_sge > 0 ? sges : nullptr;
    out->num_sge = static_cast<int>(wr.num_sge);
    if ((wr.flags & kWrInline) != 0) {
      if (wr.opcode == WrOpcode::rdma_read) {
        return Unexpected(Errc::invalid_argument, "IBV_SEND_INLINE on an RDMA READ");
      }
      if (total > limits.max_inline_data) {
        return Unexpected(Errc::invalid_argument,
                          "inline payload exceeds the QP's granted max_inline_data");
      }
    }
  } else if ((wr.flags & kWrInline) != 0) {
    return Unexpected(Errc::invalid_argument, "IBV_SEND_INLINE on a WR without payload");
  }

  switch (wr.opcode) {
    case WrOpcode::send:
      out->opcode = IBV_WR_SEND;
      break;
    case WrOpcode::send_with_inv:
      out->opcode = IBV_WR_SEND_WITH_INV;
      out->invalidate_rkey = wr.invalidate_rkey;
      break;
    case WrOpcode::rdma_write:
      out->opcode = IBV_WR_RDMA_WRITE;
      out->wr.rdma.remote_addr = wr.remote_addr;
      out->wr.rdma.rkey = wr.rkey;
      break;
    case WrOpcode::rdma_read:
      out->opcode = IBV_WR_RDMA_READ;
      out->wr.rdma.remote_addr = wr.remote_addr;
      out->wr.rdma.rkey = wr.rkey;
      break;
    case WrOpcode::local_inv:
      out->opcode = IBV_WR_LOCAL_INV;
      out->invalidate_rkey = wr.invalidate_rkey;
      break;
    case WrOpcode::bind_mw:
      if (bind.mw == nullptr || bind.mr == nullptr || shadow_mw == nullptr) {
        return Unexpected(Errc::invalid_argument, "BIND_MW without a window or a region");
      }
      // A type-2 key keeps the window's index (high 24 bits); only the low 8 bits change.
      if ((wr.bind.rkey & 0xFFFFFF00u) != (bind.current_rkey & 0xFFFFFF00u)) {
        return Unexpected(Errc::invalid_argument,
                          "BIND_MW key is not a key of this window (use next_rkey())");
      }
      *shadow_mw = *bind.mw;
      shadow_mw->rkey = bind.current_rkey;
      out->opcode = IBV_WR_BIND_MW;
      out->sg_list = nullptr;
      out->num_sge = 0;  // type-2 binds go through ibv_post_send with no SGE (VM.md)
      out->bind_mw.mw = shadow_mw;
      out->bind_mw.rkey = wr.bind.rkey;
      out->bind_mw.bind_info.mr = bind.mr;
      out->bind_mw.bind_info.addr = wr.bind.addr;
      out->bind_mw.bind_info.length = wr.bind.length;
      out->bind_mw.bind_info.mw_access_flags = wr.bind.access;
      break;
    default:
      return Unexpected(Errc::invalid_argument, "unknown WrOpcode");
  }
  return {};
}

Result<void> to_ibv_recv_wr(const RecvWr& wr, uint32_t max_sge, ibv_recv_wr* out,
                            ibv_sge* sges) noexcept {
  *out = ibv_recv_wr{};
  out->wr_id = wr.wr_id;
  uint64_t total = 0;
  Result<void> copied = copy_sges(wr.sg_list, wr.num_sge, max_sge, sges, &total);
  if (!copied) return copied;
  out->sg_list = wr.num_sge > 0 ? sges : nullptr;
  out->num_sge = static_cast<int>(wr.num_sge);
  return {};
}

DeviceCaps caps_from_attr(const char* name, const ibv_device_attr& attr) {
  DeviceCaps caps;
  caps.name = name != nullptr ? name : "";
  caps.max_qp_wr = static_cast<uint32_t>(std::max(attr.max_qp_wr, 0));
  caps.max_sge = static_cast<uint32_t>(std::max(attr.max_sge, 0));
  caps.max_cqe = static_cast<uint32_t>(std::max(attr.max_cqe, 0));
  caps.max_srq_wr = attr.max_srq > 0 ? static_cast<uint32_t>(std::max(attr.max_srq_wr, 0)) : 0;
  caps.max_qp_rd_atom = static_cast<uint32_t>(std::max(attr.max_qp_rd_atom, 0));
  caps.max_qp_init_rd_atom = static_cast<uint32_t>(std::max(attr.max_qp_init_rd_atom, 0));
  caps.max_mr_size = attr.max_mr_size;
  caps.max_mw = static_cast<uint32_t>(std::max(attr.max_mw, 0));
  caps.memory_window_type2 = (attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0;
  caps.memory_management_extensions = (attr.device_cap_flags & IBV_DEVICE_MEM_MGT_EXTENSIONS) != 0;
  return caps;
}

bool to_async_event(const ibv_async_event& raw, AsyncEvent* out) noexcept {
  const auto type_value = static_cast<unsigned>(raw.event_type);
  if (type_value >= kAsyncEventTypeCount) return false;
  *out = AsyncEvent{};
  out->type = static_cast<AsyncEventType>(type_value);
  switch (async_event_subject(out->type)) {
    case AsyncEventSubject::qp:
      out->qp_num = raw.element.qp != nullptr ? raw.element.qp->qp_num : 0;
      break;
    case AsyncEventSubject::cq:
      out->cq = raw.element.cq != nullptr
                    ? static_cast<const CompletionQueue*>(raw.element.cq->cq_context)
                    : nullptr;
      break;
    case AsyncEventSubject::srq:
      out->srq = raw.element.srq != nullptr
                     ? static_cast<const SharedReceiveQueue*>(raw.element.srq->srq_context)
                     : nullptr;
      break;
    case AsyncEventSubject::port:
      out->port_num = static_cast<uint32_t>(std::max(raw.element.port_num, 0));
      break;
    case AsyncEventSubject::wq:
    case AsyncEventSubject::device:
      break;
  }
  return true;
}

QpState qp_state_from_ibv(ibv_qp_state state) noexcept {
  switch (state) {
    case IBV_QPS_RESET:
      return QpState::reset;
    case IBV_QPS_INIT:
      return QpState::init;
    case IBV_QPS_RTR:
      return QpState::ready_to_receive;
    case IBV_QPS_RTS:
    case IBV_QPS_SQD:  // send queue drained: still connected
      return QpState::ready_to_send;
    default:  // SQE, ERR, unknown
      return QpState::error;
  }
}

std::optional<CmEventType> cm_event_type_from(rdma_cm_event_type type, int status) noexcept {
  switch (type) {
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      return CmEventType::route_resolved;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
      return CmEventType::unreachable;
    case RDMA_CM_EVENT_CONNECT_REQUEST:
      return CmEventType::connect_request;
    // CONNECT_RESPONSE only comes when the id has no QP; with one, librdmacm moves the QP to
    // RTS itself and reports ESTABLISHED.
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
    case RDMA_CM_EVENT_ESTABLISHED:
      return CmEventType::established;
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return CmEventType::connect_error;
    case RDMA_CM_EVENT_REJECTED:
      return status == kCmRejectInvalidServiceId ? CmEventType::unreachable : CmEventType::rejected;
    case RDMA_CM_EVENT_DISCONNECTED:
      return CmEventType::disconnected;
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return CmEventType::device_removal;
    default:  // ADDR_RESOLVED (handled by the channel), TIMEWAIT_EXIT, ADDR_CHANGE, multicast
      return std::nullopt;
  }
}

Result<void> parse_socket_address(const std::string& address, uint16_t port,
                                  sockaddr_storage* out) noexcept {
  *out = sockaddr_storage{};
  auto* in4 = reinterpret_cast<sockaddr_in*>(out);
  if (inet_pton(AF_INET, address.c_str(), &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    in4->sin_port = htons(port);
    return {};
  }
  *out = sockaddr_storage{};
  auto* in6 = reinterpret_cast<sockaddr_in6*>(out);
  if (inet_pton(AF_INET6, address.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    return {};
  }
  return Unexpected(Errc::invalid_argument, "address is not a numeric IPv4 or IPv6 address");
}

std::string format_socket_address(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {};
  char buffer[INET6_ADDRSTRLEN + 16];
  if (address == nullptr) return "unknown";
  if (address->sa_family == AF_INET) {
    const auto* in4 = reinterpret_cast<const sockaddr_in*>(address);
    inet_ntop(AF_INET, &in4->sin_addr, text, sizeof(text));
    snprintf(buffer, sizeof(buffer), "%s:%u", text, ntohs(in4->sin_port));
    return buffer;
  }
  if (address->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    snprintf(buffer, sizeof(buffer), "[%s]:%u", text, ntohs(in6->sin6_port));
    return buffer;
  }
  return "unknown";
}

rdma_conn_param to_conn_param(const ConnectParams& params, uint32_t max_responder_resources,
                              uint32_t max_initiator_depth, bool* clamped) noexcept {
  rdma_conn_param out{};
  out.private_data = params.private_data_length > 0 ? params.private_data : nullptr;
  out.private_data_len = params.private_data_length;
  out.responder_resources = params.responder_resources;
  out.initiator_depth = params.initiator_depth;
  *clamped = false;
  if (max_responder_resources != 0 && out.responder_resources > max_responder_resources) {
    out.responder_resources = static_cast<uint8_t>(max_responder_resources);
    *clamped = true;
  }
  if (max_initiator_depth != 0 && out.initiator_depth > max_initiator_depth) {
    out.initiator_depth = static_cast<uint8_t>(max_initiator_depth);
    *clamped = true;
  }
  out.flow_control = 1;
  // 3-bit fields in the CM REQ: 7 is the maximum, and for rnr_retry_count means "forever".
  out.retry_count = std::min<uint8_t>(params.retry_count, 7);
  out.rnr_retry_count = std::min<uint8_t>(params.rnr_retry_count, 7);
  return out;
}

}  // namespace nvmf::verbs::ibverbs
