// Device async events end to end, injected on the sim (SimProvider::inject_async_event):
// on the target's device (QP fatal closes exactly that queue pair and the host reconnects; a
// CQ error closes the queue pairs on that CQ and later ones get a new CQ; a device fatal error
// closes everything and stops listening), and on the host's device (QP fatal, CQ error and
// device fatal start the host's error recovery; nothing is lost, every callback runs once).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "host_fixture.h"
#include "log_capture.h"

namespace nvmf::e2e {
namespace {

constexpr uint32_t kBlock = 512;
constexpr uint32_t kIoBlocks = 9;  // 4.5 KiB: above the in-capsule size, read by RDMA
constexpr uint32_t kCommands = 16;

using verbs::AsyncEvent;
using verbs::AsyncEventType;

AsyncEvent qp_event(AsyncEventType type, uint32_t qp_num) {
  AsyncEvent event;
  event.type = type;
  event.qp_num = qp_num;
  return event;
}

// The QP numbers in `after` that are not in `before` (both sorted: SimProvider::qp_nums).
std::vector<uint32_t> added(const std::vector<uint32_t>& before,
                            const std::vector<uint32_t>& after) {
  std::vector<uint32_t> out;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                      std::back_inserter(out));
  return out;
}

size_t lines_with(const test::LogCapture& log, const std::string& text) {
  size_t n = 0;
  for (const std::string& line : log.lines()) n += line.find(text) != std::string::npos ? 1 : 0;
  return n;
}

// Every captured line, for a failure message.
std::string all_lines(const test::LogCapture& log) {
  std::string text;
  for (const std::string& line : log.lines()) text += line;
  return text;
}

class HostAsyncEventsTest : public HostFixture {
 protected:
  static host::ControllerOpts recovery_opts() { return HostFixture::recovery_opts(2); }

  // A new I/O qpair and the QP numbers its connection got on the target and on the host.
  struct Queue {
    std::unique_ptr<host::IoQpair> qpair;
    uint32_t target_qp = 0;
    uint32_t host_qp = 0;
  };
  Queue alloc_watched(host::Controller& controller) {
    const auto target_before = target_provider_->qp_nums();
    const auto host_before = host_provider_->qp_nums();
    Queue queue;
    queue.qpair = alloc_qpair(controller);
    const auto target_new = added(target_before, target_provider_->qp_nums());
    const auto host_new = added(host_before, host_provider_->qp_nums());
    EXPECT_EQ(target_new.size(), 1u);
    EXPECT_EQ(host_new.size(), 1u);
    if (!target_new.empty()) queue.target_qp = target_new.front();
    if (!host_new.empty()) queue.host_qp = host_new.front();
    return queue;
  }

  // Rounds of every qpair, the admin queue and the target, the fake clock moving `step_ms`.
  template <typename Done>
  bool run_with_time(host::Controller* controller, const std::vector<host::IoQpair*>& qpairs,
                     Done done, uint64_t step_ms = 20, int max_rounds = 20000) {
    for (int i = 0; i < max_rounds && !done(); ++i) {
      for (host::IoQpair* qpair : qpairs) qpair->process_completions();
      if (controller != nullptr) controller->process_admin_completions();
      harness_.poll_round();
      harness_.clock().advance_ms(step_ms);
    }
    return done();
  }

  // kCommands writes of a pattern on queue_ (after open_queue), all in flight; their
  // completions in completions_.
  void write_all(uint32_t seed) {
    const size_t io_bytes = size_t{kIoBlocks} * kBlock;
    fill_pattern(data_->data(), io_bytes * kCommands, seed);
    completions_.assign(kCommands, Completion{});
    for (uint32_t i = 0; i < kCommands; ++i) {
      ASSERT_TRUE(ns_->write(*queue_.qpair, data_->data() + i * io_bytes, uint64_t{i} * kIoBlocks,
                             kIoBlocks, &on_complete, &completions_[i]));
    }
  }

  // Reads back what write_all wrote and checks it.
  ::testing::AssertionResult read_back(host::Namespace& ns, host::IoQpair& qpair, uint32_t seed) {
    const size_t bytes = size_t{kIoBlocks} * kBlock * kCommands;
    DmaBuffer back(*host_, bytes);
    if (!back) return ::testing::AssertionFailure() << "no DMA memory";
    auto read = run_io(qpair, [&](host::IoCallback cb, void* ctx) {
      return ns.read(qpair, back.data(), 0, kIoBlocks * kCommands, cb, ctx);
    });
    if (!read) return read;
    return has_pattern(back.data(), bytes, seed);
  }

  static ::testing::AssertionResult each_once_and_ok(const std::vector<Completion>& completions) {
    for (size_t i = 0; i < completions.size(); ++i) {
      if (completions[i].calls != 1 || !completions[i].status.is_success()) {
        return ::testing::AssertionFailure()
               << "command " << i << ": " << completions[i].calls << " calls, status "
               << describe(completions[i].status);
      }
    }
    return ::testing::AssertionSuccess();
  }

  uint64_t target_events(AsyncEventType type) const {
    return transport_->stats().async_event_count(type);
  }

  // The set-up of the tests that write: a controller with recovery_opts() (controller_), the
  // target's QPs it made (admin_target_qps_: the admin queue's), one watched I/O queue
  // (queue_), namespace 1 (ns_) and room for kCommands writes (data_). Call it under
  // ASSERT_NO_FATAL_FAILURE.
  // on_reactor_1: an unwatched queue pair takes QID 1 (the target's reactor 0, the admin
  // queue's) first, so that queue_ is QID 2, on reactor 1 (RdmaTargetTransport::pick_group).
  void open_queue(bool on_reactor_1 = false) {
    controller_ = connect(kNqn512, recovery_opts());
    ASSERT_NE(controller_, nullptr);
    admin_target_qps_ = target_provider_->qp_nums();
    if (on_reactor_1) {
      placeholder_ = alloc_qpair(*controller_);
      ASSERT_TRUE(placeholder_);
    }
    queue_ = alloc_watched(*controller_);
    ASSERT_TRUE(queue_.qpair);
    ns_ = controller_->ns(1);
    ASSERT_NE(ns_, nullptr);
    data_ = std::make_unique<DmaBuffer>(*host_, size_t{kIoBlocks} * kBlock * kCommands);
    ASSERT_TRUE(*data_);
  }

  // What open_queue() made goes before the Host (HostFixture::TearDown), newest first.
  void TearDown() override {
    data_.reset();
    queue_.qpair.reset();
    placeholder_.reset();
    controller_.reset();
    HostFixture::TearDown();
  }

  std::unique_ptr<host::Controller> controller_;
  std::vector<uint32_t> admin_target_qps_;
  Queue queue_;
  std::unique_ptr<host::IoQpair> placeholder_;  // open_queue(true)
  host::Namespace* ns_ = nullptr;
  std::unique_ptr<DmaBuffer> data_;
  std::vector<Completion> completions_;  // of write_all
};

// ---------------------------------------------------------------------------------------
// Target's device

TEST_F(HostAsyncEventsTest, TargetQpFatalClosesExactlyThatQueuePairAndTheHostReconnects) {
  ASSERT_NO_FATAL_FAILURE(open_queue());
  Queue& first = queue_;
  Queue second = alloc_watched(*controller_);
  ASSERT_TRUE(second.qpair);
  ASSERT_NO_FATAL_FAILURE(write_all(3));
  ASSERT_TRUE(run_until({first.qpair.get()}, [&] { return all_called(completions_); }));
  const uint64_t accepted = transport_->stats().connects_accepted;

  // The host is idle: only the target's answer to the event (closing that queue pair, which
  // the host sees as a disconnect) can make it reconnect.
  test::LogCapture log;
  ASSERT_TRUE(
      target_provider_->inject_async_event(qp_event(AsyncEventType::qp_fatal, first.target_qp)));
  ASSERT_TRUE(run_with_time(
      controller_.get(), {first.qpair.get(), second.qpair.get()},
      [&] { return first.qpair->stats().reconnects == 1 && first.qpair->connected(); }))
      << "reconnects " << first.qpair->stats().reconnects;
  EXPECT_TRUE(each_once_and_ok(completions_));
  EXPECT_EQ(target_events(AsyncEventType::qp_fatal), 1u);
  EXPECT_EQ(transport_->stats().connects_accepted, accepted + 1) << "one reconnect";
  EXPECT_EQ(lines_with(log, "QP_FATAL async event on device sim0"), 1u) << all_lines(log);
  // Exactly that queue pair: the other and the admin queue never noticed.
  EXPECT_EQ(second.qpair->stats().qp_errors, 0u);
  EXPECT_EQ(second.qpair->stats().reconnects, 0u);
  EXPECT_TRUE(controller_->connected());
  EXPECT_TRUE(read_back(*ns_, *first.qpair, 3));
  EXPECT_TRUE(read_back(*ns_, *second.qpair, 3));
}

TEST_F(HostAsyncEventsTest, TargetCqErrorClosesTheQueuePairsOnItAndLaterOnesGetANewCq) {
  ASSERT_NO_FATAL_FAILURE(open_queue(true));  // admin: reactor 0's group; the queue: reactor 1's
  Queue& first = queue_;
  ASSERT_EQ(admin_target_qps_.size(), 1u);
  const verbs::CompletionQueue* admin_cq = target_provider_->send_cq_of(admin_target_qps_[0]);
  const verbs::CompletionQueue* failed_cq = target_provider_->send_cq_of(first.target_qp);
  ASSERT_NE(failed_cq, nullptr);
  ASSERT_NE(failed_cq, admin_cq);
  ASSERT_NO_FATAL_FAILURE(write_all(5));
  first.qpair->process_completions();  // the capsules go out
  harness_.poll_round();               // the target starts on them

  test::LogCapture log;
  const auto target_before = target_provider_->qp_nums();
  AsyncEvent cq_error;
  cq_error.type = AsyncEventType::cq_error;
  cq_error.cq = failed_cq;
  ASSERT_TRUE(target_provider_->inject_async_event(cq_error));
  ASSERT_TRUE(run_with_time(controller_.get(), {first.qpair.get()},
                            [&] {
                              return all_called(completions_) &&
                                     first.qpair->stats().reconnects == 1 &&
                                     first.qpair->connected();
                            }))
      << "reconnects " << first.qpair->stats().reconnects;
  EXPECT_TRUE(each_once_and_ok(completions_));
  EXPECT_EQ(target_events(AsyncEventType::cq_error), 1u);
  EXPECT_EQ(lines_with(log, "device sim0: CQ_ERR"), 1u);
  EXPECT_TRUE(controller_->connected()) << "the admin queue is on another CQ";

  // The reconnect (QID 2 again: reactor 1) got a new CQ there, neither the failed one nor
  // reactor 0's.
  const auto reconnected = added(target_before, target_provider_->qp_nums());
  ASSERT_EQ(reconnected.size(), 1u);
  const verbs::CompletionQueue* new_cq = target_provider_->send_cq_of(reconnected.front());
  EXPECT_NE(new_cq, failed_cq);
  EXPECT_NE(new_cq, admin_cq);
  EXPECT_TRUE(read_back(*ns_, *first.qpair, 5));
}

TEST_F(HostAsyncEventsTest, TargetDeviceFatalClosesEverythingAndStopsListening) {
  auto controller = connect(kNqn512, recovery_opts());
  ASSERT_NE(controller, nullptr);
  Queue first = alloc_watched(*controller);
  ASSERT_TRUE(first.qpair);
  ASSERT_TRUE(transport_->listening(kHostTargetAddress, kHostTargetPort));

  test::LogCapture log;
  AsyncEvent fatal;
  fatal.type = AsyncEventType::device_fatal;
  ASSERT_TRUE(target_provider_->inject_async_event(fatal));
  // Only the target runs: it closes everything by itself (the sim's host would otherwise
  // notice its peer QPs in error at once, faster than any real transport retry).
  ASSERT_TRUE(run_with_time(
      nullptr, {},
      [&] {
        return target_events(AsyncEventType::device_fatal) == 1 &&
               transport_->connection_count() == 0;
      },
      0));
  EXPECT_EQ(target_events(AsyncEventType::device_fatal), 1u);
  EXPECT_FALSE(transport_->listening(kHostTargetAddress, kHostTargetPort));
  EXPECT_EQ(lines_with(log, "DEVICE_FATAL: closing its 2 connections and 1 listeners"), 1u)
      << all_lines(log);
  EXPECT_TRUE(log.contains("restart nvmf_tgt"));
  ASSERT_TRUE(run_with_time(
      controller.get(), {first.qpair.get()}, [&] { return !controller->connected(); }, 0));
  // Nobody gets in again: the listener is gone.
  std::string message;
  auto again = host_->connect(trid(kNqn512), controller_opts(), &message);
  EXPECT_FALSE(again) << "connected to a target whose device failed";
}

// ---------------------------------------------------------------------------------------
// Host's device

TEST_F(HostAsyncEventsTest, HostQpFatalOnAnIoQueueReconnectsAndLosesNothing) {
  ASSERT_NO_FATAL_FAILURE(open_queue());
  ASSERT_NO_FATAL_FAILURE(write_all(9));

  test::LogCapture log;
  ASSERT_TRUE(
      host_provider_->inject_async_event(qp_event(AsyncEventType::qp_fatal, queue_.host_qp)));
  ASSERT_TRUE(run_with_time(controller_.get(), {queue_.qpair.get()},
                            [&] { return all_called(completions_) && queue_.qpair->connected(); }));
  for (int i = 0; i < 16; ++i) round({queue_.qpair.get()});
  EXPECT_TRUE(each_once_and_ok(completions_));
  const host::IoQpairStats stats = queue_.qpair->stats();
  EXPECT_EQ(stats.qp_errors, 1u);
  EXPECT_EQ(stats.reconnects, 1u);
  EXPECT_GT(stats.resubmitted, 0u);
  EXPECT_EQ(lines_with(log, "queue 1 to 10.0.0.1:4420: QP_FATAL async event on device sim1"), 1u);
  EXPECT_TRUE(controller_->connected());
  EXPECT_TRUE(read_back(*ns_, *queue_.qpair, 9));
}

TEST_F(HostAsyncEventsTest, HostCqErrorSettlesWithoutItsCompletionsAndReconnects) {
  ASSERT_NO_FATAL_FAILURE(open_queue());
  ASSERT_NO_FATAL_FAILURE(write_all(11));

  // The queue's one CQ stops reporting: not even the drain after the error comes back.
  test::LogCapture log;
  AsyncEvent cq_error;
  cq_error.type = AsyncEventType::cq_error;
  cq_error.cq = host_provider_->send_cq_of(queue_.host_qp);
  ASSERT_NE(cq_error.cq, nullptr);
  ASSERT_TRUE(host_provider_->inject_async_event(cq_error));
  ASSERT_TRUE(run_with_time(controller_.get(), {queue_.qpair.get()},
                            [&] { return all_called(completions_) && queue_.qpair->connected(); }))
      << "outstanding " << queue_.qpair->outstanding() << ", reconnecting "
      << queue_.qpair->reconnecting();
  for (int i = 0; i < 16; ++i) round({queue_.qpair.get()});
  EXPECT_TRUE(each_once_and_ok(completions_));
  EXPECT_EQ(queue_.qpair->stats().reconnects, 1u);
  EXPECT_EQ(queue_.qpair->stats().resubmitted, kCommands) << "no response was seen: all resent";
  EXPECT_EQ(lines_with(log, "queue 1 to 10.0.0.1:4420: CQ_ERR async event on device sim1"), 1u);
  EXPECT_TRUE(read_back(*ns_, *queue_.qpair, 11));
}

TEST_F(HostAsyncEventsTest, HostDeviceFatalFailsEveryQueueOnTheDeviceAndEachCallbackRunsOnce) {
  ASSERT_NO_FATAL_FAILURE(open_queue());
  ASSERT_NO_FATAL_FAILURE(write_all(13));

  test::LogCapture log;
  AsyncEvent fatal;
  fatal.type = AsyncEventType::device_fatal;
  ASSERT_TRUE(host_provider_->inject_async_event(fatal));
  // The I/O queue's polls read the event for both queues; the admin queue fails at its next
  // poll, and the controller resets (ControllerOpts::controller_recovery) once the device
  // takes queue pairs again (the sim's does at once): the I/O queue follows it.
  ASSERT_TRUE(run_with_time(controller_.get(), {queue_.qpair.get()}, [&] {
    return all_called(completions_) && controller_->connected() && queue_.qpair->connected();
  }));
  EXPECT_EQ(controller_->stats().resets, 1u);
  for (int i = 0; i < 16; ++i) round({queue_.qpair.get()});
  for (size_t i = 0; i < completions_.size(); ++i) {
    EXPECT_EQ(completions_[i].calls, 1) << "command " << i;  // resent and done, or failed once
  }
  EXPECT_GE(queue_.qpair->stats().qp_errors, 1u);
  EXPECT_EQ(lines_with(log, "device sim1: DEVICE_FATAL: its 2 queues fail"), 1u);
  EXPECT_EQ(lines_with(log, "queue 0 to 10.0.0.1:4420: DEVICE_FATAL async event on device sim1"),
            1u);
  EXPECT_EQ(lines_with(log, "queue 1 to 10.0.0.1:4420: DEVICE_FATAL async event on device sim1"),
            1u);
}

}  // namespace
}  // namespace nvmf::e2e
