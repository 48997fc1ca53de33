// The sim's rdma_cm: private data, every reject path, timeouts, disconnect, event fds.
#include <gtest/gtest.h>
#include <poll.h>

#include <cerrno>

#include "sim_test_util.h"

namespace nvmf::verbs::sim::test {
namespace {

bool fd_readable(int fd) {
  pollfd pfd{fd, POLLIN, 0};
  return ::poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN) != 0;
}

// A provider, a listener on 10.0.0.1:4420 and an active id with a route and a QP.
struct CmRig {
  explicit CmRig(const SimOpts& opts = {}, bool listen = true) {
    provider = std::move(*SimProvider::create(opts));
    passive = std::move(*provider->create_cm_channel());
    active = std::move(*provider->create_cm_channel());
    if (listen) {
      listener = std::move(*passive->create_id());
      EXPECT_TRUE(listener->listen("0.0.0.0", kTargetPort, 8));
    }
    pd = std::move(*provider->device().allocate_pd());
    cq = std::move(*pd->create_cq({.depth = 256}));
    id = std::move(*active->create_id());
  }
  bool resolve_and_create_qp(const std::string& address = kTargetAddress) {
    if (!id->resolve(address, kTargetPort, 500)) return false;
    CmEvent event;
    if (!SimPair::wait_event(*active, &event) || event.type != CmEventType::route_resolved) {
      return false;
    }
    return make_qp(*id);
  }
  bool make_qp(CmId& cm_id) {
    QpOpts opts;
    opts.send_cq = cq.get();
    opts.recv_cq = cq.get();
    return static_cast<bool>(cm_id.create_qp(*pd, opts));
  }

  std::unique_ptr<SimProvider> provider;
  std::unique_ptr<CmChannel> passive;
  std::unique_ptr<CmChannel> active;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<CmId> listener;
  std::unique_ptr<CmId> accepted;
  std::unique_ptr<CmId> id;
};

TEST(SimCm, PrivateDataRoundTripsWithCmMaximumLengths) {
  CmRig rig;
  ASSERT_TRUE(rig.resolve_and_create_qp());
  uint8_t request[32];
  for (int i = 0; i < 32; ++i) request[i] = static_cast<uint8_t>(i + 1);
  ConnectParams params;
  params.private_data = request;
  params.private_data_length = sizeof(request);
  params.responder_resources = 4;
  params.initiator_depth = 2;
  ASSERT_TRUE(rig.id->connect(params));
  CmEvent event;
  ASSERT_TRUE(SimPair::wait_event(*rig.passive, &event));
  ASSERT_EQ(event.type, CmEventType::connect_request);
  EXPECT_EQ(event.listen_id, rig.listener.get());
  EXPECT_EQ(event.private_data_length, 56);  // the REQ maximum, as rdma_cm reports it
  EXPECT_EQ(std::memcmp(event.private_data, request, sizeof(request)), 0);
  EXPECT_EQ(event.private_data[32], 0);
  EXPECT_EQ(event.responder_resources, 2);  // seen from the passive side
  EXPECT_EQ(event.initiator_depth, 4);
  rig.accepted = rig.passive->adopt(event.id);
  ASSERT_NE(rig.accepted, nullptr);
  EXPECT_EQ(rig.passive->adopt(event.id), nullptr);  // only once
  ASSERT_NE(rig.accepted->device(), nullptr);
  ASSERT_TRUE(rig.make_qp(*rig.accepted));

  uint8_t reply[32];
  for (int i = 0; i < 32; ++i) reply[i] = static_cast<uint8_t>(0xA0 + i);
  ConnectParams accept;
  accept.private_data = reply;
  accept.private_data_length = sizeof(reply);
  accept.responder_resources = 8;
  accept.initiator_depth = 1;
  ASSERT_TRUE(rig.accepted->accept(accept));
  ASSERT_TRUE(SimPair::wait_event(*rig.active, &event));
  ASSERT_EQ(event.type, CmEventType::established);
  EXPECT_EQ(event.id, rig.id.get());
  EXPECT_EQ(event.private_data_length, 196);  // the REP maximum
  EXPECT_EQ(std::memcmp(event.private_data, reply, sizeof(reply)), 0);
  EXPECT_EQ(event.responder_resources, 1);
  EXPECT_EQ(event.initiator_depth, 8);
  ASSERT_TRUE(SimPair::wait_event(*rig.passive, &event));
  EXPECT_EQ(event.type, CmEventType::established);
  EXPECT_EQ(event.id, rig.accepted.get());
  EXPECT_EQ(event.private_data_length, 0);
  EXPECT_EQ(rig.id->qp()->state(), QpState::ready_to_send);
  EXPECT_EQ(rig.accepted->qp()->state(), QpState::ready_to_send);
  EXPECT_EQ(rig.id->peer_address(), "10.0.0.1:4420");
  EXPECT_EQ(rig.accepted->peer_address().rfind("sim0:", 0), 0u);
  EXPECT_EQ(rig.provider->counters().established, 2u);
}

TEST(SimCm, PrivateDataAboveTheMessageLimitIsRefused) {
  CmRig rig;
  ASSERT_TRUE(rig.resolve_and_create_qp());
  uint8_t big[200] = {};
  ConnectParams params;
  params.private_data = big;
  params.private_data_length = 57;
  EXPECT_EQ(rig.id->connect(params).error().code, Errc::invalid_argument);
  params.private_data_length = 56;
  ASSERT_TRUE(rig.id->connect(params));
  CmEvent event;
  ASSERT_TRUE(SimPair::wait_event(*rig.passive, &event));
  rig.accepted = rig.passive->adopt(event.id);
  EXPECT_EQ(rig.accepted->reject(big, 149).error().code, Errc::invalid_argument);
  ASSERT_TRUE(rig.make_qp(*rig.accepted));
  ConnectParams accept;
  accept.private_data = big;
  accept.private_data_length = 197;
  EXPECT_EQ(rig.accepted->accept(accept).error().code, Errc::invalid_argument);
}

TEST(SimCm, ExplicitRejectCarriesPrivateData) {
  CmRig rig;
  ASSERT_TRUE(rig.resolve_and_create_qp());
  ASSERT_TRUE(rig.id->connect({}));
  CmEvent event;
  ASSERT_TRUE(SimPair::wait_event(*rig.passive, &event));
  rig.accepted = rig.passive->adopt(event.id);
  const uint8_t reason[4] = {0x01, 0x82, 0x00, 0x07};  // e.g. NVMe-oF RDMA_CM_REJECT
  ASSERT_TRUE(rig.accepted->reject(reason, sizeof(reason)));
  ASSERT_TRUE(SimPair::wait_event(*rig.active, &event));
  EXPECT_EQ(event.type, CmEventType::rejected);
  EXPECT_EQ(event.id, rig.id.get());
  EXPECT_EQ(event.status, 28);  // IB_CM_REJ_CONSUMER_DEFINED, as rdma_cm reports it
  EXPECT_EQ(event.private_data_length, 148);
  EXPECT_EQ(std::memcmp(event.private_data, reason, sizeof(reason)), 0);
  EXPECT_EQ(rig.provider->counters().rejects, 1u);
  EXPECT_EQ(rig.accepted->accept({}).error().code, Errc::bad_state);
}

TEST(SimCm, NoListenerIsRejectedWithConnectionRefused) {
  CmRig rig({}, false);
  ASSERT_TRUE(rig.resolve_and_create_qp());
  ASSERT_TRUE(rig.id->connect({}));
  CmEvent event;
  ASSERT_TRUE(SimPair::wait_event(*rig.active, &event));
  EXPECT_EQ(event.type, CmEventType::rejected);
  EXPECT_EQ(event.status, ECONNREFUSED);
  EXPECT_EQ(event.private_data_length, 0);
  EXPECT_EQ(rig.id->qp()->state(), QpState::init);
}

TEST(SimCm, ListenerRefusingByFaultInjectionRejects) {
  CmRig rig;
  rig.provider->refuse_connections("0.0.0.0", kTargetPort, RefuseMode::reject);
  ASSERT_TRUE(rig.resolve_and_create_qp());
  ASSERT_TRUE(rig.id->connect({}));
  CmEvent event;
  ASSERT_TRUE(SimPair::wait_event(*rig.active, &event));
  EXPECT_EQ(event.type, CmEventType::rejected);
  EXPECT_EQ(event.status, ECONNREFUSED);
  EXPECT_FALSE(rig.passive->poll_event(&event));  // the listener never heard of it
  // Back to normal: a new id connects.
  rig.provider->refuse_connections("0.0.0.0", kTargetPort, RefuseMode::none);
  rig.id = std::move(*rig.active->create_id());
  ASSERT_TRUE(rig.resolve_and_create_qp());
  ASSERT_TRUE(rig.id->connect({}));
  ASSERT_TRUE(SimPair::wait_event(*rig.passive, &event));
  EXPECT_EQ(event.type, CmEventType::connect_request);
}

TEST(SimCm, UnansweredRequestTimesOutAsUnreachable) {
  FakeClock clock;
  SimOpts opts;
  opts.clock = &clock;
  opts.cm_connect_timeout_ms = 1000;
  CmRig rig(opts);
  rig.provider->refuse_connections(kTargetAddress, kTargetPort, RefuseMode::no_answer);
  ASSERT_TRUE(rig.resolve_and_create_qp());
  ASSERT_TRUE(rig.id->connect({}));
  CmEvent event;
  clock.advance_ms(999);
  EXPECT_FALSE(rig.active->poll_event(&event));
  EXPECT_FALSE(fd_readable(rig.active->event_fd()));
  clock.advance_ms(1);
  ASSERT_TRUE(rig.active->poll_event(&event));
  EXPECT_EQ(event.type, CmEventType::unreachable);
  EXPECT_EQ(event.status, ETIMEDOUT);
  EXPECT_FALSE(rig.passive->poll_event(&event));
  EXPECT_EQ(rig.provider->counters().cm_timeouts, 1u);
}

TEST(SimCm, ListenerThatNeverAnswersTimesOutAndLateAcceptFails) {
  FakeClock clock;
  SimOpts opts;
  opts.clock = &clock;
  CmRig rig(opts);
  ASSERT_TRUE(rig.resolve_and_create_qp());
  ASSERT_TRUE(rig.id->connect({}));
  CmEvent event;
  ASSERT_TRUE(SimPair::wait_event(*rig.passive, &event));
  rig.accepted = rig.passive->adopt(event.id);
  ASSERT_TRUE(rig.make_qp(*rig.accepted));
  clock.advance_ms(opts.cm_connect_timeout_ms);
  ASSERT_TRUE(rig.active->poll_event(&event));
  EXPECT_EQ(event.type, CmEventType::unreachable);
  auto late = rig.accepted->accept({});
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, Errc::disconnected);
}

TEST(SimCm, UnreachableAddressResolvesToUnreachableAfterTheTimeout) {
  FakeClock clock;
  SimOpts opts;
  opts.clock = &clock;
  CmRig rig(opts);
  rig.provider->set_unreachable("192.0.2.1", true);
  ASSERT_TRUE(rig.id->resolve("192.0.2.1", kTargetPort, 300));
  CmEvent event;
  EXPECT_FALSE(rig.active->poll_event(&event));
  EXPECT_EQ(rig.id->device(), nullptr);
  clock.advance_ms(300);
  ASSERT_TRUE(rig.active->poll_event(&event));
  EXPECT_EQ(event.type, CmEventType::unreachable);
  EXPECT_EQ(event.status, ETIMEDOUT);
  QpOpts qp_opts;
  qp_opts.send_cq = rig.cq.get();
  qp_opts.recv_cq = rig.cq.get();
  EXPECT_EQ(rig.id->create_qp(*rig.pd, qp_opts).error().code, Errc::bad_state);
}

TEST(SimCm, ListenRejectsConflictsAndWildcardOverlap) {
  CmRig rig;
  auto second = std::move(*rig.passive->create_id());
  auto clash = second->listen("10.0.0.1", kTargetPort, 8);
  ASSERT_FALSE(clash);
  EXPECT_EQ(clash.error().code, Errc::already_exists);
  EXPECT_TRUE(second->listen("10.0.0.1", kTargetPort + 1, 8));
  EXPECT_EQ(second->listen("10.0.0.1", kTargetPort + 2, 8).error().code, Errc::bad_state);
  EXPECT_EQ(rig.listener->device(), nullptr);  // a wildcard listener has no device yet
  EXPECT_NE(second->device(), nullptr);
  // Destroying the listener frees the port.
  rig.listener.reset();
  auto third = std::move(*rig.passive->create_id());
  EXPECT_TRUE(third->listen("10.0.0.2", kTargetPort, 8));
}

TEST(SimCm, EventFdIsReadableExactlyWhileEventsWait) {
  CmRig rig;
  EXPECT_GE(rig.active->event_fd(), 0);
  EXPECT_FALSE(fd_readable(rig.active->event_fd()));
  ASSERT_TRUE(rig.id->resolve(kTargetAddress, kTargetPort, 100));
  EXPECT_TRUE(fd_readable(rig.active->event_fd()));
  CmEvent event;
  ASSERT_TRUE(rig.active->poll_event(&event));
  EXPECT_FALSE(fd_readable(rig.active->event_fd()));
  EXPECT_FALSE(rig.active->poll_event(&event));
}

TEST(SimCm, DisconnectReachesBothSidesAndFlushesBothQps) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  pair.post_recvs(pair.host, 2);
  pair.post_recvs(pair.target, 3);
  ASSERT_TRUE(pair.host.id->disconnect());
  CmEvent event;
  ASSERT_TRUE(SimPair::wait_event(*pair.host.channel, &event));
  EXPECT_EQ(event.type, CmEventType::disconnected);
  EXPECT_EQ(event.id, pair.host.id.get());
  ASSERT_TRUE(SimPair::wait_event(*pair.target.channel, &event));
  EXPECT_EQ(event.type, CmEventType::disconnected);
  EXPECT_EQ(event.id, pair.target.id.get());
  EXPECT_EQ(pair.host.qp->state(), QpState::error);
  EXPECT_EQ(pair.target.qp->state(), QpState::error);
  auto drained = pair.drain(2);
  EXPECT_EQ(count_status(drained.host_recv, WcStatus::wr_flush_error), 2u);
  EXPECT_EQ(count_status(drained.target_recv, WcStatus::wr_flush_error), 3u);
  EXPECT_TRUE(pair.target.id->disconnect());                   // already down: nothing to do
  EXPECT_EQ(pair.host_provider().counters().disconnects, 2u);  // one per side
}

// rdma_notify(COMM_EST) as the sim has it: its RTU is never lost, so on an established
// connection the call only counts (no second established event); without one it is refused.
TEST(SimCm, NotifyEstablishedCountsOnAnEstablishedIdAndIsRefusedWithoutOne) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  ASSERT_TRUE(pair.target.id->notify_established());
  EXPECT_EQ(pair.target_provider().counters().established_notifications, 1u);
  CmEvent event;
  EXPECT_FALSE(pair.target.channel->poll_event(&event)) << "established twice";

  auto listener = pair.listener->notify_established();
  ASSERT_FALSE(listener);
  EXPECT_EQ(listener.error().code, Errc::bad_state);
  ASSERT_TRUE(pair.host.id->disconnect());
  ASSERT_TRUE(SimPair::wait_event(*pair.target.channel, &event));
  ASSERT_EQ(event.type, CmEventType::disconnected);
  auto gone = pair.target.id->notify_established();
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, Errc::bad_state);
  EXPECT_EQ(pair.target_provider().counters().established_notifications, 1u);
}

TEST(SimCm, DestroyingAConnectedIdDisconnectsThePeer) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  pair.post_recvs(pair.host, 1);
  pair.target.id.reset();
  pair.target.qp = nullptr;
  CmEvent event;
  ASSERT_TRUE(SimPair::wait_event(*pair.host.channel, &event));
  EXPECT_EQ(event.type, CmEventType::disconnected);
  EXPECT_EQ(pair.host.qp->state(), QpState::error);
  auto wcs = pair.collect(*pair.host.recv_cq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::wr_flush_error);
}

TEST(SimCm, DestroyingAPendingRequestOrItsListenerRefusesTheActiveSide) {
  {
    CmRig rig;
    ASSERT_TRUE(rig.resolve_and_create_qp());
    ASSERT_TRUE(rig.id->connect({}));
    CmEvent event;
    ASSERT_TRUE(SimPair::wait_event(*rig.passive, &event));
    rig.passive->adopt(event.id).reset();  // adopted, then destroyed without an answer
    ASSERT_TRUE(SimPair::wait_event(*rig.active, &event));
    EXPECT_EQ(event.type, CmEventType::rejected);
  }
  {
    CmRig rig;
    ASSERT_TRUE(rig.resolve_and_create_qp());
    ASSERT_TRUE(rig.id->connect({}));
    rig.provider->progress();
    rig.listener.reset();  // the request was never adopted
    CmEvent event;
    EXPECT_FALSE(rig.passive->poll_event(&event));  // its connect_request is gone
    ASSERT_TRUE(SimPair::wait_event(*rig.active, &event));
    EXPECT_EQ(event.type, CmEventType::rejected);
    EXPECT_EQ(event.status, ECONNREFUSED);
  }
}

TEST(SimCm, TwoDevicesOnOneFabricKeepSeparateKeysAndCounters) {
  PairOpts opts;
  opts.two_devices = true;
  SimPair pair(opts);
  ASSERT_NE(pair.target.qp, nullptr);
  EXPECT_EQ(pair.host.id->device()->caps().name, "sim1");
  EXPECT_EQ(pair.target.id->device()->caps().name, "sim0");
  EXPECT_EQ(pair.host_provider().device_names()[0], "sim1");
  EXPECT_FALSE(pair.target_provider().create_peer("sim1"));
  pair.post_recvs(pair.target, 1);
  Sge sge = pair.host.sge(0, 64);
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(1, &sge)));
  ASSERT_TRUE(pair.host.qp->flush());
  EXPECT_EQ(pair.collect(*pair.target.recv_cq, 1).size(), 1u);
  EXPECT_EQ(pair.host_provider().counters().send, 1u);
  EXPECT_EQ(pair.target_provider().counters().send, 0u);
  EXPECT_EQ(pair.target_provider().counters().recv, 1u);
  // The host's MR key means nothing on the target's device.
  EXPECT_EQ(pair.target_provider().key_state(pair.host.mr->rkey()), KeyState::unknown);
}

}  // namespace
}  // namespace nvmf::verbs::sim::test
