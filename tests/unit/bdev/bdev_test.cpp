// Rules every backend shares, checked through the null and malloc backends: option
// validation, submit() checks, queue depth, callbacks only from poll(), statistics.
#include "bdev/bdev.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bdev/malloc_bdev.h"
#include "bdev/null_bdev.h"
#include "bdev_test_util.h"

namespace nvmf::bdev {
namespace {

using testing::AlignedBuffer;
using testing::Completions;
using testing::LogCapture;
using testing::make_io;

std::unique_ptr<Bdev> make_null(NullBdevOpts opts = {}) {
  if (opts.name.empty()) opts.name = "null0";
  auto bdev = create_null_bdev(opts);
  EXPECT_TRUE(bdev.has_value());
  return bdev ? std::move(*bdev) : nullptr;
}

std::unique_ptr<IoChannel> make_channel(Bdev& bdev) {
  auto channel = bdev.create_channel();
  EXPECT_TRUE(channel.has_value());
  return channel ? std::move(*channel) : nullptr;
}

TEST(BdevOptsTest, RejectsEmptyAndOverlongNames) {
  LogCapture log;
  NullBdevOpts opts;
  auto result = create_null_bdev(opts);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::invalid_argument);
  EXPECT_STREQ(result.error().detail, "name");

  opts.name = std::string(256, 'n');
  result = create_null_bdev(opts);
  ASSERT_FALSE(result);
  EXPECT_STREQ(result.error().detail, "name");
  EXPECT_TRUE(log.contains("name must be"));
}

TEST(BdevOptsTest, RejectsBadBlockSizes) {
  LogCapture log;
  for (uint32_t block_size : {0u, 256u, 513u, 3000u, 131072u}) {
    NullBdevOpts opts{.name = "n", .block_size_bytes = block_size};
    auto result = create_null_bdev(opts);
    ASSERT_FALSE(result) << block_size;
    EXPECT_EQ(result.error().code, Errc::invalid_argument);
    EXPECT_STREQ(result.error().detail, "block_size_bytes");
  }
  MallocBdevOpts malloc_opts{.name = "m", .block_size_bytes = 1000};
  auto result = create_malloc_bdev(malloc_opts);
  ASSERT_FALSE(result);
  EXPECT_STREQ(result.error().detail, "block_size_bytes");
  EXPECT_TRUE(log.contains("not a power of two"));
}

TEST(BdevOptsTest, RejectsZeroAndOverflowingBlockCount) {
  LogCapture log;
  NullBdevOpts opts{.name = "n", .block_count = 0};
  auto result = create_null_bdev(opts);
  ASSERT_FALSE(result);
  EXPECT_STREQ(result.error().detail, "block_count");

  // 2^55 blocks of 1 KiB is 2^65 bytes: the capacity itself would wrap.
  opts.block_size_bytes = 1024;
  opts.block_count = uint64_t{1} << 55;
  result = create_null_bdev(opts);
  ASSERT_FALSE(result);
  EXPECT_STREQ(result.error().detail, "block_count");
  EXPECT_TRUE(log.contains("overflows"));

  // The largest capacity that still fits is fine for a null bdev.
  opts.block_count = UINT64_MAX / 1024;
  EXPECT_TRUE(create_null_bdev(opts).has_value());
}

TEST(BdevOptsTest, RejectsQueueDepthDelayTypesAndClock) {
  LogCapture log;
  auto detail_of = [](const NullBdevOpts& opts) {
    auto result = create_null_bdev(opts);
    return result ? std::string("ok") : std::string(result.error().detail);
  };
  EXPECT_EQ(detail_of({.name = "n", .queue_depth_max = 0}), "queue_depth_max");
  EXPECT_EQ(detail_of({.name = "n", .queue_depth_max = 4097}), "queue_depth_max");
  EXPECT_EQ(detail_of({.name = "n", .queue_depth_max = 4096}), "ok");
  EXPECT_EQ(detail_of({.name = "n", .completion_delay_ns = uint64_t{61} * 1000000000}),
            "completion_delay_ns");
  EXPECT_EQ(detail_of({.name = "n", .supported_io_types = 1u << 7}), "supported_io_types");
  EXPECT_EQ(detail_of({.name = "n", .clock = nullptr}), "clock");
}

TEST(BdevTest, ReportsGeometryAndGeneratesUuid) {
  auto a = make_null({.name = "a", .block_size_bytes = 4096, .block_count = 1000});
  auto b = make_null({.name = "b"});
  EXPECT_EQ(a->name(), "a");
  EXPECT_STREQ(a->backend_name(), "null");
  EXPECT_EQ(a->block_size_bytes(), 4096u);
  EXPECT_EQ(a->block_count(), 1000u);
  EXPECT_EQ(a->size_bytes(), 4096000u);
  EXPECT_EQ(a->buffer_alignment_bytes(), 1u);
  EXPECT_FALSE(uuid_is_null(a->uuid()));
  EXPECT_NE(a->uuid(), b->uuid());
  EXPECT_EQ(a->uuid()[6] >> 4, 4);       // version 4
  EXPECT_EQ(a->uuid()[8] & 0xc0, 0x80);  // RFC 4122 variant

  Uuid given{};
  for (size_t i = 0; i < given.size(); ++i) given[i] = static_cast<uint8_t>(i + 1);
  auto c = make_null({.name = "c", .uuid = given});
  EXPECT_EQ(c->uuid(), given);
  char text[kUuidStringSize];
  uuid_format(given, text);
  EXPECT_STREQ(text, "01020304-0506-0708-090a-0b0c0d0e0f10");
}

TEST(BdevTest, OptsDumpAsJson) {
  NullBdevOpts opts{.name = "n\"1", .completion_delay_ns = 5};
  EXPECT_EQ(opts_to_json(opts),
            "{\"name\":\"n\\\"1\",\"block_size_bytes\":512,\"block_count\":2097152,"
            "\"uuid\":null,\"queue_depth_max\":128,\"completion_delay_ns\":5,"
            "\"zero_read_buffers\":false,\"supported_io_types\":31}");
  MallocBdevOpts malloc_opts{.name = "m", .block_count = 8};
  EXPECT_EQ(opts_to_json(malloc_opts),
            "{\"name\":\"m\",\"block_size_bytes\":512,\"block_count\":8,\"uuid\":null,"
            "\"queue_depth_max\":128}");
}

TEST(BdevSubmitTest, RejectsRangesBeyondTheEnd) {
  auto bdev = make_null({.name = "n", .block_size_bytes = 512, .block_count = 100});
  auto channel = make_channel(*bdev);
  Completions completions;
  AlignedBuffer buffer(512 * 2);
  iovec iov = buffer.iov();

  BdevIo last = make_io(IoType::read, 98, 2, &iov, 1, &completions);  // ends exactly at 100
  EXPECT_TRUE(channel->submit(last));
  BdevIo past = make_io(IoType::read, 99, 2, &iov, 1, &completions);
  auto result = channel->submit(past);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::out_of_range);
  BdevIo far = make_io(IoType::write_zeroes, 100, 1, nullptr, 0, &completions);
  EXPECT_EQ(channel->submit(far).error().code, Errc::out_of_range);
  BdevIo huge = make_io(IoType::unmap, 0, 101, nullptr, 0, &completions);
  EXPECT_EQ(channel->submit(huge).error().code, Errc::out_of_range);
  channel->poll();
  EXPECT_EQ(completions.calls, 1);
}

TEST(BdevSubmitTest, RejectsRangesThatWrapAroundU64) {
  auto bdev = make_null({.name = "n", .block_count = 100});
  auto channel = make_channel(*bdev);
  Completions completions;
  // offset + num wraps to 1, which a naive `offset + num <= count` would accept.
  BdevIo wrap = make_io(IoType::write_zeroes, UINT64_MAX, 2, nullptr, 0, &completions);
  EXPECT_EQ(channel->submit(wrap).error().code, Errc::out_of_range);
  BdevIo wrap2 = make_io(IoType::unmap, 50, UINT64_MAX - 10, nullptr, 0, &completions);
  EXPECT_EQ(channel->submit(wrap2).error().code, Errc::out_of_range);
  // A read whose byte length (num * block size) would wrap is caught by the range check first.
  AlignedBuffer buffer(512);
  iovec iov = buffer.iov();
  BdevIo wrap3 = make_io(IoType::read, 1, (UINT64_MAX / 512) + 2, &iov, 1, &completions);
  EXPECT_EQ(channel->submit(wrap3).error().code, Errc::out_of_range);
  EXPECT_EQ(channel->outstanding(), 0u);
}

TEST(BdevSubmitTest, RejectsIovLengthMismatch) {
  auto bdev = make_null({.name = "n", .block_size_bytes = 512, .block_count = 100});
  auto channel = make_channel(*bdev);
  Completions completions;
  AlignedBuffer buffer(4096);

  iovec short_iov[2] = {buffer.iov(0, 512), buffer.iov(512, 511)};
  BdevIo too_short = make_io(IoType::write, 0, 2, short_iov, 2, &completions);
  auto result = channel->submit(too_short);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::invalid_argument);

  iovec long_iov[2] = {buffer.iov(0, 512), buffer.iov(512, 513)};
  BdevIo too_long = make_io(IoType::read, 0, 2, long_iov, 2, &completions);
  EXPECT_EQ(channel->submit(too_long).error().code, Errc::invalid_argument);

  // Segment lengths that would wrap a 64-bit sum back to the right total.
  iovec wrapping[2] = {{buffer.data(), SIZE_MAX}, {buffer.data(), 1025}};
  BdevIo wrap = make_io(IoType::write, 0, 2, wrapping, 2, &completions);
  EXPECT_EQ(channel->submit(wrap).error().code, Errc::invalid_argument);

  BdevIo no_iov = make_io(IoType::read, 0, 1, nullptr, 0, &completions);
  EXPECT_EQ(channel->submit(no_iov).error().code, Errc::invalid_argument);
  iovec one = buffer.iov(0, 512);
  BdevIo too_many = make_io(IoType::read, 0, 1, &one, kIovCountMax + 1, &completions);
  EXPECT_EQ(channel->submit(too_many).error().code, Errc::invalid_argument);
  BdevIo zero_blocks = make_io(IoType::read, 0, 0, &one, 1, &completions);
  EXPECT_EQ(channel->submit(zero_blocks).error().code, Errc::invalid_argument);
  EXPECT_EQ(channel->outstanding(), 0u);
}

TEST(BdevSubmitTest, DatalessTypesTakeNoIovAndFlushTakesEmptyRange) {
  auto bdev = make_null({.name = "n", .block_count = 100});
  auto channel = make_channel(*bdev);
  Completions completions;
  AlignedBuffer buffer(512);
  iovec iov = buffer.iov();
  BdevIo zeroes_with_iov = make_io(IoType::write_zeroes, 0, 1, &iov, 1, &completions);
  EXPECT_EQ(channel->submit(zeroes_with_iov).error().code, Errc::invalid_argument);
  BdevIo empty_unmap = make_io(IoType::unmap, 0, 0, nullptr, 0, &completions);
  EXPECT_EQ(channel->submit(empty_unmap).error().code, Errc::invalid_argument);
  BdevIo flush = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
  EXPECT_TRUE(channel->submit(flush));
  EXPECT_EQ(channel->poll(), 1u);
  EXPECT_EQ(flush.status, IoStatus::success);
}

TEST(BdevSubmitTest, RejectsUnsupportedTypes) {
  auto bdev = make_null(
      {.name = "n", .supported_io_types = io_type_bit(IoType::read) | io_type_bit(IoType::write)});
  EXPECT_TRUE(bdev->supports(IoType::read));
  EXPECT_FALSE(bdev->supports(IoType::unmap));
  EXPECT_FALSE(bdev->supports(static_cast<IoType>(200)));
  auto channel = make_channel(*bdev);
  Completions completions;
  BdevIo unmap = make_io(IoType::unmap, 0, 1, nullptr, 0, &completions);
  auto result = channel->submit(unmap);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::not_supported);
  BdevIo bogus = make_io(static_cast<IoType>(7), 0, 1, nullptr, 0, &completions);
  EXPECT_EQ(channel->submit(bogus).error().code, Errc::not_supported);
}

TEST(BdevSubmitTest, BusyWhenQueueDepthReachedUntilPolled) {
  auto bdev = make_null({.name = "n", .queue_depth_max = 4});
  auto channel = make_channel(*bdev);
  EXPECT_EQ(channel->queue_depth_max(), 4u);
  Completions completions;
  std::vector<BdevIo> ios(5);
  for (auto& io : ios) io = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(channel->submit(ios[i]));
  EXPECT_EQ(channel->outstanding(), 4u);
  auto result = channel->submit(ios[4]);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::busy);
  EXPECT_EQ(channel->poll(), 4u);
  EXPECT_EQ(channel->outstanding(), 0u);
  EXPECT_TRUE(channel->submit(ios[4]));
  EXPECT_EQ(channel->poll(), 1u);
  EXPECT_EQ(completions.calls, 5);
}

TEST(BdevSubmitTest, CallbackNeverRunsInsideSubmit) {
  MallocBdevOpts malloc_opts{.name = "m", .block_count = 64};
  auto malloc_bdev = create_malloc_bdev(malloc_opts);
  ASSERT_TRUE(malloc_bdev);
  auto null_bdev = make_null({.name = "n"});
  for (Bdev* bdev : {null_bdev.get(), malloc_bdev->get()}) {
    auto channel = make_channel(*bdev);
    Completions completions;
    AlignedBuffer buffer(512);
    iovec iov = buffer.iov();
    BdevIo ios[5] = {make_io(IoType::read, 0, 1, &iov, 1, &completions),
                     make_io(IoType::write, 1, 1, &iov, 1, &completions),
                     make_io(IoType::flush, 0, 0, nullptr, 0, &completions),
                     make_io(IoType::write_zeroes, 2, 3, nullptr, 0, &completions),
                     make_io(IoType::unmap, 5, 1, nullptr, 0, &completions)};
    for (BdevIo& io : ios) {
      ASSERT_TRUE(channel->submit(io));
      EXPECT_EQ(completions.calls, 0) << bdev->backend_name();
      EXPECT_EQ(io.status, IoStatus::pending);
    }
    EXPECT_EQ(channel->outstanding(), 5u);
    EXPECT_EQ(channel->poll(), 5u);
    EXPECT_EQ(completions.calls, 5);
    for (IoStatus status : completions.statuses) EXPECT_EQ(status, IoStatus::success);
  }
}

TEST(BdevStatsTest, CountsOpsBytesAndLatency) {
  FakeClock clock(1000);
  auto bdev = make_null({.name = "n", .block_size_bytes = 4096, .clock = &clock});
  auto channel = make_channel(*bdev);
  Completions completions;
  AlignedBuffer buffer(4096 * 2);
  iovec iov = buffer.iov();
  BdevIo read = make_io(IoType::read, 0, 2, &iov, 1, &completions);
  BdevIo write = make_io(IoType::write, 4, 2, &iov, 1, &completions);
  BdevIo zeroes = make_io(IoType::write_zeroes, 8, 3, nullptr, 0, &completions);
  BdevIo unmap = make_io(IoType::unmap, 8, 1, nullptr, 0, &completions);
  BdevIo flush = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
  ASSERT_TRUE(channel->submit(read));
  ASSERT_TRUE(channel->submit(write));
  clock.advance_ns(500);
  ASSERT_TRUE(channel->submit(zeroes));
  ASSERT_TRUE(channel->submit(unmap));
  ASSERT_TRUE(channel->submit(flush));
  clock.advance_ns(1500);
  EXPECT_EQ(channel->poll(), 5u);

  IoStats stats = bdev->stats();
  EXPECT_EQ(stats.ops_of(IoType::read), 1u);
  EXPECT_EQ(stats.bytes_of(IoType::read), 8192u);
  EXPECT_EQ(stats.ops_of(IoType::write), 1u);
  EXPECT_EQ(stats.bytes_of(IoType::write), 8192u);
  EXPECT_EQ(stats.ops_of(IoType::write_zeroes), 1u);
  EXPECT_EQ(stats.bytes_of(IoType::write_zeroes), 3u * 4096);
  EXPECT_EQ(stats.ops_of(IoType::unmap), 1u);
  EXPECT_EQ(stats.bytes_of(IoType::unmap), 4096u);
  EXPECT_EQ(stats.ops_of(IoType::flush), 1u);
  EXPECT_EQ(stats.bytes_of(IoType::flush), 0u);
  EXPECT_EQ(stats.errors, 0u);
  EXPECT_EQ(stats.completions(), 5u);
  EXPECT_EQ(stats.latency_ns_total, 2 * 2000u + 3 * 1500u);
  EXPECT_EQ(stats.latency_ns_max, 2000u);
}

TEST(BdevStatsTest, SumsLiveAndClosedChannels) {
  auto bdev = make_null({.name = "n"});
  Completions completions;
  BdevIo io = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
  {
    auto first = make_channel(*bdev);
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(first->submit(io));
      first->poll();
    }
    EXPECT_EQ(bdev->channel_count(), 1u);
  }
  EXPECT_EQ(bdev->channel_count(), 0u);
  auto second = make_channel(*bdev);
  ASSERT_TRUE(second->submit(io));
  second->poll();
  EXPECT_EQ(bdev->stats().ops_of(IoType::flush), 4u);
  EXPECT_EQ(completions.calls, 4);
}

TEST(BdevChannelTest, DestroyingChannelAbortsOutstandingIo) {
  auto bdev = make_null({.name = "n", .completion_delay_ns = 1000000000});
  Completions completions;
  BdevIo a = make_io(IoType::flush, 0, 0, nullptr, 0, &completions);
  BdevIo b = make_io(IoType::write_zeroes, 0, 1, nullptr, 0, &completions);
  {
    auto channel = make_channel(*bdev);
    ASSERT_TRUE(channel->submit(a));
    ASSERT_TRUE(channel->submit(b));
    EXPECT_EQ(channel->poll(), 0u);  // a second has not passed
  }
  ASSERT_EQ(completions.calls, 2);
  EXPECT_EQ(a.status, IoStatus::aborted);
  EXPECT_EQ(b.status, IoStatus::aborted);
  EXPECT_EQ(bdev->stats().errors, 2u);
}

TEST(BdevTest, NamesOfTypesAndStatuses) {
  EXPECT_STREQ(io_type_name(IoType::write_zeroes), "write_zeroes");
  EXPECT_STREQ(io_type_name(IoType::unmap), "unmap");
  EXPECT_STREQ(io_status_name(IoStatus::no_space), "no_space");
  EXPECT_STREQ(io_status_name(IoStatus::aborted), "aborted");
  EXPECT_EQ(kAllIoTypes, 0x1fu);
}

}  // namespace
}  // namespace nvmf::bdev
