#include "bdev/null_bdev.h"

#include <gtest/gtest.h>

#include <vector>

#include "bdev_test_util.h"

namespace nvmf::bdev {
namespace {

using testing::AlignedBuffer;
using testing::Completions;
using testing::make_io;

struct NullFixture {
  explicit NullFixture(NullBdevOpts opts) {
    if (opts.name.empty()) opts.name = "null0";
    auto created = create_null_bdev(opts);
    EXPECT_TRUE(created.has_value());
    bdev = std::move(*created);
    auto made = bdev->create_channel();
    EXPECT_TRUE(made.has_value());
    channel = std::move(*made);
  }
  std::unique_ptr<Bdev> bdev;
  std::unique_ptr<IoChannel> channel;
};

TEST(NullBdevTest, CompletesEverythingAtTheNextPoll) {
  NullFixture null({});
  Completions completions;
  std::vector<BdevIo> ios(10);
  for (auto& io : ios) {
    io = make_io(IoType::write_zeroes, 0, 1, nullptr, 0, &completions);
    ASSERT_TRUE(null.channel->submit(io));
  }
  EXPECT_EQ(completions.calls, 0);
  EXPECT_EQ(null.channel->poll(), 10u);
  EXPECT_EQ(completions.calls, 10);
  EXPECT_EQ(null.channel->outstanding(), 0u);
  EXPECT_EQ(null.channel->poll(), 0u);
  EXPECT_EQ(null.channel->interrupt_fd(), -1);  // keep polling while outstanding() > 0
}

TEST(NullBdevTest, PollDeliversAtMostTheBudgetInOrder) {
  NullFixture null({});
  Completions completions;
  std::vector<BdevIo> ios(7);
  for (auto& io : ios) {
    io = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
    ASSERT_TRUE(null.channel->submit(io));
  }
  EXPECT_EQ(null.channel->poll(3), 3u);
  EXPECT_EQ(null.channel->poll(0), 0u);
  EXPECT_EQ(null.channel->poll(3), 3u);
  EXPECT_EQ(null.channel->poll(3), 1u);
  ASSERT_EQ(completions.order.size(), 7u);
  for (size_t i = 0; i < ios.size(); ++i) EXPECT_EQ(completions.order[i], &ios[i]);
}

TEST(NullBdevTest, DelayedCompletionsWaitForTheClockInFifoOrder) {
  FakeClock clock(0);
  NullFixture null({.completion_delay_ns = 1000, .clock = &clock});
  Completions completions;
  BdevIo first = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
  BdevIo second = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
  BdevIo third = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
  ASSERT_TRUE(null.channel->submit(first));  // due at 1000
  clock.advance_ns(300);
  ASSERT_TRUE(null.channel->submit(second));  // due at 1300
  ASSERT_TRUE(null.channel->submit(third));   // due at 1300

  EXPECT_EQ(null.channel->poll(), 0u);
  clock.advance_ns(699);  // 999
  EXPECT_EQ(null.channel->poll(), 0u);
  clock.advance_ns(1);  // 1000
  EXPECT_EQ(null.channel->poll(), 1u);
  ASSERT_EQ(completions.calls, 1);
  EXPECT_EQ(completions.order[0], &first);
  clock.advance_ns(299);  // 1299
  EXPECT_EQ(null.channel->poll(), 0u);
  clock.advance_ns(1);
  EXPECT_EQ(null.channel->poll(), 2u);
  ASSERT_EQ(completions.calls, 3);
  EXPECT_EQ(completions.order[1], &second);
  EXPECT_EQ(completions.order[2], &third);
  EXPECT_EQ(null.bdev->stats().latency_ns_total, 3000u);
}

// A callback that resubmits its I/O until it has run `remaining` times.
struct Resubmitter {
  IoChannel* channel = nullptr;
  int remaining = 0;
  int calls = 0;
};

void resubmit(BdevIo& io, void* ctx) {
  auto* state = static_cast<Resubmitter*>(ctx);
  ++state->calls;
  if (--state->remaining > 0) {
    EXPECT_TRUE(state->channel->submit(io));
  }
}

TEST(NullBdevTest, ResubmitFromCallbackCompletesAtALaterPoll) {
  NullFixture null({.queue_depth_max = 1});
  Resubmitter state{null.channel.get(), 3, 0};
  BdevIo io = make_io(IoType::flush, 0, 0, nullptr, 0, nullptr);
  io.done = resubmit;
  io.done_ctx = &state;
  ASSERT_TRUE(null.channel->submit(io));
  // Each poll delivers exactly one: the queue slot is free again inside the callback (depth 1),
  // and the resubmitted I/O is not picked up by the poll that is running.
  EXPECT_EQ(null.channel->poll(), 1u);
  EXPECT_EQ(state.calls, 1);
  EXPECT_EQ(null.channel->poll(), 1u);
  EXPECT_EQ(null.channel->poll(), 1u);
  EXPECT_EQ(state.calls, 3);
  EXPECT_EQ(null.channel->poll(), 0u);
}

TEST(NullBdevTest, ReadsLeaveBuffersUntouchedByDefault) {
  NullFixture null({});
  Completions completions;
  AlignedBuffer buffer(1024, 0xab);
  iovec iov = buffer.iov();
  BdevIo read = make_io(IoType::read, 0, 2, &iov, 1, &completions);
  ASSERT_TRUE(null.channel->submit(read));
  null.channel->poll();
  ASSERT_EQ(completions.calls, 1);
  for (size_t i = 0; i < buffer.size(); ++i) ASSERT_EQ(buffer.data()[i], 0xab) << i;
}

TEST(NullBdevTest, ZeroReadBuffersFillsEverySegment) {
  NullFixture null({.zero_read_buffers = true});
  Completions completions;
  AlignedBuffer buffer(2048, 0xab);
  iovec iov[3] = {buffer.iov(0, 100), buffer.iov(100, 924), buffer.iov(1024, 1024)};
  BdevIo read = make_io(IoType::read, 0, 4, iov, 3, &completions);
  ASSERT_TRUE(null.channel->submit(read));
  null.channel->poll();
  ASSERT_EQ(completions.calls, 1);
  for (size_t i = 0; i < buffer.size(); ++i) ASSERT_EQ(buffer.data()[i], 0) << i;
}

}  // namespace
}  // namespace nvmf::bdev
