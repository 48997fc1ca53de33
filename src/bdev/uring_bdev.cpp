#include "bdev/uring_bdev.h"

#include <fcntl.h>
#include <liburing.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <new>
#include <utility>

#include "bdev/bdev_internal.h"

namespace nvmf::bdev {

const char* direct_io_name(DirectIo mode) noexcept {
  switch (mode) {
    case DirectIo::prefer:
      return "prefer";
    case DirectIo::required:
      return "required";
    case DirectIo::off:
      return "off";
  }
  return "unknown";
}

namespace {

// The zero buffer write_zeroes and unmap write from when fallocate cannot do the job: large
// enough that zeroing a range costs few round trips, small enough to keep one per bdev.
constexpr size_t kZeroBufferBytes = size_t{1} << 20;
// CQEs copied out of the ring per batch (STYLE 4: reap into a stack array of 32).
constexpr unsigned kReapBatch = 32;

// BdevIo::backend_word[0]: what the SQE in flight for this I/O does.
enum UringPhase : uint64_t {
  kPhaseCommand = 0,   // the I/O's own operation (readv, writev, fsync, fallocate)
  kPhaseZeroFill = 1,  // a write from the zero buffer; backend_word[1] = next byte offset
};

IoStatus status_from_errno(int os_errno) noexcept {
  return (os_errno == ENOSPC || os_errno == EDQUOT) ? IoStatus::no_space : IoStatus::io_error;
}

class UringBdev final : public Bdev {
 public:
  UringBdev(Params params, int fd, bool direct, const UringBdevOpts& opts,
            uint8_t* zero_buffer) noexcept
      : Bdev(std::move(params)),
        fd_(fd),
        direct_(direct),
        fallocate_enabled_(opts.fallocate_enabled),
        interrupt_fd_enabled_(opts.interrupt_fd_enabled),
        zero_buffer_(zero_buffer) {}
  ~UringBdev() override {
    close(fd_);
    munmap(zero_buffer_, kZeroBufferBytes);
  }

  Result<std::unique_ptr<IoChannel>> create_channel() noexcept override;

  int fd() const noexcept { return fd_; }
  bool direct() const noexcept { return direct_; }
  bool fallocate_enabled() const noexcept { return fallocate_enabled_; }
  bool interrupt_fd_enabled() const noexcept { return interrupt_fd_enabled_; }
  const uint8_t* zero_buffer() const noexcept { return zero_buffer_; }

 private:
  const int fd_;
  const bool direct_;
  const bool fallocate_enabled_;
  const bool interrupt_fd_enabled_;
  uint8_t* const zero_buffer_;
};

// One io_uring per channel. Every outstanding I/O has exactly one SQE either queued (prepared,
// not yet handed to the kernel) or in flight (handed over, CQE not yet reaped).
class UringChannel final : public IoChannel {
 public:
  explicit UringChannel(UringBdev& bdev) noexcept
      : IoChannel(bdev),
        fd_(bdev.fd()),
        block_size_bytes_(bdev.block_size_bytes()),
        zero_buffer_(bdev.zero_buffer()),
        zero_range_enabled_(bdev.fallocate_enabled()),
        punch_hole_enabled_(bdev.fallocate_enabled()) {}

  ~UringChannel() override;

  // Setup: the ring, its registered file and its eventfd.
  Result<void> init(const UringBdev& bdev) noexcept;

  int interrupt_fd() const noexcept override { return event_fd_; }

 private:
  Result<void> queue_io(BdevIo& io) noexcept override;
  unsigned poll_completions(unsigned budget) noexcept override;

  io_uring_sqe* next_sqe() noexcept;
  void prep_command(BdevIo& io, io_uring_sqe* sqe) noexcept;
  void prep_zero_chunk(BdevIo& io, io_uring_sqe* sqe) noexcept;
  void set_file(io_uring_sqe* sqe) noexcept;
  // Handles one CQE; true when the I/O completed (its callback ran).
  bool handle_cqe(BdevIo& io, int result, uint64_t now_ns) noexcept;
  void start_zero_fill(BdevIo& io) noexcept;
  void finish(BdevIo& io, IoStatus status, int os_errno, uint64_t now_ns) noexcept;
  void ring_doorbell() noexcept;

  uint64_t range_end_bytes(const BdevIo& io) const noexcept {
    return (io.offset_blocks + io.num_blocks) * block_size_bytes_;
  }

  const int fd_;
  const uint64_t block_size_bytes_;
  const uint8_t* const zero_buffer_;
  io_uring ring_{};
  bool ring_ready_ = false;
  bool fixed_file_ = false;  // fd_ registered as fixed file 0: saves an fget/fput per I/O
  int event_fd_ = -1;
  bool zero_range_enabled_;  // cleared after the first EOPNOTSUPP from fallocate(ZERO_RANGE)
  bool punch_hole_enabled_;  // same for fallocate(PUNCH_HOLE)
  bool submit_error_logged_ = false;  // log a failing io_uring_submit once, not every poll
  unsigned sqes_queued_ = 0;
  unsigned sqes_in_flight_ = 0;
  detail::IoQueue outstanding_ios_;  // for the destructor: everything not yet completed
};

Result<void> UringChannel::init(const UringBdev& bdev) noexcept {
  // The SQ holds one SQE per outstanding I/O at most; the CQ is twice that (liburing's
  // default), so it cannot overflow.
  const auto entries = static_cast<unsigned>(round_up_power_of_two(queue_depth_max()));
  int rc = io_uring_queue_init(entries, &ring_, 0);
  if (rc < 0) {
    NVMF_ERRLOG(bdev,
                "uring bdev '%s': io_uring_queue_init(%u) failed: %s (RLIMIT_MEMLOCK or "
                "sysctl kernel.io_uring_disabled?)",
                bdev.name().c_str(), entries, strerror(-rc));
    return Unexpected(make_system_error(-rc, "io_uring_queue_init"));
  }
  ring_ready_ = true;

  rc = io_uring_register_files(&ring_, &fd_, 1);
  fixed_file_ = rc == 0;
  if (!fixed_file_) {
    NVMF_DEBUGLOG(bdev, "uring bdev '%s': no fixed file (%s); using the plain fd",
                  bdev.name().c_str(), strerror(-rc));
  }

  if (bdev.interrupt_fd_enabled()) {
    event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (event_fd_ < 0) {
      const int os_errno = errno;
      NVMF_ERRLOG(bdev, "uring bdev '%s': eventfd failed: %s", bdev.name().c_str(),
                  strerror(os_errno));
      return Unexpected(make_system_error(os_errno, "eventfd"));
    }
    rc = io_uring_register_eventfd(&ring_, event_fd_);
    if (rc < 0) {
      NVMF_ERRLOG(bdev, "uring bdev '%s': io_uring_register_eventfd failed: %s",
                  bdev.name().c_str(), strerror(-rc));
      return Unexpected(make_system_error(-rc, "io_uring_register_eventfd"));
    }
  }
  return {};
}

UringChannel::~UringChannel() {
  owner().check();
  if (ring_ready_) {
    // The kernel may still write into the callers' buffers: hand over what is queued, wait for
    // every CQE, and only then give the I/Os back (aborted).
    while (sqes_queued_ > 0) {
      const int rc = io_uring_submit(&ring_);
      if (rc == -EINTR || rc == -EAGAIN || rc == -EBUSY) continue;
      if (rc <= 0) break;
      sqes_queued_ -= static_cast<unsigned>(rc);
      sqes_in_flight_ += static_cast<unsigned>(rc);
    }
    while (sqes_in_flight_ > 0) {
      io_uring_cqe* cqe = nullptr;
      const int rc = io_uring_wait_cqe(&ring_, &cqe);
      if (rc == -EINTR) continue;
      if (rc < 0) break;
      auto* io = static_cast<BdevIo*>(io_uring_cqe_get_data(cqe));
      io_uring_cqe_seen(&ring_, cqe);
      --sqes_in_flight_;
      finish(*io, IoStatus::aborted, 0, clock().now_ns());
    }
    // Tearing the ring down cancels and waits for anything the loops above could not reap.
    io_uring_queue_exit(&ring_);
  }
  if (event_fd_ >= 0) close(event_fd_);
  const uint64_t now_ns = clock().now_ns();
  while (BdevIo* io = outstanding_ios_.pop_front()) complete(*io, IoStatus::aborted, 0, now_ns);
}

io_uring_sqe* UringChannel::next_sqe() noexcept {
  // Cannot fail: queued SQEs <= outstanding I/Os <= queue_depth_max <= SQ entries.
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  assert(sqe != nullptr);
  return sqe;
}

void UringChannel::set_file(io_uring_sqe* sqe) noexcept {
  if (fixed_file_) {
    sqe->fd = 0;  // index in the registered file table
    sqe->flags |= IOSQE_FIXED_FILE;
  }
}

Result<void> UringChannel::queue_io(BdevIo& io) noexcept {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) return Unexpected(Errc::busy, "io_uring submission queue full");
  outstanding_ios_.push_back(io);
  if ((io.type == IoType::write_zeroes && !zero_range_enabled_) ||
      (io.type == IoType::unmap && !punch_hole_enabled_)) {
    io.backend_word[0] = kPhaseZeroFill;
    io.backend_word[1] = io.offset_blocks * block_size_bytes_;
    prep_zero_chunk(io, sqe);
  } else {
    io.backend_word[0] = kPhaseCommand;
    prep_command(io, sqe);
  }
  ++sqes_queued_;
  return {};
}

void UringChannel::prep_command(BdevIo& io, io_uring_sqe* sqe) noexcept {
  const uint64_t offset_bytes = io.offset_blocks * block_size_bytes_;
  const uint64_t length_bytes = io.num_blocks * block_size_bytes_;
  switch (io.type) {
    case IoType::read:
      io_uring_prep_readv(sqe, fd_, io.iov, io.iovcnt, offset_bytes);
      break;
    case IoType::write:
      io_uring_prep_writev(sqe, fd_, io.iov, io.iovcnt, offset_bytes);
      break;
    case IoType::flush:
      // Data and the metadata needed to read it back; timestamps may stay behind.
      io_uring_prep_fsync(sqe, fd_, IORING_FSYNC_DATASYNC);
      break;
    case IoType::write_zeroes:
      io_uring_prep_fallocate(sqe, fd_, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
                              static_cast<off_t>(offset_bytes), static_cast<off_t>(length_bytes));
      break;
    case IoType::unmap:
      io_uring_prep_fallocate(sqe, fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                              static_cast<off_t>(offset_bytes), static_cast<off_t>(length_bytes));
      break;
  }
  set_file(sqe);
  io_uring_sqe_set_data(sqe, &io);
}

void UringChannel::prep_zero_chunk(BdevIo& io, io_uring_sqe* sqe) noexcept {
  const uint64_t next_bytes = io.backend_word[1];
  const auto length =
      static_cast<unsigned>(std::min<uint64_t>(range_end_bytes(io) - next_bytes, kZeroBufferBytes));
  io_uring_prep_write(sqe, fd_, zero_buffer_, length, next_bytes);
  set_file(sqe);
  io_uring_sqe_set_data(sqe, &io);
}

void UringChannel::start_zero_fill(BdevIo& io) noexcept {
  io.backend_word[0] = kPhaseZeroFill;
  io.backend_word[1] = io.offset_blocks * block_size_bytes_;
  prep_zero_chunk(io, next_sqe());
  ++sqes_queued_;
}

void UringChannel::finish(BdevIo& io, IoStatus status, int os_errno, uint64_t now_ns) noexcept {
  outstanding_ios_.remove(io);
  complete(io, status, os_errno, now_ns);
}

bool UringChannel::handle_cqe(BdevIo& io, int result, uint64_t now_ns) noexcept {
  if (io.backend_word[0] == kPhaseZeroFill) {
    if (result <= 0) {
      const int os_errno = result < 0 ? -result : EIO;  // 0 bytes written: no progress
      finish(io, status_from_errno(os_errno), os_errno, now_ns);
      return true;
    }
    io.backend_word[1] += static_cast<uint64_t>(result);
    if (io.backend_word[1] < range_end_bytes(io)) {
      prep_zero_chunk(io, next_sqe());
      ++sqes_queued_;
      return false;
    }
    finish(io, IoStatus::success, 0, now_ns);
    return true;
  }

  switch (io.type) {
    case IoType::read:
    case IoType::write:
      if (result < 0) {
        finish(io, status_from_errno(-result), -result, now_ns);
      } else if (static_cast<uint64_t>(result) != io.num_blocks * block_size_bytes_) {
        // A short transfer (the file shrank under us, or the device gave up part way): the
        // caller's iov cannot be resumed without copying it, so report it as an EIO.
        finish(io, IoStatus::io_error, EIO, now_ns);
      } else {
        finish(io, IoStatus::success, 0, now_ns);
      }
      return true;
    case IoType::flush:
      if (result < 0) {
        finish(io, status_from_errno(-result), -result, now_ns);
      } else {
        finish(io, IoStatus::success, 0, now_ns);
      }
      return true;
    case IoType::write_zeroes:
    case IoType::unmap:
      if (result == -EOPNOTSUPP) {
        // The file system or device cannot do it: write zeroes from now on in this channel.
        bool& enabled = io.type == IoType::write_zeroes ? zero_range_enabled_ : punch_hole_enabled_;
        if (enabled) {
          NVMF_NOTICELOG(bdev, "uring bdev '%s': fallocate(%s) not supported; writing zeroes",
                         bdev().name().c_str(),
                         io.type == IoType::write_zeroes ? "ZERO_RANGE" : "PUNCH_HOLE");
          enabled = false;
        }
        start_zero_fill(io);
        return false;
      }
      if (result < 0) {
        finish(io, status_from_errno(-result), -result, now_ns);
      } else {
        finish(io, IoStatus::success, 0, now_ns);
      }
      return true;
  }
  return false;
}

unsigned UringChannel::poll_completions(unsigned budget) noexcept {
  unsigned processed = 0;
  unsigned delivered = 0;
  uint64_t now_ns = 0;
  while (processed < budget && sqes_in_flight_ > 0) {
    io_uring_cqe* cqes[kReapBatch];
    const unsigned wanted = std::min(kReapBatch, budget - processed);
    const unsigned count = io_uring_peek_batch_cqe(&ring_, cqes, wanted);
    if (count == 0) break;
    // Copy out and release the CQ slots before any callback runs: a callback may submit.
    struct Reaped {
      BdevIo* io;
      int result;
    } reaped[kReapBatch];
    for (unsigned i = 0; i < count; ++i) {
      reaped[i] = {static_cast<BdevIo*>(io_uring_cqe_get_data(cqes[i])), cqes[i]->res};
    }
    io_uring_cq_advance(&ring_, count);
    sqes_in_flight_ -= count;
    processed += count;
    if (now_ns == 0) now_ns = clock().now_ns();  // one clock read per poll with completions
    for (unsigned i = 0; i < count; ++i) {
      if (handle_cqe(*reaped[i].io, reaped[i].result, now_ns)) ++delivered;
    }
    if (count < wanted) break;
  }
  // One doorbell per poll, after the callbacks, so their resubmissions ride along.
  if (sqes_queued_ > 0) ring_doorbell();
  return delivered;
}

void UringChannel::ring_doorbell() noexcept {
  const int rc = io_uring_submit(&ring_);
  if (rc >= 0) {
    const auto submitted = std::min(static_cast<unsigned>(rc), sqes_queued_);
    sqes_queued_ -= submitted;
    sqes_in_flight_ += submitted;
    return;
  }
  // Transient (kernel short of memory, CQ busy, signal): the SQEs stay in the ring and the
  // next poll retries. Anything else is logged once; it will likely repeat on every poll.
  if (rc == -EAGAIN || rc == -EBUSY || rc == -EINTR) return;
  if (!submit_error_logged_) {
    submit_error_logged_ = true;
    NVMF_ERRLOG(bdev, "uring bdev '%s': io_uring_submit failed: %s", bdev().name().c_str(),
                strerror(-rc));
  }
}

Result<std::unique_ptr<IoChannel>> UringBdev::create_channel() noexcept {
  std::unique_ptr<UringChannel> channel;
  try {
    channel = std::make_unique<UringChannel>(*this);
  } catch (const std::bad_alloc&) {
    return Unexpected(Errc::no_memory, "uring channel");
  }
  Result<void> ready = channel->init(*this);
  if (!ready) return Unexpected(ready.error());
  return std::unique_ptr<IoChannel>(std::move(channel));
}

// Closes the descriptor on every early return of create_uring_bdev().
class FdCloser {
 public:
  explicit FdCloser(int fd) noexcept : fd_(fd) {}
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  ~FdCloser() {
    if (fd_ >= 0) close(fd_);
  }
  int release() noexcept { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

Error open_error(const UringBdevOpts& opts, int os_errno) noexcept {
  NVMF_ERRLOG(bdev, "uring bdev '%s': cannot open '%s': %s", opts.name.c_str(), opts.path.c_str(),
              strerror(os_errno));
  return make_system_error(os_errno, "path");
}

// Turns O_DIRECT off on an open descriptor, for DirectIo::prefer.
Result<void> fall_back_to_buffered(const UringBdevOpts& opts, int fd, const char* why) noexcept {
  if (opts.direct_io == DirectIo::required) {
    NVMF_ERRLOG(bdev, "uring bdev '%s': O_DIRECT unusable on '%s' (%s) and direct_io=required",
                opts.name.c_str(), opts.path.c_str(), why);
    return Unexpected(Errc::not_supported, "direct_io");
  }
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_DIRECT) < 0) {
    const int os_errno = errno;
    NVMF_ERRLOG(bdev, "uring bdev '%s': clearing O_DIRECT failed: %s", opts.name.c_str(),
                strerror(os_errno));
    return Unexpected(make_system_error(os_errno, "fcntl"));
  }
  NVMF_NOTICELOG(bdev, "uring bdev '%s': O_DIRECT unusable on '%s' (%s); using buffered I/O",
                 opts.name.c_str(), opts.path.c_str(), why);
  return {};
}

}  // namespace

Result<std::unique_ptr<Bdev>> create_uring_bdev(const UringBdevOpts& opts) noexcept {
  constexpr const char* kBackend = "uring";
  Result<void> valid = detail::validate_common_opts(
      {kBackend, opts.name, opts.block_size_bytes, opts.queue_depth_max, opts.clock});
  if (!valid) return Unexpected(valid.error());
  if (opts.path.empty()) {
    NVMF_ERRLOG(bdev, "uring bdev '%s': path is empty", opts.name.c_str());
    return Unexpected(Errc::invalid_argument, "path");
  }
  if (opts.direct_io != DirectIo::prefer && opts.direct_io != DirectIo::required &&
      opts.direct_io != DirectIo::off) {
    NVMF_ERRLOG(bdev, "uring bdev '%s': direct_io %d is not a DirectIo", opts.name.c_str(),
                static_cast<int>(opts.direct_io));
    return Unexpected(Errc::invalid_argument, "direct_io");
  }

  // ---- open, with O_DIRECT if wanted and the file system takes it ----
  const int open_flags = O_RDWR | O_CLOEXEC | (opts.create_file ? O_CREAT : 0);
  constexpr mode_t kCreateMode = 0600;  // a disk image is nobody else's business
  bool direct = opts.direct_io != DirectIo::off;
  int fd = open(opts.path.c_str(), open_flags | (direct ? O_DIRECT : 0), kCreateMode);
  if (fd < 0 && direct && errno == EINVAL) {
    // Some file systems (tmpfs before Linux 6.6, many FUSE ones) refuse O_DIRECT at open.
    if (opts.direct_io == DirectIo::required) {
      NVMF_ERRLOG(bdev, "uring bdev '%s': '%s' refuses O_DIRECT and direct_io=required",
                  opts.name.c_str(), opts.path.c_str());
      return Unexpected(Errc::not_supported, "direct_io");
    }
    NVMF_NOTICELOG(bdev, "uring bdev '%s': '%s' refuses O_DIRECT; using buffered I/O",
                   opts.name.c_str(), opts.path.c_str());
    direct = false;
    fd = open(opts.path.c_str(), open_flags, kCreateMode);
  }
  if (fd < 0) return Unexpected(open_error(opts, errno));
  FdCloser fd_closer(fd);

  // ---- geometry ----
  struct stat st {};
  if (fstat(fd, &st) < 0) return Unexpected(open_error(opts, errno));
  uint32_t block_size_bytes = opts.block_size_bytes;
  uint64_t size_bytes = 0;
  if (S_ISBLK(st.st_mode)) {
    int logical_block_bytes = 0;
    if (ioctl(fd, BLKSSZGET, &logical_block_bytes) < 0 ||
        ioctl(fd, BLKGETSIZE64, &size_bytes) < 0) {
      const int os_errno = errno;
      NVMF_ERRLOG(bdev, "uring bdev '%s': block device ioctl on '%s' failed: %s", opts.name.c_str(),
                  opts.path.c_str(), strerror(os_errno));
      return Unexpected(make_system_error(os_errno, "path"));
    }
    if (block_size_bytes == 0) block_size_bytes = static_cast<uint32_t>(logical_block_bytes);
    if (block_size_bytes < static_cast<uint32_t>(logical_block_bytes)) {
      NVMF_ERRLOG(bdev,
                  "uring bdev '%s': block_size_bytes %" PRIu32
                  " is below the logical block size %d of '%s'",
                  opts.name.c_str(), block_size_bytes, logical_block_bytes, opts.path.c_str());
      return Unexpected(Errc::invalid_argument, "block_size_bytes");
    }
    if (opts.size_bytes != 0) {
      NVMF_ERRLOG(bdev, "uring bdev '%s': size_bytes must be 0 for block device '%s'",
                  opts.name.c_str(), opts.path.c_str());
      return Unexpected(Errc::invalid_argument, "size_bytes");
    }
  } else if (S_ISREG(st.st_mode)) {
    if (block_size_bytes == 0) block_size_bytes = 512;  // the classic sector, like a loop device
    size_bytes = static_cast<uint64_t>(st.st_size);
    if (opts.size_bytes != 0) {
      if (opts.size_bytes % block_size_bytes != 0 || opts.size_bytes > INT64_MAX) {
        NVMF_ERRLOG(bdev,
                    "uring bdev '%s': size_bytes %" PRIu64
                    " is not a multiple of the block size %" PRIu32,
                    opts.name.c_str(), opts.size_bytes, block_size_bytes);
        return Unexpected(Errc::invalid_argument, "size_bytes");
      }
      if (ftruncate(fd, static_cast<off_t>(opts.size_bytes)) < 0) {
        const int os_errno = errno;
        NVMF_ERRLOG(bdev, "uring bdev '%s': ftruncate('%s', %" PRIu64 ") failed: %s",
                    opts.name.c_str(), opts.path.c_str(), opts.size_bytes, strerror(os_errno));
        return Unexpected(make_system_error(os_errno, "size_bytes"));
      }
      size_bytes = opts.size_bytes;
    }
  } else {
    NVMF_ERRLOG(bdev, "uring bdev '%s': '%s' is neither a regular file nor a block device",
                opts.name.c_str(), opts.path.c_str());
    return Unexpected(Errc::invalid_argument, "path");
  }
  valid = detail::validate_block_size(kBackend, opts.name, block_size_bytes);
  if (!valid) return Unexpected(valid.error());

  // ---- what O_DIRECT needs of buffers, where the kernel says (statx, Linux 6.1) ----
  uint32_t buffer_alignment_bytes = 1;
  if (direct) {
    buffer_alignment_bytes = block_size_bytes;  // safe when the kernel does not say
    struct statx stx {};
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
        (stx.stx_mask & STATX_DIOALIGN) != 0) {
      if (stx.stx_dio_offset_align == 0) {
        valid = fall_back_to_buffered(opts, fd, "the file system has no direct I/O for it");
        if (!valid) return Unexpected(valid.error());
        direct = false;
        buffer_alignment_bytes = 1;
      } else if (stx.stx_dio_offset_align > block_size_bytes) {
        valid = fall_back_to_buffered(opts, fd, "block_size_bytes below the direct I/O alignment");
        if (!valid) return Unexpected(valid.error());
        direct = false;
        buffer_alignment_bytes = 1;
      } else {
        // Segment addresses need dio_mem_align and segment lengths dio_offset_align: one
        // value for both keeps the rule simple for callers.
        buffer_alignment_bytes = std::max(stx.stx_dio_mem_align, stx.stx_dio_offset_align);
        if (!is_power_of_two(buffer_alignment_bytes)) buffer_alignment_bytes = block_size_bytes;
      }
    }
  }

  const uint64_t block_count = size_bytes / block_size_bytes;
  if (size_bytes % block_size_bytes != 0) {
    NVMF_WARNLOG(bdev,
                 "uring bdev '%s': '%s' is %" PRIu64 " bytes, not a multiple of %" PRIu32
                 "; the last %" PRIu64 " bytes are ignored",
                 opts.name.c_str(), opts.path.c_str(), size_bytes, block_size_bytes,
                 size_bytes % block_size_bytes);
  }
  if (block_count == 0) {
    NVMF_ERRLOG(
        bdev, "uring bdev '%s': '%s' is smaller than one block (%" PRIu64 " bytes); set size_bytes",
        opts.name.c_str(), opts.path.c_str(), size_bytes);
    return Unexpected(Errc::invalid_argument, "size_bytes");
  }

  // Zeroes for write_zeroes / unmap when fallocate cannot help; page aligned for O_DIRECT.
  void* zero_buffer =
      mmap(nullptr, kZeroBufferBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (zero_buffer == MAP_FAILED) {
    const int os_errno = errno;
    NVMF_ERRLOG(bdev, "uring bdev '%s': mapping the zero buffer failed: %s", opts.name.c_str(),
                strerror(os_errno));
    return Unexpected(Errc::no_memory, "zero buffer", os_errno);
  }
  // Touch it so direct I/O pins ordinary pages rather than the kernel's shared zero page.
  std::memset(zero_buffer, 0, kZeroBufferBytes);

  try {
    auto bdev =
        std::make_unique<UringBdev>(Bdev::Params{.backend_name = kBackend,
                                                 .name = opts.name,
                                                 .block_size_bytes = block_size_bytes,
                                                 .block_count = block_count,
                                                 .uuid = opts.uuid,
                                                 .io_types = kAllIoTypes,
                                                 .queue_depth_max = opts.queue_depth_max,
                                                 .buffer_alignment_bytes = buffer_alignment_bytes,
                                                 .clock = opts.clock},
                                    fd, direct, opts, static_cast<uint8_t*>(zero_buffer));
    fd_closer.release();
    NVMF_NOTICELOG(bdev, "uring bdev '%s': '%s', %" PRIu64 " blocks of %" PRIu32 " bytes, %s",
                   opts.name.c_str(), opts.path.c_str(), block_count, block_size_bytes,
                   direct ? "O_DIRECT" : "buffered I/O");
    return std::unique_ptr<Bdev>(std::move(bdev));
  } catch (const std::bad_alloc&) {
    munmap(zero_buffer, kZeroBufferBytes);
    return Unexpected(Errc::no_memory, "uring bdev");
  }
}

std::string opts_to_json(const UringBdevOpts& opts) {
  detail::JsonObjectWriter json;
  json.add_string("name", opts.name);
  json.add_string("path", opts.path);
  json.add_bool("create_file", opts.create_file);
  json.add_number("size_bytes", opts.size_bytes);
  json.add_number("block_size_bytes", opts.block_size_bytes);
  json.add_string("direct_io", direct_io_name(opts.direct_io));
  json.add_bool("fallocate_enabled", opts.fallocate_enabled);
  json.add_bool("interrupt_fd_enabled", opts.interrupt_fd_enabled);
  json.add_uuid("uuid", opts.uuid);
  json.add_number("queue_depth_max", opts.queue_depth_max);
  return json.finish();
}

}  // namespace nvmf::bdev
