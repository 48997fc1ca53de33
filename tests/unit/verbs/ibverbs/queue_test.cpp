// The QP / CQ / SRQ data path over hand-made rdma-core objects and a fake RawOps table:
// doorbells, chain linking, bad_wr handling, busy accounting, software flush. No device.
#include <gtest/gtest.h>

#include <cerrno>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "verbs/ibverbs/ibverbs_internal.h"

namespace nvmf::verbs::ibverbs {
namespace {

// What the fake device saw and what it is told to do.
struct FakeDevice {
  struct PostedSend {
    uint64_t wr_id;
    ibv_wr_opcode opcode;
    unsigned send_flags;
    int num_sge;
    uint32_t bind_current_rkey;  // bind_mw.mw->rkey read at post time, as rxe and mlx5 do
    uint32_t bind_new_rkey;
  };
  std::vector<std::vector<PostedSend>> send_doorbells;
  std::vector<std::vector<uint64_t>> recv_doorbells;
  std::vector<std::vector<uint64_t>> srq_doorbells;
  int reject_send_at = -1;  // index in the next chain to reject (one shot)
  int reject_recv_at = -1;
  int reject_srq_at = -1;
  int reject_errno = EINVAL;
  std::map<ibv_cq*, std::deque<ibv_wc>> cq_entries;
  int modify_to_error_calls = 0;
  int destroyed_qps = 0;
};
FakeDevice* g_fake = nullptr;

int fake_post_send(ibv_qp*, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  std::vector<FakeDevice::PostedSend> posted;
  int index = 0;
  for (; wr != nullptr; wr = wr->next, ++index) {
    if (index == g_fake->reject_send_at) {
      g_fake->reject_send_at = -1;
      g_fake->send_doorbells.push_back(posted);
      *bad_wr = wr;
      return g_fake->reject_errno;
    }
    const bool bind = wr->opcode == IBV_WR_BIND_MW;
    posted.push_back({wr->wr_id, wr->opcode, wr->send_flags, wr->num_sge,
                      bind ? wr->bind_mw.mw->rkey : 0, bind ? wr->bind_mw.rkey : 0});
  }
  g_fake->send_doorbells.push_back(posted);
  return 0;
}

template <typename Wr>
int record_recv_chain(Wr* wr, Wr** bad_wr, int* reject_at,
                      std::vector<std::vector<uint64_t>>* out) {
  std::vector<uint64_t> posted;
  int index = 0;
  for (; wr != nullptr; wr = wr->next, ++index) {
    if (index == *reject_at) {
      *reject_at = -1;
      out->push_back(posted);
      *bad_wr = wr;
      return g_fake->reject_errno;
    }
    posted.push_back(wr->wr_id);
  }
  out->push_back(posted);
  return 0;
}
int fake_post_recv(ibv_qp*, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  return record_recv_chain(wr, bad_wr, &g_fake->reject_recv_at, &g_fake->recv_doorbells);
}
int fake_post_srq_recv(ibv_srq*, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  return record_recv_chain(wr, bad_wr, &g_fake->reject_srq_at, &g_fake->srq_doorbells);
}
int fake_poll_cq(ibv_cq* cq, int entries, ibv_wc* wc) {
  auto& queue = g_fake->cq_entries[cq];
  int count = 0;
  while (count < entries && !queue.empty()) {
    wc[count++] = queue.front();
    queue.pop_front();
  }
  return count;
}
int fake_modify_qp_to_error(ibv_qp*) {
  ++g_fake->modify_to_error_calls;
  return 0;
}
int fake_query_qp_state(ibv_qp*, ibv_qp_state* state) {
  *state = IBV_QPS_RTS;
  return 0;
}
void fake_destroy_qp(ibv_qp*, rdma_cm_id*) { ++g_fake->destroyed_qps; }
int fake_destroy_cq(ibv_cq*) { return 0; }
int fake_destroy_srq(ibv_srq*) { return 0; }
int fake_dereg_mr(ibv_mr*) { return 0; }
int fake_dealloc_mw(ibv_mw*) { return 0; }

const RawOps kFakeOps = {fake_post_send,  fake_post_recv,          fake_post_srq_recv,
                         fake_poll_cq,    fake_modify_qp_to_error, fake_query_qp_state,
                         fake_destroy_qp, fake_destroy_cq,         fake_destroy_srq,
                         fake_dereg_mr,   fake_dealloc_mw};

constexpr uint32_t kQpNum = 0x123;

class QueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_fake = &fake_;
    raw_qp_.qp_num = kQpNum;
    raw_qp_.pd = &raw_pd_;
    raw_cq_.cqe = 256;
    raw_recv_cq_.cqe = 256;
    cq_ = std::make_unique<IbvCompletionQueue>(kFakeOps, &raw_cq_, nullptr, WcQuirks{});
    recv_cq_ = std::make_unique<IbvCompletionQueue>(kFakeOps, &raw_recv_cq_, nullptr, WcQuirks{});
  }
  void TearDown() override {
    qp_.reset();
    srq_.reset();
    cq_.reset();
    recv_cq_.reset();
    g_fake = nullptr;
  }

  void make_qp(uint32_t send_depth, uint32_t recv_depth, bool separate_recv_cq = false,
               bool with_srq = false) {
    QpOpts granted;
    granted.send_cq = cq_.get();
    granted.recv_cq = separate_recv_cq ? recv_cq_.get() : cq_.get();
    granted.max_send_wr = send_depth;
    granted.max_recv_wr = recv_depth;
    granted.max_send_sge = 2;
    granted.max_recv_sge = 1;
    granted.max_inline_data = 64;
    if (with_srq) {
      auto srq = IbvSharedReceiveQueue::create(kFakeOps, &raw_srq_, 2, 1);
      ASSERT_TRUE(srq);
      srq_ = std::move(*srq);
      granted.srq = srq_.get();
    }
    auto qp = IbvQueuePair::create(kFakeOps, &raw_qp_, nullptr, granted, cq_.get(),
                                   separate_recv_cq ? recv_cq_.get() : cq_.get(), srq_.get());
    ASSERT_TRUE(qp);
    qp_ = std::move(*qp);
  }

  Result<void> send(uint64_t wr_id, uint32_t flags = kWrSignaled) {
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = WrOpcode::send;
    wr.flags = flags;
    wr.sg_list = &sge_;
    wr.num_sge = 1;
    return qp_->post_send(wr);
  }
  Result<void> recv(uint64_t wr_id) {
    RecvWr wr;
    wr.wr_id = wr_id;
    wr.sg_list = &sge_;
    wr.num_sge = 1;
    return qp_->post_recv(wr);
  }
  void complete(ibv_cq* cq, uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode opcode,
                uint32_t qp_num = kQpNum) {
    ibv_wc wc{};
    wc.wr_id = wr_id;
    wc.status = status;
    wc.opcode = opcode;
    wc.qp_num = qp_num;
    fake_.cq_entries[cq].push_back(wc);
  }
  std::vector<WorkCompletion> poll(IbvCompletionQueue& cq, size_t max = 64) {
    std::vector<WorkCompletion> out(max);
    out.resize(static_cast<size_t>(cq.poll(out)));
    return out;
  }

  FakeDevice fake_;
  ibv_pd raw_pd_{};
  ibv_qp raw_qp_{};
  ibv_cq raw_cq_{};
  ibv_cq raw_recv_cq_{};
  ibv_srq raw_srq_{};
  Sge sge_{0x1000, 64, 0x42};
  std::unique_ptr<IbvCompletionQueue> cq_;
  std::unique_ptr<IbvCompletionQueue> recv_cq_;
  std::unique_ptr<IbvSharedReceiveQueue> srq_;
  std::unique_ptr<IbvQueuePair> qp_;
};

std::vector<uint64_t> wr_ids(const std::vector<FakeDevice::PostedSend>& posted) {
  std::vector<uint64_t> ids;
  for (const auto& p : posted) ids.push_back(p.wr_id);
  return ids;
}

TEST_F(QueueTest, FlushRingsOneDoorbellPerQueueWithTheQueuedChainInOrder) {
  make_qp(8, 8);
  ASSERT_TRUE(send(1));
  ASSERT_TRUE(send(2, 0));
  ASSERT_TRUE(send(3));
  ASSERT_TRUE(recv(10));
  ASSERT_TRUE(recv(11));
  EXPECT_TRUE(fake_.send_doorbells.empty());  // nothing reaches the device before flush()
  ASSERT_TRUE(qp_->flush());
  ASSERT_EQ(fake_.send_doorbells.size(), 1u);
  EXPECT_EQ(wr_ids(fake_.send_doorbells[0]), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(fake_.send_doorbells[0][1].send_flags, 0u);
  ASSERT_EQ(fake_.recv_doorbells.size(), 1u);
  EXPECT_EQ(fake_.recv_doorbells[0], (std::vector<uint64_t>{10, 11}));
  EXPECT_EQ(qp_->doorbells(), 2u);
  EXPECT_EQ(qp_->send_outstanding(), 3u);
  EXPECT_EQ(qp_->recv_outstanding(), 2u);
}

TEST_F(QueueTest, FlushWithNothingQueuedRingsNoDoorbell) {
  make_qp(4, 4);
  ASSERT_TRUE(qp_->flush());
  ASSERT_TRUE(send(1));
  ASSERT_TRUE(qp_->flush());
  ASSERT_TRUE(qp_->flush());
  EXPECT_EQ(fake_.send_doorbells.size(), 1u);
  EXPECT_TRUE(fake_.recv_doorbells.empty());
}

TEST_F(QueueTest, ChainsWrapAroundTheRingInOrder) {
  make_qp(4, 4);
  uint64_t next_id = 1;
  for (int round = 0; round < 5; ++round) {
    std::vector<uint64_t> expected;
    for (int i = 0; i < 3; ++i) {
      expected.push_back(next_id);
      ASSERT_TRUE(send(next_id++));
    }
    ASSERT_TRUE(qp_->flush());
    EXPECT_EQ(wr_ids(fake_.send_doorbells.back()), expected) << "round " << round;
    for (uint64_t id : expected) complete(&raw_cq_, id, IBV_WC_SUCCESS, IBV_WC_SEND);
    EXPECT_EQ(poll(*cq_).size(), 3u);
    EXPECT_EQ(qp_->send_outstanding(), 0u);
  }
}

TEST_F(QueueTest, BusyCountsQueuedAndPostedUntilTheyComplete) {
  make_qp(4, 2);
  for (uint64_t id = 1; id <= 4; ++id) ASSERT_TRUE(send(id));
  auto full = send(5);
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, Errc::busy);
  ASSERT_TRUE(qp_->flush());
  EXPECT_FALSE(send(5));  // posted is not completed
  complete(&raw_cq_, 1, IBV_WC_SUCCESS, IBV_WC_SEND);
  ASSERT_EQ(poll(*cq_).size(), 1u);
  EXPECT_TRUE(send(5));

  ASSERT_TRUE(recv(10));
  ASSERT_TRUE(recv(11));
  EXPECT_EQ(recv(12).error().code, Errc::busy);
  ASSERT_TRUE(qp_->flush());
  complete(&raw_cq_, 10, IBV_WC_SUCCESS, IBV_WC_RECV);
  ASSERT_EQ(poll(*cq_).size(), 1u);
  EXPECT_TRUE(recv(12));
}

TEST_F(QueueTest, UnsignaledWrsCompleteWithTheNextSignaledOne) {
  make_qp(4, 4);
  ASSERT_TRUE(send(1, 0));
  ASSERT_TRUE(send(2, 0));
  ASSERT_TRUE(send(3, kWrSignaled));
  ASSERT_TRUE(send(4, 0));
  ASSERT_TRUE(qp_->flush());
  EXPECT_EQ(qp_->send_outstanding(), 4u);
  complete(&raw_cq_, 3, IBV_WC_SUCCESS, IBV_WC_SEND);
  const auto done = poll(*cq_);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].wr_id, 3u);
  EXPECT_EQ(qp_->send_outstanding(), 1u);  // WR 4 is unsignaled and still unknown
}

TEST_F(QueueTest, RejectedWrPostsThePrefixMovesToErrorAndFlushesTheRestInOrder) {
  make_qp(8, 8);
  for (uint64_t id = 1; id <= 4; ++id) ASSERT_TRUE(send(id));
  fake_.reject_send_at = 1;
  fake_.reject_errno = ENOMEM;
  auto flushed = qp_->flush();
  ASSERT_FALSE(flushed);
  EXPECT_EQ(flushed.error().os_errno, ENOMEM);
  EXPECT_STREQ(flushed.error().detail, "ibv_post_send");
  EXPECT_EQ(wr_ids(fake_.send_doorbells[0]), (std::vector<uint64_t>{1}));
  EXPECT_EQ(fake_.modify_to_error_calls, 1);
  EXPECT_TRUE(qp_->in_error());
  EXPECT_EQ(qp_->state(), QpState::error);

  // WR 1 is on the device: the software completions wait for it, to keep the QP's order.
  EXPECT_TRUE(poll(*cq_).empty());
  complete(&raw_cq_, 1, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND);
  const auto done = poll(*cq_);
  ASSERT_EQ(done.size(), 4u);
  EXPECT_EQ(done[0].wr_id, 1u);
  EXPECT_EQ(done[0].status, WcStatus::wr_flush_error);
  EXPECT_EQ(done[1].wr_id, 2u);
  EXPECT_EQ(done[1].status, WcStatus::local_qp_op_error);  // the rejected one
  EXPECT_EQ(done[1].vendor_error, static_cast<uint32_t>(ENOMEM));
  EXPECT_EQ(done[1].qp_num, kQpNum);
  EXPECT_EQ(done[2].wr_id, 3u);
  EXPECT_EQ(done[2].status, WcStatus::wr_flush_error);
  EXPECT_EQ(done[3].wr_id, 4u);
  EXPECT_EQ(qp_->send_outstanding(), 0u);
  EXPECT_TRUE(poll(*cq_).empty());  // each WR completes exactly once
}

TEST_F(QueueTest, RejectedReceiveFailsTheFlushAndCompletesEveryReceive) {
  make_qp(4, 4);
  ASSERT_TRUE(recv(10));
  ASSERT_TRUE(recv(11));
  fake_.reject_recv_at = 0;
  auto flushed = qp_->flush();
  ASSERT_FALSE(flushed);
  EXPECT_EQ(flushed.error().os_errno, EINVAL);
  EXPECT_STREQ(flushed.error().detail, "ibv_post_recv");
  const auto done = poll(*cq_);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].status, WcStatus::local_qp_op_error);
  EXPECT_EQ(done[0].opcode, WcOpcode::recv);
  EXPECT_EQ(done[1].status, WcStatus::wr_flush_error);
  EXPECT_EQ(qp_->recv_outstanding(), 0u);
}

TEST_F(QueueTest, MoveToErrorCompletesQueuedWrsWithFlushErrors) {
  make_qp(4, 4);
  ASSERT_TRUE(send(1, 0));
  ASSERT_TRUE(send(2));
  ASSERT_TRUE(recv(10));
  ASSERT_TRUE(qp_->move_to_error());
  EXPECT_EQ(fake_.modify_to_error_calls, 1);
  EXPECT_TRUE(fake_.send_doorbells.empty());
  const auto done = poll(*cq_);
  ASSERT_EQ(done.size(), 3u);
  for (const auto& wc : done) EXPECT_EQ(wc.status, WcStatus::wr_flush_error);
  EXPECT_EQ(qp_->send_outstanding(), 0u);
  EXPECT_EQ(qp_->recv_outstanding(), 0u);

  // Still accepts WRs, and flushes them without ringing the device.
  ASSERT_TRUE(send(3));
  ASSERT_TRUE(qp_->flush());
  EXPECT_TRUE(fake_.send_doorbells.empty());
  const auto late = poll(*cq_);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].wr_id, 3u);
  EXPECT_EQ(late[0].status, WcStatus::wr_flush_error);
  EXPECT_EQ(late[0].opcode, WcOpcode::send);
}

TEST_F(QueueTest, ErrorCompletionAlsoCompletesTheUnsignaledWrsBeforeIt) {
  make_qp(8, 4);
  ASSERT_TRUE(send(1, 0));
  ASSERT_TRUE(send(2, 0));  // fails at the peer
  ASSERT_TRUE(send(3, 0));
  ASSERT_TRUE(send(4));
  ASSERT_TRUE(qp_->flush());
  complete(&raw_cq_, 2, IBV_WC_REM_ACCESS_ERR, IBV_WC_SEND);
  auto done = poll(*cq_);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, WcStatus::remote_access_error);
  EXPECT_EQ(qp_->send_outstanding(), 2u);  // 1 succeeded silently, 2 failed; 3, 4 flush next
  EXPECT_TRUE(qp_->in_error());
  complete(&raw_cq_, 3, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND);
  complete(&raw_cq_, 4, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND);
  EXPECT_EQ(poll(*cq_).size(), 2u);
  EXPECT_EQ(qp_->send_outstanding(), 0u);
}

TEST_F(QueueTest, SharedCqTellsSendAndReceiveErrorsApartByWrId) {
  make_qp(4, 4);
  ASSERT_TRUE(recv(10));
  ASSERT_TRUE(recv(11));
  ASSERT_TRUE(send(20));
  ASSERT_TRUE(qp_->flush());
  // Flush errors carry no valid opcode: give them a misleading one.
  complete(&raw_cq_, 10, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND);
  complete(&raw_cq_, 20, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV);
  ASSERT_EQ(poll(*cq_).size(), 2u);
  EXPECT_EQ(qp_->recv_outstanding(), 1u);
  EXPECT_EQ(qp_->send_outstanding(), 0u);
  complete(&raw_cq_, 11, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND);
  ASSERT_EQ(poll(*cq_).size(), 1u);
  EXPECT_EQ(qp_->recv_outstanding(), 0u);
}

TEST_F(QueueTest, SeparateCqsAccountErrorsByTheCqThatReapedThem) {
  make_qp(4, 4, /*separate_recv_cq=*/true);
  ASSERT_TRUE(recv(10));
  ASSERT_TRUE(send(10));  // same wr_id on both sides: the CQ decides
  ASSERT_TRUE(qp_->flush());
  complete(&raw_recv_cq_, 10, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND);
  ASSERT_EQ(poll(*recv_cq_).size(), 1u);
  EXPECT_EQ(qp_->recv_outstanding(), 0u);
  EXPECT_EQ(qp_->send_outstanding(), 1u);
  complete(&raw_cq_, 10, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND);
  ASSERT_EQ(poll(*cq_).size(), 1u);
  EXPECT_EQ(qp_->send_outstanding(), 0u);
}

TEST_F(QueueTest, TwoBindsOfOneWindowInOneDoorbellCarryTheirOwnKeys) {
  make_qp(8, 4);
  ibv_mw raw_mw{};
  raw_mw.pd = &raw_pd_;
  raw_mw.rkey = 0x001200;
  raw_mw.type = IBV_MW_TYPE_2;
  ibv_mr raw_mr{};
  raw_mr.pd = &raw_pd_;
  IbvMemoryWindow window(kFakeOps, &raw_mw);
  IbvMemoryRegion region(kFakeOps, &raw_mr, kAccessMwBind | kAccessLocalWrite);

  SendWr bind;
  bind.opcode = WrOpcode::bind_mw;
  bind.wr_id = 1;
  bind.bind.mw = &window;
  bind.bind.mr = &region;
  bind.bind.addr = 0x1000;
  bind.bind.length = 4096;
  bind.bind.access = kAccessRemoteWrite;
  bind.bind.rkey = window.next_rkey();
  ASSERT_TRUE(qp_->post_send(bind));
  EXPECT_EQ(window.rkey(), 0x001201u);
  EXPECT_EQ(raw_mw.rkey, 0x001201u);  // set by hand: rdma-core never updates it

  SendWr invalidate;
  invalidate.opcode = WrOpcode::local_inv;
  invalidate.wr_id = 2;
  invalidate.invalidate_rkey = window.rkey();
  ASSERT_TRUE(qp_->post_send(invalidate));
  bind.wr_id = 3;
  bind.flags = kWrSignaled | kWrFenced;
  bind.bind.rkey = window.next_rkey();
  ASSERT_TRUE(qp_->post_send(bind));
  ASSERT_TRUE(qp_->flush());

  ASSERT_EQ(fake_.send_doorbells.size(), 1u);
  const auto& posted = fake_.send_doorbells[0];
  ASSERT_EQ(posted.size(), 3u);
  EXPECT_EQ(posted[0].opcode, IBV_WR_BIND_MW);
  EXPECT_EQ(posted[0].num_sge, 0);
  EXPECT_EQ(posted[0].bind_current_rkey, 0x001200u);
  EXPECT_EQ(posted[0].bind_new_rkey, 0x001201u);
  EXPECT_EQ(posted[1].opcode, IBV_WR_LOCAL_INV);
  EXPECT_EQ(posted[2].bind_current_rkey, 0x001201u);  // the first bind's key, not the raw one
  EXPECT_EQ(posted[2].bind_new_rkey, 0x001202u);
  EXPECT_EQ(posted[2].send_flags, static_cast<unsigned>(IBV_SEND_SIGNALED | IBV_SEND_FENCE));
  EXPECT_EQ(window.rkey(), 0x001202u);
}

TEST_F(QueueTest, BindOfAnotherPdsWindowIsRejectedAtPost) {
  make_qp(4, 4);
  ibv_pd other_pd{};
  ibv_mw raw_mw{};
  raw_mw.pd = &other_pd;
  ibv_mr raw_mr{};
  raw_mr.pd = &raw_pd_;
  IbvMemoryWindow window(kFakeOps, &raw_mw);
  IbvMemoryRegion region(kFakeOps, &raw_mr, kAccessMwBind);
  SendWr bind;
  bind.opcode = WrOpcode::bind_mw;
  bind.bind.mw = &window;
  bind.bind.mr = &region;
  bind.bind.rkey = window.next_rkey();
  auto result = qp_->post_send(bind);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::invalid_argument);
  EXPECT_EQ(window.rkey(), 0u);  // unchanged: nothing was queued
  bind.bind.mw = nullptr;
  EXPECT_EQ(qp_->post_send(bind).error().code, Errc::invalid_argument);
  EXPECT_EQ(qp_->send_outstanding(), 0u);
}

TEST_F(QueueTest, InvalidWrLeavesTheQueueUntouched) {
  make_qp(4, 4);
  const Sge sges[3] = {};
  SendWr wr;
  wr.sg_list = sges;
  wr.num_sge = 3;  // granted max_send_sge is 2
  EXPECT_EQ(qp_->post_send(wr).error().code, Errc::invalid_argument);
  RecvWr rwr;
  rwr.sg_list = sges;
  rwr.num_sge = 2;  // granted max_recv_sge is 1
  EXPECT_EQ(qp_->post_recv(rwr).error().code, Errc::invalid_argument);
  ASSERT_TRUE(qp_->flush());
  EXPECT_TRUE(fake_.send_doorbells.empty());
  EXPECT_TRUE(fake_.recv_doorbells.empty());
}

TEST_F(QueueTest, SrqCountsReceivesUntilAnAttachedQpConsumesThem) {
  make_qp(4, 0, false, /*with_srq=*/true);
  EXPECT_EQ(recv(1).error().code, Errc::invalid_argument);  // post to the SRQ instead
  RecvWr wr;
  wr.sg_list = &sge_;
  wr.num_sge = 1;
  wr.wr_id = 10;
  ASSERT_TRUE(srq_->post_recv(wr));
  wr.wr_id = 11;
  ASSERT_TRUE(srq_->post_recv(wr));
  wr.wr_id = 12;
  EXPECT_EQ(srq_->post_recv(wr).error().code, Errc::busy);
  ASSERT_TRUE(srq_->flush());
  ASSERT_EQ(fake_.srq_doorbells.size(), 1u);
  EXPECT_EQ(fake_.srq_doorbells[0], (std::vector<uint64_t>{10, 11}));
  complete(&raw_cq_, 11, IBV_WC_SUCCESS, IBV_WC_RECV);  // any order across QPs
  ASSERT_EQ(poll(*cq_).size(), 1u);
  EXPECT_EQ(srq_->outstanding(), 1u);
  EXPECT_TRUE(srq_->post_recv(wr));
}

TEST_F(QueueTest, SrqRejectedReceiveStaysQueuedForTheNextFlush) {
  make_qp(4, 0, false, /*with_srq=*/true);
  RecvWr wr;
  wr.sg_list = &sge_;
  wr.num_sge = 1;
  wr.wr_id = 10;
  ASSERT_TRUE(srq_->post_recv(wr));
  wr.wr_id = 11;
  ASSERT_TRUE(srq_->post_recv(wr));
  fake_.reject_srq_at = 1;
  auto flushed = srq_->flush();
  ASSERT_FALSE(flushed);
  EXPECT_STREQ(flushed.error().detail, "ibv_post_srq_recv");
  EXPECT_EQ(fake_.srq_doorbells[0], (std::vector<uint64_t>{10}));
  EXPECT_EQ(srq_->outstanding(), 2u);
  ASSERT_TRUE(srq_->flush());
  EXPECT_EQ(fake_.srq_doorbells[1], (std::vector<uint64_t>{11}));
}

TEST_F(QueueTest, PollFillsTheSpanInBatchesAndPassesForeignCompletionsThrough) {
  make_qp(64, 4);
  for (uint64_t id = 1; id <= 40; ++id) ASSERT_TRUE(send(id));
  ASSERT_TRUE(qp_->flush());
  for (uint64_t id = 1; id <= 40; ++id) complete(&raw_cq_, id, IBV_WC_SUCCESS, IBV_WC_SEND);
  complete(&raw_cq_, 99, IBV_WC_SUCCESS, IBV_WC_SEND, /*qp_num=*/0x999);  // a destroyed QP's
  EXPECT_EQ(poll(*cq_, 5).size(), 5u);
  const auto rest = poll(*cq_, 64);  // more than one ibv_poll_cq batch of 32
  ASSERT_EQ(rest.size(), 36u);
  EXPECT_EQ(rest.back().wr_id, 99u);
  EXPECT_EQ(rest.back().qp_num, 0x999u);
  EXPECT_EQ(qp_->send_outstanding(), 0u);
  EXPECT_TRUE(poll(*cq_, 0).empty());
}

TEST_F(QueueTest, DestroyingAQpWithUnreportedFlushesUnlinksItFromTheCq) {
  make_qp(4, 4);
  ASSERT_TRUE(send(1));
  ASSERT_TRUE(recv(2));
  ASSERT_TRUE(qp_->move_to_error());
  qp_.reset();
  EXPECT_EQ(fake_.destroyed_qps, 1);
  EXPECT_TRUE(poll(*cq_).empty());  // nothing dangles
}

TEST_F(QueueTest, ArmAndConsumeEventNeedAnEventChannel) {
  make_qp(4, 4);
  EXPECT_EQ(cq_->event_fd(), -1);
  EXPECT_EQ(cq_->arm().error().code, Errc::bad_state);
  EXPECT_EQ(cq_->consume_event().error().code, Errc::bad_state);
  EXPECT_EQ(cq_->depth(), 256u);
}

}  // namespace
}  // namespace nvmf::verbs::ibverbs
