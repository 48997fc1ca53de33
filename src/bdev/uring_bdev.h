// The uring backend: a regular file or a block device driven through io_uring (liburing).
// One ring per channel, so per reactor thread. submit() only fills a submission queue entry;
// poll() reaps completions and then rings the doorbell once (one io_uring_enter per poll).
// read/write = readv/writev, flush = fdatasync, write_zeroes = fallocate(ZERO_RANGE),
// unmap = fallocate(PUNCH_HOLE | KEEP_SIZE); when fallocate is refused (EOPNOTSUPP) or disabled,
// both write zeroes from a shared zero buffer instead, 1 MiB at a time.
#pragma once

#include <memory>
#include <string>

#include "bdev/bdev.h"

namespace nvmf::bdev {

enum class DirectIo : uint8_t {
  prefer,    // O_DIRECT when the file system accepts it, else buffered I/O (logged)
  required,  // O_DIRECT or fail with not_supported
  off,       // buffered I/O through the page cache
};
const char* direct_io_name(DirectIo mode) noexcept;

struct UringBdevOpts {
  std::string name{};        // required, unique in a BdevRegistry
  std::string path{};        // required: a regular file or a block device
  bool create_file = false;  // create `path` (mode 0600) when it does not exist
  // Regular files: non-zero sets the file's size (sparse growth, or truncation) and must be a
  // multiple of the block size; 0 keeps the current size. Block devices: must be 0. A file
  // whose size is not a multiple of the block size loses its trailing bytes (warned).
  uint64_t size_bytes = 0;
  // 0: the logical block size of a block device (BLKSSZGET), 512 for a file. Else a power of
  // two in [512, 65536], not below the device's logical block size.
  uint32_t block_size_bytes = 0;
  DirectIo direct_io = DirectIo::prefer;
  // false: write_zeroes and unmap always write zeroes (for file systems where fallocate is
  // slow, and for tests of that path).
  bool fallocate_enabled = true;
  // Registers an eventfd with each channel's ring so interrupt_fd() works (a reactor in
  // interrupt mode needs it); the kernel then signals it once per completion.
  bool interrupt_fd_enabled = true;
  Uuid uuid{};                                       // all zero: generated at creation
  uint32_t queue_depth_max = 128;                    // per channel (the ring's size), 1..4096
  const Clock* clock = &TscClock::instance();  // latency statistics
};

// Errors: invalid_argument (detail names the field), not_found (no such path and not
// create_file), not_supported (DirectIo::required refused), permission_denied, system_error
// (errno kept).
[[nodiscard]] Result<std::unique_ptr<Bdev>> create_uring_bdev(const UringBdevOpts& opts) noexcept;

std::string opts_to_json(const UringBdevOpts& opts);

}  // namespace nvmf::bdev
