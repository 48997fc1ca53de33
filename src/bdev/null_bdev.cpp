#include "bdev/null_bdev.h"

#include <algorithm>
#include <cinttypes>
#include <new>

#include "bdev/bdev_internal.h"

namespace nvmf::bdev {
namespace {

// Longest completion delay accepted: see NullBdevOpts::completion_delay_ns.
constexpr uint64_t kCompletionDelayMaxNs = uint64_t{60} * 1000 * 1000 * 1000;

class NullBdev final : public Bdev {
 public:
  NullBdev(Params params, const NullBdevOpts& opts) noexcept
      : Bdev(std::move(params)),
        completion_delay_ns_(opts.completion_delay_ns),
        zero_read_buffers_(opts.zero_read_buffers) {}

  Result<std::unique_ptr<IoChannel>> create_channel() noexcept override;

  uint64_t completion_delay_ns() const noexcept { return completion_delay_ns_; }
  bool zero_read_buffers() const noexcept { return zero_read_buffers_; }

 private:
  uint64_t completion_delay_ns_;
  bool zero_read_buffers_;
};

// I/Os wait in one FIFO. Every I/O gets the same delay and the clock never goes back, so due
// times are non-decreasing along the queue: poll stops at the first one not yet due.
class NullChannel final : public IoChannel {
 public:
  explicit NullChannel(NullBdev& bdev) noexcept
      : IoChannel(bdev),
        completion_delay_ns_(bdev.completion_delay_ns()),
        zero_read_buffers_(bdev.zero_read_buffers()) {}

  ~NullChannel() override {
    owner().check();
    const uint64_t now_ns = clock().now_ns();
    while (BdevIo* io = queue_.pop_front()) complete(*io, IoStatus::aborted, 0, now_ns);
  }

 private:
  Result<void> queue_io(BdevIo& io) noexcept override {
    io.backend_word[0] = io.submit_ns + completion_delay_ns_;  // due time
    queue_.push_back(io);
    return {};
  }

  unsigned poll_completions(unsigned budget) noexcept override {
    if (queue_.empty()) return 0;  // idle polls read no clock
    const uint64_t now_ns = clock().now_ns();
    // Only I/Os queued before this poll: one resubmitted from a callback waits for the next.
    const size_t limit = std::min<size_t>(budget, queue_.size());
    unsigned delivered = 0;
    while (delivered < limit && queue_.front().backend_word[0] <= now_ns) {
      BdevIo& io = *queue_.pop_front();
      if (zero_read_buffers_ && io.type == IoType::read) detail::zero_iov(io);
      complete(io, IoStatus::success, 0, now_ns);
      ++delivered;
    }
    return delivered;
  }

  const uint64_t completion_delay_ns_;
  const bool zero_read_buffers_;
  detail::IoQueue queue_;
};

Result<std::unique_ptr<IoChannel>> NullBdev::create_channel() noexcept {
  return detail::make_channel<NullChannel>(*this, "null channel");
}

}  // namespace

Result<std::unique_ptr<Bdev>> create_null_bdev(const NullBdevOpts& opts) noexcept {
  constexpr const char* kBackend = "null";
  Result<void> valid = detail::validate_geometry_opts(
      {kBackend, opts.name, opts.block_size_bytes, opts.queue_depth_max, opts.clock},
      opts.block_count);
  if (!valid) return Unexpected(valid.error());
  if (opts.completion_delay_ns > kCompletionDelayMaxNs) {
    NVMF_ERRLOG(bdev, "null bdev '%s': completion_delay_ns %" PRIu64 " is above %" PRIu64,
                opts.name.c_str(), opts.completion_delay_ns, kCompletionDelayMaxNs);
    return Unexpected(Errc::invalid_argument, "completion_delay_ns");
  }
  if ((opts.supported_io_types & ~kAllIoTypes) != 0) {
    NVMF_ERRLOG(bdev, "null bdev '%s': supported_io_types 0x%" PRIx32 " has unknown bits",
                opts.name.c_str(), opts.supported_io_types);
    return Unexpected(Errc::invalid_argument, "supported_io_types");
  }

  try {
    auto bdev = std::make_unique<NullBdev>(Bdev::Params{.backend_name = kBackend,
                                                        .name = opts.name,
                                                        .block_size_bytes = opts.block_size_bytes,
                                                        .block_count = opts.block_count,
                                                        .uuid = opts.uuid,
                                                        .io_types = opts.supported_io_types,
                                                        .queue_depth_max = opts.queue_depth_max,
                                                        .buffer_alignment_bytes = 1,
                                                        .clock = opts.clock},
                                           opts);
    NVMF_INFOLOG(
        bdev, "null bdev '%s': %" PRIu64 " blocks of %" PRIu32 " bytes, delay %" PRIu64 " ns",
        opts.name.c_str(), opts.block_count, opts.block_size_bytes, opts.completion_delay_ns);
    return std::unique_ptr<Bdev>(std::move(bdev));
  } catch (const std::bad_alloc&) {
    return Unexpected(Errc::no_memory, "null bdev");
  }
}

std::string opts_to_json(const NullBdevOpts& opts) {
  detail::JsonObjectWriter json;
  json.add_string("name", opts.name);
  json.add_number("block_size_bytes", opts.block_size_bytes);
  json.add_number("block_count", opts.block_count);
  json.add_uuid("uuid", opts.uuid);
  json.add_number("queue_depth_max", opts.queue_depth_max);
  json.add_number("completion_delay_ns", opts.completion_delay_ns);
  json.add_bool("zero_read_buffers", opts.zero_read_buffers);
  json.add_number("supported_io_types", opts.supported_io_types);
  return json.finish();
}

}  // namespace nvmf::bdev
