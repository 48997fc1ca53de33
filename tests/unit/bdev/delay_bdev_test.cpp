// The delay bdev on a FakeClock: per-type latency, jitter bounds, stall and release with
// nothing lost, pass-through data, teardown with I/O held, and the claim on its base.
#include "bdev/delay_bdev.h"

#include <gtest/gtest.h>

#include <vector>

#include "bdev/error_bdev.h"
#include "bdev/malloc_bdev.h"
#include "bdev/null_bdev.h"
#include "bdev/registry.h"
#include "bdev_test_util.h"

namespace nvmf::bdev {
namespace {

using testing::AlignedBuffer;
using testing::Completions;
using testing::make_io;

constexpr uint64_t kUs = 1000;  // ns

struct DelayFixture {
  explicit DelayFixture(DelayLatency latency, uint32_t queue_depth = 128) {
    auto made_base = create_malloc_bdev(
        {.name = "m0", .block_count = 1024, .queue_depth_max = queue_depth, .clock = &clock});
    EXPECT_TRUE(made_base.has_value());
    base = std::move(*made_base);
    auto made = create_delay_bdev(
        {.name = "d0", .base_bdev = "m0", .latency = latency, .clock = &clock}, *base);
    EXPECT_TRUE(made.has_value());
    bdev = std::move(*made);
    delay = as_delay_bdev(*bdev);
    auto opened = bdev->create_channel();
    EXPECT_TRUE(opened.has_value());
    channel = std::move(*opened);
  }
  ~DelayFixture() { channel.reset(); }

  FakeClock clock{1000 * kUs};
  std::unique_ptr<Bdev> base;  // declared first: outlives the delay bdev
  std::unique_ptr<Bdev> bdev;
  DelayBdev* delay = nullptr;
  std::unique_ptr<IoChannel> channel;
};

TEST(DelayBdevTest, TakesTheBaseGeometryAndClaimsIt) {
  DelayFixture fixture({});
  ASSERT_NE(fixture.delay, nullptr);
  EXPECT_STREQ(fixture.bdev->backend_name(), "delay");
  EXPECT_EQ(fixture.bdev->block_size_bytes(), fixture.base->block_size_bytes());
  EXPECT_EQ(fixture.bdev->block_count(), 1024u);
  EXPECT_EQ(fixture.bdev->queue_depth_max(), fixture.base->queue_depth_max());
  EXPECT_EQ(fixture.bdev->supported_io_types(), fixture.base->supported_io_types());
  EXPECT_EQ(&fixture.delay->base(), fixture.base.get());
  EXPECT_EQ(fixture.base->claimed_by(), fixture.bdev.get());
  EXPECT_EQ(fixture.base->channel_count(), 1u);  // the delay channel's own
  EXPECT_EQ(as_delay_bdev(*fixture.base), nullptr);

  // A second bdev on the same base is refused; one on the delay bdev is fine (stacking).
  testing::LogCapture log;
  auto second = create_delay_bdev({.name = "d1", .clock = &fixture.clock}, *fixture.base);
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().code, Errc::busy);
  EXPECT_TRUE(log.contains("already the base of 'd0'"));
  auto stacked = create_error_bdev({.name = "e0", .clock = &fixture.clock}, *fixture.bdev);
  ASSERT_TRUE(stacked.has_value());
  EXPECT_EQ(fixture.bdev->claimed_by(), stacked->get());
  stacked->reset();
  EXPECT_EQ(fixture.bdev->claimed_by(), nullptr);
}

TEST(DelayBdevTest, PassesDataThroughBothWays) {
  DelayFixture fixture({.read_latency_us = 5, .write_latency_us = 7});
  AlignedBuffer written(4096, 0);
  for (size_t i = 0; i < written.size(); ++i) written.data()[i] = static_cast<uint8_t>(i * 7 + 3);
  iovec write_iov[2] = {written.iov(0, 1024), written.iov(1024, 3072)};
  Completions completions;
  BdevIo write = make_io(IoType::write, 8, 8, write_iov, 2, &completions);
  ASSERT_TRUE(fixture.channel->submit(write));
  fixture.channel->poll();
  EXPECT_EQ(completions.calls, 0);
  fixture.clock.advance_us(7);
  fixture.channel->poll();
  ASSERT_EQ(completions.calls, 1);
  EXPECT_EQ(write.status, IoStatus::success);
  AlignedBuffer read_back(4096, 0xee);
  iovec read_iov = read_back.iov();
  BdevIo read = make_io(IoType::read, 8, 8, &read_iov, 1, &completions);
  ASSERT_TRUE(fixture.channel->submit(read));
  fixture.channel->poll();
  EXPECT_EQ(completions.calls, 1);
  fixture.clock.advance_us(5);
  fixture.channel->poll();
  ASSERT_EQ(completions.calls, 2);
  EXPECT_EQ(read.status, IoStatus::success);
  EXPECT_EQ(std::memcmp(read_back.data(), written.data(), written.size()), 0);
  // Both reached the base, once each.
  EXPECT_EQ(fixture.base->stats().ops_of(IoType::write), 1u);
  EXPECT_EQ(fixture.base->stats().ops_of(IoType::read), 1u);
}

TEST(DelayBdevTest, EachTypeWaitsItsLatencyAfterTheBaseCompletes) {
  DelayFixture fixture({.read_latency_us = 100, .write_latency_us = 200, .flush_latency_us = 50});
  Completions completions;
  AlignedBuffer buffer(512);
  iovec iov = buffer.iov();
  BdevIo read = make_io(IoType::read, 0, 1, &iov, 1, &completions);
  BdevIo write = make_io(IoType::write, 1, 1, &iov, 1, &completions);
  BdevIo flush = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
  BdevIo zeroes = make_io(IoType::write_zeroes, 2, 1, nullptr, 0, &completions);
  BdevIo unmap = make_io(IoType::unmap, 3, 1, nullptr, 0, &completions);
  for (BdevIo* io : {&read, &write, &flush, &zeroes, &unmap}) {
    ASSERT_TRUE(fixture.channel->submit(*io));
  }
  EXPECT_EQ(fixture.channel->poll(), 0u);  // the base completed all five; none is due
  EXPECT_EQ(fixture.base->stats().completions(), 5u);
  fixture.clock.advance_us(49);
  EXPECT_EQ(fixture.channel->poll(), 0u);
  fixture.clock.advance_us(1);  // 50
  EXPECT_EQ(fixture.channel->poll(), 1u);
  ASSERT_EQ(completions.calls, 1);
  EXPECT_EQ(completions.order[0], &flush);
  fixture.clock.advance_us(49);  // 99
  EXPECT_EQ(fixture.channel->poll(), 0u);
  fixture.clock.advance_us(1);  // 100
  EXPECT_EQ(fixture.channel->poll(), 1u);
  EXPECT_EQ(completions.order[1], &read);
  fixture.clock.advance_us(99);  // 199
  EXPECT_EQ(fixture.channel->poll(), 0u);
  fixture.clock.advance_us(1);  // 200: write, write zeroes and unmap, in the base's order
  EXPECT_EQ(fixture.channel->poll(), 3u);
  ASSERT_EQ(completions.calls, 5);
  EXPECT_EQ(completions.order[2], &write);
  EXPECT_EQ(completions.order[3], &zeroes);
  EXPECT_EQ(completions.order[4], &unmap);
  for (IoStatus status : completions.statuses) EXPECT_EQ(status, IoStatus::success);
  EXPECT_EQ(fixture.channel->outstanding(), 0u);
  // The delay bdev's statistics see the latency the caller saw.
  const IoStats stats = fixture.bdev->stats();
  EXPECT_EQ(stats.latency_ns_total, (50 + 100 + 3 * 200) * kUs);
  EXPECT_EQ(stats.latency_ns_max, 200 * kUs);
}

TEST(DelayBdevTest, EqualDelaysKeepTheBaseOrderAndPollKeepsItsBudget) {
  DelayFixture fixture({.write_latency_us = 10});
  Completions completions;
  std::vector<BdevIo> ios(9);
  for (auto& io : ios) {
    io = make_io(IoType::write_zeroes, 0, 1, nullptr, 0, &completions);
    ASSERT_TRUE(fixture.channel->submit(io));
  }
  fixture.channel->poll();
  fixture.clock.advance_us(10);
  EXPECT_EQ(fixture.channel->poll(4), 4u);
  EXPECT_EQ(fixture.channel->poll(4), 4u);
  EXPECT_EQ(fixture.channel->poll(4), 1u);
  ASSERT_EQ(completions.order.size(), ios.size());
  for (size_t i = 0; i < ios.size(); ++i) EXPECT_EQ(completions.order[i], &ios[i]) << i;
}

TEST(DelayBdevTest, JitterStaysWithinItsBound) {
  DelayFixture fixture({.read_latency_us = 20, .jitter_us = 30});
  Completions completions;
  AlignedBuffer buffer(512);
  iovec iov = buffer.iov();
  std::vector<BdevIo> ios(100);
  for (auto& io : ios) {
    io = make_io(IoType::read, 0, 1, &iov, 1, &completions);
    ASSERT_TRUE(fixture.channel->submit(io));
  }
  fixture.channel->poll(1000);  // the base completes all of them now (it keeps to the budget)
  fixture.clock.advance_us(19);
  EXPECT_EQ(fixture.channel->poll(), 0u);  // never below the fixed latency
  fixture.clock.advance_us(1);
  unsigned delivered = 0;
  for (int step = 0; step <= 30; ++step) {
    delivered += fixture.channel->poll(1000);
    fixture.clock.advance_us(1);
  }
  EXPECT_EQ(delivered, 100u);  // all by 20 + 30 us
  const IoStats stats = fixture.bdev->stats();
  EXPECT_LE(stats.latency_ns_max, 50 * kUs);
  // 100 draws from 31 values all landing on one would be a broken generator.
  EXPECT_GT(stats.latency_ns_max, stats.latency_ns_total / 100);
}

TEST(DelayBdevTest, StallHoldsEveryIoAndReleaseLosesNone) {
  DelayFixture fixture({.write_latency_us = 10});
  Completions completions;
  // Two in flight before the stall: the base completes them, the stall holds the completions.
  std::vector<BdevIo> ios(6);
  for (size_t i = 0; i < 2; ++i) {
    ios[i] = make_io(IoType::write_zeroes, i, 1, nullptr, 0, &completions);
    ASSERT_TRUE(fixture.channel->submit(ios[i]));
  }
  fixture.channel->poll();
  fixture.delay->stall();
  EXPECT_TRUE(fixture.delay->stalled());
  // Four submitted during the stall never reach the base.
  for (size_t i = 2; i < ios.size(); ++i) {
    ios[i] = make_io(IoType::write_zeroes, i, 1, nullptr, 0, &completions);
    ASSERT_TRUE(fixture.channel->submit(ios[i]));
  }
  for (int i = 0; i < 100; ++i) {
    fixture.clock.advance_us(1000);
    EXPECT_EQ(fixture.channel->poll(), 0u);
  }
  EXPECT_EQ(completions.calls, 0);
  EXPECT_EQ(fixture.channel->outstanding(), 6u);
  EXPECT_EQ(fixture.base->stats().completions(), 2u);

  fixture.delay->release();
  // The two held completions are long due; the four held I/Os go to the base now.
  EXPECT_EQ(fixture.channel->poll(), 2u);
  EXPECT_EQ(fixture.base->stats().completions(), 6u);
  fixture.clock.advance_us(10);
  EXPECT_EQ(fixture.channel->poll(), 4u);
  ASSERT_EQ(completions.calls, 6);
  for (size_t i = 0; i < ios.size(); ++i) {
    EXPECT_EQ(completions.order[i], &ios[i]) << i;  // submission order kept across the stall
    EXPECT_EQ(completions.statuses[i], IoStatus::success);
  }
  EXPECT_EQ(fixture.bdev->stats().errors, 0u);
}

TEST(DelayBdevTest, QueueDepthStillAppliesWhileStalled) {
  DelayFixture fixture({}, 2);
  Completions completions;
  fixture.delay->stall();
  BdevIo a = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
  BdevIo b = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
  BdevIo c = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
  ASSERT_TRUE(fixture.channel->submit(a));
  ASSERT_TRUE(fixture.channel->submit(b));
  auto refused = fixture.channel->submit(c);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code,
            Errc::busy);  // queued work is never failed, a full queue says busy
  fixture.delay->release();
  fixture.channel->poll();
  EXPECT_EQ(completions.calls, 2);
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

TEST(DelayBdevTest, ResubmitFromTheCallbackAtFullDepth) {
  DelayFixture fixture({.flush_latency_us = 1}, 1);
  Resubmitter state{fixture.channel.get(), 3, 0};
  BdevIo io = make_io(IoType::flush, 0, 0, nullptr, 0, nullptr);
  io.done = resubmit;
  io.done_ctx = &state;
  ASSERT_TRUE(fixture.channel->submit(io));
  for (int round = 0; round < 10 && state.calls < 3; ++round) {
    fixture.channel->poll();
    fixture.clock.advance_us(1);
  }
  EXPECT_EQ(state.calls, 3);
  fixture.clock.advance_us(1);
  EXPECT_EQ(fixture.channel->poll(), 0u);
}

TEST(DelayBdevTest, SetLatencyAppliesToLaterCompletionsAndChecksItsRange) {
  DelayFixture fixture({.read_latency_us = 100});
  EXPECT_EQ(fixture.delay->latency().read_latency_us, 100u);
  testing::LogCapture log;
  auto refused = fixture.delay->set_latency({.jitter_us = kDelayLatencyMaxUs + 1});
  ASSERT_FALSE(refused);
  EXPECT_STREQ(refused.error().detail, "jitter_us");
  EXPECT_EQ(fixture.delay->latency().read_latency_us, 100u);  // unchanged
  ASSERT_TRUE(fixture.delay->set_latency({.read_latency_us = 3}));
  Completions completions;
  AlignedBuffer buffer(512);
  iovec iov = buffer.iov();
  BdevIo read = make_io(IoType::read, 0, 1, &iov, 1, &completions);
  ASSERT_TRUE(fixture.channel->submit(read));
  fixture.channel->poll();
  fixture.clock.advance_us(3);
  EXPECT_EQ(fixture.channel->poll(), 1u);
}

TEST(DelayBdevTest, DestroyingTheChannelAbortsHeldAndDelayedIo) {
  DelayFixture fixture({.write_latency_us = 1000000});
  Completions completions;
  std::vector<BdevIo> ios(5);
  for (size_t i = 0; i < 2; ++i) {  // completed by the base, waiting a second
    ios[i] = make_io(IoType::write_zeroes, i, 1, nullptr, 0, &completions);
    ASSERT_TRUE(fixture.channel->submit(ios[i]));
  }
  fixture.channel->poll();
  ios[2] = make_io(IoType::write_zeroes, 2, 1, nullptr, 0, &completions);
  ASSERT_TRUE(fixture.channel->submit(ios[2]));  // at the base, not polled yet
  fixture.delay->stall();
  for (size_t i = 3; i < ios.size(); ++i) {  // held by the stall
    ios[i] = make_io(IoType::write_zeroes, i, 1, nullptr, 0, &completions);
    ASSERT_TRUE(fixture.channel->submit(ios[i]));
  }
  fixture.channel.reset();  // returns at once: nothing waits for the clock or a release
  ASSERT_EQ(completions.calls, 5);
  for (IoStatus status : completions.statuses) EXPECT_EQ(status, IoStatus::aborted);
  EXPECT_EQ(fixture.bdev->stats().errors, 5u);
  EXPECT_EQ(fixture.base->channel_count(), 0u);
}

TEST(DelayBdevTest, RefusesBadOptions) {
  testing::LogCapture log;
  FakeClock clock;
  auto base = create_null_bdev({.name = "n0", .clock = &clock});
  ASSERT_TRUE(base);
  auto too_slow = create_delay_bdev(
      {.name = "d0", .latency = {.write_latency_us = kDelayLatencyMaxUs + 1}, .clock = &clock},
      **base);
  ASSERT_FALSE(too_slow);
  EXPECT_STREQ(too_slow.error().detail, "write_latency_us");
  auto nameless = create_delay_bdev({.clock = &clock}, **base);
  ASSERT_FALSE(nameless);
  EXPECT_STREQ(nameless.error().detail, "name");
  auto no_clock = create_delay_bdev({.name = "d0", .clock = nullptr}, **base);
  ASSERT_FALSE(no_clock);
  EXPECT_STREQ(no_clock.error().detail, "clock");
  EXPECT_EQ((*base)->claimed_by(), nullptr);  // a refused bdev leaves no claim behind
}

TEST(DelayBdevTest, RegistryKeepsTheBaseWhileClaimedAndDestroysTopDown) {
  FakeClock clock;
  testing::LogCapture log;
  auto registry = std::make_unique<BdevRegistry>();
  auto base = create_malloc_bdev({.name = "z_base", .block_count = 8, .clock = &clock});
  ASSERT_TRUE(base);
  Bdev& base_ref = **base;
  ASSERT_TRUE(registry->add(std::move(*base)));
  // Named so that name order would destroy the base first.
  auto top = create_delay_bdev({.name = "a_top", .base_bdev = "z_base", .clock = &clock}, base_ref);
  ASSERT_TRUE(top);
  ASSERT_TRUE(registry->add(std::move(*top)));
  auto refused = registry->remove("z_base");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::busy);
  EXPECT_TRUE(log.contains("is the base of bdev 'a_top'"));
  registry.reset();  // the delay bdev goes first; its destructor releases the claim
}

TEST(DelayBdevTest, OptsAsJson) {
  const std::string json = opts_to_json(DelayBdevOpts{
      .name = "d0", .base_bdev = "m0", .latency = {.read_latency_us = 1, .jitter_us = 4}});
  EXPECT_EQ(json,
            "{\"name\":\"d0\",\"base_bdev\":\"m0\",\"read_latency_us\":1,\"write_latency_us\":0,"
            "\"flush_latency_us\":0,\"jitter_us\":4,\"uuid\":null}");
}

}  // namespace
}  // namespace nvmf::bdev
