#include "bdev/malloc_bdev.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "bdev_test_util.h"

namespace nvmf::bdev {
namespace {

using testing::AlignedBuffer;
using testing::Completions;
using testing::LogCapture;
using testing::make_io;
using testing::run_io;

constexpr uint32_t kBlock = 512;

struct MallocFixture {
  explicit MallocFixture(uint64_t block_count = 64) {
    auto created = create_malloc_bdev({.name = "malloc0", .block_count = block_count});
    EXPECT_TRUE(created.has_value());
    bdev = std::move(*created);
    auto made = bdev->create_channel();
    EXPECT_TRUE(made.has_value());
    channel = std::move(*made);
  }
  // Reads [offset, offset + count) blocks into a fresh buffer.
  std::vector<uint8_t> read(uint64_t offset_blocks, uint64_t num_blocks) {
    std::vector<uint8_t> data(num_blocks * kBlock, 0xee);
    iovec iov{data.data(), data.size()};
    BdevIo io = make_io(IoType::read, offset_blocks, num_blocks, &iov, 1, nullptr);
    EXPECT_EQ(run_io(*channel, io), IoStatus::success);
    return data;
  }
  std::unique_ptr<Bdev> bdev;
  std::unique_ptr<IoChannel> channel;
};

TEST(MallocBdevTest, StartsZeroed) {
  MallocFixture malloc_bdev;
  EXPECT_STREQ(malloc_bdev.bdev->backend_name(), "malloc");
  std::vector<uint8_t> data = malloc_bdev.read(0, 64);
  for (uint8_t byte : data) ASSERT_EQ(byte, 0);
}

TEST(MallocBdevTest, WriteReadRoundTripWithScatteredSegments) {
  MallocFixture malloc_bdev;
  // Four blocks written from three uneven segments...
  AlignedBuffer source(4 * kBlock);
  for (size_t i = 0; i < source.size(); ++i) source.data()[i] = static_cast<uint8_t>(i * 7 + 3);
  iovec write_iov[3] = {source.iov(0, 100), source.iov(100, 1000), source.iov(1100, 948)};
  BdevIo write = make_io(IoType::write, 10, 4, write_iov, 3, nullptr);
  ASSERT_EQ(run_io(*malloc_bdev.channel, write), IoStatus::success);

  // ...read back through four differently cut segments.
  AlignedBuffer sink(4 * kBlock, 0xee);
  iovec read_iov[4] = {sink.iov(0, 1), sink.iov(1, 511), sink.iov(512, 1536), sink.iov(2048, 0)};
  BdevIo read = make_io(IoType::read, 10, 4, read_iov, 4, nullptr);
  ASSERT_EQ(run_io(*malloc_bdev.channel, read), IoStatus::success);
  EXPECT_EQ(std::memcmp(source.data(), sink.data(), source.size()), 0);

  // Neighbours are untouched.
  std::vector<uint8_t> before = malloc_bdev.read(9, 1);
  std::vector<uint8_t> after = malloc_bdev.read(14, 1);
  for (size_t i = 0; i < kBlock; ++i) {
    ASSERT_EQ(before[i], 0);
    ASSERT_EQ(after[i], 0);
  }
}

TEST(MallocBdevTest, WriteZeroesAndUnmapZeroTheRange) {
  MallocFixture malloc_bdev;
  AlignedBuffer ones(16 * kBlock, 0xff);
  iovec iov = ones.iov();
  BdevIo fill = make_io(IoType::write, 0, 16, &iov, 1, nullptr);
  ASSERT_EQ(run_io(*malloc_bdev.channel, fill), IoStatus::success);

  BdevIo zeroes = make_io(IoType::write_zeroes, 2, 3, nullptr, 0, nullptr);
  ASSERT_EQ(run_io(*malloc_bdev.channel, zeroes), IoStatus::success);
  BdevIo unmap = make_io(IoType::unmap, 10, 2, nullptr, 0, nullptr);
  ASSERT_EQ(run_io(*malloc_bdev.channel, unmap), IoStatus::success);
  BdevIo flush = make_io(IoType::flush, 0, 0, nullptr, 0, nullptr);
  ASSERT_EQ(run_io(*malloc_bdev.channel, flush), IoStatus::success);

  std::vector<uint8_t> data = malloc_bdev.read(0, 16);
  for (uint64_t block = 0; block < 16; ++block) {
    const bool zeroed = (block >= 2 && block < 5) || (block >= 10 && block < 12);
    for (size_t i = 0; i < kBlock; ++i) {
      ASSERT_EQ(data[block * kBlock + i], zeroed ? 0 : 0xff) << "block " << block;
    }
  }
}

TEST(MallocBdevTest, TooLargeForMemoryIsNoMemory) {
  LogCapture log;
  // 2^40 blocks of 64 KiB = 64 PiB: more than any address space.
  auto result = create_malloc_bdev(
      {.name = "huge", .block_size_bytes = 65536, .block_count = uint64_t{1} << 40});
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::no_memory);
  EXPECT_STREQ(result.error().detail, "block_count");
  EXPECT_TRUE(log.contains("lower block_count"));
}

TEST(MallocBdevTest, ChannelsOnTwoThreadsShareTheData) {
  auto created = create_malloc_bdev({.name = "shared", .block_count = 256});
  ASSERT_TRUE(created);
  Bdev& bdev = **created;
  constexpr int kWritesPerThread = 64;

  // Each thread owns its channel and writes its own half, block by block, 4 at a time.
  auto worker = [&bdev](uint64_t first_block, uint8_t pattern, bool* ok) {
    auto channel = bdev.create_channel();
    if (!channel) return;
    AlignedBuffer buffer(kBlock, pattern);
    iovec iov = buffer.iov();
    std::vector<BdevIo> ios(4);
    int completed = 0;
    for (int i = 0; i < kWritesPerThread; i += 4) {
      Completions completions;
      for (int j = 0; j < 4; ++j) {
        ios[j] = make_io(IoType::write, first_block + i + j, 1, &iov, 1, &completions);
        if (!(*channel)->submit(ios[j])) return;
      }
      while (completions.calls < 4) (*channel)->poll();
      completed += completions.calls;
    }
    *ok = completed == kWritesPerThread;
  };
  bool ok_a = false;
  bool ok_b = false;
  std::thread a(worker, 0, uint8_t{0xa1}, &ok_a);
  std::thread b(worker, 128, uint8_t{0xb2}, &ok_b);
  // Statistics may be read while both threads run.
  uint64_t seen = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t writes = bdev.stats().ops_of(IoType::write);
    EXPECT_GE(writes, seen);  // counters only grow
    seen = writes;
  }
  a.join();
  b.join();
  EXPECT_TRUE(ok_a);
  EXPECT_TRUE(ok_b);
  EXPECT_EQ(bdev.stats().ops_of(IoType::write), 2u * kWritesPerThread);
  EXPECT_EQ(bdev.channel_count(), 0u);

  auto channel = bdev.create_channel();
  ASSERT_TRUE(channel);
  std::vector<uint8_t> data(256 * kBlock);
  iovec iov{data.data(), data.size()};
  BdevIo read = make_io(IoType::read, 0, 256, &iov, 1, nullptr);
  ASSERT_EQ(run_io(**channel, read), IoStatus::success);
  for (size_t block = 0; block < 256; ++block) {
    const uint8_t expected = block < 64 ? 0xa1 : (block >= 128 && block < 192) ? 0xb2 : 0;
    ASSERT_EQ(data[block * kBlock], expected) << block;
    ASSERT_EQ(data[block * kBlock + kBlock - 1], expected) << block;
  }
}

}  // namespace
}  // namespace nvmf::bdev
