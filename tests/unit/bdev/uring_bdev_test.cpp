// The io_uring backend against real files under /tmp: data written through the bdev is read
// back through the bdev and checked byte for byte with pread(2) on the file itself.
#include "bdev/uring_bdev.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bdev_test_util.h"

namespace nvmf::bdev {
namespace {

using testing::AlignedBuffer;
using testing::Completions;
using testing::LogCapture;
using testing::make_io;
using testing::poll_until;
using testing::record_completion;
using testing::run_io;
using testing::TempFile;

constexpr uint32_t kBlock = 4096;
constexpr uint64_t kFileBytes = 4 << 20;  // 4 MiB: room for the multi-chunk zero fill

class UringBdevTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(file_.ok()) << "mkstemp under /tmp failed: " << strerror(errno);
    // io_uring can be disabled (sysctl kernel.io_uring_disabled, seccomp in containers).
    auto probe = create_uring_bdev({.name = "probe", .path = file_.path(), .size_bytes = kBlock});
    ASSERT_TRUE(probe) << probe.error().detail;
    auto channel = (*probe)->create_channel();
    if (!channel) {
      char text[160];
      GTEST_SKIP() << "io_uring unavailable here: "
                   << error_describe(channel.error(), text, sizeof(text));
    }
  }

  std::unique_ptr<Bdev> create(UringBdevOpts opts) {
    if (opts.name.empty()) opts.name = "uring0";
    if (opts.path.empty()) opts.path = file_.path();
    auto bdev = create_uring_bdev(opts);
    EXPECT_TRUE(bdev.has_value()) << (bdev ? "" : bdev.error().detail);
    return bdev ? std::move(*bdev) : nullptr;
  }
  std::unique_ptr<Bdev> create_default() {
    return create({.size_bytes = kFileBytes, .block_size_bytes = kBlock});
  }
  static std::unique_ptr<IoChannel> open_channel(Bdev& bdev) {
    auto channel = bdev.create_channel();
    EXPECT_TRUE(channel.has_value());
    return channel ? std::move(*channel) : nullptr;
  }

  // The file's bytes, bypassing the bdev.
  std::vector<uint8_t> file_bytes(uint64_t offset, size_t length) const {
    std::vector<uint8_t> data(length, 0xee);
    EXPECT_EQ(pread(file_.fd(), data.data(), length, static_cast<off_t>(offset)),
              static_cast<ssize_t>(length));
    return data;
  }
  void fill_file(uint8_t value) const {
    std::vector<uint8_t> data(kFileBytes, value);
    ASSERT_EQ(pwrite(file_.fd(), data.data(), data.size(), 0), static_cast<ssize_t>(kFileBytes));
  }

  TempFile file_;
};

std::vector<uint8_t> pattern(size_t length, unsigned seed) {
  std::vector<uint8_t> data(length);
  for (size_t i = 0; i < length; ++i) data[i] = static_cast<uint8_t>((i * 131 + seed) >> 3);
  return data;
}

bool all_equal(const std::vector<uint8_t>& data, uint8_t value) {
  for (uint8_t byte : data) {
    if (byte != value) return false;
  }
  return true;
}

TEST_F(UringBdevTest, RejectsBadOptions) {
  LogCapture log;
  auto detail_of = [](const UringBdevOpts& opts) {
    auto result = create_uring_bdev(opts);
    return result ? std::string("ok") : std::string(result.error().detail);
  };
  EXPECT_EQ(detail_of({.name = "u"}), "path");
  EXPECT_EQ(detail_of({.name = "", .path = file_.path()}), "name");
  EXPECT_EQ(detail_of({.name = "u", .path = file_.path(), .size_bytes = 4097}), "size_bytes");
  EXPECT_EQ(detail_of({.name = "u", .path = file_.path(), .block_size_bytes = 1000}),
            "block_size_bytes");
  EXPECT_EQ(detail_of({.name = "u", .path = file_.path(), .queue_depth_max = 0}),
            "queue_depth_max");
  EXPECT_EQ(detail_of({.name = "u", .path = "/tmp"}), "path");  // a directory
  EXPECT_EQ(detail_of({.name = "u",
                       .path = file_.path(),
                       .size_bytes = 0,
                       .direct_io = static_cast<DirectIo>(9)}),
            "direct_io");

  auto missing = create_uring_bdev({.name = "u", .path = file_.path() + ".missing"});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, Errc::not_found);
  EXPECT_EQ(missing.error().os_errno, ENOENT);

  // The probe in SetUp sized the file to one 4 KiB block; shrink it below one block.
  ASSERT_EQ(ftruncate(file_.fd(), 100), 0);
  EXPECT_EQ(detail_of({.name = "u", .path = file_.path(), .block_size_bytes = 4096}), "size_bytes");
  EXPECT_TRUE(log.contains("smaller than one block"));
}

TEST_F(UringBdevTest, CreatesAndSizesAFile) {
  const std::string path = file_.path() + ".created";
  auto bdev = create({.path = path, .create_file = true, .size_bytes = 1 << 20});
  ASSERT_TRUE(bdev);
  EXPECT_STREQ(bdev->backend_name(), "uring");
  EXPECT_EQ(bdev->block_size_bytes(), 512u);  // the default for files
  EXPECT_EQ(bdev->block_count(), 2048u);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 1 << 20);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  bdev.reset();
  unlink(path.c_str());
}

TEST_F(UringBdevTest, TrailingBytesAreIgnoredWithAWarning) {
  ASSERT_EQ(ftruncate(file_.fd(), 3 * kBlock + 100), 0);
  LogCapture log;
  auto bdev = create({.block_size_bytes = kBlock});
  ASSERT_TRUE(bdev);
  EXPECT_EQ(bdev->block_count(), 3u);
  EXPECT_TRUE(log.contains("the last 100 bytes are ignored"));
}

TEST_F(UringBdevTest, WriteThenReadRoundTripsThroughTheFile) {
  LogCapture log;
  auto bdev = create_default();
  ASSERT_TRUE(bdev);
  // /tmp is a disk file system here, so O_DIRECT is expected; either way the log says which.
  EXPECT_TRUE(log.contains("O_DIRECT") || log.contains("buffered I/O"));
  auto channel = open_channel(*bdev);
  ASSERT_TRUE(channel);

  const std::vector<uint8_t> data = pattern(8 * kBlock, 1);
  AlignedBuffer source(data.size());
  std::memcpy(source.data(), data.data(), data.size());
  iovec write_iov = source.iov();
  BdevIo write = make_io(IoType::write, 5, 8, &write_iov, 1, nullptr);
  ASSERT_EQ(run_io(*channel, write), IoStatus::success);
  EXPECT_EQ(write.os_errno, 0);

  EXPECT_EQ(file_bytes(5 * kBlock, data.size()), data);

  AlignedBuffer sink(data.size(), 0xee);
  iovec read_iov = sink.iov();
  BdevIo read = make_io(IoType::read, 5, 8, &read_iov, 1, nullptr);
  ASSERT_EQ(run_io(*channel, read), IoStatus::success);
  EXPECT_EQ(std::memcmp(sink.data(), data.data(), data.size()), 0);

  IoStats stats = bdev->stats();
  EXPECT_EQ(stats.ops_of(IoType::write), 1u);
  EXPECT_EQ(stats.bytes_of(IoType::read), 8u * kBlock);
  EXPECT_EQ(stats.errors, 0u);
}

TEST_F(UringBdevTest, ScatterGatherSegments) {
  auto bdev = create_default();
  ASSERT_TRUE(bdev);
  auto channel = open_channel(*bdev);
  ASSERT_TRUE(channel);
  const std::vector<uint8_t> data = pattern(6 * kBlock, 9);
  AlignedBuffer source(data.size());
  std::memcpy(source.data(), data.data(), data.size());
  iovec write_iov[3] = {source.iov(0, kBlock), source.iov(kBlock, 3 * kBlock),
                        source.iov(4 * kBlock, 2 * kBlock)};
  BdevIo write = make_io(IoType::write, 100, 6, write_iov, 3, nullptr);
  ASSERT_EQ(run_io(*channel, write), IoStatus::success);
  EXPECT_EQ(file_bytes(100 * kBlock, data.size()), data);

  // Read back into six separate buffers.
  std::vector<std::unique_ptr<AlignedBuffer>> sinks;
  iovec read_iov[6];
  for (int i = 0; i < 6; ++i) {
    sinks.push_back(std::make_unique<AlignedBuffer>(kBlock, 0xee));
    read_iov[i] = sinks.back()->iov();
  }
  BdevIo read = make_io(IoType::read, 100, 6, read_iov, 6, nullptr);
  ASSERT_EQ(run_io(*channel, read), IoStatus::success);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(std::memcmp(sinks[i]->data(), data.data() + i * kBlock, kBlock), 0) << i;
  }
}

TEST_F(UringBdevTest, BufferedModeRoundTrips) {
  LogCapture log;
  auto bdev =
      create({.size_bytes = kFileBytes, .block_size_bytes = 512, .direct_io = DirectIo::off});
  ASSERT_TRUE(bdev);
  EXPECT_TRUE(log.contains("buffered I/O"));
  EXPECT_EQ(bdev->buffer_alignment_bytes(), 1u);  // the page cache takes any buffer
  auto channel = open_channel(*bdev);
  ASSERT_TRUE(channel);
  std::vector<uint8_t> data = pattern(3 * 512, 4);
  std::vector<uint8_t> unaligned(data.size() + 1);
  std::memcpy(unaligned.data() + 1, data.data(), data.size());
  iovec iov{unaligned.data() + 1, data.size()};
  BdevIo write = make_io(IoType::write, 7, 3, &iov, 1, nullptr);
  ASSERT_EQ(run_io(*channel, write), IoStatus::success);
  EXPECT_EQ(file_bytes(7 * 512, data.size()), data);
}

TEST_F(UringBdevTest, DirectModeRejectsMisalignedBuffers) {
  auto bdev = create_default();
  ASSERT_TRUE(bdev);
  if (bdev->buffer_alignment_bytes() == 1) GTEST_SKIP() << "O_DIRECT not in use on /tmp";
  auto channel = open_channel(*bdev);
  ASSERT_TRUE(channel);
  AlignedBuffer buffer(2 * kBlock);
  iovec iov{buffer.data() + 1, kBlock};
  BdevIo read = make_io(IoType::read, 0, 1, &iov, 1, nullptr);
  auto result = channel->submit(read);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::invalid_argument);
}

TEST_F(UringBdevTest, FlushSucceeds) {
  auto bdev = create_default();
  ASSERT_TRUE(bdev);
  auto channel = open_channel(*bdev);
  ASSERT_TRUE(channel);
  AlignedBuffer source(kBlock, 0x5a);
  iovec iov = source.iov();
  BdevIo write = make_io(IoType::write, 0, 1, &iov, 1, nullptr);
  ASSERT_EQ(run_io(*channel, write), IoStatus::success);
  BdevIo flush = make_io(IoType::flush, 0, 0, nullptr, 0, nullptr);
  ASSERT_EQ(run_io(*channel, flush), IoStatus::success);
  EXPECT_EQ(bdev->stats().ops_of(IoType::flush), 1u);
}

TEST_F(UringBdevTest, WriteZeroesZeroesTheRangeInTheFile) {
  fill_file(0xff);
  auto bdev = create_default();
  ASSERT_TRUE(bdev);
  auto channel = open_channel(*bdev);
  ASSERT_TRUE(channel);
  BdevIo zeroes = make_io(IoType::write_zeroes, 3, 5, nullptr, 0, nullptr);
  ASSERT_EQ(run_io(*channel, zeroes), IoStatus::success);
  EXPECT_TRUE(all_equal(file_bytes(3 * kBlock, 5 * kBlock), 0));
  EXPECT_TRUE(all_equal(file_bytes(2 * kBlock, kBlock), 0xff));
  EXPECT_TRUE(all_equal(file_bytes(8 * kBlock, kBlock), 0xff));

  AlignedBuffer sink(5 * kBlock, 0xee);
  iovec iov = sink.iov();
  BdevIo read = make_io(IoType::read, 3, 5, &iov, 1, nullptr);
  ASSERT_EQ(run_io(*channel, read), IoStatus::success);
  EXPECT_TRUE(all_equal(std::vector<uint8_t>(sink.data(), sink.data() + sink.size()), 0));
}

TEST_F(UringBdevTest, UnmapPunchesAHoleAndKeepsTheSize) {
  fill_file(0xff);
  ASSERT_EQ(fsync(file_.fd()), 0);
  struct stat before {};
  ASSERT_EQ(fstat(file_.fd(), &before), 0);
  auto bdev = create_default();
  ASSERT_TRUE(bdev);
  auto channel = open_channel(*bdev);
  ASSERT_TRUE(channel);
  BdevIo unmap = make_io(IoType::unmap, 16, 256, nullptr, 0, nullptr);  // 1 MiB
  ASSERT_EQ(run_io(*channel, unmap), IoStatus::success);
  EXPECT_TRUE(all_equal(file_bytes(16 * kBlock, 256 * kBlock), 0));
  EXPECT_TRUE(all_equal(file_bytes(15 * kBlock, kBlock), 0xff));
  EXPECT_TRUE(all_equal(file_bytes(272 * kBlock, kBlock), 0xff));
  struct stat after {};
  ASSERT_EQ(fstat(file_.fd(), &after), 0);
  EXPECT_EQ(after.st_size, before.st_size);
  // On a file system with holes, the 1 MiB is gone from the allocation.
  EXPECT_LE(after.st_blocks, before.st_blocks);
}

TEST_F(UringBdevTest, ZeroFillFallbackCoversRangesLargerThanTheZeroBuffer) {
  fill_file(0xff);
  auto bdev =
      create({.size_bytes = kFileBytes, .block_size_bytes = kBlock, .fallocate_enabled = false});
  ASSERT_TRUE(bdev);
  auto channel = open_channel(*bdev);
  ASSERT_TRUE(channel);
  // 2.5 MiB: three writes from the 1 MiB zero buffer.
  BdevIo zeroes = make_io(IoType::write_zeroes, 1, 640, nullptr, 0, nullptr);
  ASSERT_EQ(run_io(*channel, zeroes), IoStatus::success);
  EXPECT_TRUE(all_equal(file_bytes(kBlock, 640 * kBlock), 0));
  EXPECT_TRUE(all_equal(file_bytes(0, kBlock), 0xff));
  EXPECT_TRUE(all_equal(file_bytes(641 * kBlock, kBlock), 0xff));

  BdevIo unmap = make_io(IoType::unmap, 700, 3, nullptr, 0, nullptr);
  ASSERT_EQ(run_io(*channel, unmap), IoStatus::success);
  EXPECT_TRUE(all_equal(file_bytes(700 * kBlock, 3 * kBlock), 0));
  EXPECT_TRUE(all_equal(file_bytes(703 * kBlock, kBlock), 0xff));
  EXPECT_EQ(bdev->stats().bytes_of(IoType::write_zeroes), 640u * kBlock);
}

TEST_F(UringBdevTest, ReadPastTheEndIsCaughtByTheRangeCheck) {
  auto bdev = create_default();
  ASSERT_TRUE(bdev);
  auto channel = open_channel(*bdev);
  ASSERT_TRUE(channel);
  const uint64_t blocks = bdev->block_count();
  EXPECT_EQ(blocks, kFileBytes / kBlock);
  AlignedBuffer sink(2 * kBlock);
  iovec iov = sink.iov();
  BdevIo read = make_io(IoType::read, blocks - 1, 2, &iov, 1, nullptr);
  auto result = channel->submit(read);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::out_of_range);
  EXPECT_EQ(channel->outstanding(), 0u);
  // The last block itself is fine.
  iovec last_iov = sink.iov(0, kBlock);
  BdevIo last = make_io(IoType::read, blocks - 1, 1, &last_iov, 1, nullptr);
  EXPECT_EQ(run_io(*channel, last), IoStatus::success);
}

TEST_F(UringBdevTest, ShortReadAfterTheFileShrankIsAnIoError) {
  auto bdev = create_default();
  ASSERT_TRUE(bdev);
  auto channel = open_channel(*bdev);
  ASSERT_TRUE(channel);
  // Someone else truncates the file: the bdev still believes in 4 MiB.
  ASSERT_EQ(ftruncate(file_.fd(), kBlock), 0);
  AlignedBuffer sink(kBlock);
  iovec iov = sink.iov();
  BdevIo read = make_io(IoType::read, 10, 1, &iov, 1, nullptr);
  EXPECT_EQ(run_io(*channel, read), IoStatus::io_error);
  EXPECT_EQ(read.os_errno, EIO);
  EXPECT_EQ(bdev->stats().errors, 1u);
}

TEST_F(UringBdevTest, KernelErrorsKeepTheirErrno) {
  auto bdev = create_default();
  ASSERT_TRUE(bdev);
  auto channel = open_channel(*bdev);
  ASSERT_TRUE(channel);
  // A file size limit makes writes past it fail with EFBIG (SIGXFSZ ignored for the test).
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto saved_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit limited = saved;
  limited.rlim_cur = 64 * 1024;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limited), 0);

  AlignedBuffer source(kBlock, 1);
  iovec iov = source.iov();
  BdevIo write = make_io(IoType::write, 100, 1, &iov, 1, nullptr);  // at 400 KiB
  const IoStatus status = run_io(*channel, write);

  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, saved_handler);
  EXPECT_EQ(status, IoStatus::io_error);
  EXPECT_EQ(write.os_errno, EFBIG);
}

TEST_F(UringBdevTest, SubmissionsWaitForPollAndTheInterruptFdWakesTheReactor) {
  auto bdev = create_default();
  ASSERT_TRUE(bdev);
  auto channel = open_channel(*bdev);
  ASSERT_TRUE(channel);
  const int fd = channel->interrupt_fd();
  ASSERT_GE(fd, 0);
  Completions completions;
  AlignedBuffer source(kBlock, 0x11);
  iovec iov = source.iov();
  BdevIo write = make_io(IoType::write, 0, 1, &iov, 1, &completions);
  ASSERT_TRUE(channel->submit(write));

  // Batching: nothing reaches the kernel before poll(), so nothing completes.
  pollfd waiter{fd, POLLIN, 0};
  EXPECT_EQ(::poll(&waiter, 1, 50), 0);
  EXPECT_EQ(completions.calls, 0);

  EXPECT_EQ(channel->poll(), 0u);  // rings the doorbell; the CQE comes later
  EXPECT_EQ(completions.calls, 0);
  ASSERT_EQ(::poll(&waiter, 1, 5000), 1);
  EXPECT_TRUE(waiter.revents & POLLIN);
  uint64_t counter = 0;
  ASSERT_EQ(read(fd, &counter, sizeof(counter)), static_cast<ssize_t>(sizeof(counter)));
  EXPECT_GE(counter, 1u);
  EXPECT_EQ(channel->poll(), 1u);
  EXPECT_EQ(completions.calls, 1);
  EXPECT_EQ(write.status, IoStatus::success);
  waiter.revents = 0;
  EXPECT_EQ(::poll(&waiter, 1, 0), 0);  // drained: the reactor may sleep again
}

TEST_F(UringBdevTest, InterruptFdCanBeDisabled) {
  auto bdev = create({.size_bytes = kFileBytes, .interrupt_fd_enabled = false});
  ASSERT_TRUE(bdev);
  auto channel = open_channel(*bdev);
  ASSERT_TRUE(channel);
  EXPECT_EQ(channel->interrupt_fd(), -1);
}

TEST_F(UringBdevTest, BusyAtQueueDepthAndDestroyAbortsOutstanding) {
  auto bdev = create({.size_bytes = kFileBytes, .block_size_bytes = kBlock, .queue_depth_max = 4});
  ASSERT_TRUE(bdev);
  auto channel = open_channel(*bdev);
  ASSERT_TRUE(channel);
  Completions completions;
  AlignedBuffer source(kBlock, 0x22);
  iovec iov = source.iov();
  std::vector<BdevIo> ios(5);
  for (int i = 0; i < 4; ++i) {
    ios[i] = make_io(IoType::write, i, 1, &iov, 1, &completions);
    ASSERT_TRUE(channel->submit(ios[i]));
  }
  ios[4] = make_io(IoType::write, 4, 1, &iov, 1, &completions);
  auto result = channel->submit(ios[4]);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::busy);

  channel.reset();  // never polled: the destructor hands them to the kernel, waits, aborts
  ASSERT_EQ(completions.calls, 4);
  for (IoStatus status : completions.statuses) EXPECT_EQ(status, IoStatus::aborted);
  EXPECT_EQ(bdev->channel_count(), 0u);
}

TEST_F(UringBdevTest, ChannelsOnTwoThreads) {
  auto bdev = create_default();
  ASSERT_TRUE(bdev);
  constexpr uint64_t kBlocksPerThread = 64;
  constexpr int kDepth = 8;

  auto worker = [&bdev](uint64_t first_block, unsigned seed, bool* ok) {
    auto channel = bdev->create_channel();
    if (!channel) return;
    const std::vector<uint8_t> data = pattern(kBlocksPerThread * kBlock, seed);
    AlignedBuffer source(data.size());
    std::memcpy(source.data(), data.data(), data.size());
    std::vector<iovec> iovs(kBlocksPerThread);
    std::vector<BdevIo> ios(kBlocksPerThread);
    Completions completions;
    uint64_t next = 0;
    while (completions.calls < static_cast<int>(kBlocksPerThread)) {
      while (next < kBlocksPerThread && (*channel)->outstanding() < kDepth) {
        iovs[next] = source.iov(next * kBlock, kBlock);
        ios[next] = make_io(IoType::write, first_block + next, 1, &iovs[next], 1, &completions);
        if (!(*channel)->submit(ios[next])) return;
        ++next;
      }
      (*channel)->poll();
    }
    for (IoStatus status : completions.statuses) {
      if (status != IoStatus::success) return;
    }
    *ok = true;
  };
  bool ok_a = false;
  bool ok_b = false;
  std::thread a(worker, 0, 1u, &ok_a);
  std::thread b(worker, 512, 2u, &ok_b);
  a.join();
  b.join();
  EXPECT_TRUE(ok_a);
  EXPECT_TRUE(ok_b);
  EXPECT_EQ(bdev->stats().ops_of(IoType::write), 2 * kBlocksPerThread);
  EXPECT_EQ(file_bytes(0, kBlocksPerThread * kBlock), pattern(kBlocksPerThread * kBlock, 1));
  EXPECT_EQ(file_bytes(512 * kBlock, kBlocksPerThread * kBlock),
            pattern(kBlocksPerThread * kBlock, 2));
}

TEST_F(UringBdevTest, OptsDumpAsJson) {
  UringBdevOpts opts{.name = "u", .path = "/tmp/a b", .direct_io = DirectIo::off};
  EXPECT_EQ(opts_to_json(opts),
            "{\"name\":\"u\",\"path\":\"/tmp/a b\",\"create_file\":false,\"size_bytes\":0,"
            "\"block_size_bytes\":0,\"direct_io\":\"off\",\"fallocate_enabled\":true,"
            "\"interrupt_fd_enabled\":true,\"uuid\":null,\"queue_depth_max\":128}");
}

}  // namespace
}  // namespace nvmf::bdev
