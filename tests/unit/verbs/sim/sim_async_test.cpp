// Device async events on the sim provider: the event queue and its fd, what the sim raises by
// itself (responder NAKs under the mlx5-like profiles, CQ overruns) and what a test injects.
#include <gtest/gtest.h>
#include <poll.h>

#include "sim_test_util.h"

namespace nvmf::verbs::sim::test {
namespace {

bool readable(int fd) {
  pollfd entry{fd, POLLIN, 0};
  return ::poll(&entry, 1, 0) == 1 && (entry.revents & POLLIN) != 0;
}

PairOpts two_devices(SimProfile profile = SimProfile::rxe) {
  PairOpts opts;
  opts.two_devices = true;
  opts.sim.profile = profile;
  return opts;
}

AsyncEvent qp_event(AsyncEventType type, uint32_t qp_num) {
  AsyncEvent event;
  event.type = type;
  event.qp_num = qp_num;
  return event;
}

TEST(SimAsync, NamesFollowRdmaCoreAndSubjectsAreRight) {
  EXPECT_STREQ(async_event_type_name(AsyncEventType::qp_fatal), "QP_FATAL");
  EXPECT_STREQ(async_event_type_name(AsyncEventType::cq_error), "CQ_ERR");
  EXPECT_STREQ(async_event_type_name(AsyncEventType::device_fatal), "DEVICE_FATAL");
  EXPECT_STREQ(async_event_type_name(AsyncEventType::wq_fatal), "WQ_FATAL");
  for (size_t i = 0; i < kAsyncEventTypeCount; ++i) {
    EXPECT_STRNE(async_event_type_name(static_cast<AsyncEventType>(i)), "unknown async event") << i;
  }
  EXPECT_EQ(async_event_subject(AsyncEventType::qp_access_error), AsyncEventSubject::qp);
  EXPECT_EQ(async_event_subject(AsyncEventType::cq_error), AsyncEventSubject::cq);
  EXPECT_EQ(async_event_subject(AsyncEventType::srq_error), AsyncEventSubject::srq);
  EXPECT_EQ(async_event_subject(AsyncEventType::port_error), AsyncEventSubject::port);
  EXPECT_EQ(async_event_subject(AsyncEventType::device_fatal), AsyncEventSubject::device);
}

TEST(SimAsync, InjectedQpFatalFailsThatQpAndIsReadOnceThroughItsFd) {
  SimPair pair(two_devices());
  ASSERT_NE(pair.host.qp, nullptr);
  Device& device = pair.host_provider().device();
  ASSERT_GE(device.async_event_fd(), 0);
  AsyncEvent event;
  EXPECT_FALSE(device.poll_async_event(&event));
  EXPECT_FALSE(readable(device.async_event_fd()));

  const std::vector<uint32_t> host_qps = pair.host_provider().qp_nums();
  ASSERT_EQ(host_qps, std::vector<uint32_t>{pair.host.qp->qp_num()});
  pair.post_recvs(pair.host, 2);
  ASSERT_TRUE(pair.host_provider().inject_async_event(
      qp_event(AsyncEventType::qp_fatal, pair.host.qp->qp_num())));
  EXPECT_TRUE(readable(device.async_event_fd()));
  ASSERT_TRUE(device.poll_async_event(&event));
  EXPECT_EQ(event.type, AsyncEventType::qp_fatal);
  EXPECT_EQ(event.qp_num, pair.host.qp->qp_num());
  EXPECT_FALSE(device.poll_async_event(&event));  // each event once
  EXPECT_FALSE(readable(device.async_event_fd()));

  EXPECT_EQ(pair.host.qp->state(), QpState::error);
  EXPECT_EQ(pair.target.qp->state(), QpState::ready_to_send);  // only that QP
  auto drained = pair.drain(3);
  EXPECT_EQ(count_status(drained.host_recv, WcStatus::wr_flush_error), 2u);
  // The target's device heard nothing.
  EXPECT_FALSE(pair.target_provider().device().poll_async_event(&event));
  EXPECT_EQ(pair.host_provider().counters().async_events, 1u);
}

TEST(SimAsync, InjectionRefusesObjectsOfAnotherDevice) {
  SimPair pair(two_devices());
  ASSERT_NE(pair.target.qp, nullptr);
  auto refused = pair.host_provider().inject_async_event(
      qp_event(AsyncEventType::qp_fatal, pair.target.qp->qp_num()));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::invalid_argument);
  AsyncEvent cq_error;
  cq_error.type = AsyncEventType::cq_error;
  cq_error.cq = pair.target.send_cq.get();
  EXPECT_FALSE(pair.host_provider().inject_async_event(cq_error));
  AsyncEvent unknown;
  unknown.type = static_cast<AsyncEventType>(kAsyncEventTypeCount);
  EXPECT_FALSE(pair.host_provider().inject_async_event(unknown));
  EXPECT_EQ(pair.target.qp->state(), QpState::ready_to_send);
  AsyncEvent event;
  EXPECT_FALSE(pair.host_provider().device().poll_async_event(&event));
}

TEST(SimAsync, InjectedCqErrorLosesEveryLaterCompletionOfThatCq) {
  SimPair pair(two_devices());
  ASSERT_NE(pair.host.qp, nullptr);
  EXPECT_EQ(pair.host_provider().send_cq_of(pair.host.qp->qp_num()), pair.host.send_cq.get());
  EXPECT_EQ(pair.host_provider().send_cq_of(pair.target.qp->qp_num()), nullptr);
  AsyncEvent cq_error;
  cq_error.type = AsyncEventType::cq_error;
  cq_error.cq = pair.host.send_cq.get();
  ASSERT_TRUE(pair.host_provider().inject_async_event(cq_error));
  AsyncEvent event;
  ASSERT_TRUE(pair.host_provider().device().poll_async_event(&event));
  EXPECT_EQ(event.type, AsyncEventType::cq_error);
  EXPECT_EQ(event.cq, pair.host.send_cq.get());
  EXPECT_FALSE(pair.host_provider().device().poll_async_event(&event));

  pair.post_recvs(pair.target, 1);
  Sge sge = pair.host.sge(0, 64);
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(1, &sge)));
  ASSERT_TRUE(pair.host.qp->flush());
  auto drained = pair.drain(3);
  EXPECT_TRUE(drained.host_send.empty());     // the SEND executed; its CQE is lost
  EXPECT_EQ(drained.target_recv.size(), 1u);  // the other CQs work
  EXPECT_EQ(pair.host_provider().counters().cq_overruns, 1u);
}

TEST(SimAsync, CqOverrunRaisesCqErrorOnceOnEachOverrunCq) {
  // Queues of 2048 over the pair's CQs of 1024: 1100 signaled SENDs overrun the host's send
  // CQ and the target's receive CQ.
  PairOpts opts = two_devices();
  opts.queue_depth = 2048;
  SimPair pair(opts);
  ASSERT_NE(pair.host.qp, nullptr);
  constexpr uint32_t kSends = 1100;
  pair.post_recvs(pair.target, kSends, 0, 8);
  Sge sge = pair.host.sge(0, 8);
  for (uint64_t i = 0; i < kSends; ++i) ASSERT_TRUE(pair.host.qp->post_send(send_wr(i + 1, &sge)));
  ASSERT_TRUE(pair.host.qp->flush());
  pair.target_provider().progress();

  AsyncEvent event;
  ASSERT_TRUE(pair.host_provider().device().poll_async_event(&event));
  EXPECT_EQ(event.type, AsyncEventType::cq_error);
  EXPECT_EQ(event.cq, pair.host.send_cq.get());
  EXPECT_FALSE(pair.host_provider().device().poll_async_event(&event));  // once per CQ
  ASSERT_TRUE(pair.target_provider().device().poll_async_event(&event));
  EXPECT_EQ(event.type, AsyncEventType::cq_error);
  EXPECT_EQ(event.cq, pair.target.recv_cq.get());
  EXPECT_FALSE(pair.target_provider().device().poll_async_event(&event));
  EXPECT_EQ(pair.host_provider().counters().cq_overruns, kSends - 1024);
  // What the CQ held before it failed can still be reaped; nothing after.
  auto reaped = pair.collect(*pair.host.send_cq, kSends, 40);
  EXPECT_EQ(reaped.size(), 1024u);
}

TEST(SimAsync, ResponderOfARefusedRkeyRaisesQpAccessErrorUnderMlx5Only) {
  for (SimProfile profile : {SimProfile::mlx5_2017, SimProfile::rxe}) {
    SCOPED_TRACE(sim_profile_name(profile));
    SimPair pair(two_devices(profile));
    ASSERT_NE(pair.host.qp, nullptr);
    Sge sge = pair.host.sge(0, 8);
    // A WRITE with a key the target never gave: the target (responder) refuses it.
    ASSERT_TRUE(pair.host.qp->post_send(
        rdma_wr(WrOpcode::rdma_write, 1, &sge, pair.target.addr(0), pair.target.mr->rkey() + 1)));
    ASSERT_TRUE(pair.host.qp->flush());
    auto drained = pair.drain(3);
    ASSERT_EQ(drained.host_send.size(), 1u);
    EXPECT_EQ(drained.host_send[0].status, WcStatus::remote_access_error);
    EXPECT_EQ(pair.target.qp->state(), QpState::error);
    AsyncEvent event;
    const bool raised = pair.target_provider().device().poll_async_event(&event);
    if (profile == SimProfile::rxe) {
      EXPECT_FALSE(raised);
    } else {
      ASSERT_TRUE(raised);
      EXPECT_EQ(event.type, AsyncEventType::qp_access_error);
      EXPECT_EQ(event.qp_num, pair.target.qp->qp_num());
    }
    // The requester reported its error by CQE: no event for it.
    EXPECT_FALSE(pair.host_provider().device().poll_async_event(&event));
  }
}

TEST(SimAsync, DeviceFatalFailsEveryQpOfTheDeviceAndOnlyThose) {
  SimPair pair(two_devices());
  ASSERT_NE(pair.target.qp, nullptr);
  AsyncEvent fatal;
  fatal.type = AsyncEventType::device_fatal;
  ASSERT_TRUE(pair.target_provider().inject_async_event(fatal));
  EXPECT_EQ(pair.target.qp->state(), QpState::error);
  EXPECT_EQ(pair.host.qp->state(), QpState::ready_to_send);  // another device
  AsyncEvent event;
  ASSERT_TRUE(pair.target_provider().device().poll_async_event(&event));
  EXPECT_EQ(event.type, AsyncEventType::device_fatal);

  // A port event changes nothing but is delivered with its port.
  AsyncEvent port;
  port.type = AsyncEventType::port_error;
  port.port_num = 1;
  ASSERT_TRUE(pair.host_provider().inject_async_event(port));
  ASSERT_TRUE(pair.host_provider().device().poll_async_event(&event));
  EXPECT_EQ(event.type, AsyncEventType::port_error);
  EXPECT_EQ(event.port_num, 1u);
  EXPECT_EQ(pair.host.qp->state(), QpState::ready_to_send);
}

}  // namespace
}  // namespace nvmf::verbs::sim::test
