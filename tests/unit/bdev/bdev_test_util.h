// Helpers shared by the bdev unit tests: completion recording, aligned buffers, temp files,
// log capture and polling loops.
#pragma once

#include <sys/uio.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bdev/bdev.h"
#include "common/log.h"
#include "log_capture.h"

namespace nvmf::bdev::testing {

// Counts callbacks and remembers the order in which I/Os completed.
struct Completions {
  int calls = 0;
  std::vector<const BdevIo*> order;
  std::vector<IoStatus> statuses;
};

inline void record_completion(BdevIo& io, void* ctx) {
  auto* completions = static_cast<Completions*>(ctx);
  ++completions->calls;
  completions->order.push_back(&io);
  completions->statuses.push_back(io.status);
}

inline BdevIo make_io(IoType type, uint64_t offset_blocks, uint64_t num_blocks, const iovec* iov,
                      unsigned iovcnt, Completions* completions) {
  BdevIo io;
  io.type = type;
  io.offset_blocks = offset_blocks;
  io.num_blocks = num_blocks;
  io.iov = iov;
  io.iovcnt = iovcnt;
  io.done = record_completion;
  io.done_ctx = completions;
  return io;
}

// Page-aligned, so it satisfies any bdev's buffer_alignment_bytes().
class AlignedBuffer {
 public:
  explicit AlignedBuffer(size_t size_bytes, uint8_t fill = 0)
      : size_(size_bytes),
        data_(static_cast<uint8_t*>(std::aligned_alloc(4096, (size_bytes + 4095) / 4096 * 4096))) {
    std::memset(data_, fill, size_);
  }
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  iovec iov(size_t offset, size_t length) const { return iovec{data_ + offset, length}; }
  iovec iov() const { return iovec{data_, size_}; }

 private:
  size_t size_;
  uint8_t* data_;
};

// A file under /tmp from mkstemp, removed at the end of the test.
class TempFile {
 public:
  TempFile() {
    char path_template[] = "/tmp/nvmf_bdev_test_XXXXXX";
    fd_ = mkstemp(path_template);
    if (fd_ >= 0) path_ = path_template;
  }
  ~TempFile() {
    if (fd_ >= 0) close(fd_);
    if (!path_.empty()) unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

using test::LogCapture;  // tests/support/log_capture.h

// Polls until `done` holds or 10 s pass (real devices: the kernel completes asynchronously).
template <typename Predicate>
bool poll_until(IoChannel& channel, Predicate done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    channel.poll();
    if (std::chrono::steady_clock::now() > deadline) return false;
  }
  return true;
}

// Submits one I/O and polls until its callback ran; returns its status.
inline IoStatus run_io(IoChannel& channel, BdevIo& io) {
  Completions completions;
  io.done = record_completion;
  io.done_ctx = &completions;
  if (!channel.submit(io)) return IoStatus::pending;
  if (!poll_until(channel, [&] { return completions.calls == 1; })) return IoStatus::pending;
  return io.status;
}

}  // namespace nvmf::bdev::testing
