// nbd::Queue against a socketpair playing the kernel and an in-memory fake backend that
// completes immediately (inside submit), at its next process(), or when the test says so,
// and can refuse with busy.
#include "nbd/queue.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "log_capture.h"
#include "nbd/wire.h"

namespace nvmf::nbd {
namespace {

using wire::Command;

constexpr uint64_t kDiskBytes = 1024 * 1024;
constexpr uint32_t kBlock = 512;

// An in-memory disk behind the Backend interface.
class FakeBackend : public Backend {
 public:
  enum class Mode {
    immediate,   // complete() from inside submit()
    in_process,  // complete() from the next process(), in submit order
    manual,      // the test calls complete_tag()
  };

  bool submit(const Request& request) noexcept override {
    if (refuse > 0) {
      --refuse;
      return false;
    }
    submitted.push_back(request);
    if (mode == Mode::immediate) {
      finish(request);
    } else {
      pending.push_back(request);
    }
    return true;
  }

  int process() noexcept override {
    ++process_calls;
    if (mode != Mode::in_process) return 0;
    int done = 0;
    while (!pending.empty()) {
      const Request request = pending.front();
      pending.pop_front();
      finish(request);
      ++done;
    }
    return done;
  }

  // Completes the pending request with `tag` (manual mode), out of order if the test likes.
  void complete_tag(uint32_t tag, int error_value = 0) {
    for (auto it = pending.begin(); it != pending.end(); ++it) {
      if (it->tag != tag) continue;
      const Request request = *it;
      pending.erase(it);
      error = error_value;
      finish(request);
      error = 0;
      return;
    }
    ADD_FAILURE() << "no pending request with tag " << tag;
  }
  void complete_all() {
    while (!pending.empty()) complete_tag(pending.front().tag);
  }

  Queue* queue = nullptr;
  Mode mode = Mode::in_process;
  int refuse = 0;  // refuse (busy) this many next submits
  int error = 0;   // errno to complete with
  int process_calls = 0;
  std::vector<uint8_t> disk = std::vector<uint8_t>(kDiskBytes, 0);
  std::vector<Request> submitted;  // every accepted request, in order
  std::deque<Request> pending;     // accepted, not completed

 private:
  void finish(const Request& request) {
    execute(request);
    queue->complete(request.tag, error);
  }
  void execute(const Request& request) {
    if (error != 0) return;
    uint8_t* at = disk.data() + request.offset_bytes;
    switch (request.op) {
      case Op::read:
        std::memcpy(request.buffer, at, request.length_bytes);
        break;
      case Op::write:
        std::memcpy(at, request.buffer, request.length_bytes);
        break;
      case Op::trim:
      case Op::write_zeroes:
        std::memset(at, 0, request.length_bytes);
        break;
      case Op::flush:
        break;
    }
  }
};

// Counts the setup allocator's calls, so a test can see no buffer is freed early.
struct CountingAllocator {
  int allocs = 0;
  int frees = 0;
  static void* alloc(void* ctx, size_t bytes) {
    ++static_cast<CountingAllocator*>(ctx)->allocs;
    return std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  }
  static void free(void* ctx, void* buffer) {
    ++static_cast<CountingAllocator*>(ctx)->frees;
    std::free(buffer);
  }
};

std::vector<uint8_t> pattern(size_t bytes, uint8_t seed) {
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 9));
  return data;
}

struct Reply {
  uint32_t error = 0;
  uint64_t handle = 0;
  std::vector<uint8_t> data;
};

class NbdQueueTest : public ::testing::Test {
 protected:
  static QueueOpts default_opts() {
    QueueOpts opts;
    opts.slots = 8;
    opts.max_request_bytes = 64 * 1024;
    opts.size_bytes = kDiskBytes;
    opts.block_size_bytes = kBlock;
    opts.name = "test";
    return opts;
  }

  // `queue_sndbuf`: SO_SNDBUF of the queue's end (small: replies go out in pieces).
  void start(QueueOpts opts = default_opts(), int queue_sndbuf = 0) {
    int fds[2];
    ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, fds));
    peer_ = fds[1];
    ASSERT_EQ(0, fcntl(peer_, F_SETFL, fcntl(peer_, F_GETFL) | O_NONBLOCK));
    if (queue_sndbuf != 0) {
      ASSERT_EQ(0, setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &queue_sndbuf, sizeof(int)));
    }
    auto created = Queue::create(fds[0], backend_, opts);
    ASSERT_TRUE(created) << errc_name(created.error().code);
    queue_ = std::move(*created);
    backend_.queue = queue_.get();
  }

  void TearDown() override {
    if (queue_) {
      backend_.complete_all();
      pump();
      queue_.reset();
    }
    if (peer_ >= 0) close(peer_);
  }

  int pump(int rounds = 20) {
    int work = 0;
    for (int i = 0; i < rounds; ++i) work += queue_->poll();
    return work;
  }

  // Writes all of `bytes` from the kernel side, polling the queue while the socket is full.
  void send_bytes(const void* bytes, size_t size) {
    const auto* at = static_cast<const uint8_t*>(bytes);
    for (int spins = 0; size != 0; ++spins) {
      ASSERT_LT(spins, 100000) << "the queue stopped reading";
      const ssize_t sent = send(peer_, at, size, MSG_NOSIGNAL);
      if (sent < 0) {
        ASSERT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << strerror(errno);
        queue_->poll();
        continue;
      }
      at += sent;
      size -= static_cast<size_t>(sent);
    }
  }

  void send_request(Command type, uint64_t handle, uint64_t offset, uint32_t length,
                    uint16_t flags = 0, const std::vector<uint8_t>* payload = nullptr) {
    const wire::Request request = wire::make_request(type, flags, handle, offset, length);
    send_bytes(&request, sizeof(request));
    if (payload != nullptr) send_bytes(payload->data(), payload->size());
  }

  // Reads exactly `size` bytes on the kernel side, polling the queue while none arrive.
  bool read_bytes(void* to, size_t size) {
    auto* at = static_cast<uint8_t*>(to);
    for (int spins = 0; size != 0; ++spins) {
      if (spins > 100000) return false;
      const ssize_t got = recv(peer_, at, size, 0);
      if (got <= 0) {
        if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return false;
        queue_->poll();
        continue;
      }
      at += got;
      size -= static_cast<size_t>(got);
    }
    return true;
  }

  // One simple reply; a successful one carries `data_bytes` of read data.
  Reply read_reply(uint32_t data_bytes = 0) {
    Reply reply;
    wire::SimpleReply header{};
    if (!read_bytes(&header, sizeof(header))) {
      ADD_FAILURE() << "no reply";
      return reply;
    }
    EXPECT_EQ(header.magic(), wire::kSimpleReplyMagic);
    reply.error = header.error();
    std::memcpy(&reply.handle, header.handle, sizeof(reply.handle));
    if (reply.error == 0 && data_bytes != 0) {
      reply.data.resize(data_bytes);
      EXPECT_TRUE(read_bytes(reply.data.data(), data_bytes)) << "short read data";
    }
    return reply;
  }

  bool peer_has_data() {
    uint8_t byte;
    return recv(peer_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
  }

  FakeBackend backend_;
  std::unique_ptr<Queue> queue_;
  int peer_ = -1;
};

TEST_F(NbdQueueTest, WriteThenReadRoundTrip) {
  start();
  const auto data = pattern(8192, 3);
  send_request(Command::write, 0x1111, 4096, 8192, wire::kCmdFlagFua, &data);
  Reply reply = read_reply();
  EXPECT_EQ(reply.error, 0u);
  EXPECT_EQ(reply.handle, 0x1111u);
  ASSERT_EQ(backend_.submitted.size(), 1u);
  EXPECT_EQ(backend_.submitted[0].op, Op::write);
  EXPECT_EQ(backend_.submitted[0].offset_bytes, 4096u);
  EXPECT_EQ(backend_.submitted[0].length_bytes, 8192u);
  EXPECT_TRUE(backend_.submitted[0].fua);
  EXPECT_EQ(0, std::memcmp(backend_.disk.data() + 4096, data.data(), data.size()));

  send_request(Command::read, 0x2222, 4096, 8192);
  reply = read_reply(8192);
  EXPECT_EQ(reply.error, 0u);
  EXPECT_EQ(reply.handle, 0x2222u);
  EXPECT_EQ(reply.data, data);
  EXPECT_FALSE(backend_.submitted[1].fua);
  EXPECT_EQ(backend_.submitted[1].buffer, backend_.submitted[0].buffer)
      << "a freed slot (LIFO) is reused with its buffer";
  EXPECT_EQ(queue_->state(), QueueState::running);
  EXPECT_EQ(queue_->in_flight(), 0u);
}

TEST_F(NbdQueueTest, CompletionFromInsideSubmitWorks) {
  backend_.mode = FakeBackend::Mode::immediate;
  start();
  const auto data = pattern(4096, 9);
  send_request(Command::write, 1, 0, 4096, 0, &data);
  send_request(Command::read, 2, 0, 4096);
  EXPECT_EQ(read_reply().handle, 1u);
  const Reply reply = read_reply(4096);
  EXPECT_EQ(reply.handle, 2u);
  EXPECT_EQ(reply.data, data);
}

TEST_F(NbdQueueTest, FlushTrimAndWriteZeroes) {
  start();
  std::memset(backend_.disk.data(), 0xab, 64 * 1024);
  send_request(Command::flush, 1, 0, 0);
  send_request(Command::trim, 2, 0, 4096);
  send_request(Command::write_zeroes, 3, 8192, 16384, wire::kCmdFlagNoHole | wire::kCmdFlagFua);
  for (uint64_t handle = 1; handle <= 3; ++handle) {
    const Reply reply = read_reply();
    EXPECT_EQ(reply.handle, handle);
    EXPECT_EQ(reply.error, 0u);
  }
  ASSERT_EQ(backend_.submitted.size(), 3u);
  const Request& flush = backend_.submitted[0];
  EXPECT_EQ(flush.op, Op::flush);
  EXPECT_EQ(flush.length_bytes, 0u);
  EXPECT_EQ(flush.buffer, nullptr);
  const Request& trim = backend_.submitted[1];
  EXPECT_EQ(trim.op, Op::trim);
  EXPECT_EQ(trim.buffer, nullptr);
  EXPECT_EQ(trim.length_bytes, 4096u);
  const Request& zeroes = backend_.submitted[2];
  EXPECT_EQ(zeroes.op, Op::write_zeroes);
  EXPECT_TRUE(zeroes.no_hole);
  EXPECT_TRUE(zeroes.fua);
  EXPECT_EQ(zeroes.offset_bytes, 8192u);

  send_request(Command::read, 4, 0, 32768);
  const Reply reply = read_reply(32768);
  std::vector<uint8_t> expected(32768, 0xab);
  std::memset(expected.data(), 0, 4096);
  std::memset(expected.data() + 8192, 0, 16384);
  EXPECT_EQ(reply.data, expected);
}

TEST_F(NbdQueueTest, HeaderAndPayloadSplitByteByByte) {
  start();
  const auto data = pattern(1024, 5);
  const wire::Request request = wire::make_request(Command::write, 0, 77, 512, 1024);
  std::vector<uint8_t> bytes(sizeof(request));
  std::memcpy(bytes.data(), &request, sizeof(request));
  bytes.insert(bytes.end(), data.begin(), data.end());
  for (size_t i = 0; i + 1 < bytes.size(); ++i) {
    send_bytes(&bytes[i], 1);
    queue_->poll();
    ASSERT_TRUE(backend_.submitted.empty()) << "submitted after " << i + 1 << " bytes";
  }
  send_bytes(&bytes.back(), 1);
  const Reply reply = read_reply();
  EXPECT_EQ(reply.handle, 77u);
  EXPECT_EQ(reply.error, 0u);
  EXPECT_EQ(0, std::memcmp(backend_.disk.data() + 512, data.data(), data.size()));
}

TEST_F(NbdQueueTest, ManyRequestsInOneSendAndLargeWriteThroughStaging) {
  QueueOpts opts = default_opts();
  opts.slots = 128;
  opts.max_request_bytes = 128 * 1024;
  start(opts);
  // One buffer: a 128 KiB write (larger than the staging area) and 100 small reads.
  const auto data = pattern(128 * 1024, 11);
  std::vector<uint8_t> bytes;
  auto append = [&](const wire::Request& request) {
    const auto* raw = reinterpret_cast<const uint8_t*>(&request);
    bytes.insert(bytes.end(), raw, raw + sizeof(request));
  };
  append(wire::make_request(Command::write, 0, 1000, 0, 128 * 1024));
  bytes.insert(bytes.end(), data.begin(), data.end());
  for (uint64_t i = 0; i < 100; ++i) append(wire::make_request(Command::read, 0, i, i * 512, 512));
  send_bytes(bytes.data(), bytes.size());
  EXPECT_EQ(read_reply().handle, 1000u);
  for (uint64_t i = 0; i < 100; ++i) {
    const Reply reply = read_reply(512);
    ASSERT_EQ(reply.handle, i);
    ASSERT_EQ(0, std::memcmp(reply.data.data(), data.data() + i * 512, 512)) << i;
  }
  EXPECT_EQ(queue_->stats().requests, 101u);
}

TEST_F(NbdQueueTest, PartialReplyWritesAreResumed) {
  QueueOpts opts = default_opts();
  opts.max_request_bytes = 128 * 1024;
  start(opts, 4096);  // the queue's send buffer holds far less than one reply
  const auto first = pattern(128 * 1024, 1);
  const auto second = pattern(64 * 1024, 2);
  std::memcpy(backend_.disk.data(), first.data(), first.size());
  std::memcpy(backend_.disk.data() + 256 * 1024, second.data(), second.size());
  send_request(Command::read, 1, 0, 128 * 1024);
  send_request(Command::read, 2, 256 * 1024, 64 * 1024);
  pump();
  EXPECT_TRUE(queue_->wants_write()) << "replies wait for socket space";
  Reply reply = read_reply(128 * 1024);
  EXPECT_EQ(reply.handle, 1u);
  EXPECT_EQ(reply.data, first);
  reply = read_reply(64 * 1024);
  EXPECT_EQ(reply.handle, 2u);
  EXPECT_EQ(reply.data, second);
  pump();
  EXPECT_FALSE(queue_->wants_write());
  EXPECT_EQ(queue_->stats().bytes_read, 192u * 1024);
}

TEST_F(NbdQueueTest, FullSlotTableStopsReadingUntilASlotFrees) {
  backend_.mode = FakeBackend::Mode::manual;
  QueueOpts opts = default_opts();
  opts.slots = 4;
  start(opts);
  for (uint64_t i = 0; i < 6; ++i) send_request(Command::read, i, i * 512, 512);
  pump();
  EXPECT_EQ(backend_.submitted.size(), 4u);
  EXPECT_EQ(queue_->in_flight(), 4u);
  EXPECT_FALSE(peer_has_data()) << "no replies yet";
  backend_.complete_tag(backend_.submitted[2].tag);
  pump();  // the reply frees slot 2; the fifth request takes it
  EXPECT_EQ(read_reply(512).handle, 2u);
  EXPECT_EQ(backend_.submitted.size(), 5u);
  EXPECT_EQ(backend_.submitted[4].offset_bytes, 4u * 512);
  backend_.complete_all();
  pump();
  backend_.complete_all();
  for (int i = 0; i < 5; ++i) read_reply(512);
  EXPECT_EQ(backend_.submitted.size(), 6u);
}

TEST_F(NbdQueueTest, OutOfOrderCompletionsAreMatchedByHandle) {
  backend_.mode = FakeBackend::Mode::manual;
  start();
  for (uint64_t i = 0; i < 3; ++i) {
    std::memset(backend_.disk.data() + i * 4096, static_cast<int>(0x10 + i), 4096);
    send_request(Command::read, 0xabc0 + i, i * 4096, 4096);
  }
  pump();
  ASSERT_EQ(backend_.submitted.size(), 3u);
  const uint32_t order[] = {2, 0, 1};
  for (uint32_t i : order) backend_.complete_tag(backend_.submitted[i].tag);
  for (uint32_t i : order) {
    const Reply reply = read_reply(4096);
    EXPECT_EQ(reply.handle, 0xabc0u + i) << "replies go out in completion order";
    EXPECT_EQ(reply.data, std::vector<uint8_t>(4096, static_cast<uint8_t>(0x10 + i)));
  }
}

TEST_F(NbdQueueTest, BusyBackendIsRetriedInOrder) {
  start();
  backend_.refuse = 2;
  for (uint64_t i = 0; i < 3; ++i) {
    const auto data = pattern(512, static_cast<uint8_t>(i));
    send_request(Command::write, i, 0, 512, 0, &data);  // same block: order decides the data
  }
  for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ(read_reply().handle, i);
  ASSERT_EQ(backend_.submitted.size(), 3u);
  // All three wrote block 0: the last one submitted must be the last one sent.
  EXPECT_EQ(0, std::memcmp(backend_.disk.data(), pattern(512, 2).data(), 512));
  EXPECT_EQ(queue_->stats().busy_retries, 2u);
}

TEST_F(NbdQueueTest, RequestAboveMaxRequestBytesIsEinvalAndLoggedOnce) {
  test::LogCapture log;
  start();
  const uint32_t too_large = 64 * 1024 + kBlock;
  send_request(Command::read, 1, 0, too_large);
  EXPECT_EQ(read_reply().error, uint32_t{EINVAL});
  // A write that large: its payload is read and dropped, the stream stays in step.
  const auto payload = pattern(too_large * 3, 4);  // several buffer-fuls
  send_request(Command::write, 2, 0, too_large * 3, 0, &payload);
  const Reply reply = read_reply();
  EXPECT_EQ(reply.handle, 2u);
  EXPECT_EQ(reply.error, uint32_t{EINVAL});
  send_request(Command::read, 3, 0, 512);
  EXPECT_EQ(read_reply(512).error, 0u);
  EXPECT_EQ(backend_.submitted.size(), 1u) << "only the valid read reaches the backend";
  int logged = 0;
  for (const auto& line : log.lines())
    logged += line.find("max_request_bytes") != std::string::npos;
  EXPECT_EQ(logged, 1);
  EXPECT_EQ(queue_->stats().errors, 2u);
  EXPECT_EQ(queue_->stats().bytes_written, 0u);
}

TEST_F(NbdQueueTest, MisalignedRequestsAreEinval) {
  start();
  send_request(Command::read, 1, 100, 512);
  EXPECT_EQ(read_reply().error, uint32_t{EINVAL});
  send_request(Command::read, 2, 512, 100);
  EXPECT_EQ(read_reply().error, uint32_t{EINVAL});
  const auto data = pattern(700, 1);
  send_request(Command::write, 3, 0, 700, 0, &data);  // payload consumed all the same
  EXPECT_EQ(read_reply().error, uint32_t{EINVAL});
  send_request(Command::trim, 4, 512, 1000);
  EXPECT_EQ(read_reply().error, uint32_t{EINVAL});
  send_request(Command::read, 5, 0, 0);  // zero length
  EXPECT_EQ(read_reply().error, uint32_t{EINVAL});
  send_request(Command::read, 6, 512, 512);
  EXPECT_EQ(read_reply(512).error, 0u);
  EXPECT_EQ(backend_.submitted.size(), 1u);
}

TEST_F(NbdQueueTest, RequestsBeyondTheDeviceAreRejected) {
  start();
  send_request(Command::read, 1, kDiskBytes - 512, 1024);
  EXPECT_EQ(read_reply().error, uint32_t{EINVAL});
  const auto data = pattern(1024, 1);
  send_request(Command::write, 2, kDiskBytes - 512, 1024, 0, &data);
  EXPECT_EQ(read_reply().error, uint32_t{ENOSPC});
  send_request(Command::trim, 3, kDiskBytes, 512);
  EXPECT_EQ(read_reply().error, uint32_t{EINVAL});
  send_request(Command::write_zeroes, 4, kDiskBytes - 512, 1024);
  EXPECT_EQ(read_reply().error, uint32_t{ENOSPC});
  send_request(Command::read, 5, ~uint64_t{0} - 511, 1024);  // offset + length wraps
  EXPECT_EQ(read_reply().error, uint32_t{EINVAL});
  send_request(Command::read, 6, kDiskBytes - 512, 512);  // the last block is fine
  EXPECT_EQ(read_reply(512).error, 0u);
  EXPECT_EQ(backend_.submitted.size(), 1u);
  EXPECT_EQ(queue_->stats().errors, 5u);
}

TEST_F(NbdQueueTest, UnknownOrMisplacedCommandFlagsAreEinval) {
  start();
  send_request(Command::read, 1, 0, 512, wire::kCmdFlagDf);
  EXPECT_EQ(read_reply().error, uint32_t{EINVAL});
  const auto data = pattern(512, 1);
  send_request(Command::write, 2, 0, 512, wire::kCmdFlagNoHole, &data);
  EXPECT_EQ(read_reply().error, uint32_t{EINVAL});
  send_request(Command::read, 3, 0, 512, 0x8000);
  EXPECT_EQ(read_reply().error, uint32_t{EINVAL});
  send_request(Command::read, 4, 0, 512, wire::kCmdFlagFua);  // FUA is accepted anywhere
  EXPECT_EQ(read_reply(512).error, 0u);
  EXPECT_EQ(queue_->state(), QueueState::running);
}

TEST_F(NbdQueueTest, ReadOnlyQueueAnswersWritesEperm) {
  QueueOpts opts = default_opts();
  opts.read_only = true;
  start(opts);
  const auto data = pattern(512, 1);
  send_request(Command::write, 1, 0, 512, 0, &data);
  EXPECT_EQ(read_reply().error, uint32_t{EPERM});
  send_request(Command::trim, 2, 0, 512);
  EXPECT_EQ(read_reply().error, uint32_t{EPERM});
  send_request(Command::write_zeroes, 3, 0, 512);
  EXPECT_EQ(read_reply().error, uint32_t{EPERM});
  send_request(Command::flush, 4, 0, 0);
  EXPECT_EQ(read_reply().error, 0u);
  send_request(Command::read, 5, 0, 512);
  EXPECT_EQ(read_reply(512).error, 0u);
}

TEST_F(NbdQueueTest, BackendErrorsAreMappedToProtocolErrnos) {
  backend_.mode = FakeBackend::Mode::manual;
  start();
  for (uint64_t i = 0; i < 4; ++i) send_request(Command::read, i, 0, 512);
  pump();
  ASSERT_EQ(backend_.submitted.size(), 4u);
  backend_.complete_tag(backend_.submitted[0].tag, EIO);
  backend_.complete_tag(backend_.submitted[1].tag, EDQUOT);
  backend_.complete_tag(backend_.submitted[2].tag, ENODEV);
  backend_.complete_tag(backend_.submitted[3].tag, ENOSPC);
  const uint32_t expected[] = {EIO, ENOSPC, EIO, ENOSPC};
  for (uint32_t error : expected) EXPECT_EQ(read_reply().error, error);  // no read data
  EXPECT_EQ(queue_->stats().errors, 4u);
  EXPECT_EQ(queue_->stats().bytes_read, 0u);
  EXPECT_EQ(reply_error_of(-5), uint32_t{EIO});
  EXPECT_EQ(reply_error_of(EFBIG), uint32_t{ENOSPC});
  EXPECT_EQ(reply_error_of(ESHUTDOWN), uint32_t{ESHUTDOWN});
}

TEST_F(NbdQueueTest, BadMagicIsAProtocolErrorAndDrains) {
  test::LogCapture log;
  backend_.mode = FakeBackend::Mode::manual;
  start();
  send_request(Command::read, 1, 0, 512);
  pump();
  ASSERT_EQ(queue_->in_flight(), 1u);
  wire::Request bad = wire::make_request(Command::read, 0, 2, 0, 512);
  bad.magic_be = wire::to_be32(0x12345678);
  send_bytes(&bad, sizeof(bad));
  send_request(Command::read, 3, 0, 512);  // after the bad header: never read
  pump();
  EXPECT_EQ(queue_->state(), QueueState::draining);
  EXPECT_EQ(queue_->stats().protocol_errors, 1u);
  EXPECT_TRUE(log.contains("protocol error")) << "logged";
  EXPECT_TRUE(log.contains("0x12345678"));
  backend_.complete_all();
  EXPECT_EQ(read_reply(512).handle, 1u) << "what was taken is still answered";
  pump();
  EXPECT_EQ(queue_->state(), QueueState::closed);
  EXPECT_EQ(backend_.submitted.size(), 1u);
  EXPECT_FALSE(peer_has_data());
}

TEST_F(NbdQueueTest, UnknownCommandIsAnsweredEinvalThenDrains) {
  test::LogCapture log;
  start();
  send_request(Command::cache, 9, 0, 512);
  const Reply reply = read_reply();
  EXPECT_EQ(reply.handle, 9u);
  EXPECT_EQ(reply.error, uint32_t{EINVAL});
  pump();
  EXPECT_EQ(queue_->stats().protocol_errors, 1u);
  EXPECT_EQ(queue_->state(), QueueState::closed);
  EXPECT_TRUE(backend_.submitted.empty());
  EXPECT_TRUE(log.contains("unknown command 0x5"));
}

TEST_F(NbdQueueTest, DisconnectDrainsThenCloses) {
  backend_.mode = FakeBackend::Mode::manual;
  start();
  send_request(Command::read, 1, 0, 512);
  send_request(Command::read, 2, 512, 512);
  send_request(Command::disconnect, 3, 0, 0);
  send_request(Command::read, 4, 0, 512);  // a peer breaking the rules: not read
  pump();
  EXPECT_EQ(queue_->state(), QueueState::draining);
  EXPECT_EQ(queue_->in_flight(), 2u);
  backend_.complete_tag(backend_.submitted[1].tag);
  pump();
  EXPECT_EQ(queue_->state(), QueueState::draining);
  backend_.complete_tag(backend_.submitted[0].tag);
  pump();
  EXPECT_EQ(queue_->state(), QueueState::closed);
  EXPECT_EQ(read_reply(512).handle, 2u);
  EXPECT_EQ(read_reply(512).handle, 1u);
  EXPECT_FALSE(peer_has_data()) << "no reply to NBD_CMD_DISC";
  EXPECT_EQ(backend_.submitted.size(), 2u);
  EXPECT_EQ(queue_->stats().requests, 2u) << "DISC is not a request";
  EXPECT_EQ(queue_->poll(), 0) << "a closed queue does nothing";
}

TEST_F(NbdQueueTest, DrainAnswersInFlightAndReadsNoMore) {
  backend_.mode = FakeBackend::Mode::manual;
  start();
  send_request(Command::read, 1, 0, 512);
  pump();
  queue_->drain();
  send_request(Command::read, 2, 0, 512);
  pump();
  EXPECT_EQ(queue_->state(), QueueState::draining);
  EXPECT_EQ(backend_.submitted.size(), 1u);
  backend_.complete_all();
  EXPECT_EQ(read_reply(512).handle, 1u);
  pump();
  EXPECT_EQ(queue_->state(), QueueState::closed);
}

TEST_F(NbdQueueTest, DrainWhileTheBackendIsBusyStillSubmitsWhatWasTaken) {
  start();
  backend_.refuse = 1000;
  send_request(Command::flush, 1, 0, 0);
  pump();
  queue_->drain();
  pump();
  EXPECT_EQ(queue_->state(), QueueState::draining) << "a refused request is still owed";
  backend_.refuse = 0;
  EXPECT_EQ(read_reply().handle, 1u);
  pump();
  EXPECT_EQ(queue_->state(), QueueState::closed);
}

TEST_F(NbdQueueTest, PeerCloseWithIoInFlightKeepsBuffersUntilCompletion) {
  backend_.mode = FakeBackend::Mode::manual;
  CountingAllocator allocator;
  QueueOpts opts = default_opts();
  opts.alloc = CountingAllocator::alloc;
  opts.free = CountingAllocator::free;
  opts.alloc_ctx = &allocator;
  start(opts);
  EXPECT_EQ(allocator.allocs, 8);
  const auto data = pattern(4096, 6);
  send_request(Command::write, 1, 0, 4096, 0, &data);
  send_request(Command::read, 2, 0, 4096);
  pump();
  ASSERT_EQ(queue_->in_flight(), 2u);
  close(peer_);
  peer_ = -1;
  pump();
  EXPECT_EQ(queue_->state(), QueueState::draining);
  EXPECT_FALSE(queue_->wants_write());
  // The backend still owns both buffers: it may write into them (a DMA finishing late).
  for (const Request& request : backend_.pending) std::memset(request.buffer, 0x5a, 4096);
  EXPECT_EQ(allocator.frees, 0);
  backend_.complete_all();
  pump();
  EXPECT_EQ(queue_->state(), QueueState::closed);
  EXPECT_EQ(queue_->in_flight(), 0u);
  queue_.reset();
  EXPECT_EQ(allocator.frees, 8);
}

TEST_F(NbdQueueTest, PeerCloseDuringAWritePayload) {
  start();
  const wire::Request request = wire::make_request(Command::write, 0, 1, 0, 4096);
  send_bytes(&request, sizeof(request));
  const auto half = pattern(2048, 1);
  send_bytes(half.data(), half.size());
  pump();
  close(peer_);
  peer_ = -1;
  pump();
  EXPECT_EQ(queue_->state(), QueueState::closed);
  EXPECT_TRUE(backend_.submitted.empty());
}

TEST_F(NbdQueueTest, PeerCloseWhileAReplyIsHalfWritten) {
  QueueOpts opts = default_opts();
  opts.max_request_bytes = 128 * 1024;
  start(opts, 4096);
  send_request(Command::read, 1, 0, 128 * 1024);
  pump();
  EXPECT_TRUE(queue_->wants_write());
  close(peer_);
  peer_ = -1;
  pump();  // EPIPE (no SIGPIPE): the rest is dropped
  EXPECT_EQ(queue_->state(), QueueState::closed);
}

TEST_F(NbdQueueTest, DestroyingWithIoInFlightAssertsOrLeaksTheBuffers) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  backend_.mode = FakeBackend::Mode::manual;
  CountingAllocator allocator;
  QueueOpts opts = default_opts();
  opts.alloc = CountingAllocator::alloc;
  opts.free = CountingAllocator::free;
  opts.alloc_ctx = &allocator;
  start(opts);
  send_request(Command::read, 1, 0, 512);
  pump();
  ASSERT_EQ(queue_->in_flight(), 1u);
  test::LogCapture log;
  // Debug builds stop here; release builds keep the memory the backend may still write.
  EXPECT_DEBUG_DEATH(queue_.reset(), "backend owns requests");
  if (!queue_) {
    EXPECT_EQ(allocator.frees, 0);
    EXPECT_TRUE(log.contains("slot buffers leaked"));
    backend_.pending.clear();  // their buffers are leaked, not freed: nothing to complete
  } else {
    // Asserting builds: the queue died in the death test's child and lives on here, so it goes
    // now, while `allocator` (its alloc_ctx) exists, not in TearDown (ASan: use after return).
    backend_.complete_all();
    pump();
    queue_.reset();
  }
}

TEST_F(NbdQueueTest, AnotherThreadMayTakeOwnership) {
  start();
  std::thread reactor([&] {
    queue_->take_ownership();
    send_request(Command::flush, 1, 0, 0);
    EXPECT_EQ(read_reply().handle, 1u);
  });
  reactor.join();
  queue_->take_ownership();  // back, for TearDown
}

TEST_F(NbdQueueTest, StatsCountEveryKind) {
  start();
  const auto data = pattern(1024, 1);
  send_request(Command::read, 7, 3, 512);  // misaligned: answered first, by the queue itself
  send_request(Command::write, 1, 0, 1024, 0, &data);
  send_request(Command::read, 2, 0, 1024);
  send_request(Command::read, 3, 0, 512);
  send_request(Command::flush, 4, 0, 0);
  send_request(Command::trim, 5, 0, 512);
  send_request(Command::write_zeroes, 6, 0, 512);
  EXPECT_EQ(read_reply().error, uint32_t{EINVAL});
  read_reply();
  read_reply(1024);
  read_reply(512);
  for (int i = 0; i < 3; ++i) read_reply();
  const QueueStats& stats = queue_->stats();
  EXPECT_EQ(stats.requests, 7u);
  EXPECT_EQ(stats.reads, 3u);
  EXPECT_EQ(stats.writes, 1u);
  EXPECT_EQ(stats.flushes, 1u);
  EXPECT_EQ(stats.trims, 1u);
  EXPECT_EQ(stats.write_zeroes, 1u);
  EXPECT_EQ(stats.errors, 1u);
  EXPECT_EQ(stats.bytes_read, 1536u);
  EXPECT_EQ(stats.bytes_written, 1024u);
  EXPECT_EQ(stats.busy_retries, 0u);
  EXPECT_EQ(stats.protocol_errors, 0u);
}

TEST_F(NbdQueueTest, PollReportsWorkAndIdle) {
  start();
  EXPECT_EQ(queue_->poll(), 0);
  send_request(Command::flush, 1, 0, 0);
  EXPECT_GT(pump(1), 0);
  read_reply();
  EXPECT_EQ(queue_->poll(), 0);
}

TEST(NbdQueueCreate, RejectsBadOptionsAndClosesTheFd) {
  FakeBackend backend;
  auto try_create = [&](QueueOpts opts, int type) {
    int fds[2];
    EXPECT_EQ(0, socketpair(AF_UNIX, type, 0, fds));
    auto created = Queue::create(fds[0], backend, opts);
    EXPECT_EQ(fcntl(fds[0], F_GETFD), -1) << "closed on failure";
    close(fds[1]);
    return created ? Errc::ok : created.error().code;
  };
  QueueOpts opts;
  opts.slots = 0;
  EXPECT_EQ(try_create(opts, SOCK_STREAM), Errc::invalid_argument);
  opts = QueueOpts{};
  opts.block_size_bytes = 768;
  EXPECT_EQ(try_create(opts, SOCK_STREAM), Errc::invalid_argument);
  opts = QueueOpts{};
  opts.max_request_bytes = 256;
  EXPECT_EQ(try_create(opts, SOCK_STREAM), Errc::invalid_argument);
  opts = QueueOpts{};
  opts.alloc = CountingAllocator::alloc;  // without free
  EXPECT_EQ(try_create(opts, SOCK_STREAM), Errc::invalid_argument);
  EXPECT_EQ(try_create(QueueOpts{}, SOCK_DGRAM), Errc::invalid_argument);
  EXPECT_FALSE(Queue::create(-1, backend, QueueOpts{}));
}

TEST(NbdQueueCreate, FailedBufferAllocationIsNoMemory) {
  FakeBackend backend;
  struct FailThird {
    int calls = 0;
    static void* alloc(void* ctx, size_t bytes) {
      auto* self = static_cast<FailThird*>(ctx);
      return ++self->calls == 3 ? nullptr : std::aligned_alloc(4096, bytes);
    }
    static void free(void*, void* buffer) { std::free(buffer); }
  } fail;
  QueueOpts opts;
  opts.slots = 4;
  opts.max_request_bytes = 4096;
  opts.alloc = FailThird::alloc;
  opts.free = FailThird::free;
  opts.alloc_ctx = &fail;
  int fds[2];
  ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, fds));
  test::LogCapture log;
  auto created = Queue::create(fds[0], backend, opts);
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code, Errc::no_memory);
  EXPECT_TRUE(log.contains("max_request_bytes")) << "names the knobs";
  close(fds[1]);
}

TEST(NbdQueueNames, OpAndStateNames) {
  EXPECT_STREQ(op_name(Op::write_zeroes), "write_zeroes");
  EXPECT_STREQ(queue_state_name(QueueState::draining), "draining");
}

}  // namespace
}  // namespace nvmf::nbd
