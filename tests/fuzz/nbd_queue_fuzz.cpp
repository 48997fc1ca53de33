// Fuzz target: the NBD request stream as the kernel's nbd driver would send it over one
// socket (nbd::Queue, src/nbd/queue.h): headers, write payloads, flags, offsets and lengths,
// unknown commands, bad magic, NBD_CMD_DISC, all cut into chunks of any size; against a fake
// backend that completes at once, at its next process() or one at a time out of order, may
// answer busy and may fail requests.
//
// Input: [config u8: bit 0 read-only, bits 2:1 backend mode, bits 5:3 refuse every n-th
//         submit (0 and 1: never), bit 6 fail every fourth request]
//        [chunk u8: the stream goes to the socket 2^(chunk % 17) bytes per poll, at least
//         1/256 of it]
//        [slots u8: 1 + slots % 8] [the byte stream: the rest]
// The harness reads the stream as the kernel's requests up to where the Queue must stop
// (bad magic, NBD_CMD_DISC, an unknown command) and gives every request a handle of its
// own. Properties: every request that arrived whole is answered exactly once (after the
// stream, drain() and polls until the Queue is closed), nothing else is; a reply carries the
// error the protocol asks for (EINVAL, EPERM, ENOSPC for the checks, in the Queue's order)
// or the backend's (mapped as reply_error_of documents); the backend sees exactly the valid
// requests, in arrival order, with the write payload as sent; a read's reply carries the data
// the backend read.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "fuzz_input.h"
#include "nbd/queue.h"
#include "nbd/wire.h"

namespace nbd = nvmf::nbd;
namespace wire = nvmf::nbd::wire;
using nvmf::fuzz::Input;

namespace {

constexpr uint32_t kMaxRequestBytes = 8192;
constexpr uint64_t kDiskBytes = 64 * 1024;
constexpr uint32_t kBlockBytes = 512;
// Polls the harness allows beyond one per byte of the stream (a stream sent a byte per poll
// needs that many just to arrive).
constexpr size_t kRoundsSlack = 20000;

// Errors the fake backend completes with, and what the reply must carry for each.
struct InjectedError {
  int error;
  uint32_t reply;
};
constexpr InjectedError kInjected[] = {{EIO, wire::kErrorIo},
                                       {EDQUOT, wire::kErrorNoSpace},
                                       {-5, wire::kErrorIo},
                                       {12345, wire::kErrorIo},
                                       {ENOTSUP, wire::kErrorNotSupported}};

// One request as the harness reads it from the stream.
struct Expected {
  wire::Command type = wire::Command::read;
  uint16_t flags = 0;
  uint64_t offset = 0;
  uint32_t length = 0;
  size_t payload_at = 0;     // write: where its payload starts in the stream
  bool whole = false;        // header (and a write's payload) all in the stream
  uint32_t check_error = 0;  // the Queue's own answer, or 0: the backend's
  bool backend_failed = false;
  uint32_t backend_reply = 0;
  std::vector<uint8_t> read_data;  // what the backend read for it
  int replies = 0;
};

bool known(uint16_t type) {
  switch (static_cast<wire::Command>(type)) {
    case wire::Command::read:
    case wire::Command::write:
    case wire::Command::flush:
    case wire::Command::trim:
    case wire::Command::write_zeroes:
      return true;
    default:
      return false;
  }
}

// The Queue's checks (queue.cpp check_request / check_range), in its order.
uint32_t check_error(const Expected& r, bool read_only) {
  if (!known(static_cast<uint16_t>(r.type))) return wire::kErrorInvalid;
  const uint16_t allowed =
      wire::kCmdFlagFua | (r.type == wire::Command::write_zeroes ? wire::kCmdFlagNoHole : 0);
  if ((r.flags & ~allowed) != 0) return wire::kErrorInvalid;
  if (r.type == wire::Command::flush) return 0;
  if (read_only && r.type != wire::Command::read) return wire::kErrorPermission;
  const bool has_data = r.type == wire::Command::read || r.type == wire::Command::write;
  if (has_data && r.length > kMaxRequestBytes) return wire::kErrorInvalid;
  if (r.length == 0 || r.offset % kBlockBytes != 0 || r.length % kBlockBytes != 0) {
    return wire::kErrorInvalid;
  }
  if (r.offset > kDiskBytes || r.length > kDiskBytes - r.offset) {
    const bool is_write = r.type == wire::Command::write || r.type == wire::Command::write_zeroes;
    return is_write ? wire::kErrorNoSpace : wire::kErrorInvalid;
  }
  return 0;
}

class FakeBackend : public nbd::Backend {
 public:
  enum class Mode : uint8_t { immediate, in_process, one_at_a_time, in_process_reversed };

  FakeBackend(Mode mode, unsigned refuse_every, bool inject, std::vector<Expected>& expected,
              const std::vector<uint8_t>& stream)
      : mode_(mode),
        refuse_every_(refuse_every),
        inject_(inject),
        expected_(expected),
        stream_(stream) {
    for (size_t i = 0; i < expected_.size(); ++i) {
      if (expected_[i].whole && expected_[i].check_error == 0) valid_.push_back(i);
    }
  }

  void attach(nbd::Queue* queue) { queue_ = queue; }
  bool idle() const { return pending_.empty(); }
  bool saw_every_valid_request() const { return next_valid_ == valid_.size(); }

  bool submit(const nbd::Request& request) noexcept override {
    ++calls_;
    if (refuse_every_ != 0 && calls_ % refuse_every_ == 0) return false;
    // The k-th request the backend takes is the k-th valid one of the stream.
    FUZZ_CHECK_MSG(next_valid_ < valid_.size(), "the backend got a request it should not");
    const size_t index = valid_[next_valid_++];
    Expected& r = expected_[index];
    FUZZ_CHECK(request.offset_bytes == (r.type == wire::Command::flush ? 0 : r.offset));
    FUZZ_CHECK(request.length_bytes == (r.type == wire::Command::flush ? 0 : r.length));
    FUZZ_CHECK(request.fua == ((r.flags & wire::kCmdFlagFua) != 0));
    switch (r.type) {
      case wire::Command::read:
        FUZZ_CHECK(request.op == nbd::Op::read && request.buffer != nullptr);
        break;
      case wire::Command::write:
        FUZZ_CHECK(request.op == nbd::Op::write && request.buffer != nullptr);
        FUZZ_CHECK_MSG(std::memcmp(request.buffer, stream_.data() + r.payload_at, r.length) == 0,
                       "the write payload reached the backend changed");
        break;
      case wire::Command::flush:
        FUZZ_CHECK(request.op == nbd::Op::flush);
        break;
      case wire::Command::trim:
        FUZZ_CHECK(request.op == nbd::Op::trim && request.buffer == nullptr);
        break;
      case wire::Command::write_zeroes:
        FUZZ_CHECK(request.op == nbd::Op::write_zeroes && request.buffer == nullptr);
        FUZZ_CHECK(request.no_hole == ((r.flags & wire::kCmdFlagNoHole) != 0));
        break;
      default:
        FUZZ_CHECK_MSG(false, "an unknown command reached the backend");
    }
    if (inject_ && index % 4 == 3) {
      r.backend_failed = true;
      r.backend_reply = kInjected[index % 5].reply;
    }
    pending_.push_back(Pending{request, index});
    if (mode_ == Mode::immediate) finish_back(false);
    return true;
  }

  int process() noexcept override {
    int done = 0;
    switch (mode_) {
      case Mode::immediate:
        break;
      case Mode::in_process:
        while (!pending_.empty()) done += finish_back(true);
        break;
      case Mode::in_process_reversed:
        while (!pending_.empty()) done += finish_back(false);
        break;
      case Mode::one_at_a_time:
        if (!pending_.empty()) done += finish_back(false);  // the newest first: out of order
        break;
    }
    return done;
  }

 private:
  struct Pending {
    nbd::Request request;
    size_t index;
  };

  int finish_back(bool oldest) {
    const Pending p = oldest ? pending_.front() : pending_.back();
    if (oldest) {
      pending_.pop_front();
    } else {
      pending_.pop_back();
    }
    Expected& r = expected_[p.index];
    int error = 0;
    if (r.backend_failed) {
      error = kInjected[p.index % 5].error;
    } else {
      uint8_t* at = disk_.data() + p.request.offset_bytes;
      switch (p.request.op) {
        case nbd::Op::read:
          std::memcpy(p.request.buffer, at, p.request.length_bytes);
          r.read_data.assign(at, at + p.request.length_bytes);
          break;
        case nbd::Op::write:
          std::memcpy(at, p.request.buffer, p.request.length_bytes);
          break;
        case nbd::Op::trim:
        case nbd::Op::write_zeroes:
          std::memset(at, 0, p.request.length_bytes);
          break;
        case nbd::Op::flush:
          break;
      }
    }
    queue_->complete(p.request.tag, error);
    return 1;
  }

  Mode mode_;
  unsigned refuse_every_;
  bool inject_;
  std::vector<Expected>& expected_;
  const std::vector<uint8_t>& stream_;
  std::vector<size_t> valid_;
  size_t next_valid_ = 0;
  uint64_t calls_ = 0;
  std::deque<Pending> pending_;
  std::vector<uint8_t> disk_ = std::vector<uint8_t>(kDiskBytes, 0);
  nbd::Queue* queue_ = nullptr;
};

// Reads the stream as the kernel's requests, up to where the Queue stops reading, and gives
// each request the handle index + 1 (in `stream`, which is what gets sent).
std::vector<Expected> read_requests(std::vector<uint8_t>& stream, bool read_only) {
  std::vector<Expected> out;
  size_t at = 0;
  while (at + sizeof(wire::Request) <= stream.size()) {
    wire::Request header;
    std::memcpy(&header, stream.data() + at, sizeof(header));
    if (header.magic() != wire::kRequestMagic) break;  // protocol error: no reply
    if (header.type() == static_cast<uint16_t>(wire::Command::disconnect)) break;
    const uint64_t handle = out.size() + 1;
    std::memcpy(header.handle, &handle, sizeof(header.handle));
    std::memcpy(stream.data() + at, &header, sizeof(header));
    at += sizeof(header);
    Expected r;
    r.type = static_cast<wire::Command>(header.type());
    r.flags = header.flags();
    r.offset = header.offset();
    r.length = header.length();
    r.whole = true;
    r.check_error = check_error(r, read_only);
    const bool stop = !known(header.type());  // answered EINVAL, then nothing more is read
    if (!stop && r.type == wire::Command::write && r.length != 0) {
      r.payload_at = at;
      if (r.length > stream.size() - at) {
        r.whole = false;  // its payload never arrives whole: dropped at drain, no reply
        out.push_back(r);
        break;
      }
      at += r.length;
    }
    out.push_back(std::move(r));
    if (stop) break;
  }
  return out;
}

// Parses replies as they arrive from the Queue and checks each against its request.
class ReplyReader {
 public:
  explicit ReplyReader(std::vector<Expected>& expected) : expected_(expected) {}

  void feed(const uint8_t* data, size_t size) {
    buffer_.insert(buffer_.end(), data, data + size);
    for (;;) {
      if (data_left_ != 0) {
        const size_t n = std::min(data_left_, buffer_.size() - begin_);
        Expected& r = expected_[current_];
        const size_t offset = r.length - data_left_;
        FUZZ_CHECK(offset + n <= r.read_data.size());
        FUZZ_CHECK_MSG(std::memcmp(buffer_.data() + begin_, r.read_data.data() + offset, n) == 0,
                       "a read's reply carries other data than the backend read");
        begin_ += n;
        data_left_ -= n;
        if (data_left_ != 0) break;
        continue;
      }
      if (buffer_.size() - begin_ < sizeof(wire::SimpleReply)) break;
      wire::SimpleReply reply;
      std::memcpy(&reply, buffer_.data() + begin_, sizeof(reply));
      begin_ += sizeof(reply);
      FUZZ_CHECK(reply.magic() == wire::kSimpleReplyMagic);
      uint64_t handle = 0;
      std::memcpy(&handle, reply.handle, sizeof(handle));
      FUZZ_CHECK_MSG(handle >= 1 && handle <= expected_.size(), "a reply to no request");
      current_ = handle - 1;
      Expected& r = expected_[current_];
      FUZZ_CHECK_MSG(r.whole, "a reply to a request that never arrived whole");
      FUZZ_CHECK_MSG(++r.replies == 1, "a request answered twice");
      const uint32_t want = r.check_error != 0 ? r.check_error
                            : r.backend_failed ? r.backend_reply
                                               : 0;
      FUZZ_CHECK_MSG(reply.error() == want, "a reply with the wrong error");
      if (r.type == wire::Command::read && reply.error() == 0) data_left_ = r.length;
    }
    if (begin_ == buffer_.size()) {
      buffer_.clear();
      begin_ = 0;
    }
  }
  bool between_replies() const { return data_left_ == 0 && begin_ == buffer_.size(); }

 private:
  std::vector<Expected>& expected_;
  std::vector<uint8_t> buffer_;
  size_t begin_ = 0;
  size_t data_left_ = 0;
  size_t current_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  nvmf::fuzz::drop_log_lines();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const uint8_t config = in.byte();
  const uint8_t chunk_choice = in.byte();
  const uint32_t slots = 1 + in.byte() % 8;
  const std::string_view rest = in.rest();
  std::vector<uint8_t> stream(rest.begin(), rest.end());
  // Small chunks split headers and payloads anywhere; a long stream still goes in at most
  // ~256 pieces (each piece is a send, a poll and a recv).
  const size_t chunk = std::max(size_t{1} << (chunk_choice % 17), stream.size() / 256 + 1);

  const bool read_only = (config & 1) != 0;
  std::vector<Expected> expected = read_requests(stream, read_only);
  // Refusing every submit would never let a request through: every second one at most.
  const unsigned refuse_every = (config >> 3) & 7;
  FakeBackend backend(static_cast<FakeBackend::Mode>((config >> 1) & 3),
                      refuse_every < 2 ? 0 : refuse_every, (config & 0x40) != 0, expected, stream);

  int fds[2];
  FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  FUZZ_CHECK(fcntl(fds[0], F_SETFL, O_NONBLOCK) == 0);
  nbd::QueueOpts opts;
  opts.slots = slots;
  opts.max_request_bytes = kMaxRequestBytes;
  opts.size_bytes = kDiskBytes;
  opts.block_size_bytes = kBlockBytes;
  opts.read_only = read_only;
  auto created = nbd::Queue::create(fds[1], backend, opts);
  FUZZ_CHECK(created.has_value());
  std::unique_ptr<nbd::Queue> queue = std::move(*created);
  backend.attach(queue.get());

  ReplyReader replies(expected);
  const auto read_replies = [&] {
    uint8_t buffer[16384];
    for (;;) {
      const ssize_t got = recv(fds[0], buffer, sizeof(buffer), MSG_DONTWAIT);
      if (got <= 0) break;
      replies.feed(buffer, static_cast<size_t>(got));
    }
  };

  const size_t rounds_max = stream.size() + kRoundsSlack;
  size_t sent = 0;
  int idle_rounds = 0;
  for (size_t round = 0; round < rounds_max && idle_rounds < 2; ++round) {
    if (sent < stream.size() && queue->state() == nbd::QueueState::running) {
      const ssize_t n =
          send(fds[0], stream.data() + sent, std::min(chunk, stream.size() - sent), MSG_DONTWAIT);
      if (n > 0) sent += static_cast<size_t>(n);
    }
    const int work = queue->poll();
    read_replies();
    int unread = 0;
    FUZZ_CHECK(ioctl(queue->fd(), FIONREAD, &unread) == 0);
    const bool all_in =
        queue->state() != nbd::QueueState::running || (sent == stream.size() && unread == 0);
    idle_rounds = all_in && work == 0 && backend.idle() ? idle_rounds + 1 : 0;
  }
  FUZZ_CHECK_MSG(idle_rounds >= 2, "the queue never settled");
  queue->drain();
  for (size_t round = 0; round < kRoundsSlack && queue->state() != nbd::QueueState::closed;
       ++round) {
    queue->poll();
    read_replies();
  }
  FUZZ_CHECK_MSG(queue->state() == nbd::QueueState::closed, "drain() never closed the queue");
  FUZZ_CHECK(queue->in_flight() == 0);
  read_replies();
  FUZZ_CHECK_MSG(replies.between_replies(), "a reply was cut short");
  for (const Expected& r : expected) {
    if (r.whole) FUZZ_CHECK_MSG(r.replies == 1, "a request that arrived whole was not answered");
  }
  FUZZ_CHECK(backend.saw_every_valid_request());
  queue.reset();
  close(fds[0]);
  return 0;
}
