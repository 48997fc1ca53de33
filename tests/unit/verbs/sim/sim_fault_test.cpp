// Fault injection, counters and CQ interrupts on the sim provider.
#include <gtest/gtest.h>
#include <poll.h>

#include "sim_test_util.h"

namespace nvmf::verbs::sim::test {
namespace {

TEST(SimFault, FailNextWrOfAQpFailsItAndFlushesTheRest) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  pair.post_recvs(pair.target, 4);
  ASSERT_TRUE(pair.host_provider().fail_next_wrs(*pair.host.qp, 1, WcStatus::general_error));
  Sge sge = pair.host.sge(0, 64);
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(1, &sge, 0)));
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(2, &sge, 0)));
  ASSERT_TRUE(pair.host.qp->flush());
  auto drained = pair.drain(3);
  ASSERT_EQ(drained.host_send.size(), 2u);
  EXPECT_EQ(drained.host_send[0].status, WcStatus::general_error);
  EXPECT_EQ(drained.host_send[1].status, WcStatus::wr_flush_error);
  EXPECT_TRUE(drained.target_recv.empty());
  EXPECT_EQ(pair.target.qp->state(), QpState::ready_to_send);  // a local fault stays local
  EXPECT_EQ(pair.host_provider().counters().injected_faults, 1u);
}

TEST(SimFault, SimWideFaultsHitTheNextWrsAnywhereAndRemoteOnesTakeThePeerDown) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  pair.post_recvs(pair.host, 2);
  pair.target_provider().fail_next_wrs(1, WcStatus::remote_access_error);
  Sge sge = pair.target.sge(0, 64);
  ASSERT_TRUE(pair.target.qp->post_send(send_wr(1, &sge, 0)));
  ASSERT_TRUE(pair.target.qp->flush());
  auto drained = pair.drain(3);
  ASSERT_EQ(drained.target_send.size(), 1u);
  EXPECT_EQ(drained.target_send[0].status, WcStatus::remote_access_error);
  EXPECT_EQ(pair.host.qp->state(), QpState::error);
  EXPECT_EQ(count_status(drained.host_recv, WcStatus::wr_flush_error), 2u);

  // Count 2 across two connections of the same fabric.
  SimPair other;
  ASSERT_NE(other.target.qp, nullptr);
  other.target_provider().fail_next_wrs(2, WcStatus::local_access_error);
  Sge host_sge = other.host.sge(0, 8);
  Sge target_sge = other.target.sge(0, 8);
  ASSERT_TRUE(other.host.qp->post_send(
      rdma_wr(WrOpcode::rdma_write, 1, &host_sge, other.target.addr(0), other.target.mr->rkey())));
  ASSERT_TRUE(other.host.qp->flush());
  ASSERT_TRUE(other.target.qp->post_send(
      rdma_wr(WrOpcode::rdma_write, 2, &target_sge, other.host.addr(0), other.host.mr->rkey())));
  ASSERT_TRUE(other.target.qp->flush());
  auto both = other.drain(3);
  ASSERT_EQ(both.host_send.size(), 1u);
  EXPECT_EQ(both.host_send[0].status, WcStatus::local_access_error);
  ASSERT_EQ(both.target_send.size(), 1u);
  EXPECT_EQ(both.target_send[0].status, WcStatus::local_access_error);
}

TEST(SimFault, DropConnectionDisconnectsBothSides) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  pair.post_recvs(pair.host, 1);
  pair.post_recvs(pair.target, 1);
  EXPECT_FALSE(pair.host_provider().drop_connection(*pair.listener));  // not connected
  ASSERT_TRUE(pair.host_provider().drop_connection(*pair.host.id));
  CmEvent event;
  ASSERT_TRUE(SimPair::wait_event(*pair.host.channel, &event));
  EXPECT_EQ(event.type, CmEventType::disconnected);
  ASSERT_TRUE(SimPair::wait_event(*pair.target.channel, &event));
  EXPECT_EQ(event.type, CmEventType::disconnected);
  auto drained = pair.drain(2);
  EXPECT_EQ(count_status(drained.host_recv, WcStatus::wr_flush_error), 1u);
  EXPECT_EQ(count_status(drained.target_recv, WcStatus::wr_flush_error), 1u);
  Sge sge = pair.host.sge(0, 8);
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(5, &sge, 0)));
  ASSERT_TRUE(pair.host.qp->flush());
  auto late = pair.collect(*pair.host.send_cq, 1);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].status, WcStatus::wr_flush_error);
}

TEST(SimFault, CompletionsDelayedByPollsStayInOrder) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  ASSERT_TRUE(pair.host_provider().delay_completions(*pair.host.send_cq, {.polls = 3, .count = 1}));
  Sge sge = pair.host.sge(0, 8);
  for (uint64_t i = 1; i <= 2; ++i) {
    ASSERT_TRUE(pair.host.qp->post_send(
        rdma_wr(WrOpcode::rdma_write, i, &sge, pair.target.addr(0), pair.target.mr->rkey())));
  }
  ASSERT_TRUE(pair.host.qp->flush());
  WorkCompletion wcs[4];
  EXPECT_EQ(pair.host.send_cq->poll(wcs), 0);
  EXPECT_EQ(pair.host.send_cq->poll(wcs), 0);  // the second one waits behind the first
  ASSERT_EQ(pair.host.send_cq->poll(wcs), 2);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[1].wr_id, 2u);
}

TEST(SimFault, CompletionsDelayedByTime) {
  FakeClock clock;
  PairOpts opts;
  opts.sim.clock = &clock;
  SimPair pair(opts);
  ASSERT_NE(pair.target.qp, nullptr);
  ASSERT_TRUE(pair.target_provider().delay_completions(*pair.target.recv_cq,
                                                       {.delay_ns = 5000000, .count = UINT32_MAX}));
  pair.post_recvs(pair.target, 2);
  Sge sge = pair.host.sge(0, 8);
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(1, &sge)));
  ASSERT_TRUE(pair.host.qp->flush());
  EXPECT_EQ(pair.collect(*pair.host.send_cq, 1).size(), 1u);  // the sender is not delayed
  EXPECT_TRUE(pair.collect(*pair.target.recv_cq, 1, 20).empty());
  clock.advance_ms(5);
  EXPECT_EQ(pair.collect(*pair.target.recv_cq, 1).size(), 1u);
  ASSERT_TRUE(pair.target_provider().delay_completions(*pair.target.recv_cq, {.count = 0}));
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(2, &sge)));
  ASSERT_TRUE(pair.host.qp->flush());
  EXPECT_EQ(pair.collect(*pair.target.recv_cq, 1, 1).size(), 1u);
}

TEST(SimCounters, CountWrsDoorbellsCompletionsAndErrors) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  pair.target_provider().reset_counters();
  pair.post_recvs(pair.target, 3);  // one doorbell, 3 receives
  Sge sge = pair.host.sge(0, 100);
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(1, &sge)));
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(2, &sge, 0)));
  ASSERT_TRUE(pair.host.qp->post_send(
      rdma_wr(WrOpcode::rdma_write, 3, &sge, pair.target.addr(0), pair.target.mr->rkey())));
  ASSERT_TRUE(pair.host.qp->post_send(
      rdma_wr(WrOpcode::rdma_read, 4, &sge, pair.target.addr(0), pair.target.mr->rkey())));
  ASSERT_TRUE(pair.host.qp->flush());
  ASSERT_TRUE(pair.host.qp->flush());  // nothing new: not a doorbell
  pair.drain(2);
  SimCounters counters = pair.target_provider().counters();
  EXPECT_EQ(counters.send, 2u);
  EXPECT_EQ(counters.rdma_write, 1u);
  EXPECT_EQ(counters.rdma_read, 1u);
  EXPECT_EQ(counters.recv, 3u);
  EXPECT_EQ(counters.doorbells, 2u);
  EXPECT_EQ(counters.completions, 5u);  // 3 signaled WRs + 2 receives
  EXPECT_EQ(counters.bytes_moved, 400u);
  EXPECT_EQ(counters.error_completions, 0u);

  // An error and its flushes.
  Sge bad{pair.host.addr(0), 8, 0};
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(5, &bad, 0)));
  ASSERT_TRUE(pair.host.qp->flush());
  pair.drain(2);
  counters = pair.target_provider().counters();
  EXPECT_EQ(counters.error_completions, 1u);
  EXPECT_EQ(counters.qp_errors, 1u);
  EXPECT_EQ(counters.flush_completions, 0u);  // the host posted no receives
  pair.target_provider().reset_counters();
  EXPECT_EQ(pair.target_provider().counters().send, 0u);
}

TEST(SimCq, EventFdStaysQuietUntilACompletionArrivesWhileArmed) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  auto cq_result = pair.target.pd->create_cq({.depth = 16, .with_event_fd = true});
  ASSERT_TRUE(cq_result);
  CompletionQueue& cq = **cq_result;
  ASSERT_GE(cq.event_fd(), 0);
  pollfd pfd{cq.event_fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&pfd, 1, 0), 0);
  EXPECT_EQ(cq.consume_event().error().code, Errc::busy);
  ASSERT_TRUE(cq.arm());
  EXPECT_EQ(::poll(&pfd, 1, 0), 0);
}

TEST(SimCq, ArmedRecvCqBecomesReadableOnACompletion) {
  // A pair whose target recv CQ has an event fd.
  auto provider = std::move(*SimProvider::create());
  auto channel = std::move(*provider->create_cm_channel());
  auto listener = std::move(*channel->create_id());
  ASSERT_TRUE(listener->listen(kTargetAddress, kTargetPort, 4));
  auto id = std::move(*channel->create_id());
  ASSERT_TRUE(id->resolve(kTargetAddress, kTargetPort, 100));
  CmEvent event;
  ASSERT_TRUE(SimPair::wait_event(*channel, &event));
  auto pd = std::move(*provider->device().allocate_pd());
  auto cq = std::move(*pd->create_cq({.depth = 16}));
  auto event_cq = std::move(*pd->create_cq({.depth = 16, .with_event_fd = true}));
  std::vector<uint8_t> buffer(4096);
  auto mr = std::move(*pd->register_memory(buffer.data(), buffer.size(), kAccessLocalWrite));
  QpOpts active_opts;
  active_opts.send_cq = cq.get();
  active_opts.recv_cq = cq.get();
  ASSERT_TRUE(id->create_qp(*pd, active_opts));
  ASSERT_TRUE(id->connect({}));
  ASSERT_TRUE(SimPair::wait_event(*channel, &event));
  ASSERT_EQ(event.type, CmEventType::connect_request);
  auto passive = channel->adopt(event.id);
  QpOpts passive_opts;
  passive_opts.send_cq = cq.get();
  passive_opts.recv_cq = event_cq.get();
  ASSERT_TRUE(passive->create_qp(*pd, passive_opts));
  ASSERT_TRUE(passive->accept({}));
  auto readable = [&] {
    pollfd pfd{event_cq->event_fd(), POLLIN, 0};
    return ::poll(&pfd, 1, 0) == 1;
  };
  Sge recv_sge{reinterpret_cast<uint64_t>(buffer.data()), 64, mr->lkey()};
  ASSERT_TRUE(passive->qp()->post_recv({1, &recv_sge, 1}));
  ASSERT_TRUE(passive->qp()->post_recv({2, &recv_sge, 1}));
  ASSERT_TRUE(passive->qp()->flush());
  Sge send_sge{reinterpret_cast<uint64_t>(buffer.data()) + 1024, 64, mr->lkey()};
  ASSERT_TRUE(id->qp()->post_send(send_wr(1, &send_sge, 0)));
  ASSERT_TRUE(id->qp()->flush());
  EXPECT_FALSE(readable());  // not armed
  ASSERT_TRUE(event_cq->arm());
  ASSERT_TRUE(id->qp()->post_send(send_wr(2, &send_sge, 0)));
  ASSERT_TRUE(id->qp()->flush());
  EXPECT_TRUE(readable());
  ASSERT_TRUE(event_cq->consume_event());
  EXPECT_FALSE(readable());
  WorkCompletion wcs[4];
  EXPECT_EQ(event_cq->poll(wcs), 2);
}

}  // namespace
}  // namespace nvmf::verbs::sim::test
