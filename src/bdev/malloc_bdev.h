// The malloc backend: a RAM disk. Its memory is mapped once at creation (zeroed, anonymous,
// so untouched blocks cost nothing) and freed with the bdev. Data is copied at the poll() that
// completes the I/O; write_zeroes and unmap zero the range; flush does nothing.
#pragma once

#include <memory>
#include <string>

#include "bdev/bdev.h"

namespace nvmf::bdev {

struct MallocBdevOpts {
  std::string name{};               // required, unique in a BdevRegistry
  uint32_t block_size_bytes = 512;  // power of two in [512, 65536]
  uint64_t block_count = 131072;    // 64 MiB of 512-byte blocks
  Uuid uuid{};                      // all zero: generated at creation
  uint32_t queue_depth_max = 128;   // per channel, 1..4096; 128 = a typical NVMe-oF queue
  const Clock* clock = &TscClock::instance();  // latency statistics
};

// Errors: invalid_argument (the detail names the field), no_memory (the mapping failed: lower
// block_count).
[[nodiscard]] Result<std::unique_ptr<Bdev>> create_malloc_bdev(const MallocBdevOpts& opts) noexcept;

std::string opts_to_json(const MallocBdevOpts& opts);

}  // namespace nvmf::bdev
