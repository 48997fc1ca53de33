// Pieces shared by the backends' .cpp files; not part of the layer's interface.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <string>

#include "bdev/bdev.h"
#include "common/log.h"

NVMF_LOG_COMPONENT_DECLARE(bdev);

namespace nvmf::bdev::detail {

// NVMe LBA formats start at 512 bytes; 64 KiB is the largest any real device reports.
inline constexpr uint32_t kBlockSizeMin = 512;
inline constexpr uint32_t kBlockSizeMax = 65536;
// Per-channel depth: far above any NVMe-oF queue a reactor serves (hosts ask for <= 1024).
inline constexpr uint32_t kQueueDepthLimit = 4096;
// Names appear in logs, JSON-RPC replies and file-name-like places: keep them file-name sized.
inline constexpr size_t kNameLengthMax = 255;

// Fields every backend's Opts has. Logs the reason and returns invalid_argument whose static
// detail names the field.
struct CommonOpts {
  const char* backend;
  const std::string& name;
  uint32_t block_size_bytes;
  uint32_t queue_depth_max;
  const Clock* clock;
};
Result<void> validate_common_opts(const CommonOpts& opts) noexcept;
Result<void> validate_block_size(const char* backend, const std::string& name,
                                 uint32_t block_size_bytes) noexcept;
// Backends whose Opts give the whole geometry (null, malloc): the common fields, a block size
// that is required (not 0), and the block count.
Result<void> validate_geometry_opts(const CommonOpts& opts, uint64_t block_count) noexcept;
// block_count >= 1 and block_count * block_size fits in 64 bits (so no range product can wrap).
Result<void> validate_block_count(const char* backend, const std::string& name,
                                  uint32_t block_size_bytes, uint64_t block_count) noexcept;

// A backend's channel, or no_memory: the one place a channel allocation can fail.
template <typename Channel, typename Owner>
Result<std::unique_ptr<IoChannel>> make_channel(Owner& owner, const char* what) noexcept {
  try {
    return std::unique_ptr<IoChannel>(std::make_unique<Channel>(owner));
  } catch (const std::bad_alloc&) {
    return Unexpected(Errc::no_memory, what);
  }
}

// The queue every backend keeps of its outstanding I/Os (through BdevIo::channel_node).
using IoQueue = IntrusiveList<BdevIo, &BdevIo::channel_node>;

// Copies between a flat buffer and an I/O's segments (lengths were checked by submit()).
void copy_to_iov(const BdevIo& io, const uint8_t* source) noexcept;
void copy_from_iov(const BdevIo& io, uint8_t* destination) noexcept;
void zero_iov(const BdevIo& io) noexcept;

// Owner-thread increment of a counter other threads only read: no locked instruction needed.
inline void counter_add(std::atomic<uint64_t>& counter, uint64_t value) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + value, std::memory_order_relaxed);
}

// A flat JSON object, built on the setup path for opts_to_json().
class JsonObjectWriter {
 public:
  JsonObjectWriter() : text_("{") {}
  void add_string(const char* key, const std::string& value);
  void add_number(const char* key, uint64_t value);
  void add_bool(const char* key, bool value);
  void add_uuid(const char* key, const Uuid& value);  // null when all zero (generated later)
  std::string finish();

 private:
  void add_key(const char* key);
  std::string text_;
};

}  // namespace nvmf::bdev::detail
