// libnvmf_host against the in-process target, queues: several I/O qpairs of one controller
// spread over both target reactors, a full queue answering busy, and disconnects (of one
// qpair, of the whole controller) with commands outstanding: every callback runs exactly once;
// and 64 queues connected in a row well inside the keep-alive timeout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "host_fixture.h"
#include "log_capture.h"

namespace nvmf::e2e {
namespace {

using host::IoCallback;

constexpr uint32_t kBlock = 512;

class HostQueuesTest : public HostFixture {
 protected:
  // Fills `qpair` with 1-block commands until it answers busy (or `limit` were accepted): writes of
  // pattern seed+i to LBA base+i (in-capsule) alternating with reads of LBA base+i into `buffer`
  // (keyed), one Completion per command. Returns how many were accepted.
  uint32_t fill_queue(host::Namespace& ns, host::IoQpair& qpair, DmaBuffer& buffer, uint64_t base,
                      uint32_t seed, std::vector<Completion>* completions,
                      uint32_t limit = UINT32_MAX) {
    completions->assign(qpair.depth() + 1, Completion{});
    uint32_t accepted = 0;
    for (uint32_t i = 0; i <= qpair.depth() && i < limit; ++i) {
      uint8_t* slot = buffer.data() + size_t{i} * kBlock;
      Result<void> submitted = Errc::ok;
      if (i % 2 == 0) {
        fill_pattern(slot, kBlock, seed + i);
        submitted = ns.write(qpair, slot, base + i, 1, &on_complete, &(*completions)[i]);
      } else {
        submitted = ns.read(qpair, slot, base + i, 1, &on_complete, &(*completions)[i]);
      }
      if (!submitted) {
        EXPECT_EQ(submitted.error().code, Errc::busy)
            << "command " << i << ": " << describe(submitted.error());
        break;
      }
      ++accepted;
    }
    completions->resize(accepted);
    return accepted;
  }

  // Every callback ran exactly once, with success or an SQ-deletion abort. Counts both.
  void expect_each_called_once_success_or_aborted(const std::vector<Completion>& completions,
                                                  uint32_t* succeeded, uint32_t* aborted) {
    *succeeded = 0;
    *aborted = 0;
    for (size_t i = 0; i < completions.size(); ++i) {
      const Completion& c = completions[i];
      EXPECT_EQ(c.calls, 1) << "command " << i;
      if (c.calls == 0) continue;
      if (c.status.is_success()) {
        ++*succeeded;
      } else if (is_sq_deletion_abort(c.status)) {
        ++*aborted;
      } else {
        ADD_FAILURE() << "command " << i << ": " << describe(c.status);
      }
    }
  }

  static std::vector<int> call_counts(const std::vector<Completion>& completions) {
    std::vector<int> counts;
    for (const Completion& c : completions) counts.push_back(c.calls);
    return counts;
  }
};

TEST_F(HostQueuesTest, FourQueuesOnBothReactorsAndAFifthIsBusy) {
  auto controller = connect(kNqn512, controller_opts(4));
  ASSERT_NE(controller, nullptr);
  ASSERT_EQ(controller->data().io_queues_granted, 4u);
  host::Namespace* ns = controller->ns(1);
  ASSERT_NE(ns, nullptr);

  std::vector<std::unique_ptr<host::IoQpair>> qpairs;
  std::set<uint16_t> qids;
  for (int i = 0; i < 4; ++i) {
    qpairs.push_back(alloc_qpair(*controller));
    ASSERT_NE(qpairs.back(), nullptr) << "qpair " << i;
    EXPECT_TRUE(qpairs.back()->connected());
    qids.insert(qpairs.back()->qid());
  }
  EXPECT_EQ(qids, (std::set<uint16_t>{1, 2, 3, 4}));
  EXPECT_EQ(controller->stats().io_qpairs_allocated, 4u);
  EXPECT_EQ(transport_->connection_count(), 5u) << "admin + 4 I/O connections";

  std::string message;
  auto fifth = controller->alloc_io_qpair({}, &message);
  ASSERT_FALSE(fifth) << "a 5th I/O queue with 4 granted";
  EXPECT_EQ(fifth.error().code, Errc::busy) << describe(fifth.error()) << ": " << message;
  EXPECT_EQ(transport_->connection_count(), 5u) << "the refused 5th queue connected anyway";

  // I/O on every queue, alone, to see which target reactor serves it (the one that did the
  // work), then all at once.
  std::vector<host::IoQpair*> all;
  for (auto& qpair : qpairs) all.push_back(qpair.get());
  std::set<int> reactors_used;
  for (size_t q = 0; q < qpairs.size(); ++q) {
    host::IoQpair& qpair = *qpairs[q];
    DmaBuffer out(*host_, 16 * kBlock);
    DmaBuffer in(*host_, 16 * kBlock);
    ASSERT_TRUE(out && in);
    fill_pattern(out.data(), out.size(), static_cast<uint32_t>(q));
    const uint64_t busy0 = harness_.reactor(0).stats().busy_iterations;
    const uint64_t busy1 = harness_.reactor(1).stats().busy_iterations;
    ASSERT_TRUE(
        run_io(qpair, [&](IoCallback cb,
                          void* ctx) { return ns->write(qpair, out.data(), q * 16, 16, cb, ctx); }))
        << "qpair " << q;
    ASSERT_TRUE(run_io(
        qpair,
        [&](IoCallback cb, void* ctx) { return ns->read(qpair, in.data(), q * 16, 16, cb, ctx); }))
        << "qpair " << q;
    EXPECT_TRUE(has_pattern(in.data(), in.size(), static_cast<uint32_t>(q))) << "qpair " << q;
    const uint64_t work0 = harness_.reactor(0).stats().busy_iterations - busy0;
    const uint64_t work1 = harness_.reactor(1).stats().busy_iterations - busy1;
    reactors_used.insert(work0 > work1 ? 0 : 1);
  }
  EXPECT_EQ(reactors_used, (std::set<int>{0, 1})) << "the target spreads queues round-robin";

  // All four at once, each reading what another one wrote.
  std::vector<std::unique_ptr<DmaBuffer>> buffers;
  std::vector<Completion> completions(qpairs.size());
  for (size_t q = 0; q < qpairs.size(); ++q) {
    buffers.push_back(std::make_unique<DmaBuffer>(*host_, 16 * kBlock));
    ASSERT_TRUE(*buffers.back());
    const size_t other = (q + 1) % qpairs.size();
    ASSERT_TRUE(
        ns->read(*qpairs[q], buffers[q]->data(), other * 16, 16, &on_complete, &completions[q]));
  }
  ASSERT_TRUE(run_until(all, [&] { return all_called(completions); }));
  for (size_t q = 0; q < qpairs.size(); ++q) {
    EXPECT_TRUE(completions[q].ok()) << "qpair " << q << ": " << describe(completions[q].status);
    EXPECT_TRUE(has_pattern(buffers[q]->data(), 16 * kBlock,
                            static_cast<uint32_t>((q + 1) % qpairs.size())))
        << "qpair " << q;
  }

  // A freed queue makes room for another.
  const uint16_t freed_qid = qpairs[1]->qid();
  qpairs[1].reset();
  auto again = alloc_qpair(*controller);
  ASSERT_NE(again, nullptr) << "no queue after one was freed";
  EXPECT_EQ(again->qid(), freed_qid);
  DmaBuffer check(*host_, 16 * kBlock);
  ASSERT_TRUE(check);
  ASSERT_TRUE(run_io(*again, [&](IoCallback cb, void* ctx) {
    return ns->read(*again, check.data(), 0, 16, cb, ctx);
  }));
  EXPECT_TRUE(has_pattern(check.data(), check.size(), 0));
}

TEST_F(HostQueuesTest, FullQueueAnswersBusyThenDrains) {
  auto controller = connect(kNqn512);
  ASSERT_NE(controller, nullptr);
  host::Namespace* ns = controller->ns(1);
  ASSERT_NE(ns, nullptr);
  auto qpair = alloc_qpair(*controller);
  ASSERT_NE(qpair, nullptr);
  const uint32_t depth = qpair->depth();
  ASSERT_EQ(depth, 127u);
  DmaBuffer buffer(*host_, size_t{depth + 1} * kBlock);
  ASSERT_TRUE(buffer);

  std::vector<Completion> completions;
  const uint32_t accepted = fill_queue(*ns, *qpair, buffer, 0, 1000, &completions);
  EXPECT_EQ(accepted, depth) << "busy before the queue was full";
  EXPECT_EQ(qpair->outstanding(), depth);
  EXPECT_GE(qpair->stats().busy, 1u);
  for (const Completion& c : completions) ASSERT_EQ(c.calls, 0) << "callback inside submit";
  // The commands go on the wire at the next process_completions() (one doorbell for the
  // batch); the target has not run yet, so no callback can run.
  EXPECT_EQ(qpair->process_completions(), 0);
  // Still busy, however often it is asked, until completions are processed.
  Completion extra;
  DmaBuffer one(*host_, kBlock);
  ASSERT_TRUE(one);
  for (int i = 0; i < 3; ++i) {
    harness_.poll_round();
    auto submitted = ns->read(*qpair, one.data(), 0, 1, &on_complete, &extra);
    ASSERT_FALSE(submitted) << "accepted beyond depth()";
    EXPECT_EQ(submitted.error().code, Errc::busy);
  }

  // Let the target finish everything, then reap with a budget: at most 5 callbacks.
  ASSERT_GE(harness_.poll_until_idle(), 0);
  const int reaped = qpair->process_completions(5);
  EXPECT_GT(reaped, 0);
  EXPECT_LE(reaped, 5);
  int called = 0;
  for (const Completion& c : completions) called += c.calls;
  EXPECT_EQ(called, reaped) << "process_completions(5) ran another number of callbacks";
  EXPECT_EQ(qpair->outstanding(), depth - static_cast<uint32_t>(reaped));

  ASSERT_TRUE(run_until({qpair.get()}, [&] { return all_called(completions); }))
      << "outstanding " << qpair->outstanding();
  for (int i = 0; i < 16; ++i) round({qpair.get()});
  for (size_t i = 0; i < completions.size(); ++i) {
    EXPECT_EQ(completions[i].calls, 1) << "command " << i;
    EXPECT_TRUE(completions[i].status.is_success())
        << "command " << i << ": " << describe(completions[i].status);
  }
  EXPECT_EQ(extra.calls, 0) << "a refused command's callback ran";
  EXPECT_EQ(qpair->outstanding(), 0u);
  EXPECT_EQ(qpair->stats().completed, qpair->stats().submitted);

  // Submitting works again, and every write of the full queue landed where it should.
  DmaBuffer back(*host_, size_t{depth} * kBlock);
  ASSERT_TRUE(back);
  ASSERT_TRUE(run_io(*qpair, [&](IoCallback cb, void* ctx) {
    return ns->read(*qpair, back.data(), 0, depth, cb, ctx);
  }));
  for (uint32_t i = 0; i < depth; i += 2) {
    EXPECT_TRUE(has_pattern(back.data() + size_t{i} * kBlock, kBlock, 1000 + i)) << "LBA " << i;
  }
}

TEST_F(HostQueuesTest, QueueFullAgainAndAgain) {
  // Several rounds of fill / drain: no slot, receive or buffer leaks.
  auto controller = connect(kNqn512);
  ASSERT_NE(controller, nullptr);
  host::Namespace* ns = controller->ns(1);
  auto qpair = alloc_qpair(*controller);
  ASSERT_NE(qpair, nullptr);
  DmaBuffer buffer(*host_, size_t{qpair->depth() + 1} * kBlock);
  ASSERT_TRUE(buffer);
  for (uint32_t pass = 0; pass < 5; ++pass) {
    std::vector<Completion> completions;
    EXPECT_EQ(fill_queue(*ns, *qpair, buffer, pass * 256, pass * 7, &completions), qpair->depth())
        << "pass " << pass;
    ASSERT_TRUE(run_until({qpair.get()}, [&] { return all_called(completions); }))
        << "pass " << pass;
    for (const Completion& c : completions) ASSERT_TRUE(c.ok()) << describe(c.status);
    EXPECT_EQ(qpair->outstanding(), 0u);
  }
}

TEST_F(HostQueuesTest, QueueSizeOptionGivesTheDepth) {
  auto controller = connect(kNqn512);
  ASSERT_NE(controller, nullptr);
  host::IoQpairOpts opts;
  opts.queue_size = 16;
  auto qpair = alloc_qpair(*controller, opts);
  ASSERT_NE(qpair, nullptr);
  EXPECT_EQ(qpair->depth(), 15u);
  DmaBuffer buffer(*host_, 17 * kBlock);
  ASSERT_TRUE(buffer);
  std::vector<Completion> completions;
  EXPECT_EQ(fill_queue(*controller->ns(1), *qpair, buffer, 0, 3, &completions), 15u);
  ASSERT_TRUE(run_until({qpair.get()}, [&] { return all_called(completions); }));
  for (const Completion& c : completions) EXPECT_TRUE(c.ok()) << describe(c.status);
}

TEST_F(HostQueuesTest, QpairDisconnectWithAFullQueueCallsEveryCallbackOnce) {
  auto controller = connect(kNqn512);
  ASSERT_NE(controller, nullptr);
  host::Namespace* ns = controller->ns(1);
  auto qpair = alloc_qpair(*controller);
  ASSERT_NE(qpair, nullptr);
  DmaBuffer buffer(*host_, size_t{qpair->depth() + 1} * kBlock);
  ASSERT_TRUE(buffer);
  std::vector<Completion> completions;
  ASSERT_EQ(fill_queue(*ns, *qpair, buffer, 0, 9, &completions), qpair->depth());
  // Ring the doorbell (no response can be there yet), then a couple of target rounds: some
  // commands finish at the target and their responses wait in the host's CQ, unreaped;
  // others are still in flight.
  EXPECT_EQ(qpair->process_completions(), 0);
  for (int i = 0; i < 2; ++i) harness_.poll_round();

  qpair->disconnect();
  EXPECT_FALSE(qpair->connected());
  EXPECT_EQ(qpair->outstanding(), 0u);
  uint32_t succeeded = 0;
  uint32_t aborted = 0;
  expect_each_called_once_success_or_aborted(completions, &succeeded, &aborted);
  EXPECT_EQ(succeeded + aborted, completions.size());
  EXPECT_GT(aborted, 0u) << "every command finished before disconnect: the test proves little";
  EXPECT_GT(succeeded, 0u) << "no command finished before disconnect: the test proves little";
  RecordProperty("succeeded", static_cast<int>(succeeded));
  RecordProperty("aborted", static_cast<int>(aborted));

  // Nothing after: no second call, whatever is polled.
  const std::vector<int> counts = call_counts(completions);
  for (int i = 0; i < 2000; ++i) {
    EXPECT_EQ(qpair->process_completions(), 0) << "round " << i;
    harness_.poll_round();
  }
  EXPECT_EQ(call_counts(completions), counts) << "callbacks ran after disconnect() returned";
  qpair->disconnect();  // idempotent
  EXPECT_EQ(call_counts(completions), counts);

  // Submitting on a disconnected queue: bad_state, no callback.
  DmaBuffer one(*host_, kBlock);
  ASSERT_TRUE(one);
  EXPECT_TRUE(refused(*qpair, Errc::bad_state, [&](IoCallback cb, void* ctx) {
    return ns->read(*qpair, one.data(), 0, 1, cb, ctx);
  }));
  EXPECT_TRUE(refused(*qpair, Errc::bad_state, [&](IoCallback cb, void* ctx) {
    return ns->write(*qpair, one.data(), 0, 1, cb, ctx);
  }));
  EXPECT_TRUE(refused(*qpair, Errc::bad_state,
                      [&](IoCallback cb, void* ctx) { return ns->flush(*qpair, cb, ctx); }));

  // The controller lives on: freeing the queue and allocating another works.
  qpair.reset();
  EXPECT_TRUE(controller->connected());
  auto fresh = alloc_qpair(*controller);
  ASSERT_NE(fresh, nullptr);
  ASSERT_TRUE(run_io(*fresh, [&](IoCallback cb, void* ctx) {
    return ns->read(*fresh, one.data(), 0, 1, cb, ctx);
  }));
  // The target cleaned the old queue up: admin + the fresh queue.
  for (int i = 0; i < kMaxRounds && transport_->connection_count() != 2; ++i) {
    harness_.poll_round();
  }
  EXPECT_EQ(transport_->connection_count(), 2u);
}

// Disconnect before the target ran at all: every command is aborted by the host, whether it
// was still in the host's send queue (no doorbell yet) or already at the target.
TEST_F(HostQueuesTest, QpairDisconnectBeforeTheTargetRan) {
  for (bool doorbell : {false, true}) {
    SCOPED_TRACE(doorbell ? "commands sent" : "commands not yet sent");
    auto controller = connect(kNqn512);
    ASSERT_NE(controller, nullptr);
    host::Namespace* ns = controller->ns(1);
    auto qpair = alloc_qpair(*controller);
    ASSERT_NE(qpair, nullptr);
    DmaBuffer buffer(*host_, size_t{qpair->depth() + 1} * kBlock);
    ASSERT_TRUE(buffer);
    std::vector<Completion> completions;
    ASSERT_EQ(fill_queue(*ns, *qpair, buffer, 0, 4, &completions), qpair->depth());
    if (doorbell) {
      EXPECT_EQ(qpair->process_completions(), 0);
    }
    qpair->disconnect();
    uint32_t succeeded = 0;
    uint32_t aborted = 0;
    expect_each_called_once_success_or_aborted(completions, &succeeded, &aborted);
    EXPECT_EQ(aborted, completions.size()) << succeeded << " succeeded without a target round";
    const std::vector<int> counts = call_counts(completions);
    for (int i = 0; i < 2000; ++i) {
      qpair->process_completions();
      harness_.poll_round();
    }
    EXPECT_EQ(call_counts(completions), counts);
  }
}

TEST_F(HostQueuesTest, ControllerDisconnectWithQpairsAllocatedAbortsTheirCommands) {
  auto controller = connect(kNqn512, controller_opts(2));
  ASSERT_NE(controller, nullptr);
  host::Namespace* ns = controller->ns(1);
  ASSERT_NE(ns, nullptr);
  auto first = alloc_qpair(*controller);
  auto second = alloc_qpair(*controller);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  DmaBuffer buffer_first(*host_, size_t{first->depth() + 1} * kBlock);
  DmaBuffer buffer_second(*host_, size_t{second->depth() + 1} * kBlock);
  ASSERT_TRUE(buffer_first && buffer_second);
  std::vector<Completion> completions_first;
  std::vector<Completion> completions_second;
  ASSERT_EQ(fill_queue(*ns, *first, buffer_first, 0, 1, &completions_first), first->depth());
  // The second queue only half full.
  const uint32_t half = second->depth() / 2;
  ASSERT_EQ(fill_queue(*ns, *second, buffer_second, 1000, 2, &completions_second, half), half);
  EXPECT_EQ(first->process_completions(), 0);
  EXPECT_EQ(second->process_completions(), 0);
  harness_.poll_round();

  ASSERT_TRUE(controller->disconnect());
  EXPECT_FALSE(controller->connected());
  EXPECT_FALSE(first->connected());
  EXPECT_FALSE(second->connected());
  EXPECT_EQ(first->outstanding(), 0u);
  EXPECT_EQ(second->outstanding(), 0u);
  uint32_t succeeded = 0;
  uint32_t aborted = 0;
  expect_each_called_once_success_or_aborted(completions_first, &succeeded, &aborted);
  EXPECT_EQ(succeeded + aborted, completions_first.size());
  expect_each_called_once_success_or_aborted(completions_second, &succeeded, &aborted);
  EXPECT_EQ(succeeded + aborted, completions_second.size());

  const std::vector<int> counts_first = call_counts(completions_first);
  const std::vector<int> counts_second = call_counts(completions_second);
  for (int i = 0; i < 2000; ++i) {
    first->process_completions();
    second->process_completions();
    controller->process_admin_completions();
    harness_.poll_round();
  }
  EXPECT_EQ(call_counts(completions_first), counts_first);
  EXPECT_EQ(call_counts(completions_second), counts_second);

  DmaBuffer one(*host_, kBlock);
  ASSERT_TRUE(one);
  EXPECT_TRUE(refused(*first, Errc::bad_state, [&](IoCallback cb, void* ctx) {
    return ns->read(*first, one.data(), 0, 1, cb, ctx);
  }));
  EXPECT_TRUE(refused(*second, Errc::bad_state, [&](IoCallback cb, void* ctx) {
    return ns->write(*second, one.data(), 0, 1, cb, ctx);
  }));
  std::string message;
  auto late = controller->alloc_io_qpair({}, &message);
  EXPECT_FALSE(late) << "a qpair from a disconnected controller";
  ASSERT_TRUE(controller->disconnect()) << "idempotent";

  // The target let the controller go.
  for (int i = 0; i < kMaxRounds &&
                  (target_->controller_count(kNqn512) != 0 || transport_->connection_count() != 0);
       ++i) {
    harness_.poll_round();
  }
  EXPECT_EQ(target_->controller_count(kNqn512), 0u);
  EXPECT_EQ(transport_->connection_count(), 0u);
  first.reset();
  second.reset();
}

TEST_F(HostQueuesTest, ControllerDestroyedWithItsQpairsFreedFirstIsClean) {
  // The plain way out: free qpairs, then the controller (its destructor disconnects).
  {
    auto controller = connect(kNqn512, controller_opts(2));
    ASSERT_NE(controller, nullptr);
    auto qpair = alloc_qpair(*controller);
    ASSERT_NE(qpair, nullptr);
    DmaBuffer buffer(*host_, 8 * kBlock);
    ASSERT_TRUE(buffer);
    ASSERT_TRUE(run_io(*qpair, [&](IoCallback cb, void* ctx) {
      return controller->ns(1)->read(*qpair, buffer.data(), 0, 8, cb, ctx);
    }));
    EXPECT_EQ(transport_->connection_count(), 2u);
  }
  for (int i = 0; i < kMaxRounds && transport_->connection_count() != 0; ++i) {
    harness_.poll_round();
  }
  EXPECT_EQ(transport_->connection_count(), 0u);
  EXPECT_EQ(target_->controller_count(kNqn512), 0u);
  // And the host connects again.
  auto again = connect(kNqn512);
  ASSERT_NE(again, nullptr);
}

// Issue 14: connecting 64 I/O queues one after the other finishes well inside the keep-alive
// timeout (users of SPDK and the kernel saw controllers expire while they connected many
// queues). This target restarts its keep-alive timer on Keep Alive only (no Traffic Based Keep
// Alive). Time in the fixture moves only when a test moves it: here every idle() round of a
// blocking call costs kRoundCostMs of fake time, far more than a real polling round
// (microseconds), so that a series of connects that spun many rounds would show up as fake
// time against KATO. The 64 connects take about 224 rounds (3.5 each): 224 ms, before the
// first Keep Alive is due. (The next test makes them slow.)
TEST_F(HostQueuesTest, SixtyFourQueuesConnectWellInsideTheKeepAliveTimeout) {
  constexpr uint16_t kQueues = 64;
  constexpr uint32_t kKatoMs = 10000;  // ControllerOpts' default
  constexpr uint64_t kRoundCostMs = 1;
  constexpr uint32_t kIoBytes = 4096;
  ASSERT_GE(target_->opts().max_qpairs_per_ctrlr, uint32_t{kQueues} + 1)
      << "the target must grant 64 I/O queues besides the admin queue";
  host::ControllerOpts opts = controller_opts(kQueues);
  opts.keep_alive_timeout_ms = kKatoMs;
  auto controller = connect(kNqn512, opts);
  ASSERT_NE(controller, nullptr);
  ASSERT_EQ(controller->data().io_queues_granted, kQueues);
  host::Namespace* ns = controller->ns(1);
  ASSERT_NE(ns, nullptr);
  test::LogCapture log;  // the target's "keep-alive timeout" line, if it expired the controller

  // The target's keep-alive timer runs from the admin Connect, just now.
  const uint64_t start_ns = harness_.clock().now_ns();
  const uint64_t rounds_before = idle_rounds_;
  idle_clock_step_ms_ = kRoundCostMs;
  std::vector<std::unique_ptr<host::IoQpair>> qpairs;
  for (uint16_t i = 0; i < kQueues; ++i) {
    qpairs.push_back(alloc_qpair(*controller));
    ASSERT_NE(qpairs.back(), nullptr) << "queue " << i;
    ASSERT_TRUE(qpairs.back()->connected()) << "queue " << i;
    EXPECT_EQ(qpairs.back()->qid(), i + 1);
  }
  idle_clock_step_ms_ = 0;
  const uint64_t connect_ms = (harness_.clock().now_ns() - start_ns) / (1000 * 1000);
  const uint64_t rounds = idle_rounds_ - rounds_before;
  RecordProperty("connect_ms", static_cast<int>(connect_ms));
  RecordProperty("idle_rounds", static_cast<int>(rounds));
  // Well inside: before even the first Keep Alive is due (KATO/2), since none can go out
  // meanwhile.
  EXPECT_LT(connect_ms, kKatoMs / 2) << rounds << " idle rounds for " << kQueues << " connects";
  EXPECT_EQ(controller->stats().keep_alives_sent, 0u) << "a Keep Alive before KATO/2";
  EXPECT_EQ(controller->stats().io_qpairs_allocated, kQueues);
  EXPECT_TRUE(controller->connected());
  EXPECT_FALSE(log.contains("keep-alive timeout")) << "the target expired the controller";
  EXPECT_EQ(transport_->connection_count(), size_t{kQueues} + 1) << "admin + 64 I/O connections";
  // The target agrees: one controller, with its admin queue and all 64 I/O queues.
  const std::vector<target::SubsystemInfo> subsystems = target_->subsystems_info();
  const auto subsystem =
      std::find_if(subsystems.begin(), subsystems.end(),
                   [](const target::SubsystemInfo& info) { return info.nqn == kNqn512; });
  ASSERT_NE(subsystem, subsystems.end());
  ASSERT_EQ(subsystem->controllers.size(), 1u) << "the target expired the controller";
  EXPECT_EQ(subsystem->controllers[0].cntlid, controller->data().cntlid);
  EXPECT_EQ(subsystem->controllers[0].qpairs.size(), size_t{kQueues} + 1);

  // Keep-alive goes on from here: two KATOs of admin polling, a Keep Alive each KATO/2, each
  // answered (the library sends no second one while one waits), both ends still connected.
  constexpr uint64_t kStepMs = 100;
  for (uint64_t elapsed_ms = 0; elapsed_ms < 2 * kKatoMs; elapsed_ms += kStepMs) {
    harness_.clock().advance_ms(kStepMs);
    controller->process_admin_completions();
    for (int i = 0; i < 4; ++i) harness_.poll_round();
  }
  EXPECT_GE(controller->stats().keep_alives_sent, 3u);
  EXPECT_TRUE(controller->connected());
  EXPECT_FALSE(log.contains("keep-alive timeout")) << "the target expired the controller";
  EXPECT_EQ(target_->controller_count(kNqn512), 1u);

  // One verified 4 KiB write and read on every queue, each at its own LBA.
  const uint32_t blocks = kIoBytes / ns->block_size();
  DmaBuffer out(*host_, kIoBytes);
  DmaBuffer in(*host_, kIoBytes);
  ASSERT_TRUE(out && in);
  for (uint16_t q = 0; q < kQueues; ++q) {
    host::IoQpair& qpair = *qpairs[q];
    const uint64_t lba = uint64_t{q} * blocks;
    SCOPED_TRACE(::testing::Message() << "queue " << qpair.qid());
    fill_pattern(out.data(), kIoBytes, q);
    std::memset(in.data(), 0, kIoBytes);
    ASSERT_TRUE(run_io(qpair, [&](IoCallback cb, void* ctx) {
      return ns->write(qpair, out.data(), lba, blocks, cb, ctx);
    }));
    ASSERT_TRUE(run_io(qpair, [&](IoCallback cb, void* ctx) {
      return ns->read(qpair, in.data(), lba, blocks, cb, ctx);
    }));
    EXPECT_TRUE(has_pattern(in.data(), kIoBytes, q));
  }
}

// The same 64 connects made slow (50 ms of fake time per idle round: 11 s in all, longer than
// KATO) on the thread that owns the admin queue: alloc_io_qpair() keeps its keep-alive going
// meanwhile (Keep Alives sent and answered during the connects), so the target never expires
// the controller. Without that, the target expired it near queue 58 and the later Connects
// were refused (Connect Invalid Parameters: CNTLID).
TEST_F(HostQueuesTest, SlowConnectsOnTheAdminThreadKeepTheKeepAliveGoing) {
  constexpr uint16_t kQueues = 64;
  constexpr uint32_t kKatoMs = 10000;
  host::ControllerOpts opts = controller_opts(kQueues);
  opts.keep_alive_timeout_ms = kKatoMs;
  auto controller = connect(kNqn512, opts);
  ASSERT_NE(controller, nullptr);
  ASSERT_EQ(controller->data().io_queues_granted, kQueues);
  test::LogCapture log;
  const uint64_t start_ns = harness_.clock().now_ns();
  idle_clock_step_ms_ = 50;
  std::vector<std::unique_ptr<host::IoQpair>> qpairs;
  for (uint16_t i = 0; i < kQueues; ++i) {
    qpairs.push_back(alloc_qpair(*controller));
    ASSERT_NE(qpairs.back(), nullptr) << "queue " << i;
  }
  idle_clock_step_ms_ = 0;
  const uint64_t connect_ms = (harness_.clock().now_ns() - start_ns) / (1000 * 1000);
  EXPECT_GT(connect_ms, uint64_t{kKatoMs}) << "not slow enough to need keep-alive";
  EXPECT_GE(controller->stats().keep_alives_sent, connect_ms / (kKatoMs / 2));
  EXPECT_TRUE(controller->connected());
  EXPECT_FALSE(log.contains("keep-alive timeout")) << "the target expired the controller";
  EXPECT_EQ(target_->controller_count(kNqn512), 1u);
  EXPECT_EQ(transport_->connection_count(), size_t{kQueues} + 1);
  DmaBuffer buffer(*host_, 4096);
  ASSERT_TRUE(buffer);
  EXPECT_TRUE(run_io(*qpairs.back(), [&](IoCallback cb, void* ctx) {
    return controller->ns(1)->read(*qpairs.back(), buffer.data(), 0, 8, cb, ctx);
  }));
}

}  // namespace
}  // namespace nvmf::e2e
