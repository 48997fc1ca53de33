#include "bdev/bdev.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "bdev/bdev_internal.h"
#include "common/log.h"

NVMF_LOG_COMPONENT(bdev);

namespace nvmf::bdev {

const char* io_type_name(IoType type) noexcept {
  switch (type) {
    case IoType::read:
      return "read";
    case IoType::write:
      return "write";
    case IoType::flush:
      return "flush";
    case IoType::write_zeroes:
      return "write_zeroes";
    case IoType::unmap:
      return "unmap";
  }
  return "unknown";
}

const char* io_status_name(IoStatus status) noexcept {
  switch (status) {
    case IoStatus::pending:
      return "pending";
    case IoStatus::success:
      return "success";
    case IoStatus::io_error:
      return "io_error";
    case IoStatus::no_space:
      return "no_space";
    case IoStatus::aborted:
      return "aborted";
    case IoStatus::nvme_error:
      return "nvme_error";
  }
  return "unknown";
}

uint64_t IoStats::completions() const noexcept {
  uint64_t total = errors;
  for (uint64_t count : ops) total += count;
  return total;
}

bool uuid_is_null(const Uuid& uuid) noexcept {
  return std::all_of(uuid.begin(), uuid.end(), [](uint8_t byte) { return byte == 0; });
}

Uuid uuid_generate() noexcept {
  Uuid uuid{};
  size_t filled = 0;
  while (filled < uuid.size()) {
    ssize_t got = getrandom(uuid.data() + filled, uuid.size() - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      // No getrandom (very old kernel or seccomp): fall back to time and address bits, which
      // are unique enough for a device id on one host.
      uint64_t seed = monotonic_now_ns() ^ reinterpret_cast<uintptr_t>(&uuid);
      for (size_t i = filled; i < uuid.size(); ++i) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;  // Knuth's MMIX LCG
        uuid[i] = static_cast<uint8_t>(seed >> 56);
      }
      break;
    }
    filled += static_cast<size_t>(got);
  }
  uuid[6] = static_cast<uint8_t>((uuid[6] & 0x0f) | 0x40);  // version 4: random
  uuid[8] = static_cast<uint8_t>((uuid[8] & 0x3f) | 0x80);  // variant 1: RFC 4122
  return uuid;
}

void uuid_format(const Uuid& uuid, char (&text)[kUuidStringSize]) noexcept {
  static constexpr char kHex[] = "0123456789abcdef";
  size_t out = 0;
  for (size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text[out++] = '-';  // 8-4-4-4-12 groups
    text[out++] = kHex[uuid[i] >> 4];
    text[out++] = kHex[uuid[i] & 0xf];
  }
  text[out] = '\0';
}

void ChannelCounters::add_to(IoStats& stats) const noexcept {
  for (unsigned i = 0; i < kIoTypeCount; ++i) {
    stats.ops[i] += ops[i].load(std::memory_order_relaxed);
    stats.bytes[i] += bytes[i].load(std::memory_order_relaxed);
  }
  stats.errors += errors.load(std::memory_order_relaxed);
  stats.latency_ns_total += latency_ns_total.load(std::memory_order_relaxed);
  stats.latency_ns_max =
      std::max(stats.latency_ns_max, latency_ns_max.load(std::memory_order_relaxed));
}

// ---- IoChannel ----

IoChannel::IoChannel(Bdev& bdev) noexcept
    : bdev_(bdev), clock_(bdev.clock()), queue_depth_max_(bdev.queue_depth_max()) {
  std::lock_guard<std::mutex> lock(bdev_.channels_mutex_);
  bdev_.channels_.push_back(*this);
}

IoChannel::~IoChannel() {
  // Backends have completed everything (aborted if need be) in their own destructors.
  assert(outstanding_ == 0 && "backend destructor left I/O outstanding");
  std::lock_guard<std::mutex> lock(bdev_.channels_mutex_);
  bdev_.channels_.remove(*this);
  counters_.add_to(bdev_.closed_stats_);
}

Result<void> IoChannel::submit(BdevIo& io) noexcept {
  owner_.check();
  assert(io.done != nullptr && "BdevIo::done is required");
  assert(!io.channel_node.linked() && "BdevIo submitted while still outstanding");

  if (!bdev_.supports(io.type)) {
    return Unexpected(Errc::not_supported, "io type not supported by this bdev");
  }
  if (!range_within(io.offset_blocks, io.num_blocks, bdev_.block_count())) {
    return Unexpected(Errc::out_of_range, "block range beyond the end of the bdev");
  }
  if (io.type == IoType::read || io.type == IoType::write) {
    if (io.num_blocks == 0) return Unexpected(Errc::invalid_argument, "num_blocks is 0");
    if (io.iovcnt == 0 || io.iovcnt > kIovCountMax || io.iov == nullptr) {
      return Unexpected(Errc::invalid_argument, "iovcnt not in [1, kIovCountMax]");
    }
    // Cannot wrap: num_blocks <= block_count, and block_count * block size fits in 64 bits
    // (checked when the bdev was made).
    const uint64_t expected_bytes = io.num_blocks * bdev_.block_size_bytes();
    const uint64_t alignment_mask = bdev_.buffer_alignment_bytes() - 1;
    uint64_t total_bytes = 0;
    for (unsigned i = 0; i < io.iovcnt; ++i) {
      const uint64_t length = io.iov[i].iov_len;
      if (length > expected_bytes - total_bytes) {
        return Unexpected(Errc::invalid_argument, "iov longer than num_blocks");
      }
      if (((reinterpret_cast<uintptr_t>(io.iov[i].iov_base) | length) & alignment_mask) != 0) {
        return Unexpected(Errc::invalid_argument, "iov segment not aligned to the bdev");
      }
      total_bytes += length;
    }
    if (total_bytes != expected_bytes) {
      return Unexpected(Errc::invalid_argument, "iov shorter than num_blocks");
    }
  } else {
    if (io.iovcnt != 0) return Unexpected(Errc::invalid_argument, "iov given for a dataless type");
    if (io.num_blocks == 0 && io.type != IoType::flush) {
      return Unexpected(Errc::invalid_argument, "num_blocks is 0");
    }
  }
  if (outstanding_ >= queue_depth_max_) {
    return Unexpected(Errc::busy, "channel queue depth reached");
  }

  io.status = IoStatus::pending;
  io.nvme_sct = 0;
  io.nvme_sc = 0;
  io.nvme_dnr = false;
  io.os_errno = 0;
  io.submit_ns = clock_.now_ns();
  Result<void> queued = queue_io(io);
  if (queued) ++outstanding_;
  return queued;
}

unsigned IoChannel::poll(unsigned budget) noexcept {
  owner_.check();
  if (budget == 0) return 0;
  return poll_completions(budget);
}

void IoChannel::complete(BdevIo& io, IoStatus status, int os_errno, uint64_t now_ns) noexcept {
  assert(outstanding_ > 0);
  assert(status != IoStatus::pending);
  const auto type_index = static_cast<unsigned>(io.type);
  if (status == IoStatus::success) {
    detail::counter_add(counters_.ops[type_index], 1);
    if (io.type != IoType::flush) {
      detail::counter_add(counters_.bytes[type_index], io.num_blocks * bdev_.block_size_bytes());
    }
  } else {
    detail::counter_add(counters_.errors, 1);
  }
  // A FakeClock may be set backwards by a test; never count a negative latency.
  const uint64_t latency_ns = now_ns > io.submit_ns ? now_ns - io.submit_ns : 0;
  detail::counter_add(counters_.latency_ns_total, latency_ns);
  if (latency_ns > counters_.latency_ns_max.load(std::memory_order_relaxed)) {
    counters_.latency_ns_max.store(latency_ns, std::memory_order_relaxed);
  }

  // Free the slot before the callback so that it may resubmit at full queue depth.
  --outstanding_;
  io.status = status;
  io.os_errno = os_errno;
  io.done(io, io.done_ctx);  // io may be reused from here on: touch it no more
}

// ---- Bdev ----

Bdev::Bdev(Params params) noexcept
    : backend_name_(params.backend_name),
      name_(std::move(params.name)),
      block_size_bytes_(params.block_size_bytes),
      block_count_(params.block_count),
      uuid_(uuid_is_null(params.uuid) ? uuid_generate() : params.uuid),
      uuid_generated_(uuid_is_null(params.uuid)),
      io_types_(params.io_types & kAllIoTypes),
      queue_depth_max_(params.queue_depth_max),
      buffer_alignment_bytes_(params.buffer_alignment_bytes),
      clock_(params.clock),
      nguid_(params.nguid),
      eui64_(params.eui64) {
  assert(clock_ != nullptr);
  assert(is_power_of_two(buffer_alignment_bytes_));
}

void Bdev::set_removed_callback(RemovedFn fn, void* ctx) noexcept {
  removed_fn_ = fn;
  removed_ctx_ = ctx;
}

void Bdev::notify_removed() noexcept {
  if (removed_.exchange(true, std::memory_order_acq_rel)) return;
  NVMF_WARNLOG(bdev, "bdev '%s' (%s): device removed", name_.c_str(), backend_name_);
  if (removed_fn_ != nullptr) removed_fn_(removed_ctx_, *this);
}

Bdev::~Bdev() {
  std::lock_guard<std::mutex> lock(channels_mutex_);
  assert(channels_.empty() && "bdev destroyed while channels are open");
  assert(claimed_by() == nullptr && "bdev destroyed before the bdev built on it");
}

Result<void> Bdev::claim(const Bdev& by) noexcept {
  const Bdev* expected = nullptr;
  if (&by == this ||
      !claimed_by_.compare_exchange_strong(expected, &by, std::memory_order_acq_rel)) {
    return Unexpected(Errc::busy, "bdev is already the base of another bdev");
  }
  return {};
}

void Bdev::release_claim(const Bdev& by) noexcept {
  const Bdev* expected = &by;
  const bool released =
      claimed_by_.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
  assert(released && "release_claim by a bdev that holds no claim");
  (void)released;
}

bool Bdev::supports(IoType type) const noexcept {
  // A value cast from outside the enum must not shift past the mask's width.
  return static_cast<unsigned>(type) < kIoTypeCount && (io_types_ & io_type_bit(type)) != 0;
}

IoStats Bdev::stats() const noexcept {
  std::lock_guard<std::mutex> lock(channels_mutex_);
  IoStats total = closed_stats_;
  for (IoChannel& channel : channels_) channel.counters_.add_to(total);
  return total;
}

size_t Bdev::channel_count() const noexcept {
  std::lock_guard<std::mutex> lock(channels_mutex_);
  return channels_.size();
}

// ---- shared helpers ----

namespace detail {

Result<void> validate_block_size(const char* backend, const std::string& name,
                                 uint32_t block_size_bytes) noexcept {
  if (!is_power_of_two(block_size_bytes) || block_size_bytes < kBlockSizeMin ||
      block_size_bytes > kBlockSizeMax) {
    NVMF_ERRLOG(bdev,
                "%s bdev '%s': block_size_bytes %" PRIu32 " is not a power of two in [%" PRIu32
                ", %" PRIu32 "]",
                backend, name.c_str(), block_size_bytes, kBlockSizeMin, kBlockSizeMax);
    return Unexpected(Errc::invalid_argument, "block_size_bytes");
  }
  return {};
}

Result<void> validate_common_opts(const CommonOpts& opts) noexcept {
  if (opts.name.empty() || opts.name.size() > kNameLengthMax) {
    NVMF_ERRLOG(bdev, "%s bdev: name must be 1 to %zu characters (got %zu)", opts.backend,
                kNameLengthMax, opts.name.size());
    return Unexpected(Errc::invalid_argument, "name");
  }
  if (opts.block_size_bytes != 0) {
    Result<void> block_size_ok =
        validate_block_size(opts.backend, opts.name, opts.block_size_bytes);
    if (!block_size_ok) return block_size_ok;
  }
  if (opts.queue_depth_max == 0 || opts.queue_depth_max > kQueueDepthLimit) {
    NVMF_ERRLOG(bdev, "%s bdev '%s': queue_depth_max %" PRIu32 " is not in [1, %" PRIu32 "]",
                opts.backend, opts.name.c_str(), opts.queue_depth_max, kQueueDepthLimit);
    return Unexpected(Errc::invalid_argument, "queue_depth_max");
  }
  if (opts.clock == nullptr) {
    NVMF_ERRLOG(bdev, "%s bdev '%s': clock is null", opts.backend, opts.name.c_str());
    return Unexpected(Errc::invalid_argument, "clock");
  }
  return {};
}

Result<void> validate_geometry_opts(const CommonOpts& opts, uint64_t block_count) noexcept {
  Result<void> valid = validate_common_opts(opts);
  if (!valid) return valid;
  valid = validate_block_size(opts.backend, opts.name, opts.block_size_bytes);
  if (!valid) return valid;
  return validate_block_count(opts.backend, opts.name, opts.block_size_bytes, block_count);
}

Result<void> validate_block_count(const char* backend, const std::string& name,
                                  uint32_t block_size_bytes, uint64_t block_count) noexcept {
  if (block_count == 0) {
    NVMF_ERRLOG(bdev, "%s bdev '%s': block_count is 0", backend, name.c_str());
    return Unexpected(Errc::invalid_argument, "block_count");
  }
  if (block_count > UINT64_MAX / block_size_bytes) {
    NVMF_ERRLOG(bdev, "%s bdev '%s': block_count %" PRIu64 " x %" PRIu32 " bytes overflows 64 bits",
                backend, name.c_str(), block_count, block_size_bytes);
    return Unexpected(Errc::invalid_argument, "block_count");
  }
  return {};
}

void copy_to_iov(const BdevIo& io, const uint8_t* source) noexcept {
  for (unsigned i = 0; i < io.iovcnt; ++i) {
    std::memcpy(io.iov[i].iov_base, source, io.iov[i].iov_len);
    source += io.iov[i].iov_len;
  }
}

void copy_from_iov(const BdevIo& io, uint8_t* destination) noexcept {
  for (unsigned i = 0; i < io.iovcnt; ++i) {
    std::memcpy(destination, io.iov[i].iov_base, io.iov[i].iov_len);
    destination += io.iov[i].iov_len;
  }
}

void zero_iov(const BdevIo& io) noexcept {
  for (unsigned i = 0; i < io.iovcnt; ++i) std::memset(io.iov[i].iov_base, 0, io.iov[i].iov_len);
}

void JsonObjectWriter::add_key(const char* key) {
  if (text_.size() > 1) text_ += ',';
  text_ += '"';
  text_ += key;  // keys are our own identifiers: nothing to escape
  text_ += "\":";
}

void JsonObjectWriter::add_string(const char* key, const std::string& value) {
  add_key(key);
  text_ += '"';
  for (char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      text_ += '\\';
      text_ += c;
    } else if (byte < 0x20) {  // control characters must be escaped (RFC 8259 section 7)
      char escaped[8];
      snprintf(escaped, sizeof(escaped), "\\u%04x", byte);
      text_ += escaped;
    } else {
      text_ += c;
    }
  }
  text_ += '"';
}

void JsonObjectWriter::add_number(const char* key, uint64_t value) {
  add_key(key);
  text_ += std::to_string(value);
}

void JsonObjectWriter::add_bool(const char* key, bool value) {
  add_key(key);
  text_ += value ? "true" : "false";
}

void JsonObjectWriter::add_uuid(const char* key, const Uuid& value) {
  if (uuid_is_null(value)) {
    add_key(key);
    text_ += "null";
    return;
  }
  char text[kUuidStringSize];
  uuid_format(value, text);
  add_string(key, text);
}

std::string JsonObjectWriter::finish() {
  text_ += '}';
  return std::move(text_);
}

}  // namespace detail
}  // namespace nvmf::bdev
