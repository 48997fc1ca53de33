#include "bdev/malloc_bdev.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <new>

#include "bdev/bdev_internal.h"

namespace nvmf::bdev {
namespace {

class MallocBdev final : public Bdev {
 public:
  MallocBdev(Params params, uint8_t* memory, size_t memory_bytes) noexcept
      : Bdev(std::move(params)), memory_(memory), memory_bytes_(memory_bytes) {}
  ~MallocBdev() override { munmap(memory_, memory_bytes_); }

  Result<std::unique_ptr<IoChannel>> create_channel() noexcept override;

  uint8_t* memory() const noexcept { return memory_; }

 private:
  uint8_t* memory_;
  size_t memory_bytes_;
};

// Like the null channel, but the data moves at the poll that completes the I/O, so a poll's
// copying is bounded by its budget.
class MallocChannel final : public IoChannel {
 public:
  explicit MallocChannel(MallocBdev& bdev) noexcept
      : IoChannel(bdev), memory_(bdev.memory()), block_size_bytes_(bdev.block_size_bytes()) {}

  ~MallocChannel() override {
    owner().check();
    const uint64_t now_ns = clock().now_ns();
    while (BdevIo* io = queue_.pop_front()) complete(*io, IoStatus::aborted, 0, now_ns);
  }

 private:
  Result<void> queue_io(BdevIo& io) noexcept override {
    queue_.push_back(io);
    return {};
  }

  unsigned poll_completions(unsigned budget) noexcept override {
    if (queue_.empty()) return 0;
    const uint64_t now_ns = clock().now_ns();
    // Only I/Os queued before this poll: one resubmitted from a callback waits for the next.
    const size_t limit = std::min<size_t>(budget, queue_.size());
    unsigned delivered = 0;
    while (delivered < limit) {
      BdevIo& io = *queue_.pop_front();
      execute(io);
      complete(io, IoStatus::success, 0, now_ns);
      ++delivered;
    }
    return delivered;
  }

  void execute(const BdevIo& io) noexcept {
    // submit() checked the range, so these products neither wrap nor leave the mapping.
    uint8_t* start = memory_ + io.offset_blocks * block_size_bytes_;
    const size_t length = io.num_blocks * block_size_bytes_;
    switch (io.type) {
      case IoType::read:
        detail::copy_to_iov(io, start);
        break;
      case IoType::write:
        detail::copy_from_iov(io, start);
        break;
      case IoType::flush:
        break;  // RAM has nothing to make durable
      case IoType::write_zeroes:
      case IoType::unmap:
        std::memset(start, 0, length);
        break;
    }
  }

  uint8_t* const memory_;
  const uint64_t block_size_bytes_;
  detail::IoQueue queue_;
};

Result<std::unique_ptr<IoChannel>> MallocBdev::create_channel() noexcept {
  return detail::make_channel<MallocChannel>(*this, "malloc channel");
}

}  // namespace

Result<std::unique_ptr<Bdev>> create_malloc_bdev(const MallocBdevOpts& opts) noexcept {
  constexpr const char* kBackend = "malloc";
  Result<void> valid = detail::validate_geometry_opts(
      {kBackend, opts.name, opts.block_size_bytes, opts.queue_depth_max, opts.clock},
      opts.block_count);
  if (!valid) return Unexpected(valid.error());
  static_assert(sizeof(size_t) == sizeof(uint64_t), "a 64-bit address space holds any size");
  const uint64_t size_bytes = opts.block_count * opts.block_size_bytes;

  // Anonymous memory is zeroed by the kernel. MAP_POPULATE faults every page in now, so no
  // page is allocated later on the data path (and a too large disk fails here, not there).
  void* memory = mmap(nullptr, size_bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (memory == MAP_FAILED) {
    const int os_errno = errno;
    NVMF_ERRLOG(bdev, "malloc bdev '%s': mmap of %" PRIu64 " bytes failed: %s; lower block_count",
                opts.name.c_str(), size_bytes, strerror(os_errno));
    return Unexpected(Errc::no_memory, "block_count", os_errno);
  }

  try {
    auto bdev = std::make_unique<MallocBdev>(Bdev::Params{.backend_name = kBackend,
                                                          .name = opts.name,
                                                          .block_size_bytes = opts.block_size_bytes,
                                                          .block_count = opts.block_count,
                                                          .uuid = opts.uuid,
                                                          .io_types = kAllIoTypes,
                                                          .queue_depth_max = opts.queue_depth_max,
                                                          .buffer_alignment_bytes = 1,
                                                          .clock = opts.clock},
                                             static_cast<uint8_t*>(memory),
                                             static_cast<size_t>(size_bytes));
    NVMF_INFOLOG(bdev, "malloc bdev '%s': %" PRIu64 " blocks of %" PRIu32 " bytes",
                 opts.name.c_str(), opts.block_count, opts.block_size_bytes);
    return std::unique_ptr<Bdev>(std::move(bdev));
  } catch (const std::bad_alloc&) {
    munmap(memory, size_bytes);
    return Unexpected(Errc::no_memory, "malloc bdev");
  }
}

std::string opts_to_json(const MallocBdevOpts& opts) {
  detail::JsonObjectWriter json;
  json.add_string("name", opts.name);
  json.add_number("block_size_bytes", opts.block_size_bytes);
  json.add_number("block_count", opts.block_count);
  json.add_uuid("uuid", opts.uuid);
  json.add_number("queue_depth_max", opts.queue_depth_max);
  return json.finish();
}

}  // namespace nvmf::bdev
