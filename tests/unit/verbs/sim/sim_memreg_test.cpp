// Type-2 memory windows on the sim: bind, remote access through window keys (range, rights,
// invalidated keys), local and remote invalidation, and the 2017 invalidate/re-bind race under
// each hardware profile (memreg-2017-race.md section 4, canonical failing trace).
#include <gtest/gtest.h>

#include <span>
#include <vector>

#include "sim_test_util.h"

namespace nvmf::verbs::sim::test {
namespace {

constexpr uint32_t kRemoteRw = kAccessRemoteRead | kAccessRemoteWrite;

std::unique_ptr<MemoryWindow> make_window(Side& side) {
  auto mw = side.pd->allocate_window();
  EXPECT_TRUE(mw);
  return mw ? std::move(*mw) : nullptr;
}

// Binds `mw` over the host buffer [offset, offset + length) and waits for the bind.
uint32_t bind_and_wait(SimPair& pair, MemoryWindow& mw, size_t offset, uint64_t length,
                       uint32_t access = kRemoteRw) {
  const uint32_t key = mw.next_rkey();
  EXPECT_TRUE(pair.host.qp->post_send(
      bind_wr(500, mw, *pair.host.mr, pair.host.addr(offset), length, access, key)));
  EXPECT_TRUE(pair.host.qp->flush());
  auto wcs = pair.collect(*pair.host.send_cq, 1);
  EXPECT_EQ(wcs.size(), 1u);
  if (!wcs.empty()) {
    EXPECT_EQ(wcs[0].status, WcStatus::success);
    EXPECT_EQ(wcs[0].opcode, WcOpcode::bind_mw);
  }
  EXPECT_EQ(mw.rkey(), key);
  return key;
}

// The target writes `length` bytes to host address `offset` with `key`; returns its status.
WcStatus target_write(SimPair& pair, size_t host_offset, uint32_t length, uint32_t key,
                      uint8_t seed = 1) {
  fill(pair.target.buffer, 0, length, seed);
  Sge sge = pair.target.sge(0, length);
  EXPECT_TRUE(pair.target.qp->post_send(
      rdma_wr(WrOpcode::rdma_write, 900, &sge, pair.host.addr(host_offset), key, 0)));
  EXPECT_TRUE(pair.target.qp->flush());
  auto wcs = pair.collect(*pair.target.send_cq, 1, 5);
  return wcs.empty() ? WcStatus::success : wcs[0].status;  // unsignaled: no CQE on success
}

// A refused remote access as on hardware: requester error, both QPs in error, the owner of
// the memory sees only flushes of its receives.
void expect_failed_on_both_sides(SimPair& pair, WcStatus requester_status) {
  EXPECT_EQ(requester_status, WcStatus::remote_access_error);
  EXPECT_EQ(pair.target.qp->state(), QpState::error);
  EXPECT_EQ(pair.host.qp->state(), QpState::error);
  auto drained = pair.drain(3);
  EXPECT_TRUE(drained.host_send.empty());
  EXPECT_FALSE(drained.host_recv.empty());
  EXPECT_EQ(count_status(drained.host_recv, WcStatus::wr_flush_error), drained.host_recv.size());
}

TEST(SimWindow, BindGrantsAccessToTheWindowRangeOnly) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  pair.post_recvs(pair.host, 2);
  auto mw = make_window(pair.host);
  const uint32_t key = bind_and_wait(pair, *mw, 8192, 4096);
  EXPECT_EQ(pair.host_provider().key_state(key), KeyState::valid);
  EXPECT_EQ(target_write(pair, 8192, 4096, key, 7), WcStatus::success);
  EXPECT_TRUE(filled(pair.host.buffer, 8192, 4096, 7));
  // 200 bytes from the window's last 100: inside the MR, outside the window (rxe allows it,
  // the sim does not).
  const WcStatus status = target_write(pair, 8192 + 4000, 200, key, 8);
  expect_failed_on_both_sides(pair, status);
  EXPECT_FALSE(filled(pair.host.buffer, 8192 + 4000, 200, 8));
}

TEST(SimWindow, ReadOnlyWindowRefusesWritesAndServesReads) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  pair.post_recvs(pair.host, 1);
  auto mw = make_window(pair.host);
  const uint32_t key = bind_and_wait(pair, *mw, 0, 4096, kAccessRemoteRead);
  fill(pair.host.buffer, 0, 4096, 3);
  Sge sge = pair.target.sge(0, 4096);
  ASSERT_TRUE(
      pair.target.qp->post_send(rdma_wr(WrOpcode::rdma_read, 1, &sge, pair.host.addr(0), key)));
  ASSERT_TRUE(pair.target.qp->flush());
  auto wcs = pair.collect(*pair.target.send_cq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::success);
  EXPECT_TRUE(filled(pair.target.buffer, 0, 4096, 3));
  expect_failed_on_both_sides(pair, target_write(pair, 0, 16, key));
}

TEST(SimWindow, AccessWithAnInvalidatedKeyFailsOnBothSides) {
  for (SimProfile profile : {SimProfile::rxe, SimProfile::mlx5_2017}) {
    SCOPED_TRACE(sim_profile_name(profile));
    PairOpts opts;
    opts.sim.profile = profile;
    SimPair pair(opts);
    ASSERT_NE(pair.target.qp, nullptr);
    pair.post_recvs(pair.host, 2);
    auto mw = make_window(pair.host);
    const uint32_t key = bind_and_wait(pair, *mw, 0, 4096);
    ASSERT_TRUE(pair.host.qp->post_send(local_inv_wr(2, key)));
    ASSERT_TRUE(pair.host.qp->flush());
    auto wcs = pair.collect(*pair.host.send_cq, 1);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::success);
    EXPECT_EQ(wcs[0].opcode, WcOpcode::local_inv);
    EXPECT_EQ(pair.host_provider().key_state(key), KeyState::free);
    fill(pair.host.buffer, 0, 16, 0);
    expect_failed_on_both_sides(pair, target_write(pair, 0, 16, key, 9));
    EXPECT_FALSE(filled(pair.host.buffer, 0, 16, 9));
    EXPECT_EQ(pair.host_provider().counters().remote_access_errors, 1u);
  }
}

TEST(SimWindow, UnsignaledLocalInvalidateRevokesRemoteAccessAtOnceEvenWithLag) {
  // The lag delays what later binds see, never what remote accesses see.
  PairOpts opts;
  opts.sim.profile = SimProfile::mlx5_2017;
  opts.sim.mkey_commit_lag_steps = 50;
  SimPair pair(opts);
  ASSERT_NE(pair.target.qp, nullptr);
  pair.post_recvs(pair.host, 1);
  auto mw = make_window(pair.host);
  const uint32_t key = bind_and_wait(pair, *mw, 0, 4096);
  ASSERT_TRUE(pair.host.qp->post_send(local_inv_wr(2, key, 0)));
  ASSERT_TRUE(pair.host.qp->flush());
  expect_failed_on_both_sides(pair, target_write(pair, 0, 16, key));
}

TEST(SimWindow, OutOfRangeAndUnknownKeysFailOnBothSides) {
  {
    SimPair pair;
    ASSERT_NE(pair.target.qp, nullptr);
    pair.post_recvs(pair.host, 1);
    // The MR's own rkey, running past the end of the MR.
    expect_failed_on_both_sides(pair,
                                target_write(pair, kBufferBytes - 8, 16, pair.host.mr->rkey()));
  }
  {
    SimPair pair;
    ASSERT_NE(pair.target.qp, nullptr);
    pair.post_recvs(pair.host, 1);
    expect_failed_on_both_sides(pair, target_write(pair, 0, 16, 0x00ABCD00u));
  }
  {
    SimPair pair;
    ASSERT_NE(pair.target.qp, nullptr);
    pair.post_recvs(pair.host, 1);
    // Right index, wrong key byte.
    expect_failed_on_both_sides(pair, target_write(pair, 0, 16, pair.host.mr->rkey() ^ 0x80u));
  }
}

TEST(SimWindow, SendWithInvalidateReportsTheKeyAndFreesTheWindow) {
  PairOpts opts;
  opts.target_srq = true;
  SimPair pair(opts);
  ASSERT_NE(pair.target.qp, nullptr);
  pair.post_recvs(pair.host, 3);
  auto mw = make_window(pair.host);
  const uint32_t key = bind_and_wait(pair, *mw, 0, 4096);
  Sge sge = pair.target.sge(0, 16);
  ASSERT_TRUE(pair.target.qp->post_send(send_inv_wr(1, &sge, key)));
  ASSERT_TRUE(pair.target.qp->flush());
  auto recv = pair.collect(*pair.host.recv_cq, 1);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0].status, WcStatus::success);
  EXPECT_TRUE(recv[0].remote_invalidated);
  EXPECT_EQ(recv[0].invalidated_rkey, key);
  EXPECT_EQ(recv[0].byte_len, 16u);
  EXPECT_EQ(pair.host_provider().key_state(key), KeyState::free);
  EXPECT_EQ(pair.collect(*pair.target.send_cq, 1).size(), 1u);
  // FREE again: the window can be bound with its next key, and the old key is dead.
  const uint32_t next = bind_and_wait(pair, *mw, 0, 4096);
  EXPECT_NE(next, key);
  EXPECT_EQ(target_write(pair, 0, 16, next), WcStatus::success);
  expect_failed_on_both_sides(pair, target_write(pair, 0, 16, key));
  // A plain SEND does not claim an invalidation.
}

TEST(SimWindow, PlainSendDoesNotInvalidate) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  pair.post_recvs(pair.host, 1);
  auto mw = make_window(pair.host);
  const uint32_t key = bind_and_wait(pair, *mw, 0, 4096);
  Sge sge = pair.target.sge(0, 16);
  ASSERT_TRUE(pair.target.qp->post_send(send_wr(1, &sge)));
  ASSERT_TRUE(pair.target.qp->flush());
  auto recv = pair.collect(*pair.host.recv_cq, 1);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_FALSE(recv[0].remote_invalidated);
  EXPECT_EQ(recv[0].invalidated_rkey, 0u);
  EXPECT_EQ(pair.host_provider().key_state(key), KeyState::valid);
}

TEST(SimWindow, SendWithInvalidateOfABadKeyFailsAsTheProfileDoes) {
  {
    // rxe (rxe-feasibility.md F4): the receiver fails, the sender completes successfully.
    SimPair pair;
    ASSERT_NE(pair.target.qp, nullptr);
    pair.post_recvs(pair.host, 2);
    auto mw = make_window(pair.host);  // never bound
    Sge sge = pair.target.sge(0, 16);
    ASSERT_TRUE(pair.target.qp->post_send(send_inv_wr(1, &sge, mw->rkey())));
    ASSERT_TRUE(pair.target.qp->flush());
    auto drained = pair.drain(3);
    ASSERT_EQ(drained.target_send.size(), 1u);
    EXPECT_EQ(drained.target_send[0].status, WcStatus::success);
    ASSERT_EQ(drained.host_recv.size(), 2u);
    EXPECT_EQ(drained.host_recv[0].status, WcStatus::remote_invalid_request_error);
    EXPECT_EQ(drained.host_recv[1].status, WcStatus::wr_flush_error);
    EXPECT_EQ(pair.host.qp->state(), QpState::error);
  }
  {
    PairOpts opts;
    opts.sim.profile = SimProfile::mlx5_2017;
    SimPair pair(opts);
    ASSERT_NE(pair.target.qp, nullptr);
    pair.post_recvs(pair.host, 2);
    auto mw = make_window(pair.host);
    Sge sge = pair.target.sge(0, 16);
    ASSERT_TRUE(pair.target.qp->post_send(send_inv_wr(1, &sge, mw->rkey())));
    ASSERT_TRUE(pair.target.qp->flush());
    auto drained = pair.drain(3);
    ASSERT_EQ(drained.target_send.size(), 1u);
    EXPECT_EQ(drained.target_send[0].status, WcStatus::remote_invalid_request_error);
    EXPECT_EQ(count_status(drained.host_recv, WcStatus::wr_flush_error), 2u);
    EXPECT_EQ(pair.host.qp->state(), QpState::error);
    EXPECT_EQ(pair.target.qp->state(), QpState::error);
  }
}

TEST(SimWindow, LocalInvalidateOfAnUnboundOrMismatchedKeyFails) {
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    SimPair pair;
    ASSERT_NE(pair.target.qp, nullptr);
    auto mw = make_window(pair.host);
    uint32_t key = mw->rkey();  // variant 0: never bound
    if (variant >= 1) {
      const uint32_t bound = bind_and_wait(pair, *mw, 0, 4096);
      key = variant == 1 ? bound ^ 0x40u          // wrong key byte
                         : pair.host.mr->lkey();  // an MR, not a window
    }
    Sge sge = pair.host.sge(0, 16);
    ASSERT_TRUE(pair.host.qp->post_send(local_inv_wr(1, key, 0)));  // unsignaled: still reported
    ASSERT_TRUE(pair.host.qp->post_send(send_wr(2, &sge, 0)));
    ASSERT_TRUE(pair.host.qp->flush());
    auto wcs = pair.collect(*pair.host.send_cq, 2);
    ASSERT_EQ(wcs.size(), 2u);
    EXPECT_EQ(wcs[0].wr_id, 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::local_qp_op_error);
    EXPECT_EQ(wcs[1].status, WcStatus::wr_flush_error);
    EXPECT_EQ(pair.host.qp->state(), QpState::error);
  }
}

TEST(SimWindow, LocalInvalidateTwiceFailsTheSecondTime) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  auto mw = make_window(pair.host);
  const uint32_t key = bind_and_wait(pair, *mw, 0, 4096);
  ASSERT_TRUE(pair.host.qp->post_send(local_inv_wr(1, key)));
  ASSERT_TRUE(pair.host.qp->post_send(local_inv_wr(2, key)));
  ASSERT_TRUE(pair.host.qp->flush());
  auto wcs = pair.collect(*pair.host.send_cq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::success);
  EXPECT_EQ(wcs[1].status, WcStatus::local_qp_op_error);
}

TEST(SimWindow, BindChecksWindowStateKeyIndexAndParentMr) {
  enum Case { still_valid, wrong_index, no_bind_right, outside_mr, write_without_local_write };
  for (Case c : {still_valid, wrong_index, no_bind_right, outside_mr, write_without_local_write}) {
    SCOPED_TRACE(static_cast<int>(c));
    PairOpts opts;
    if (c == no_bind_right) opts.host_mr_access = kAccessLocalWrite | kAccessRemoteRead;
    if (c == write_without_local_write) opts.host_mr_access = kAccessRemoteRead | kAccessMwBind;
    SimPair pair(opts);
    ASSERT_NE(pair.target.qp, nullptr);
    pair.post_recvs(pair.host, 1);
    auto mw = make_window(pair.host);
    uint32_t key = mw->next_rkey();
    uint64_t addr = pair.host.addr(0);
    uint64_t length = 4096;
    if (c == still_valid) {
      bind_and_wait(pair, *mw, 0, 4096);
      key = mw->next_rkey();
    }
    if (c == wrong_index) key ^= 0x100u;
    if (c == outside_mr) length = kBufferBytes + 1;
    ASSERT_TRUE(
        pair.host.qp->post_send(bind_wr(1, *mw, *pair.host.mr, addr, length, kRemoteRw, key, 0)));
    ASSERT_TRUE(pair.host.qp->flush());
    auto drained = pair.drain(3);
    ASSERT_EQ(drained.host_send.size(), 1u);
    EXPECT_EQ(drained.host_send[0].wr_id, 1u);
    EXPECT_EQ(drained.host_send[0].status, WcStatus::mw_bind_error);
    EXPECT_EQ(pair.host.qp->state(), QpState::error);
    EXPECT_EQ(count_status(drained.host_recv, WcStatus::wr_flush_error), 1u);
  }
}

TEST(SimWindow, DestroyingTheQpFreesItsWindowsForTheNextConnection) {
  SimPair pair;
  ASSERT_NE(pair.target.qp, nullptr);
  auto mw = make_window(pair.host);
  const uint32_t key = bind_and_wait(pair, *mw, 0, 4096);
  ASSERT_TRUE(pair.host.id->disconnect());
  EXPECT_EQ(pair.host_provider().key_state(key), KeyState::valid);  // bound to a dead QP
  pair.host.id.reset();
  pair.host.qp = nullptr;
  EXPECT_EQ(pair.host_provider().key_state(key), KeyState::free);
}

// --- The canonical failing trace -------------------------------------------------------
//
// host:   BIND(W,k1) SEND(c1)             target: RECV(c1) WRITE(k1) SEND(rsp1, no invalidate)
// host:   RECV(rsp1) -> LOCAL_INV(W,k1) unsignaled -> BIND(W,k2) SEND(c2), one doorbell.

struct TraceResult {
  std::vector<WorkCompletion> host_send;  // after the second I/O
  std::vector<WorkCompletion> host_recv;
  QpState host_state = QpState::reset;
  bool second_write_ok = false;
};

struct TraceOpts {
  SimProfile profile = SimProfile::mlx5_2017;
  uint32_t lag = 8;
  bool fence_second_bind = false;
  int polls_between = 0;
  uint32_t local_inv_flags = 0;  // kWrSignaled: the LOCAL_INV is signaled, but not waited for
  SendFence send_fence = SendFence::profile;
  uint32_t slow_one_in = SimOpts{}.mkey_commit_slow_one_in;
  uint64_t seed = 1;
};

TraceResult run_canonical_trace(const TraceOpts& trace) {
  const bool fence_second_bind = trace.fence_second_bind;
  const int polls_between = trace.polls_between;
  PairOpts opts;
  opts.sim.profile = trace.profile;
  opts.sim.mkey_commit_lag_steps = trace.lag;
  opts.sim.send_fence = trace.send_fence;
  opts.sim.mkey_commit_slow_one_in = trace.slow_one_in;
  opts.sim.seed = trace.seed;
  SimPair pair(opts);
  TraceResult result;
  if (pair.target.qp == nullptr) return result;
  pair.post_recvs(pair.host, 4);
  pair.post_recvs(pair.target, 4, 0, 64);
  auto mw = make_window(pair.host);
  Sge capsule = pair.host.sge(60000, 64);

  // I/O 1.
  const uint32_t k1 = mw->next_rkey();
  EXPECT_TRUE(pair.host.qp->post_send(
      bind_wr(11, *mw, *pair.host.mr, pair.host.addr(4096), 4096, kRemoteRw, k1, 0)));
  EXPECT_TRUE(pair.host.qp->post_send(send_wr(12, &capsule)));
  EXPECT_TRUE(pair.host.qp->flush());
  EXPECT_EQ(pair.collect(*pair.target.recv_cq, 1).size(), 1u);
  EXPECT_EQ(target_write(pair, 4096, 4096, k1, 21), WcStatus::success);
  EXPECT_TRUE(filled(pair.host.buffer, 4096, 4096, 21));
  Sge response = pair.target.sge(30000, 16);
  EXPECT_TRUE(pair.target.qp->post_send(send_wr(13, &response)));  // no invalidation
  EXPECT_TRUE(pair.target.qp->flush());
  auto rsp1 = pair.collect(*pair.host.recv_cq, 1);
  EXPECT_EQ(rsp1.size(), 1u);
  EXPECT_EQ(pair.collect(*pair.host.send_cq, 1).size(), 1u);  // c1

  // The host invalidates itself (unsignaled, or signaled without waiting for the completion)
  // and reuses the window for I/O 2 at once.
  EXPECT_TRUE(pair.host.qp->post_send(local_inv_wr(14, k1, trace.local_inv_flags)));
  if (polls_between > 0) {
    // The LOCAL_INV rings in alone; each sim call afterwards is one step.
    EXPECT_TRUE(pair.host.qp->flush());
    for (int i = 0; i < polls_between; ++i) pair.host_provider().progress();
  }
  const uint32_t k2 = mw->next_rkey();
  EXPECT_EQ(k2 >> 8, k1 >> 8);
  EXPECT_TRUE(
      pair.host.qp->post_send(bind_wr(15, *mw, *pair.host.mr, pair.host.addr(4096), 4096, kRemoteRw,
                                      k2, fence_second_bind ? uint32_t{kWrFenced} : 0u)));
  EXPECT_TRUE(pair.host.qp->post_send(send_wr(16, &capsule)));
  EXPECT_TRUE(pair.host.qp->flush());
  const bool signaled_inv = (trace.local_inv_flags & kWrSignaled) != 0;
  result.host_send = pair.collect(*pair.host.send_cq, signaled_inv ? 2 : 1);
  if (signaled_inv && !result.host_send.empty() && result.host_send[0].wr_id == 14 &&
      result.host_send[0].status == WcStatus::success) {
    // The LOCAL_INV's own completion: it executed before the bind whatever happened next.
    result.host_send.erase(result.host_send.begin());
  }
  result.host_state = pair.host.qp->state();
  if (result.host_state == QpState::error) {
    auto rest = pair.drain(3);
    result.host_send.insert(result.host_send.end(), rest.host_send.begin(), rest.host_send.end());
    result.host_recv = rest.host_recv;
  } else if (pair.collect(*pair.target.recv_cq, 1).size() == 1) {
    result.second_write_ok = target_write(pair, 4096, 4096, k2, 22) == WcStatus::success &&
                             filled(pair.host.buffer, 4096, 4096, 22);
  }
  return result;
}

TraceResult run_canonical_trace(SimProfile profile, uint32_t lag, bool fence_second_bind,
                                int polls_between = 0) {
  TraceOpts trace;
  trace.profile = profile;
  trace.lag = lag;
  trace.fence_second_bind = fence_second_bind;
  trace.polls_between = polls_between;
  return run_canonical_trace(trace);
}

void expect_trace_fails(const TraceResult& result) {
  EXPECT_EQ(result.host_state, QpState::error);
  ASSERT_EQ(result.host_send.size(), 2u);
  EXPECT_EQ(result.host_send[0].wr_id, 15u);  // the unsignaled bind still reports its error
  EXPECT_EQ(result.host_send[0].status, WcStatus::mw_bind_error);
  EXPECT_EQ(static_cast<int>(result.host_send[0].status), 6);
  EXPECT_EQ(result.host_send[1].wr_id, 16u);
  EXPECT_EQ(result.host_send[1].status, WcStatus::wr_flush_error);
  EXPECT_EQ(count_status(result.host_recv, WcStatus::wr_flush_error), 3u);
}

void expect_trace_passes(const TraceResult& result) {
  EXPECT_EQ(result.host_state, QpState::ready_to_send);
  ASSERT_EQ(result.host_send.size(), 1u);
  EXPECT_EQ(result.host_send[0].wr_id, 16u);
  EXPECT_EQ(result.host_send[0].status, WcStatus::success);
  EXPECT_TRUE(result.second_write_ok);
}

TEST(SimCanonicalTrace, FailsUnderMlx5_2017) {
  expect_trace_fails(run_canonical_trace(SimProfile::mlx5_2017, 8, false));
}

TEST(SimCanonicalTrace, SucceedsUnderRxe) {
  expect_trace_passes(run_canonical_trace(SimProfile::rxe, 8, false));
}

TEST(SimCanonicalTrace, SucceedsUnderMlx5Fenced) {
  expect_trace_passes(run_canonical_trace(SimProfile::mlx5_fenced, 8, false));
}

TEST(SimCanonicalTrace, SucceedsUnderMlx5_2017WhenTheBindIsFenced) {
  expect_trace_passes(run_canonical_trace(SimProfile::mlx5_2017, 8, true));
}

TEST(SimCanonicalTrace, Mlx5_2017FailsOnlyWhileTheLagExceedsTheDistance) {
  // Adjacent WQEs are one step apart: a lag of 1 has landed before the bind starts.
  expect_trace_passes(run_canonical_trace(SimProfile::mlx5_2017, 1, false));
  expect_trace_fails(run_canonical_trace(SimProfile::mlx5_2017, 2, false));
  // Each sim call is a step too: enough calls between LOCAL_INV and BIND and it has landed.
  expect_trace_fails(run_canonical_trace(SimProfile::mlx5_2017, 8, false, 3));
  expect_trace_passes(run_canonical_trace(SimProfile::mlx5_2017, 8, false, 10));
}

TEST(SimCanonicalTrace, SignaledInvalidateWaitedForIsSafeUnderMlx5_2017) {
  PairOpts opts;
  opts.sim.profile = SimProfile::mlx5_2017;
  SimPair pair(opts);
  ASSERT_NE(pair.target.qp, nullptr);
  auto mw = make_window(pair.host);
  const uint32_t k1 = bind_and_wait(pair, *mw, 0, 4096);
  ASSERT_TRUE(pair.host.qp->post_send(local_inv_wr(1, k1, kWrSignaled)));  // Sagi's fix
  ASSERT_TRUE(pair.host.qp->flush());
  auto inv = pair.collect(*pair.host.send_cq, 1);
  ASSERT_EQ(inv.size(), 1u);
  EXPECT_EQ(inv[0].status, WcStatus::success);
  const uint32_t k2 = bind_and_wait(pair, *mw, 0, 4096);
  EXPECT_NE(k1, k2);
  EXPECT_EQ(pair.host.qp->state(), QpState::ready_to_send);
}

// --- The hazard model: commit lag whatever the signal bit, fences as separate rules ------
//
// These encode the issue-13 rules. Under the model before them a signaled LOCAL_INV took
// effect at once, a bind was visible at once, and FENCE always waited for key changes: each
// test below names the assertion that failed there.

// A fake memreg client that signals its LOCAL_INV but does not wait for the completion before
// rebinding the window: the signal bit does not make the change land sooner, so the bind
// races exactly as unsafe's does. (Before: the signaled LOCAL_INV landed at once and the
// bind succeeded, so expect_trace_fails saw host_state ready_to_send and no mw_bind_error.)
TEST(SimHazard, SignaledLocalInvRebindWithoutWaitingFailsUnderMlx5_2017) {
  TraceOpts trace;
  trace.local_inv_flags = kWrSignaled;
  expect_trace_fails(run_canonical_trace(trace));
  trace.polls_between = 3;  // a few polls later, still before the completion: the same
  expect_trace_fails(run_canonical_trace(trace));
  // Waiting for it (more polls than the lag) is what makes it safe.
  trace.polls_between = 10;
  expect_trace_passes(run_canonical_trace(trace));
  // rxe lands it at once, the umr_fence waits for it: both safe without waiting.
  trace.polls_between = 0;
  trace.profile = SimProfile::rxe;
  expect_trace_passes(run_canonical_trace(trace));
  trace.profile = SimProfile::mlx5_fenced;
  expect_trace_passes(run_canonical_trace(trace));
}

// Polls of the host send CQ until one completion arrives; -1 if none within `polls_max`.
int polls_until_completion(SimPair& pair, WorkCompletion* wc, int polls_max = 200) {
  for (int poll = 1; poll <= polls_max; ++poll) {
    if (pair.host.send_cq->poll(std::span<WorkCompletion>(wc, 1)) == 1) return poll;
  }
  return -1;
}

// The CQE of a signaled LOCAL_INV comes only once its key change is visible, `lag` steps
// after it executed; remote access through the key is refused from the start. (Before: the
// CQE came on the first poll, so EXPECT_GT(polls, kLag - 5) failed.)
TEST(SimHazard, SignaledLocalInvCompletesOnlyAfterItsCommitLag) {
  constexpr uint32_t kLag = 40;
  for (SimProfile profile : {SimProfile::rxe, SimProfile::mlx5_2017, SimProfile::mlx5_fenced}) {
    SCOPED_TRACE(sim_profile_name(profile));
    PairOpts opts;
    opts.sim.profile = profile;
    opts.sim.mkey_commit_lag_steps = kLag;
    SimPair pair(opts);
    ASSERT_NE(pair.target.qp, nullptr);
    pair.post_recvs(pair.host, 1);
    auto mw = make_window(pair.host);
    const uint32_t key = bind_and_wait(pair, *mw, 0, 4096);
    ASSERT_TRUE(pair.host.qp->post_send(local_inv_wr(1, key, kWrSignaled)));
    ASSERT_TRUE(pair.host.qp->flush());
    EXPECT_EQ(pair.host_provider().key_state(key), KeyState::free);  // committed at execute
    WorkCompletion wc;
    const int polls = polls_until_completion(pair, &wc);
    ASSERT_GT(polls, 0);
    EXPECT_EQ(wc.status, WcStatus::success);
    EXPECT_EQ(wc.opcode, WcOpcode::local_inv);
    if (profile == SimProfile::rxe) {
      EXPECT_EQ(polls, 1);
    } else {
      EXPECT_GT(polls, static_cast<int>(kLag) - 5);  // one step per poll
      EXPECT_LE(polls, static_cast<int>(kLag) + 1);
    }
  }
}

// A bind's key works for remote access at once (the SEND behind it may carry it), but the
// bind completes, and a later bind's FREE check sees the window VALID, only after its lag.
// (Before: the bind completed on the first poll.)
TEST(SimHazard, BindIsUsableAtOnceButCompletesOnlyAfterItsCommitLag) {
  constexpr uint32_t kLag = 40;
  PairOpts opts;
  opts.sim.profile = SimProfile::mlx5_2017;
  opts.sim.mkey_commit_lag_steps = kLag;
  SimPair pair(opts);
  ASSERT_NE(pair.target.qp, nullptr);
  pair.post_recvs(pair.host, 1);
  auto mw = make_window(pair.host);
  const uint32_t key = mw->next_rkey();
  ASSERT_TRUE(pair.host.qp->post_send(
      bind_wr(1, *mw, *pair.host.mr, pair.host.addr(0), 4096, kRemoteRw, key, kWrSignaled)));
  ASSERT_TRUE(pair.host.qp->flush());
  EXPECT_EQ(pair.host_provider().key_state(key), KeyState::valid);
  // The target writes through the key before the host has seen the bind complete.
  fill(pair.target.buffer, 0, 64, 5);
  Sge sge = pair.target.sge(0, 64);
  ASSERT_TRUE(pair.target.qp->post_send(
      rdma_wr(WrOpcode::rdma_write, 900, &sge, pair.host.addr(0), key, kWrSignaled)));
  ASSERT_TRUE(pair.target.qp->flush());
  auto written = pair.collect(*pair.target.send_cq, 1);
  ASSERT_EQ(written.size(), 1u);
  EXPECT_EQ(written[0].status, WcStatus::success);
  EXPECT_TRUE(filled(pair.host.buffer, 0, 64, 5));
  WorkCompletion wc;
  const int polls = polls_until_completion(pair, &wc);
  EXPECT_EQ(wc.status, WcStatus::success);
  EXPECT_EQ(wc.opcode, WcOpcode::bind_mw);
  EXPECT_GT(polls, static_cast<int>(kLag) / 2);  // the target's calls were steps too
  EXPECT_EQ(pair.host.qp->state(), QpState::ready_to_send);
}

// mlx5's IBV_SEND_FENCE as a profile parameter. Where it orders key updates (the strong
// fence, the mlx5 profiles' default) a fenced rebind waits for the LOCAL_INV to land; where it
// is only the IBTA fence (prior RDMA READs) the rebind races. (Before: FENCE always waited on
// the mlx5 profiles, so the `reads` trace passed and expect_trace_fails failed.)
TEST(SimFence, FencedRebindIsSafeOnlyWhereTheFenceOrdersKeyUpdates) {
  TraceOpts trace;
  trace.fence_second_bind = true;
  expect_trace_passes(run_canonical_trace(trace));  // mlx5-2017's documented rule
  trace.send_fence = SendFence::key_updates;
  expect_trace_passes(run_canonical_trace(trace));
  trace.send_fence = SendFence::reads;
  expect_trace_fails(run_canonical_trace(trace));
  trace.profile = SimProfile::adversarial;
  trace.seed = 3;
  trace.send_fence = SendFence::key_updates;
  expect_trace_passes(run_canonical_trace(trace));
  // The umr_fence is the driver's, whatever IBV_SEND_FENCE does.
  trace.profile = SimProfile::mlx5_fenced;
  trace.send_fence = SendFence::reads;
  expect_trace_passes(run_canonical_trace(trace));
  trace.fence_second_bind = false;
  expect_trace_passes(run_canonical_trace(trace));
}

TEST(SimFence, ProfilesResolveTheirSendFence) {
  SimOpts opts;
  EXPECT_EQ(sim_send_fence(opts), SendFence::reads);  // rxe: the IBTA fence
  for (SimProfile profile : {SimProfile::mlx5_2017, SimProfile::mlx5_fenced,
                             SimProfile::adversarial, SimProfile::mlx5_2017_rare}) {
    opts.profile = profile;
    EXPECT_EQ(sim_send_fence(opts), SendFence::key_updates) << sim_profile_name(profile);
  }
  opts.send_fence = SendFence::reads;
  EXPECT_EQ(sim_send_fence(opts), SendFence::reads);
  opts.profile = SimProfile::rxe;
  opts.send_fence = SendFence::key_updates;
  EXPECT_EQ(sim_send_fence(opts), SendFence::key_updates);
}

// What a fenced SEND behind an unsignaled LOCAL_INV waits for: the strong fence holds it
// until the key change is visible, the IBTA fence does not (no READ is outstanding). (Before:
// it always waited, so the `reads` case delivered late.)
TEST(SimFence, StrongFenceWaitsForPriorKeyChangesAndTheIbtaFenceDoesNot) {
  constexpr uint32_t kLag = 40;
  for (SendFence fence : {SendFence::key_updates, SendFence::reads}) {
    SCOPED_TRACE(send_fence_name(fence));
    PairOpts opts;
    opts.sim.profile = SimProfile::mlx5_2017;
    opts.sim.mkey_commit_lag_steps = kLag;
    opts.sim.send_fence = fence;
    SimPair pair(opts);
    ASSERT_NE(pair.target.qp, nullptr);
    pair.post_recvs(pair.target, 1, 0, 64);
    auto mw = make_window(pair.host);
    const uint32_t key = bind_and_wait(pair, *mw, 0, 4096);
    Sge sge = pair.host.sge(60000, 16);
    ASSERT_TRUE(pair.host.qp->post_send(local_inv_wr(1, key, 0)));
    ASSERT_TRUE(pair.host.qp->post_send(send_wr(2, &sge, kWrSignaled | kWrFenced)));
    ASSERT_TRUE(pair.host.qp->flush());
    int polls = 0;
    std::vector<WorkCompletion> got;
    while (got.empty() && polls < 200) {
      ++polls;
      got = pair.collect(*pair.target.recv_cq, 1, 1);
    }
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status, WcStatus::success);
    if (fence == SendFence::key_updates) {
      EXPECT_GT(polls, static_cast<int>(kLag) - 5);
    } else {
      EXPECT_EQ(polls, 1);
    }
  }
}

// mlx5 INITIATOR_SMALL: the WQE after a BIND_MW waits for the prior RDMA READs, even when
// neither is fenced. The READ's completion is held back (adversarial delays), so a SEND that
// started early would reach the target while the READ's CQE is still missing at the host.
// (Pins the "previous WQE was a BIND / LOCAL_INV" state the fence table is indexed by.)
TEST(SimFence, TheWqeAfterABindWaitsForPriorReads) {
  int held_back = 0;  // polls at which the READ was still held back, the SEND not delivered
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE(seed);
    PairOpts opts;
    opts.sim.profile = SimProfile::adversarial;
    opts.sim.seed = seed;
    opts.sim.adversarial_completion_delay_steps = 200;
    SimPair pair(opts);
    ASSERT_NE(pair.target.qp, nullptr);
    pair.post_recvs(pair.target, 1, 0, 64);
    auto mw = make_window(pair.host);
    Sge read_sge = pair.host.sge(8192, 512);
    Sge capsule = pair.host.sge(60000, 16);
    ASSERT_TRUE(pair.host.qp->post_send(
        rdma_wr(WrOpcode::rdma_read, 1, &read_sge, pair.target.addr(0), pair.target.mr->rkey())));
    ASSERT_TRUE(pair.host.qp->post_send(
        bind_wr(2, *mw, *pair.host.mr, pair.host.addr(4096), 4096, kRemoteRw, mw->next_rkey(), 0)));
    ASSERT_TRUE(pair.host.qp->post_send(send_wr(3, &capsule, 0)));
    ASSERT_TRUE(pair.host.qp->flush());
    bool read_done = false;
    bool delivered = false;
    for (int poll = 0; poll < 2000 && !delivered; ++poll) {
      // The recv CQ first: when it shows the SEND, the READ must have completed before it.
      delivered = !pair.collect(*pair.target.recv_cq, 1, 1).empty();
      for (const WorkCompletion& wc : pair.collect(*pair.host.send_cq, 1, 1)) {
        EXPECT_EQ(wc.status, WcStatus::success);
        if (wc.wr_id == 1) read_done = true;
      }
      if (!delivered && !read_done && poll > 0) ++held_back;
      EXPECT_TRUE(!delivered || read_done) << "the SEND started before the READ completed";
    }
    EXPECT_TRUE(delivered);
  }
  EXPECT_GT(held_back, 0);  // the delays did hold READs back: the test can see a violation
}

// mlx5-2017-rare: the same rules, the lag drawn per WR: slow for one in `slow_one_in`.
TEST(SimRareRace, OneInOneIsTheCertainRace) {
  TraceOpts trace;
  trace.profile = SimProfile::mlx5_2017_rare;
  trace.slow_one_in = 1;
  expect_trace_fails(run_canonical_trace(trace));
  trace.fence_second_bind = true;  // and the same fences hold
  expect_trace_passes(run_canonical_trace(trace));
}

TEST(SimRareRace, TheRaceIsRareAndEachSeedReproducesItsRun) {
  constexpr uint64_t kSeeds = 400;
  constexpr uint32_t kOneIn = 8;
  auto failures = [](uint32_t one_in, std::vector<bool>* failed) {
    uint64_t count = 0;
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
      TraceOpts trace;
      trace.profile = SimProfile::mlx5_2017_rare;
      trace.slow_one_in = one_in;
      trace.seed = seed;
      const TraceResult result = run_canonical_trace(trace);
      const bool race = result.host_state == QpState::error;
      if (race) {
        EXPECT_FALSE(result.host_send.empty());
        if (!result.host_send.empty()) {
          EXPECT_EQ(result.host_send[0].status, WcStatus::mw_bind_error);
        }
      } else {
        expect_trace_passes(result);
      }
      count += race ? 1 : 0;
      if (failed != nullptr) failed->push_back(race);
    }
    return count;
  };
  std::vector<bool> first, second;
  const uint64_t rare = failures(kOneIn, &first);
  // Only the LOCAL_INV's draw matters here: about 1 in 8 of the runs race.
  EXPECT_GT(rare, kSeeds / kOneIn / 2);
  EXPECT_LT(rare, kSeeds / kOneIn * 2);
  EXPECT_EQ(failures(kOneIn, &second), rare);
  EXPECT_EQ(first, second);  // the same seeds race
  // The default rate: no run of this size races.
  EXPECT_EQ(failures(SimOpts{}.mkey_commit_slow_one_in, nullptr), 0u);
}

}  // namespace
}  // namespace nvmf::verbs::sim::test
