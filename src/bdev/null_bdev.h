// The null backend: a device with no storage, for benchmarks and tests of the layers above
// (like SPDK's bdev_null and Linux null_blk). Writes are discarded; reads leave the caller's
// buffers untouched unless zero_read_buffers is set (SPDK's null does not touch them either);
// write_zeroes, unmap and flush do nothing. Every I/O completes at the next poll(), or once
// completion_delay_ns has passed (null_blk's completion_nsec), in submission order.
#pragma once

#include <memory>
#include <string>

#include "bdev/bdev.h"

namespace nvmf::bdev {

struct NullBdevOpts {
  std::string name{};                        // required, unique in a BdevRegistry
  uint32_t block_size_bytes = 512;           // power of two in [512, 65536]
  uint64_t block_count = uint64_t{1} << 21;  // 1 GiB of 512-byte blocks
  Uuid uuid{};                               // all zero: generated at creation
  uint32_t queue_depth_max = 128;            // per channel, 1..4096; 128 = a typical NVMe-oF queue
  // Time from submit() to the poll() that may deliver the completion; 0 = the next poll.
  // At most 60 s: hosts time an I/O out after 30 s by default, so more is a unit mistake.
  uint64_t completion_delay_ns = 0;
  bool zero_read_buffers = false;               // true: reads fill iov with zeroes (costs a memset)
  IoTypeMask supported_io_types = kAllIoTypes;  // fewer, to test callers of weaker devices
  const Clock* clock = &TscClock::instance();  // delays and latency; tests use FakeClock
};

// Errors: invalid_argument (the detail names the field; the log says why), no_memory.
[[nodiscard]] Result<std::unique_ptr<Bdev>> create_null_bdev(const NullBdevOpts& opts) noexcept;

// The options as one JSON object (setup path), e.g. for saving a target's configuration.
std::string opts_to_json(const NullBdevOpts& opts);

}  // namespace nvmf::bdev
