// The provider's pure conversions, fed hand-made rdma-core structs: no device needed.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <gtest/gtest.h>

#include <cstring>

#include "verbs/ibverbs/ibverbs_internal.h"

namespace nvmf::verbs::ibverbs {
namespace {

ibv_wc make_wc(uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode opcode) {
  ibv_wc wc{};
  wc.wr_id = wr_id;
  wc.status = status;
  wc.opcode = opcode;
  wc.qp_num = 0x11;
  return wc;
}

constexpr WcQuirks kRxe{true};
constexpr WcQuirks kOther{false};

TEST(WorkCompletionMapping, CopiesTheFieldsOfASuccessfulCompletion) {
  ibv_wc wc = make_wc(0xABCD, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
  wc.byte_len = 4096;
  wc.vendor_err = 0;
  const WorkCompletion out = to_work_completion(wc, kOther);
  EXPECT_EQ(out.wr_id, 0xABCDu);
  EXPECT_EQ(out.status, WcStatus::success);
  EXPECT_EQ(out.opcode, WcOpcode::rdma_read);
  EXPECT_EQ(out.byte_len, 4096u);
  EXPECT_EQ(out.qp_num, 0x11u);
  EXPECT_FALSE(out.remote_invalidated);
}

TEST(WorkCompletionMapping, MapsEveryOpcodeTheStackUses) {
  const struct {
    ibv_wc_opcode in;
    WcOpcode out;
  } cases[] = {{IBV_WC_SEND, WcOpcode::send},
               {IBV_WC_RDMA_WRITE, WcOpcode::rdma_write},
               {IBV_WC_RDMA_READ, WcOpcode::rdma_read},
               {IBV_WC_LOCAL_INV, WcOpcode::local_inv},
               {IBV_WC_BIND_MW, WcOpcode::bind_mw},
               {IBV_WC_RECV, WcOpcode::recv},
               {IBV_WC_RECV_RDMA_WITH_IMM, WcOpcode::recv}};
  for (const auto& c : cases) {
    EXPECT_EQ(to_work_completion(make_wc(1, IBV_WC_SUCCESS, c.in), kOther).opcode, c.out)
        << "ibv opcode " << c.in;
  }
}

TEST(WorkCompletionMapping, KeepsKnownStatusesAndFoldsTheRestIntoGeneralError) {
  EXPECT_EQ(to_wc_status(IBV_WC_WR_FLUSH_ERR), WcStatus::wr_flush_error);
  EXPECT_EQ(to_wc_status(IBV_WC_MW_BIND_ERR), WcStatus::mw_bind_error);
  EXPECT_EQ(to_wc_status(IBV_WC_REM_ACCESS_ERR), WcStatus::remote_access_error);
  EXPECT_EQ(to_wc_status(IBV_WC_RNR_RETRY_EXC_ERR), WcStatus::rnr_retry_exceeded_error);
  EXPECT_EQ(to_wc_status(IBV_WC_LOC_EEC_OP_ERR), WcStatus::general_error);
  EXPECT_EQ(to_wc_status(IBV_WC_FATAL_ERR), WcStatus::general_error);
  EXPECT_EQ(to_wc_status(IBV_WC_RESP_TIMEOUT_ERR), WcStatus::general_error);
  ibv_wc wc = make_wc(9, IBV_WC_REM_ACCESS_ERR, IBV_WC_SEND);
  wc.vendor_err = 0x88;
  const WorkCompletion out = to_work_completion(wc, kOther);
  EXPECT_EQ(out.status, WcStatus::remote_access_error);
  EXPECT_EQ(out.vendor_error, 0x88u);
}

TEST(WorkCompletionMapping, StandardWithInvFlagMeansRemotelyInvalidatedOnAnyDevice) {
  ibv_wc wc = make_wc(2, IBV_WC_SUCCESS, IBV_WC_RECV);
  wc.wc_flags = IBV_WC_WITH_INV;
  wc.invalidated_rkey = 0x4567;
  for (WcQuirks quirks : {kRxe, kOther}) {
    const WorkCompletion out = to_work_completion(wc, quirks);
    EXPECT_TRUE(out.remote_invalidated);
    EXPECT_EQ(out.invalidated_rkey, 0x4567u);
  }
}

TEST(WorkCompletionMapping, RxeBit2MeansRemotelyInvalidatedOnlyOnRxe) {
  // rxe 6.1: bit 0x4 (IBV_WC_IP_CSUM_OK in libibverbs) set, 0x8 clear, key correct (VM.md).
  ibv_wc wc = make_wc(3, IBV_WC_SUCCESS, IBV_WC_RECV);
  wc.wc_flags = 0x4;
  wc.invalidated_rkey = 0x1201;
  const WorkCompletion rxe = to_work_completion(wc, kRxe);
  EXPECT_TRUE(rxe.remote_invalidated);
  EXPECT_EQ(rxe.invalidated_rkey, 0x1201u);
  // On mlx5 RoCEv2 the same bit is the IP checksum flag of an ordinary receive.
  const WorkCompletion other = to_work_completion(wc, kOther);
  EXPECT_FALSE(other.remote_invalidated);
  EXPECT_EQ(other.invalidated_rkey, 0u);
}

TEST(WorkCompletionMapping, InvalidateFlagsCountOnlyOnSuccessfulReceives) {
  ibv_wc send = make_wc(4, IBV_WC_SUCCESS, IBV_WC_SEND);
  send.wc_flags = IBV_WC_WITH_INV | 0x4;
  send.invalidated_rkey = 0x77;
  EXPECT_FALSE(to_work_completion(send, kRxe).remote_invalidated);
  ibv_wc flushed = make_wc(5, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV);
  flushed.wc_flags = IBV_WC_WITH_INV;
  EXPECT_FALSE(to_work_completion(flushed, kRxe).remote_invalidated);
}

TEST(WorkCompletionMapping, QuirkFollowsTheRxeVendorIdOrName) {
  ibv_device_attr attr{};
  attr.vendor_id = kRxeVendorId;
  EXPECT_TRUE(wc_quirks_for("roce_lab", attr).invalidate_flag_in_bit2);
  attr.vendor_id = 0x02c9;  // Mellanox
  EXPECT_FALSE(wc_quirks_for("mlx5_0", attr).invalidate_flag_in_bit2);
  EXPECT_TRUE(wc_quirks_for("rxe0", attr).invalidate_flag_in_bit2);
  EXPECT_FALSE(wc_quirks_for(nullptr, attr).invalidate_flag_in_bit2);
}

// --- SendWr -> ibv_send_wr

struct Converted {
  ibv_send_wr wr{};
  ibv_sge sges[4] = {};
  ibv_mw shadow{};
};

TEST(SendWrConversion, SendCopiesSgesAndPassesFlagsThrough) {
  const Sge sges[2] = {{0x1000, 64, 0x11}, {0x2000, 128, 0x22}};
  SendWr wr;
  wr.wr_id = 77;
  wr.opcode = WrOpcode::send;
  wr.flags = kWrSignaled | kWrFenced | kWrSolicited;
  wr.sg_list = sges;
  wr.num_sge = 2;
  Converted c;
  ASSERT_TRUE(to_ibv_send_wr(wr, SendLimits{4, 0}, BindTarget{}, &c.wr, c.sges, &c.shadow));
  EXPECT_EQ(c.wr.wr_id, 77u);
  EXPECT_EQ(c.wr.opcode, IBV_WR_SEND);
  EXPECT_EQ(c.wr.send_flags,
            static_cast<unsigned>(IBV_SEND_SIGNALED | IBV_SEND_FENCE | IBV_SEND_SOLICITED));
  EXPECT_EQ(c.wr.next, nullptr);
  ASSERT_EQ(c.wr.num_sge, 2);
  EXPECT_EQ(c.wr.sg_list, c.sges);  // the slot's own storage, not the caller's array
  EXPECT_EQ(c.sges[1].addr, 0x2000u);
  EXPECT_EQ(c.sges[1].length, 128u);
  EXPECT_EQ(c.sges[1].lkey, 0x22u);
}

TEST(SendWrConversion, RdmaWriteAndReadCarryRemoteAddressAndKey) {
  const Sge sge{0x3000, 4096, 0x33};
  for (WrOpcode opcode : {WrOpcode::rdma_write, WrOpcode::rdma_read}) {
    SendWr wr;
    wr.opcode = opcode;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.remote_addr = 0xFEED0000;
    wr.rkey = 0xAB12;
    Converted c;
    ASSERT_TRUE(to_ibv_send_wr(wr, SendLimits{1, 0}, BindTarget{}, &c.wr, c.sges, &c.shadow));
    EXPECT_EQ(c.wr.opcode, opcode == WrOpcode::rdma_write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ);
    EXPECT_EQ(c.wr.wr.rdma.remote_addr, 0xFEED0000u);
    EXPECT_EQ(c.wr.wr.rdma.rkey, 0xAB12u);
    EXPECT_EQ(c.wr.send_flags, 0u);  // unsignaled unless asked
  }
}

TEST(SendWrConversion, SendWithInvalidateAndLocalInvalidateCarryTheKey) {
  const Sge sge{0x1000, 16, 1};
  SendWr send_inv;
  send_inv.opcode = WrOpcode::send_with_inv;
  send_inv.sg_list = &sge;
  send_inv.num_sge = 1;
  send_inv.invalidate_rkey = 0x5503;
  Converted a;
  ASSERT_TRUE(to_ibv_send_wr(send_inv, SendLimits{1, 0}, BindTarget{}, &a.wr, a.sges, &a.shadow));
  EXPECT_EQ(a.wr.opcode, IBV_WR_SEND_WITH_INV);
  EXPECT_EQ(a.wr.invalidate_rkey, 0x5503u);
  EXPECT_EQ(a.wr.num_sge, 1);

  SendWr local_inv;
  local_inv.opcode = WrOpcode::local_inv;
  local_inv.invalidate_rkey = 0x6604;
  local_inv.flags = kWrFenced;
  Converted b;
  ASSERT_TRUE(to_ibv_send_wr(local_inv, SendLimits{1, 0}, BindTarget{}, &b.wr, b.sges, &b.shadow));
  EXPECT_EQ(b.wr.opcode, IBV_WR_LOCAL_INV);
  EXPECT_EQ(b.wr.invalidate_rkey, 0x6604u);
  EXPECT_EQ(b.wr.num_sge, 0);
  EXPECT_EQ(b.wr.send_flags, static_cast<unsigned>(IBV_SEND_FENCE));
}

TEST(SendWrConversion, BindUsesAShadowWindowHoldingTheCurrentKeyAndNoSge) {
  ibv_pd pd{};
  ibv_mw mw{};
  mw.pd = &pd;
  mw.rkey = 0xAAAA1205;  // what the real ibv_mw holds now: irrelevant to this WR
  mw.handle = 9;
  mw.type = IBV_MW_TYPE_2;
  ibv_mr mr{};
  mr.pd = &pd;
  SendWr wr;
  wr.wr_id = 5;
  wr.opcode = WrOpcode::bind_mw;
  wr.flags = kWrSignaled;
  wr.bind.addr = 0x10000;
  wr.bind.length = 8192;
  wr.bind.access = kAccessRemoteRead | kAccessRemoteWrite;
  wr.bind.rkey = 0xAAAA1204;
  Converted c;
  ASSERT_TRUE(to_ibv_send_wr(wr, SendLimits{1, 0}, BindTarget{&mw, 0xAAAA1203, &mr}, &c.wr, c.sges,
                             &c.shadow));
  EXPECT_EQ(c.wr.opcode, IBV_WR_BIND_MW);
  EXPECT_EQ(c.wr.num_sge, 0);
  EXPECT_EQ(c.wr.sg_list, nullptr);
  EXPECT_EQ(c.wr.bind_mw.mw, &c.shadow);
  EXPECT_EQ(c.shadow.rkey, 0xAAAA1203u);  // the key before this bind
  EXPECT_EQ(c.shadow.handle, 9u);
  EXPECT_EQ(c.shadow.type, IBV_MW_TYPE_2);
  EXPECT_EQ(c.shadow.pd, &pd);
  EXPECT_EQ(c.wr.bind_mw.rkey, 0xAAAA1204u);  // the key after it
  EXPECT_EQ(c.wr.bind_mw.bind_info.mr, &mr);
  EXPECT_EQ(c.wr.bind_mw.bind_info.addr, 0x10000u);
  EXPECT_EQ(c.wr.bind_mw.bind_info.length, 8192u);
  EXPECT_EQ(c.wr.bind_mw.bind_info.mw_access_flags,
            static_cast<unsigned>(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE));
}

TEST(SendWrConversion, RejectsMalformedWorkRequests) {
  const Sge sges[3] = {{1, 1, 1}, {2, 2, 2}, {3, 300, 3}};
  Converted c;
  SendWr too_many;
  too_many.sg_list = sges;
  too_many.num_sge = 3;
  auto result = to_ibv_send_wr(too_many, SendLimits{2, 0}, BindTarget{}, &c.wr, c.sges, &c.shadow);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::invalid_argument);

  SendWr inline_too_big;
  inline_too_big.flags = kWrInline;
  inline_too_big.sg_list = sges;
  inline_too_big.num_sge = 3;  // 303 bytes
  EXPECT_FALSE(
      to_ibv_send_wr(inline_too_big, SendLimits{4, 256}, BindTarget{}, &c.wr, c.sges, &c.shadow));
  EXPECT_TRUE(
      to_ibv_send_wr(inline_too_big, SendLimits{4, 512}, BindTarget{}, &c.wr, c.sges, &c.shadow));

  SendWr bind_without_window;
  bind_without_window.opcode = WrOpcode::bind_mw;
  EXPECT_FALSE(to_ibv_send_wr(bind_without_window, SendLimits{1, 0}, BindTarget{}, &c.wr, c.sges,
                              &c.shadow));

  ibv_mw mw{};
  ibv_mr mr{};
  SendWr bind_foreign_key;
  bind_foreign_key.opcode = WrOpcode::bind_mw;
  bind_foreign_key.bind.rkey = 0x00BB0001;  // index 0x00BB00, the window's is 0x001200
  auto foreign = to_ibv_send_wr(bind_foreign_key, SendLimits{1, 0}, BindTarget{&mw, 0x120001, &mr},
                                &c.wr, c.sges, &c.shadow);
  ASSERT_FALSE(foreign);
  EXPECT_EQ(foreign.error().code, Errc::invalid_argument);
}

TEST(RecvWrConversion, CopiesSgesAndChecksTheLimit) {
  const Sge sges[2] = {{0x1000, 512, 7}, {0x2000, 512, 7}};
  RecvWr wr;
  wr.wr_id = 42;
  wr.sg_list = sges;
  wr.num_sge = 2;
  ibv_recv_wr out{};
  ibv_sge storage[2] = {};
  ASSERT_TRUE(to_ibv_recv_wr(wr, 2, &out, storage));
  EXPECT_EQ(out.wr_id, 42u);
  EXPECT_EQ(out.num_sge, 2);
  EXPECT_EQ(out.sg_list, storage);
  EXPECT_EQ(storage[1].addr, 0x2000u);
  EXPECT_EQ(out.next, nullptr);
  EXPECT_FALSE(to_ibv_recv_wr(wr, 1, &out, storage));
}

// --- device attributes, QP states, CM

TEST(DeviceCapsMapping, ReadsLimitsAndCapabilityFlags) {
  ibv_device_attr attr{};
  attr.max_qp_wr = 16384;
  attr.max_sge = 30;
  attr.max_cqe = 4194303;
  attr.max_srq = 1024;
  attr.max_srq_wr = 32767;
  attr.max_qp_rd_atom = 16;
  attr.max_qp_init_rd_atom = 16;
  attr.max_mr_size = 1ull << 40;
  attr.max_mw = 4096;
  attr.device_cap_flags = IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_MEM_MGT_EXTENSIONS;
  DeviceCaps caps = caps_from_attr("rxe0", attr);
  EXPECT_EQ(caps.name, "rxe0");
  EXPECT_EQ(caps.max_qp_wr, 16384u);
  EXPECT_EQ(caps.max_sge, 30u);
  EXPECT_EQ(caps.max_srq_wr, 32767u);
  EXPECT_EQ(caps.max_qp_rd_atom, 16u);
  EXPECT_EQ(caps.max_mw, 4096u);
  EXPECT_TRUE(caps.memory_window_type2);
  EXPECT_TRUE(caps.memory_management_extensions);

  attr.device_cap_flags = IBV_DEVICE_MEM_WINDOW_TYPE_2A;  // 2A is not what the stack binds
  attr.max_srq = 0;                                       // no SRQ at all
  caps = caps_from_attr("other", attr);
  EXPECT_FALSE(caps.memory_window_type2);
  EXPECT_FALSE(caps.memory_management_extensions);
  EXPECT_EQ(caps.max_srq_wr, 0u);
}

TEST(QpStateMapping, FollowsRdmaCoreStates) {
  EXPECT_EQ(qp_state_from_ibv(IBV_QPS_RESET), QpState::reset);
  EXPECT_EQ(qp_state_from_ibv(IBV_QPS_INIT), QpState::init);
  EXPECT_EQ(qp_state_from_ibv(IBV_QPS_RTR), QpState::ready_to_receive);
  EXPECT_EQ(qp_state_from_ibv(IBV_QPS_RTS), QpState::ready_to_send);
  EXPECT_EQ(qp_state_from_ibv(IBV_QPS_SQE), QpState::error);
  EXPECT_EQ(qp_state_from_ibv(IBV_QPS_ERR), QpState::error);
}

TEST(CmEventMapping, SurfacesWhatTheStackNeedsAndHandlesTheRest) {
  EXPECT_EQ(cm_event_type_from(RDMA_CM_EVENT_ADDR_RESOLVED, 0), std::nullopt);
  EXPECT_EQ(cm_event_type_from(RDMA_CM_EVENT_ROUTE_RESOLVED, 0), CmEventType::route_resolved);
  EXPECT_EQ(cm_event_type_from(RDMA_CM_EVENT_ADDR_ERROR, -ENODEV), CmEventType::unreachable);
  EXPECT_EQ(cm_event_type_from(RDMA_CM_EVENT_ROUTE_ERROR, -ETIMEDOUT), CmEventType::unreachable);
  EXPECT_EQ(cm_event_type_from(RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT), CmEventType::unreachable);
  EXPECT_EQ(cm_event_type_from(RDMA_CM_EVENT_CONNECT_REQUEST, 0), CmEventType::connect_request);
  EXPECT_EQ(cm_event_type_from(RDMA_CM_EVENT_ESTABLISHED, 0), CmEventType::established);
  EXPECT_EQ(cm_event_type_from(RDMA_CM_EVENT_CONNECT_RESPONSE, 0), CmEventType::established);
  EXPECT_EQ(cm_event_type_from(RDMA_CM_EVENT_CONNECT_ERROR, -EIO), CmEventType::connect_error);
  EXPECT_EQ(cm_event_type_from(RDMA_CM_EVENT_REJECTED, 28), CmEventType::rejected);  // consumer
  EXPECT_EQ(cm_event_type_from(RDMA_CM_EVENT_REJECTED, kCmRejectInvalidServiceId),
            CmEventType::unreachable);  // nobody listens there
  EXPECT_EQ(cm_event_type_from(RDMA_CM_EVENT_DISCONNECTED, 0), CmEventType::disconnected);
  EXPECT_EQ(cm_event_type_from(RDMA_CM_EVENT_DEVICE_REMOVAL, 0), CmEventType::device_removal);
  EXPECT_EQ(cm_event_type_from(RDMA_CM_EVENT_TIMEWAIT_EXIT, 0), std::nullopt);
  EXPECT_EQ(cm_event_type_from(RDMA_CM_EVENT_ADDR_CHANGE, 0), std::nullopt);
}

TEST(SocketAddress, ParsesNumericIpv4AndIpv6AndRejectsNames) {
  sockaddr_storage storage;
  ASSERT_TRUE(parse_socket_address("192.168.10.2", 4420, &storage));
  const auto* in4 = reinterpret_cast<const sockaddr_in*>(&storage);
  EXPECT_EQ(in4->sin_family, AF_INET);
  EXPECT_EQ(ntohs(in4->sin_port), 4420);
  EXPECT_EQ(format_socket_address(reinterpret_cast<sockaddr*>(&storage)), "192.168.10.2:4420");

  ASSERT_TRUE(parse_socket_address("0.0.0.0", 4421, &storage));
  EXPECT_EQ(format_socket_address(reinterpret_cast<sockaddr*>(&storage)), "0.0.0.0:4421");

  ASSERT_TRUE(parse_socket_address("fe80::1", 4420, &storage));
  EXPECT_EQ(storage.ss_family, AF_INET6);
  EXPECT_EQ(format_socket_address(reinterpret_cast<sockaddr*>(&storage)), "[fe80::1]:4420");

  for (const char* bad : {"", "localhost", "192.168.1", "1.2.3.4:80", "300.1.1.1"}) {
    auto result = parse_socket_address(bad, 1, &storage);
    ASSERT_FALSE(result) << bad;
    EXPECT_EQ(result.error().code, Errc::invalid_argument);
  }
  EXPECT_EQ(format_socket_address(nullptr), "unknown");
}

TEST(ConnectParamMapping, CopiesParametersAndClampsReadDepthsToTheDevice) {
  const uint8_t data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ConnectParams params;
  params.private_data = data;
  params.private_data_length = sizeof(data);
  params.responder_resources = 32;
  params.initiator_depth = 4;
  params.retry_count = 7;
  params.rnr_retry_count = 9;  // out of the 3-bit range
  bool clamped = false;
  rdma_conn_param out = to_conn_param(params, 16, 16, &clamped);
  EXPECT_TRUE(clamped);
  EXPECT_EQ(out.private_data, data);
  EXPECT_EQ(out.private_data_len, sizeof(data));
  EXPECT_EQ(out.responder_resources, 16);  // device max_qp_rd_atom
  EXPECT_EQ(out.initiator_depth, 4);
  EXPECT_EQ(out.retry_count, 7);
  EXPECT_EQ(out.rnr_retry_count, 7);
  EXPECT_EQ(out.flow_control, 1);

  params.responder_resources = 8;
  out = to_conn_param(params, 16, 16, &clamped);
  EXPECT_FALSE(clamped);
  EXPECT_EQ(out.responder_resources, 8);

  params.private_data_length = 0;
  out = to_conn_param(params, 0, 0, &clamped);  // limits unknown: passed through
  EXPECT_EQ(out.private_data, nullptr);
  EXPECT_FALSE(clamped);
}

TEST(AsyncEventMapping, TakesWhatEachSubjectNamesBeforeTheAck) {
  // Hand-made rdma-core objects: a QP event names the QP by number, CQ and SRQ events by the
  // context the provider stored at creation (the interface's object), port events by port.
  ibv_qp qp{};
  qp.qp_num = 0x2A;
  ibv_async_event raw{};
  raw.event_type = IBV_EVENT_QP_FATAL;
  raw.element.qp = &qp;
  AsyncEvent out;
  ASSERT_TRUE(to_async_event(raw, &out));
  EXPECT_EQ(out.type, AsyncEventType::qp_fatal);
  EXPECT_EQ(out.qp_num, 0x2Au);
  EXPECT_EQ(out.cq, nullptr);

  int cq_wrapper = 0;  // stands for the CompletionQueue in cq_context
  ibv_cq cq{};
  cq.cq_context = &cq_wrapper;
  raw = ibv_async_event{};
  raw.event_type = IBV_EVENT_CQ_ERR;
  raw.element.cq = &cq;
  ASSERT_TRUE(to_async_event(raw, &out));
  EXPECT_EQ(out.type, AsyncEventType::cq_error);
  EXPECT_EQ(static_cast<const void*>(out.cq), &cq_wrapper);
  EXPECT_EQ(out.qp_num, 0u);

  int srq_wrapper = 0;
  ibv_srq srq{};
  srq.srq_context = &srq_wrapper;
  raw = ibv_async_event{};
  raw.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
  raw.element.srq = &srq;
  ASSERT_TRUE(to_async_event(raw, &out));
  EXPECT_EQ(out.type, AsyncEventType::srq_limit_reached);
  EXPECT_EQ(static_cast<const void*>(out.srq), &srq_wrapper);

  raw = ibv_async_event{};
  raw.event_type = IBV_EVENT_PORT_ERR;
  raw.element.port_num = 2;
  ASSERT_TRUE(to_async_event(raw, &out));
  EXPECT_EQ(out.type, AsyncEventType::port_error);
  EXPECT_EQ(out.port_num, 2u);

  raw = ibv_async_event{};
  raw.event_type = IBV_EVENT_DEVICE_FATAL;
  ASSERT_TRUE(to_async_event(raw, &out));
  EXPECT_EQ(out.type, AsyncEventType::device_fatal);
  EXPECT_STREQ(async_event_type_name(out.type), "DEVICE_FATAL");

  raw.event_type = static_cast<ibv_event_type>(IBV_EVENT_WQ_FATAL + 1);  // newer rdma-core
  EXPECT_FALSE(to_async_event(raw, &out));
}

}  // namespace
}  // namespace nvmf::verbs::ibverbs
