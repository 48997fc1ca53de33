// The sim provider: options and profiles, resources, and the data-moving verbs (SEND/RECV,
// RDMA WRITE/READ, SRQ, inline, signaling, ordering, RNR, flush).
#include <gtest/gtest.h>

#include <algorithm>
#include <span>

#include "sim_test_util.h"

namespace nvmf::verbs::sim::test {
namespace {

TEST(SimProfile, NamesRoundTripAndUnknownIsRejected) {
  for (SimProfile profile : {SimProfile::rxe, SimProfile::mlx5_2017, SimProfile::mlx5_fenced,
                             SimProfile::adversarial, SimProfile::mlx5_2017_rare}) {
    SimProfile parsed = SimProfile::rxe;
    ASSERT_TRUE(sim_profile_parse(sim_profile_name(profile), &parsed));
    EXPECT_EQ(parsed, profile);
  }
  EXPECT_STREQ(sim_profile_name(SimProfile::mlx5_2017), "mlx5-2017");
  EXPECT_STREQ(sim_profile_name(SimProfile::mlx5_2017_rare), "mlx5-2017-rare");
  for (SendFence fence : {SendFence::profile, SendFence::reads, SendFence::key_updates}) {
    SendFence parsed = SendFence::profile;
    ASSERT_TRUE(send_fence_parse(send_fence_name(fence), &parsed));
    EXPECT_EQ(parsed, fence);
  }
  SendFence fence = SendFence::reads;
  EXPECT_FALSE(send_fence_parse("strong", &fence));
  EXPECT_EQ(fence, SendFence::reads);
  SimProfile unchanged = SimProfile::mlx5_fenced;
  EXPECT_FALSE(sim_profile_parse("mlx5", &unchanged));
  EXPECT_FALSE(sim_profile_parse(nullptr, &unchanged));
  EXPECT_EQ(unchanged, SimProfile::mlx5_fenced);
}

TEST(SimProvider, CreateChecksOptsAndDumpsThem) {
  SimOpts opts;
  opts.caps.name = "";
  auto bad = SimProvider::create(opts);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, Errc::invalid_argument);

  opts = SimOpts{};
  opts.profile = SimProfile::adversarial;
  opts.seed = 42;
  auto provider = SimProvider::create(opts);
  ASSERT_TRUE(provider);
  EXPECT_STREQ((*provider)->name(), "sim");
  EXPECT_EQ((*provider)->seed(), 42u);
  EXPECT_EQ((*provider)->profile(), SimProfile::adversarial);
  ASSERT_EQ((*provider)->device_names().size(), 1u);
  EXPECT_EQ((*provider)->device_names()[0], "sim0");
  const std::string json = opts_to_json(opts);
  EXPECT_NE(json.find("\"profile\": \"adversarial\""), std::string::npos);
  EXPECT_NE(json.find("\"seed\": 42"), std::string::npos);
  EXPECT_NE(json.find("\"send_fence\": \"key-updates\""), std::string::npos);  // resolved
  EXPECT_NE(json.find("\"mkey_commit_slow_one_in\": 1000000"), std::string::npos);

  opts.mkey_commit_slow_one_in = 0;
  auto no_rate = SimProvider::create(opts);
  ASSERT_FALSE(no_rate);
  EXPECT_EQ(no_rate.error().code, Errc::invalid_argument);
}

TEST(SimProvider, DefaultCapsAreMlx5LikeAndConfigurable) {
  const DeviceCaps caps = sim_default_caps();
  EXPECT_TRUE(caps.memory_window_type2);
  EXPECT_TRUE(caps.memory_management_extensions);
  EXPECT_EQ(caps.max_qp_rd_atom, 16u);
  EXPECT_GE(caps.max_qp_wr, 16384u);
  EXPECT_GT(caps.max_srq_wr, 0u);

  SimOpts opts;
  opts.caps.name = "mlx5_0";
  opts.caps.memory_window_type2 = false;
  auto provider = SimProvider::create(opts);
  ASSERT_TRUE(provider);
  EXPECT_EQ((*provider)->device().caps().name, "mlx5_0");
  auto pd = (*provider)->device().allocate_pd();
  ASSERT_TRUE(pd);
  auto mw = (*pd)->allocate_window();
  ASSERT_FALSE(mw);
  EXPECT_EQ(mw.error().code, Errc::not_supported);
}

TEST(SimResources, RegisterMemoryChecksArgumentsAndKeys) {
  auto provider = SimProvider::create();
  ASSERT_TRUE(provider);
  auto pd = (*provider)->device().allocate_pd();
  ASSERT_TRUE(pd);
  std::vector<uint8_t> buffer(4096);
  EXPECT_FALSE((*pd)->register_memory(nullptr, 4096, kAccessLocalWrite));
  EXPECT_FALSE((*pd)->register_memory(buffer.data(), 0, kAccessLocalWrite));
  EXPECT_FALSE((*pd)->register_memory(buffer.data(), 4096, kAccessRemoteWrite));  // no local
  EXPECT_FALSE((*pd)->register_memory(buffer.data(), 4096, 1u << 20));

  auto local = (*pd)->register_memory(buffer.data(), 4096, kAccessLocalWrite);
  ASSERT_TRUE(local);
  EXPECT_EQ((*local)->rkey(), 0u);  // as rxe: no remote access, no rkey
  EXPECT_NE((*local)->lkey(), 0u);
  EXPECT_EQ((*local)->addr(), buffer.data());
  EXPECT_EQ((*local)->length(), 4096u);
  auto remote = (*pd)->register_memory(buffer.data(), 4096, kAllAccess);
  ASSERT_TRUE(remote);
  EXPECT_EQ((*remote)->rkey(), (*remote)->lkey());
  EXPECT_NE((*remote)->lkey() >> 8, (*local)->lkey() >> 8);
  EXPECT_EQ((*provider)->key_state((*remote)->rkey()), KeyState::valid);
}

TEST(SimResources, WindowsHaveDistinctIndexesAndNextRkeyBumpsTheKeyByte) {
  auto provider = SimProvider::create();
  ASSERT_TRUE(provider);
  auto pd = (*provider)->device().allocate_pd();
  ASSERT_TRUE(pd);
  auto a = (*pd)->allocate_window();
  auto b = (*pd)->allocate_window();
  ASSERT_TRUE(a && b);
  EXPECT_NE((*a)->rkey() >> 8, (*b)->rkey() >> 8);
  const uint32_t key = (*a)->rkey();
  EXPECT_EQ((*a)->next_rkey() >> 8, key >> 8);
  EXPECT_EQ((*a)->next_rkey() & 0xFFu, (key + 1) & 0xFFu);
  EXPECT_EQ((*provider)->key_state(key), KeyState::free);
  EXPECT_EQ((*provider)->key_state(key ^ 0x1u), KeyState::unknown);
}

TEST(SimResources, CqAndSrqCreationChecksLimitsAndGrantsPowersOfTwo) {
  SimOpts opts;
  opts.caps.max_cqe = 1000;
  opts.caps.max_srq_wr = 0;
  auto provider = SimProvider::create(opts);
  ASSERT_TRUE(provider);
  auto pd = (*provider)->device().allocate_pd();
  ASSERT_TRUE(pd);
  EXPECT_FALSE((*pd)->create_cq({.depth = 0}));
  EXPECT_FALSE((*pd)->create_cq({.depth = 1001}));
  auto cq = (*pd)->create_cq({.depth = 100});
  ASSERT_TRUE(cq);
  EXPECT_EQ((*cq)->depth(), 128u);
  EXPECT_EQ((*cq)->event_fd(), -1);
  EXPECT_FALSE((*cq)->arm());
  auto srq = (*pd)->create_srq({});
  ASSERT_FALSE(srq);
  EXPECT_EQ(srq.error().code, Errc::not_supported);
}

TEST(SimQp, CreateQpChecksObjectsAndSizes) {
  PairOpts opts;
  opts.connect = false;
  SimPair pair(opts);
  ASSERT_NE(pair.target.qp, nullptr);
  EXPECT_EQ(pair.host.qp->state(), QpState::init);
  EXPECT_EQ(pair.host.qp->granted().max_send_wr, 64u);
  // A second QP on the same id.
  QpOpts qp_opts;
  qp_opts.send_cq = pair.host.send_cq.get();
  qp_opts.recv_cq = pair.host.recv_cq.get();
  auto again = pair.host.id->create_qp(*pair.host.pd, qp_opts);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, Errc::already_exists);
  // A fresh id: PD of another device, missing CQs, sizes above the caps.
  auto id = pair.host.channel->create_id();
  ASSERT_TRUE(id);
  ASSERT_TRUE((*id)->resolve(kTargetAddress, kTargetPort, 100));
  CmEvent event;
  ASSERT_TRUE(SimPair::wait_event(*pair.host.channel, &event));
  QpOpts no_cq;
  EXPECT_EQ((*id)->create_qp(*pair.host.pd, no_cq).error().code, Errc::invalid_argument);
  QpOpts too_big = qp_opts;
  too_big.max_send_wr = 1u << 20;
  EXPECT_EQ((*id)->create_qp(*pair.host.pd, too_big).error().code, Errc::invalid_argument);
  too_big = qp_opts;
  too_big.max_inline_data = 4096;
  EXPECT_EQ((*id)->create_qp(*pair.host.pd, too_big).error().code, Errc::invalid_argument);
  QpOpts odd = qp_opts;
  odd.max_send_wr = 100;
  auto qp = (*id)->create_qp(*pair.host.pd, odd);
  ASSERT_TRUE(qp);
  EXPECT_EQ((*qp)->granted().max_send_wr, 128u);  // >= asked
  EXPECT_NE((*qp)->qp_num(), pair.host.qp->qp_num());
}

TEST(SimQp, PostChecksStateSgesWindowAndQueueDepth) {
  PairOpts opts;
  opts.connect = false;
  opts.queue_depth = 4;
  SimPair pair(opts);
  ASSERT_NE(pair.target.qp, nullptr);
  Sge sge = pair.host.sge(0, 16);
  Sge recv_sge = pair.target.sge(0, 16);
  auto before_connect = pair.host.qp->post_send(send_wr(1, &sge));
  ASSERT_FALSE(before_connect);
  EXPECT_EQ(before_connect.error().code, Errc::bad_state);
  // Receives may be posted before the connection exists (rdma_create_qp leaves INIT).
  EXPECT_TRUE(pair.target.qp->post_recv({1, &recv_sge, 1}));

  ASSERT_TRUE(pair.target.id->accept({}));
  CmEvent event;
  ASSERT_TRUE(SimPair::wait_event(*pair.host.channel, &event));
  EXPECT_EQ(pair.host.qp->state(), QpState::ready_to_send);

  Sge three[3] = {sge, sge, sge};
  SendWr wr = send_wr(1, three);
  wr.num_sge = 3;
  EXPECT_EQ(pair.host.qp->post_send(wr).error().code, Errc::invalid_argument);
  SendWr bind;
  bind.opcode = WrOpcode::bind_mw;
  EXPECT_EQ(pair.host.qp->post_send(bind).error().code, Errc::invalid_argument);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(pair.host.qp->post_send(send_wr(10 + i, &sge)));
  auto full = pair.host.qp->post_send(send_wr(99, &sge));
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, Errc::busy);
  for (uint64_t i = 2; i <= 4; ++i) ASSERT_TRUE(pair.target.qp->post_recv({i, &recv_sge, 1}));
  EXPECT_EQ(pair.target.qp->post_recv({9, &recv_sge, 1}).error().code, Errc::busy);
  ASSERT_TRUE(pair.target.qp->flush());
  ASSERT_TRUE(pair.host.qp->flush());
  EXPECT_EQ(pair.collect(*pair.host.send_cq, 4).size(), 4u);
  EXPECT_EQ(pair.collect(*pair.target.recv_cq, 4).size(), 4u);
  EXPECT_TRUE(pair.host.qp->post_send(send_wr(99, &sge)));  // room again
}

TEST(SimData, SendRecvCopiesPayloadAcrossSges) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  pair.post_recvs(pair.target, 1, 0, 8192);
  fill(pair.host.buffer, 100, 3000, 1);
  fill(pair.host.buffer, 20000, 500, 2);
  Sge sges[2] = {pair.host.sge(100, 3000), pair.host.sge(20000, 500)};
  SendWr wr = send_wr(7, sges);
  wr.num_sge = 2;
  ASSERT_TRUE(pair.host.qp->post_send(wr));
  ASSERT_TRUE(pair.host.qp->flush());
  auto recv = pair.collect(*pair.target.recv_cq, 1);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0].status, WcStatus::success);
  EXPECT_EQ(recv[0].opcode, WcOpcode::recv);
  EXPECT_EQ(recv[0].wr_id, 1000u);
  EXPECT_EQ(recv[0].byte_len, 3500u);
  EXPECT_EQ(recv[0].qp_num, pair.target.qp->qp_num());
  EXPECT_FALSE(recv[0].remote_invalidated);
  EXPECT_TRUE(filled(pair.target.buffer, 0, 3000, 1));
  EXPECT_TRUE(filled(pair.target.buffer, 3000, 500, 2));
  auto sent = pair.collect(*pair.host.send_cq, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].wr_id, 7u);
  EXPECT_EQ(sent[0].opcode, WcOpcode::send);
  EXPECT_EQ(sent[0].qp_num, pair.host.qp->qp_num());
}

TEST(SimData, RdmaWriteAndReadMoveDataBetweenRegisteredBuffers) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  fill(pair.target.buffer, 0, 4096, 3);
  Sge write_sge = pair.target.sge(0, 4096);
  ASSERT_TRUE(pair.target.qp->post_send(
      rdma_wr(WrOpcode::rdma_write, 1, &write_sge, pair.host.addr(8192), pair.host.mr->rkey())));
  fill(pair.host.buffer, 32768, 1024, 4);
  Sge read_sge = pair.target.sge(16384, 1024);
  ASSERT_TRUE(pair.target.qp->post_send(
      rdma_wr(WrOpcode::rdma_read, 2, &read_sge, pair.host.addr(32768), pair.host.mr->rkey())));
  ASSERT_TRUE(pair.target.qp->flush());
  auto wcs = pair.collect(*pair.target.send_cq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].opcode, WcOpcode::rdma_write);
  EXPECT_EQ(wcs[1].opcode, WcOpcode::rdma_read);
  EXPECT_EQ(wcs[1].byte_len, 1024u);
  EXPECT_EQ(count_status(wcs, WcStatus::success), 2u);
  EXPECT_TRUE(filled(pair.host.buffer, 8192, 4096, 3));
  EXPECT_TRUE(filled(pair.target.buffer, 16384, 1024, 4));
}

TEST(SimData, SkippedPayloadsAreCheckedButNotMoved) {
  PairOpts opts;
  opts.two_devices = true;
  SimPair pair(opts);
  ASSERT_NE(pair.target.qp, nullptr);
  // The host's [8192, 16384) is marked: READs and WRITEs wholly inside it move nothing.
  ASSERT_TRUE(pair.host_provider().skip_payloads(pair.host.buffer.data() + 8192, 8192));
  fill(pair.target.buffer, 0, 4096, 3);
  fill(pair.target.buffer, 20000, 4096, 5);
  fill(pair.host.buffer, 32768, 1024, 4);
  Sge write_sge = pair.target.sge(0, 4096);
  Sge skipped_read_sge = pair.target.sge(20000, 4096);
  Sge straddling_sge = pair.target.sge(0, 4096);
  Sge read_sge = pair.target.sge(16384, 1024);
  const uint32_t rkey = pair.host.mr->rkey();
  ASSERT_TRUE(pair.target.qp->post_send(
      rdma_wr(WrOpcode::rdma_write, 1, &write_sge, pair.host.addr(8192), rkey)));
  ASSERT_TRUE(pair.target.qp->post_send(
      rdma_wr(WrOpcode::rdma_read, 2, &skipped_read_sge, pair.host.addr(12288), rkey)));
  ASSERT_TRUE(pair.target.qp->post_send(  // ends 2 KiB past the range: moved
      rdma_wr(WrOpcode::rdma_write, 3, &straddling_sge, pair.host.addr(14336), rkey)));
  ASSERT_TRUE(pair.target.qp->post_send(  // outside: moved
      rdma_wr(WrOpcode::rdma_read, 4, &read_sge, pair.host.addr(32768), rkey)));
  ASSERT_TRUE(pair.target.qp->flush());
  auto wcs = pair.collect(*pair.target.send_cq, 4);
  ASSERT_EQ(wcs.size(), 4u);
  EXPECT_EQ(count_status(wcs, WcStatus::success), 4u);
  EXPECT_EQ(wcs[1].byte_len, 4096u);  // a skipped READ still reports its length
  EXPECT_TRUE(std::all_of(pair.host.buffer.begin() + 8192, pair.host.buffer.begin() + 12288,
                          [](uint8_t byte) { return byte == 0; }));  // not written
  EXPECT_TRUE(filled(pair.target.buffer, 20000, 4096, 5));  // not read into
  EXPECT_TRUE(filled(pair.host.buffer, 14336, 4096, 3));
  EXPECT_TRUE(filled(pair.target.buffer, 16384, 1024, 4));
  SimCounters counters = pair.target_provider().counters();
  EXPECT_EQ(counters.bytes_skipped, 8192u);
  EXPECT_EQ(counters.bytes_moved, 4096u + 1024u);

  // The checks still run: a bad key into the marked range fails the QP as before.
  ASSERT_TRUE(pair.target.qp->post_send(
      rdma_wr(WrOpcode::rdma_write, 5, &write_sge, pair.host.addr(8192), rkey ^ 0xFFu)));
  ASSERT_TRUE(pair.target.qp->flush());
  wcs = pair.collect(*pair.target.send_cq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::remote_access_error);
}

TEST(SimData, SkipPayloadsRefusesEmptyRangesAndTooMany) {
  auto provider = SimProvider::create();
  ASSERT_TRUE(provider);
  std::vector<uint8_t> memory(kPayloadSkipRangesMax + 1);
  EXPECT_EQ((*provider)->skip_payloads(memory.data(), 0).error().code, Errc::invalid_argument);
  for (uint32_t i = 0; i < kPayloadSkipRangesMax; ++i) {
    EXPECT_TRUE((*provider)->skip_payloads(memory.data() + i, 1));
  }
  EXPECT_EQ((*provider)->skip_payloads(memory.data() + kPayloadSkipRangesMax, 1).error().code,
            Errc::invalid_argument);
}

TEST(SimData, InlineSendCopiesAtPostTime) {
  PairOpts opts;
  opts.max_inline_data = 64;
  SimPair pair(opts);
  ASSERT_NE(pair.target.qp, nullptr);
  pair.post_recvs(pair.target, 1);
  fill(pair.host.buffer, 0, 64, 9);
  Sge sge{pair.host.addr(0), 64, 0xDEAD};  // the lkey of an inline SGE is not used
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(1, &sge, kWrSignaled | kWrInline)));
  fill(pair.host.buffer, 0, 64, 10);  // changed after post, before the doorbell
  ASSERT_TRUE(pair.host.qp->flush());
  auto recv = pair.collect(*pair.target.recv_cq, 1);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0].byte_len, 64u);
  EXPECT_TRUE(filled(pair.target.buffer, 0, 64, 9));
  Sge big{pair.host.addr(0), 65, 0};
  EXPECT_EQ(pair.host.qp->post_send(send_wr(2, &big, kWrInline)).error().code,
            Errc::invalid_argument);
}

TEST(SimData, UnsignaledSuccessesProduceNoCompletion) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  Sge sge = pair.target.sge(0, 512);
  for (uint64_t i = 0; i < 16; ++i) {
    const uint32_t flags = (i % 4 == 3) ? uint32_t{kWrSignaled} : 0u;
    ASSERT_TRUE(pair.target.qp->post_send(
        rdma_wr(WrOpcode::rdma_write, i, &sge, pair.host.addr(0), pair.host.mr->rkey(), flags)));
  }
  ASSERT_TRUE(pair.target.qp->flush());
  auto drained = pair.drain(10);
  ASSERT_EQ(drained.target_send.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(drained.target_send[i].wr_id, i * 4 + 3);
}

TEST(SimData, CompletionsArriveInPostOrderPerQp) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  pair.post_recvs(pair.host, 8);
  Sge sge = pair.target.sge(0, 256);
  for (uint64_t i = 0; i < 24; ++i) {
    SendWr wr =
        (i % 3 == 0) ? send_wr(i, &sge)
        : (i % 3 == 1)
            ? rdma_wr(WrOpcode::rdma_write, i, &sge, pair.host.addr(40000), pair.host.mr->rkey())
            : rdma_wr(WrOpcode::rdma_read, i, &sge, pair.host.addr(40000), pair.host.mr->rkey());
    ASSERT_TRUE(pair.target.qp->post_send(wr));
    if (i % 5 == 4) {
      ASSERT_TRUE(pair.target.qp->flush());
    }
  }
  ASSERT_TRUE(pair.target.qp->flush());
  auto wcs = pair.collect(*pair.target.send_cq, 24);
  ASSERT_EQ(wcs.size(), 24u);
  for (uint64_t i = 0; i < 24; ++i) {
    EXPECT_EQ(wcs[i].wr_id, i);
    EXPECT_EQ(wcs[i].status, WcStatus::success);
  }
  auto recvs = pair.collect(*pair.host.recv_cq, 8);
  ASSERT_EQ(recvs.size(), 8u);
  for (uint64_t i = 0; i < 8; ++i) EXPECT_EQ(recvs[i].wr_id, 1000 + i);
}

TEST(SimData, SharedReceiveQueueFeedsTheQp) {
  PairOpts opts;
  opts.target_srq = true;
  SimPair pair(opts);
  ASSERT_NE(pair.target.qp, nullptr);
  ASSERT_NE(pair.target.srq, nullptr);
  EXPECT_EQ(pair.target.qp->post_recv({1, nullptr, 0}).error().code, Errc::invalid_argument);
  pair.post_recvs(pair.target, 4);
  Sge sge = pair.host.sge(0, 100);
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(pair.host.qp->post_send(send_wr(i, &sge)));
  ASSERT_TRUE(pair.host.qp->flush());
  auto recvs = pair.collect(*pair.target.recv_cq, 4);
  ASSERT_EQ(recvs.size(), 4u);
  for (uint64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(recvs[i].wr_id, 1000 + i);
    EXPECT_EQ(recvs[i].qp_num, pair.target.qp->qp_num());
    EXPECT_EQ(recvs[i].byte_len, 100u);
  }
  // A QP error does not flush an SRQ's receives: they belong to the SRQ.
  pair.post_recvs(pair.target, 2, 0, 4096, 2000);
  ASSERT_TRUE(pair.target.qp->move_to_error());
  auto drained = pair.drain(5);
  EXPECT_TRUE(drained.target_recv.empty());
}

TEST(SimData, BadLocalKeyIsALocalProtectionErrorAndFlushesTheRest) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  pair.post_recvs(pair.target, 2);
  pair.post_recvs(pair.host, 3);
  Sge bad{pair.host.addr(0), 64, pair.host.mr->lkey() ^ 0x1u};
  Sge outside{pair.host.addr(kBufferBytes - 32), 64, pair.host.mr->lkey()};
  Sge good = pair.host.sge(0, 64);
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(1, &good, 0)));
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(2, &outside, 0)));  // unsignaled: still reported
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(3, &bad, 0)));
  ASSERT_TRUE(pair.host.qp->flush());
  auto drained = pair.drain(5);
  ASSERT_EQ(drained.host_send.size(), 2u);
  EXPECT_EQ(drained.host_send[0].wr_id, 2u);
  EXPECT_EQ(drained.host_send[0].status, WcStatus::local_protection_error);
  EXPECT_EQ(drained.host_send[1].wr_id, 3u);
  EXPECT_EQ(drained.host_send[1].status, WcStatus::wr_flush_error);
  EXPECT_EQ(count_status(drained.host_recv, WcStatus::wr_flush_error), 3u);
  EXPECT_EQ(pair.host.qp->state(), QpState::error);
  ASSERT_EQ(drained.target_recv.size(), 1u);  // the first SEND got through
  EXPECT_EQ(pair.target.qp->state(), QpState::ready_to_send);
}

TEST(SimData, ReceiveTooSmallFailsBothSides) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  pair.post_recvs(pair.target, 2, 0, 128);
  Sge sge = pair.host.sge(0, 129);
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(1, &sge)));
  ASSERT_TRUE(pair.host.qp->flush());
  auto drained = pair.drain(5);
  ASSERT_EQ(drained.host_send.size(), 1u);
  EXPECT_EQ(drained.host_send[0].status, WcStatus::remote_invalid_request_error);
  ASSERT_EQ(drained.target_recv.size(), 2u);
  EXPECT_EQ(drained.target_recv[0].status, WcStatus::local_length_error);
  EXPECT_EQ(drained.target_recv[1].status, WcStatus::wr_flush_error);
  EXPECT_EQ(pair.target.qp->state(), QpState::error);
}

TEST(SimRnr, FiniteRetriesEndInRnrRetryExceeded) {
  FakeClock clock;
  PairOpts opts;
  opts.sim.clock = &clock;
  opts.sim.rnr_timer_ns = 1000000;
  opts.host_params.rnr_retry_count = 3;
  SimPair pair(opts);
  ASSERT_NE(pair.target.qp, nullptr);
  Sge sge = pair.host.sge(0, 64);
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(1, &sge)));
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(2, &sge, 0)));
  ASSERT_TRUE(pair.host.qp->flush());
  // Without time passing the SEND just waits.
  EXPECT_TRUE(pair.collect(*pair.host.send_cq, 1, 20).empty());
  EXPECT_EQ(pair.target_provider().counters().rnr_naks, 1u);
  for (int retry = 1; retry <= 2; ++retry) {
    clock.advance_ms(1);
    EXPECT_TRUE(pair.collect(*pair.host.send_cq, 1, 3).empty()) << "retry " << retry;
  }
  clock.advance_ms(1);
  auto wcs = pair.collect(*pair.host.send_cq, 2, 5);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::rnr_retry_exceeded_error);
  EXPECT_EQ(wcs[1].status, WcStatus::wr_flush_error);
  EXPECT_EQ(pair.target_provider().counters().rnr_naks, 4u);  // the first try + 3 retries
  EXPECT_EQ(pair.host.qp->state(), QpState::error);
}

TEST(SimRnr, ZeroRetriesFailsAtTheFirstNak) {
  PairOpts opts;
  opts.host_params.rnr_retry_count = 0;
  SimPair pair(opts);
  ASSERT_NE(pair.target.qp, nullptr);
  Sge sge = pair.host.sge(0, 64);
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(1, &sge)));
  ASSERT_TRUE(pair.host.qp->flush());
  auto wcs = pair.collect(*pair.host.send_cq, 1, 2);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::rnr_retry_exceeded_error);
}

TEST(SimRnr, InfiniteRetryWaitsUntilAReceiveIsPosted) {
  FakeClock clock;
  PairOpts opts;
  opts.sim.clock = &clock;
  opts.host_params.rnr_retry_count = 7;
  SimPair pair(opts);
  ASSERT_NE(pair.target.qp, nullptr);
  fill(pair.host.buffer, 0, 64, 5);
  Sge sge = pair.host.sge(0, 64);
  Sge write_sge = pair.host.sge(0, 64);
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(1, &sge)));
  // The WRITE behind the blocked SEND waits too: RC executes in order.
  ASSERT_TRUE(pair.host.qp->post_send(rdma_wr(WrOpcode::rdma_write, 2, &write_sge,
                                              pair.target.addr(8192), pair.target.mr->rkey())));
  ASSERT_TRUE(pair.host.qp->flush());
  clock.advance_ms(10000);
  EXPECT_TRUE(pair.collect(*pair.host.send_cq, 1, 50).empty());
  EXPECT_FALSE(filled(pair.target.buffer, 8192, 64, 5));
  pair.post_recvs(pair.target, 1);
  auto wcs = pair.collect(*pair.host.send_cq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(count_status(wcs, WcStatus::success), 2u);
  EXPECT_TRUE(filled(pair.target.buffer, 0, 64, 5));
  EXPECT_TRUE(filled(pair.target.buffer, 8192, 64, 5));
}

TEST(SimFlush, MoveToErrorFlushesEverythingIncludingUnsignaled) {
  FakeClock clock;
  PairOpts opts;
  opts.sim.clock = &clock;
  SimPair pair(opts);
  ASSERT_NE(pair.target.qp, nullptr);
  pair.post_recvs(pair.host, 5);
  Sge sge = pair.host.sge(0, 64);
  // The target has no receive: the SENDs wait on RNR, so they are outstanding.
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(1, &sge, 0)));
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(2, &sge, kWrSignaled)));
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(3, &sge, 0)));
  ASSERT_TRUE(pair.host.qp->flush());
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(4, &sge, 0)));  // posted, not rung in yet
  ASSERT_TRUE(pair.host.qp->move_to_error());
  EXPECT_EQ(pair.host.qp->state(), QpState::error);
  auto drained = pair.drain(3);
  ASSERT_EQ(drained.host_send.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(drained.host_send[i].wr_id, i + 1);
    EXPECT_EQ(drained.host_send[i].status, WcStatus::wr_flush_error);
  }
  EXPECT_EQ(count_status(drained.host_recv, WcStatus::wr_flush_error), 5u);
  // The queued WR and anything posted later are flushed at their doorbell.
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(5, &sge, 0)));
  Sge recv_sge = pair.host.sge(0, 64);
  ASSERT_TRUE(pair.host.qp->post_recv({77, &recv_sge, 1}));
  ASSERT_TRUE(pair.host.qp->flush());
  drained = pair.drain(2);
  ASSERT_EQ(drained.host_send.size(), 2u);
  EXPECT_EQ(drained.host_send[0].wr_id, 4u);
  EXPECT_EQ(drained.host_send[1].wr_id, 5u);
  ASSERT_EQ(drained.host_recv.size(), 1u);
  EXPECT_EQ(drained.host_recv[0].wr_id, 77u);
  EXPECT_EQ(drained.host_recv[0].status, WcStatus::wr_flush_error);
  EXPECT_EQ(drained.host_recv[0].opcode, WcOpcode::recv);
}

TEST(SimFlush, SendingToAPeerInErrorExceedsTheRetryCount) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  ASSERT_TRUE(pair.target.qp->move_to_error());
  Sge sge = pair.host.sge(0, 64);
  ASSERT_TRUE(pair.host.qp->post_send(send_wr(1, &sge, 0)));
  ASSERT_TRUE(pair.host.qp->flush());
  auto wcs = pair.collect(*pair.host.send_cq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::retry_exceeded_error);
  EXPECT_EQ(pair.host.qp->state(), QpState::error);
}

}  // namespace
}  // namespace nvmf::verbs::sim::test
