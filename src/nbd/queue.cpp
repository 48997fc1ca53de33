#include "nbd/queue.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/log.h"

NVMF_LOG_COMPONENT(nbd);

namespace nvmf::nbd {

namespace {

constexpr size_t kRequestBytes = sizeof(wire::Request);
constexpr size_t kReplyBytes = sizeof(wire::SimpleReply);
// One recv usually brings every header the kernel queued and the payloads of small writes
// with them; 64 KiB holds 128 headers plus several 4 KiB payloads. A payload that does not
// fit goes straight into its slot buffer.
constexpr size_t kStagingBytes = 64 * 1024;
// Replies gathered into one sendmsg (two iovecs each: header, read data); STYLE 4's budget.
constexpr unsigned kSendBatch = 32;
// Far above the kernel's 128 tags per hardware queue; only guards against nonsense options.
constexpr uint32_t kSlotsMax = 65536;
// The largest block size worth supporting (NVMe LBA formats go to 64 KiB in practice).
constexpr uint32_t kBlockSizeMax = 64 * 1024;
constexpr size_t kBufferAlignment = 4096;  // page: what DMA and O_DIRECT-like users expect

void* default_alloc(void*, size_t bytes) {
  return std::aligned_alloc(kBufferAlignment, align_up(bytes, kBufferAlignment));  // setup-path
}
void default_free(void*, void* buffer) { std::free(buffer); }

// strerror() may use a shared buffer; reactors log from several threads.
const char* errno_text(int os_errno, char (&buffer)[64]) noexcept {
  return strerror_r(os_errno, buffer, sizeof(buffer));  // GNU: may return a static string
}

bool is_known_command(uint16_t type) noexcept {
  switch (static_cast<wire::Command>(type)) {
    case wire::Command::read:
    case wire::Command::write:
    case wire::Command::disconnect:
    case wire::Command::flush:
    case wire::Command::trim:
    case wire::Command::write_zeroes:
      return true;
    case wire::Command::cache:
      break;
  }
  return false;
}

Op op_of(wire::Command type) noexcept {
  switch (type) {
    case wire::Command::read:
      return Op::read;
    case wire::Command::write:
      return Op::write;
    case wire::Command::flush:
      return Op::flush;
    case wire::Command::trim:
      return Op::trim;
    default:
      return Op::write_zeroes;  // the only other command that reaches here
  }
}

Result<void> check_opts(int fd, const QueueOpts& opts) noexcept {
  if (fd < 0) return Unexpected{Errc::invalid_argument, "nbd queue: fd"};
  if (opts.slots == 0 || opts.slots > kSlotsMax) {
    return Unexpected{Errc::invalid_argument, "nbd queue: slots (1..65536)"};
  }
  if (!is_power_of_two(opts.block_size_bytes) || opts.block_size_bytes > kBlockSizeMax) {
    return Unexpected{Errc::invalid_argument, "nbd queue: block_size_bytes (power of two)"};
  }
  if (opts.max_request_bytes < opts.block_size_bytes) {
    return Unexpected{Errc::invalid_argument, "nbd queue: max_request_bytes < block size"};
  }
  if ((opts.alloc == nullptr) != (opts.free == nullptr)) {
    return Unexpected{Errc::invalid_argument, "nbd queue: alloc and free go together"};
  }
  int type = 0;
  socklen_t length = sizeof(type);
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) != 0 || type != SOCK_STREAM) {
    return Unexpected{Errc::invalid_argument, "nbd queue: fd is not a stream socket", errno};
  }
  return {};
}

}  // namespace

const char* op_name(Op op) noexcept {
  switch (op) {
    case Op::read:
      return "read";
    case Op::write:
      return "write";
    case Op::flush:
      return "flush";
    case Op::trim:
      return "trim";
    case Op::write_zeroes:
      return "write_zeroes";
  }
  return "unknown";
}

const char* queue_state_name(QueueState state) noexcept {
  switch (state) {
    case QueueState::running:
      return "running";
    case QueueState::draining:
      return "draining";
    case QueueState::closed:
      return "closed";
  }
  return "unknown";
}

uint32_t reply_error_of(int error) noexcept {
  switch (error) {
    case 0:
    case EPERM:
    case EIO:
    case ENOMEM:
    case EINVAL:
    case ENOSPC:
    case EOVERFLOW:
    case ENOTSUP:
    case ESHUTDOWN:
      return static_cast<uint32_t>(error);
    case EDQUOT:
    case EFBIG:
      return wire::kErrorNoSpace;  // proto.md: "SHOULD map EDQUOT and EFBIG to ENOSPC"
    default:
      return wire::kErrorIo;  // includes a negative errno: a backend bug, still an I/O error
  }
}

// ---- Setup ----

Queue::Queue(int fd, Backend& backend, const QueueOpts& opts) noexcept
    : fd_(fd), backend_(backend), opts_(opts) {}

Result<std::unique_ptr<Queue>> Queue::create(int fd, Backend& backend, const QueueOpts& opts) {
  if (auto checked = check_opts(fd, opts); !checked) {
    if (fd >= 0) close(fd);
    return Unexpected{checked.error()};
  }
  // MSG_DONTWAIT covers our own calls; O_NONBLOCK also keeps a stray blocking call from
  // stalling the reactor.
  const int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
    const int os_errno = errno;
    close(fd);
    return Unexpected{make_system_error(os_errno, "nbd queue: fcntl O_NONBLOCK")};
  }
  std::unique_ptr<Queue> queue(new Queue(fd, backend, opts));  // setup-path
  if (auto allocated = queue->allocate_buffers(); !allocated) {
    return Unexpected{allocated.error()};  // ~Queue frees what was made and closes fd
  }
  return queue;
}

Result<void> Queue::allocate_buffers() noexcept {
  if (opts_.alloc == nullptr) {
    opts_.alloc = default_alloc;
    opts_.free = default_free;
  }
  if (opts_.name.empty()) {
    char text[32];
    snprintf(text, sizeof(text), "nbd fd %d", fd_);
    name_ = text;  // setup-path
  } else {
    name_ = opts_.name;  // setup-path
  }
  slots_.resize(opts_.slots);      // setup-path
  staging_.resize(kStagingBytes);  // setup-path
  for (uint32_t tag = 0; tag < opts_.slots; ++tag) {
    Slot& slot = slots_[tag];
    slot.request.tag = tag;
    slot.buffer = opts_.alloc(opts_.alloc_ctx, opts_.max_request_bytes);  // setup-path
    if (slot.buffer == nullptr) {
      NVMF_ERRLOG(nbd,
                  "%s: cannot allocate %u slot buffers of %u bytes (QueueOpts::slots, "
                  "max_request_bytes)",
                  name(), opts_.slots, opts_.max_request_bytes);
      return Unexpected{Errc::no_memory, "nbd queue: slot buffer"};
    }
    free_.push_back(slot);
  }
  return {};
}

Queue::~Queue() {
  assert(in_flight_ == 0 && "nbd::Queue destroyed while the backend owns requests");
  if (in_flight_ == 0) {
    for (Slot& slot : slots_) {
      if (slot.buffer != nullptr) opts_.free(opts_.alloc_ctx, slot.buffer);
    }
  } else {
    // The backend may still DMA into them: leaking is the lesser evil.
    NVMF_ERRLOG(nbd, "%s: destroyed with %u requests in flight; slot buffers leaked", name(),
                in_flight_);
  }
  close(fd_);
}

// ---- The poll loop ----

int Queue::poll() noexcept {
  owner_.check();
  if (state_ == QueueState::closed) return 0;
  int work = 0;
  if (state_ == QueueState::running) work += receive();
  work += submit_queued();
  work += std::max(0, backend_.process());
  work += send_replies();
  update_closed();
  return work;
}

void Queue::drain() noexcept {
  owner_.check();
  if (state_ == QueueState::running) start_draining(false);
}

bool Queue::wants_write() const noexcept { return !peer_gone_ && !replies_.empty(); }

// ---- Receive side ----

int Queue::receive() noexcept {
  int taken = 0;
  while (state_ == QueueState::running) {
    if (rx_slot_ != nullptr) {
      if (!receive_payload()) break;
      continue;
    }
    if (staging_end_ - staging_begin_ >= kRequestBytes) {
      wire::Request header;
      std::memcpy(&header, staging_.data() + staging_begin_, kRequestBytes);
      const bool needs_slot = header.magic() == wire::kRequestMagic &&
                              header.type() != static_cast<uint16_t>(wire::Command::disconnect);
      if (needs_slot && free_.empty()) break;  // backpressure: every slot is busy
      take_header();
      ++taken;
      continue;
    }
    if (!fill_staging()) break;
  }
  return taken;
}

// Returns how many bytes recv put at `to` (0: nothing now, or the peer is gone and the queue
// is draining).
size_t Queue::recv_some(void* to, size_t bytes) noexcept {
  for (;;) {
    const ssize_t got = recv(fd_, to, bytes, MSG_DONTWAIT);
    if (got > 0) return static_cast<size_t>(got);
    if (got == 0) {
      NVMF_INFOLOG(nbd, "%s: peer closed the socket", name());
      start_draining(true);
      return 0;
    }
    const int os_errno = errno;
    if (os_errno == EINTR) continue;
    if (os_errno == EAGAIN || os_errno == EWOULDBLOCK) return 0;
    char text[64];
    NVMF_WARNLOG(nbd, "%s: recv: %s", name(), errno_text(os_errno, text));
    start_draining(true);
    return 0;
  }
}

bool Queue::fill_staging() noexcept {
  const size_t left = staging_end_ - staging_begin_;
  if (staging_begin_ != 0) {
    // Less than one header is left here (we only refill then): the move is tiny.
    std::memmove(staging_.data(), staging_.data() + staging_begin_, left);
    staging_begin_ = 0;
    staging_end_ = left;
  }
  const size_t got = recv_some(staging_.data() + staging_end_, staging_.size() - staging_end_);
  staging_end_ += got;
  return got != 0;
}

bool Queue::receive_payload() noexcept {
  Slot& slot = *rx_slot_;
  const uint32_t received = slot.request.length_bytes - slot.payload_bytes;
  // A discarded payload cycles through the buffer; a kept one fills it in order.
  uint8_t* to = static_cast<uint8_t*>(slot.buffer) + (slot.discard ? 0 : received);
  const size_t want =
      slot.discard ? std::min(slot.payload_bytes, opts_.max_request_bytes) : slot.payload_bytes;
  size_t got = 0;
  if (staging_end_ != staging_begin_) {
    got = std::min(want, staging_end_ - staging_begin_);
    std::memcpy(to, staging_.data() + staging_begin_, got);
    staging_begin_ += got;
  } else {
    got = recv_some(to, want);  // staging is empty: straight into the buffer, no copy
    if (got == 0) return false;
  }
  slot.payload_bytes -= static_cast<uint32_t>(got);
  if (slot.payload_bytes == 0) {
    rx_slot_ = nullptr;
    payload_done(slot);
  }
  return true;
}

void Queue::take_header() noexcept {
  wire::Request header;
  std::memcpy(&header, staging_.data() + staging_begin_, kRequestBytes);
  staging_begin_ += kRequestBytes;
  if (header.magic() != wire::kRequestMagic) {
    protocol_error("bad request magic", header.magic());
    return;
  }
  const auto type = static_cast<wire::Command>(header.type());
  if (type == wire::Command::disconnect) {
    // The kernel's disconnect: it expects no reply and shuts the socket down next.
    NVMF_INFOLOG(nbd, "%s: NBD_CMD_DISC: draining %u requests", name(), in_flight_);
    start_draining(false);
    return;
  }
  Slot& slot = *free_.pop_front();
  std::memcpy(slot.handle, header.handle, sizeof(slot.handle));
  ++stats_.requests;
  if (!is_known_command(header.type())) {
    // Answer it so the kernel's request does not wait for a timeout, then stop: we cannot
    // know whether a payload follows, so the stream may be out of step.
    finish(slot, wire::kErrorInvalid);
    protocol_error("unknown command", header.type());
    return;
  }
  count_request(type);
  Request& request = slot.request;
  request.op = op_of(type);
  request.offset_bytes = type == wire::Command::flush ? 0 : header.offset();
  request.length_bytes = type == wire::Command::flush ? 0 : header.length();
  const bool has_data = type == wire::Command::read || type == wire::Command::write;
  request.buffer = has_data ? slot.buffer : nullptr;
  request.fua = (header.flags() & wire::kCmdFlagFua) != 0;
  request.no_hole = (header.flags() & wire::kCmdFlagNoHole) != 0;
  const uint32_t error = check_request(slot, type, header.flags());
  if (type == wire::Command::write && header.length() != 0) {
    // The payload follows in any case and must be consumed to stay in step.
    slot.state = SlotState::receiving;
    slot.error = error;
    slot.payload_bytes = header.length();
    slot.discard = header.length() > opts_.max_request_bytes;
    request.length_bytes = header.length();
    rx_slot_ = &slot;
    return;
  }
  if (error != 0) {
    finish(slot, error);
    return;
  }
  slot.state = SlotState::queued;
  queued_.push_back(slot);
}

void Queue::count_request(wire::Command type) noexcept {
  switch (type) {
    case wire::Command::read:
      ++stats_.reads;
      break;
    case wire::Command::write:
      ++stats_.writes;
      break;
    case wire::Command::flush:
      ++stats_.flushes;
      break;
    case wire::Command::trim:
      ++stats_.trims;
      break;
    case wire::Command::write_zeroes:
      ++stats_.write_zeroes;
      break;
    default:
      break;
  }
}

// The reply's error for a request the backend must not see, or 0. proto.md "Error values".
uint32_t Queue::check_request(Slot& slot, wire::Command type, uint16_t flags) noexcept {
  // FUA is valid on every command (clients are known to set it anywhere); NO_HOLE only on
  // write zeroes; anything else (DF needs structured replies) is unknown to us.
  const uint16_t allowed =
      wire::kCmdFlagFua | (type == wire::Command::write_zeroes ? wire::kCmdFlagNoHole : 0);
  if ((flags & ~allowed) != 0) return wire::kErrorInvalid;
  if (type == wire::Command::flush) return 0;
  if (opts_.read_only && type != wire::Command::read) return wire::kErrorPermission;
  const bool has_data = type == wire::Command::read || type == wire::Command::write;
  const Request& request = slot.request;
  if (has_data && request.length_bytes > opts_.max_request_bytes) {
    if (!logged_too_large_) {
      logged_too_large_ = true;
      NVMF_ERRLOG(nbd,
                  "%s: %s of %u bytes exceeds max_request_bytes %u (the device's "
                  "max_sectors_kb must be at most %u): answered EINVAL, logged once",
                  name(), op_name(request.op), request.length_bytes, opts_.max_request_bytes,
                  opts_.max_request_bytes / 1024);
    }
    return wire::kErrorInvalid;
  }
  const bool is_write = type == wire::Command::write || type == wire::Command::write_zeroes;
  return check_range(slot, is_write);
}

uint32_t Queue::check_range(Slot& slot, bool is_write) noexcept {
  const Request& request = slot.request;
  // A zero-length request would reach NVMe as a 0's-based block count of "1 block" or worse.
  if (request.length_bytes == 0) return wire::kErrorInvalid;
  const uint64_t mask = opts_.block_size_bytes - 1;
  if ((request.offset_bytes & mask) != 0 || (request.length_bytes & mask) != 0) {
    return wire::kErrorInvalid;
  }
  if (opts_.size_bytes != 0 &&
      !range_within(request.offset_bytes, request.length_bytes, opts_.size_bytes)) {
    return is_write ? wire::kErrorNoSpace : wire::kErrorInvalid;
  }
  return 0;
}

void Queue::payload_done(Slot& slot) noexcept {
  if (slot.error != 0) {
    finish(slot, slot.error);
    return;
  }
  slot.state = SlotState::queued;
  queued_.push_back(slot);
}

void Queue::protocol_error(const char* what, uint32_t value) noexcept {
  ++stats_.protocol_errors;
  NVMF_ERRLOG(nbd, "%s: protocol error: %s 0x%x; no more requests are read from this socket",
              name(), what, value);
  start_draining(false);
}

// ---- Backend side ----

int Queue::submit_queued() noexcept {
  int submitted = 0;
  while (!queued_.empty()) {
    // Off the list before submit(): the backend may complete it from inside submit(), which
    // puts it on replies_.
    Slot& slot = *queued_.pop_front();
    slot.state = SlotState::in_flight;
    ++in_flight_;
    if (!backend_.submit(slot.request)) {
      assert(slot.state == SlotState::in_flight && "backend completed a request it refused");
      --in_flight_;
      slot.state = SlotState::queued;
      queued_.push_front(slot);  // stays first: later requests wait behind it, order is kept
      ++stats_.busy_retries;
      break;
    }
    ++submitted;
  }
  return submitted;
}

void Queue::complete(uint32_t tag, int error) noexcept {
  owner_.check();
  assert(tag < slots_.size() && slots_[tag].state == SlotState::in_flight &&
         "complete() of a request the backend does not own");
  if (tag >= slots_.size() || slots_[tag].state != SlotState::in_flight) {
    NVMF_ERRLOG(nbd, "%s: complete(%u) of a request not in flight: ignored", name(), tag);
    return;
  }
  --in_flight_;
  finish(slots_[tag], reply_error_of(error));
  update_closed();
}

void Queue::finish(Slot& slot, uint32_t error) noexcept {
  if (error != 0) {
    ++stats_.errors;
  } else if (slot.request.op == Op::read) {
    stats_.bytes_read += slot.request.length_bytes;
  } else if (slot.request.op == Op::write) {
    stats_.bytes_written += slot.request.length_bytes;
  }
  if (peer_gone_) {
    release(slot);  // nobody to answer; the buffer is ours again only now
    return;
  }
  slot.error = error;
  slot.reply = wire::make_simple_reply(error, slot.handle);
  slot.state = SlotState::replying;
  replies_.push_back(slot);
}

// ---- Send side ----

size_t Queue::reply_bytes(const Slot& slot) noexcept {
  const bool with_data = slot.request.op == Op::read && slot.error == 0;
  return kReplyBytes + (with_data ? slot.request.length_bytes : 0);
}

int Queue::send_replies() noexcept {
  int finished = 0;
  while (!replies_.empty() && !peer_gone_) {
    iovec iov[kSendBatch * 2];
    unsigned count = 0;
    size_t total = 0;
    size_t skip = reply_sent_bytes_;  // of the first reply only
    for (Slot* slot = &replies_.front(); slot != nullptr && count + 2 <= kSendBatch * 2;
         slot = replies_.next_of(*slot)) {
      const size_t data_bytes = reply_bytes(*slot) - kReplyBytes;
      const size_t header_skip = std::min(skip, kReplyBytes);
      if (header_skip < kReplyBytes) {
        iov[count++] = {reinterpret_cast<uint8_t*>(&slot->reply) + header_skip,
                        kReplyBytes - header_skip};
      }
      const size_t data_skip = skip - header_skip;
      if (data_skip < data_bytes) {
        iov[count++] = {static_cast<uint8_t*>(slot->buffer) + data_skip, data_bytes - data_skip};
      }
      total += kReplyBytes + data_bytes - skip;
      skip = 0;
    }
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = count;
    const ssize_t sent = sendmsg(fd_, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      const int os_errno = errno;
      if (os_errno == EINTR) continue;
      if (os_errno == EAGAIN || os_errno == EWOULDBLOCK) break;  // the rest: next poll
      char text[64];
      NVMF_WARNLOG(nbd, "%s: send: %s; replies dropped", name(), errno_text(os_errno, text));
      start_draining(true);
      break;
    }
    finished += reply_consumed(static_cast<size_t>(sent));
    if (static_cast<size_t>(sent) < total) break;  // the socket buffer is full
  }
  return finished;
}

// Advances the reply list by `bytes` written; returns how many replies went out whole.
int Queue::reply_consumed(size_t bytes) noexcept {
  int finished = 0;
  while (bytes != 0) {
    Slot& slot = replies_.front();
    const size_t left = reply_bytes(slot) - reply_sent_bytes_;
    if (bytes < left) {
      reply_sent_bytes_ += bytes;
      break;
    }
    bytes -= left;
    reply_sent_bytes_ = 0;
    replies_.pop_front();
    release(slot);
    ++finished;
  }
  return finished;
}

// ---- Lifecycle ----

void Queue::start_draining(bool peer_gone) noexcept {
  if (state_ == QueueState::running) state_ = QueueState::draining;
  if (rx_slot_ != nullptr) {
    release(*rx_slot_);  // a write whose payload will not arrive: never offered to the backend
    rx_slot_ = nullptr;
  }
  if (peer_gone && !peer_gone_) {
    peer_gone_ = true;
    // Nobody reads replies any more: what the backend does not own is ours to drop now; what
    // it owns is dropped in finish() once it completes.
    while (Slot* slot = queued_.pop_front()) release(*slot);
    while (Slot* slot = replies_.pop_front()) release(*slot);
    reply_sent_bytes_ = 0;
  }
  update_closed();
}

void Queue::release(Slot& slot) noexcept {
  slot.state = SlotState::free;
  slot.discard = false;
  slot.error = 0;
  slot.payload_bytes = 0;
  free_.push_front(slot);  // LIFO: the buffer used last is the one warm in cache
}

void Queue::update_closed() noexcept {
  if (state_ == QueueState::draining && in_flight_ == 0 && queued_.empty() && replies_.empty() &&
      rx_slot_ == nullptr) {
    state_ = QueueState::closed;
    NVMF_INFOLOG(nbd, "%s: closed", name());
  }
}

}  // namespace nvmf::nbd
