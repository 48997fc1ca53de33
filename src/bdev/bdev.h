// Block device layer: a narrow interface over storage backends (null, malloc, io_uring), shaped
// like SPDK's bdev. A Bdev describes one device and is shared by every reactor; an IoChannel is
// one reactor thread's private queue to it. A BdevIo is a request the caller preallocates.
//
// The data path (IoChannel::submit / poll) allocates nothing, takes no lock and throws nothing.
// Completions are delivered only from IoChannel::poll() on the thread that owns the channel,
// never from inside submit(), so a completion callback never runs in the middle of its caller.
#pragma once

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/intrusive_list.h"
#include "common/result.h"
#include "common/util.h"

namespace nvmf::bdev {

// What an I/O asks of the device. Each maps to one NVMe I/O command.
enum class IoType : uint8_t {
  read = 0,      // NVMe Read: copy the range into iov.
  write,         // NVMe Write: copy iov into the range.
  flush,         // NVMe Flush: make every completed write durable. The range is checked but
                 // backends flush the whole device; num_blocks 0 is allowed (NVMe Flush has no
                 // range, so the target passes 0/0).
  write_zeroes,  // NVMe Write Zeroes: afterwards the range reads back as zeroes.
  unmap,         // NVMe Dataset Management, deallocate: afterwards the range reads back as
                 // zeroes on every backend that stores data (malloc zeroes it, uring punches a
                 // hole or writes zeroes), so the target may report DLFEAT "reads return
                 // zeroes" for them (null stores nothing).
};
inline constexpr unsigned kIoTypeCount = 5;
const char* io_type_name(IoType type) noexcept;

// A set of IoTypes, one bit per type: what a backend supports.
using IoTypeMask = uint32_t;
constexpr IoTypeMask io_type_bit(IoType type) noexcept {
  return IoTypeMask{1} << static_cast<unsigned>(type);
}
inline constexpr IoTypeMask kAllIoTypes = (IoTypeMask{1} << kIoTypeCount) - 1;

// The outcome of a submitted I/O, written by the channel just before the callback runs. Each
// value names the NVMe status the target should answer with; os_errno keeps the detail.
enum class IoStatus : uint8_t {
  pending = 0,  // Accepted by submit(), not yet completed: the channel owns the BdevIo.
  success,      // Done. NVMe: Successful Completion (SCT 0h, SC 00h).
  io_error,     // The backing store failed the transfer; os_errno says why (EIO, EFBIG, EINVAL
                // from the kernel, EIO for a short transfer). NVMe: Write Fault (SCT 2h, SC 80h)
                // or Unrecovered Read Error (SCT 2h, SC 81h); Internal Error (SC 06h) otherwise.
  no_space,     // The backing file system ran out of space (ENOSPC, EDQUOT in os_errno), e.g. a
                // sparse file that could not be filled. NVMe: Capacity Exceeded (SCT 0h, SC 81h).
  aborted,      // The channel was destroyed while the I/O was outstanding; data in the range is
                // undefined. NVMe: Command Aborted due to SQ Deletion (SCT 0h, SC 08h).
  nvme_error,   // The backend chose the NVMe status itself: BdevIo::nvme_sct / nvme_sc /
                // nvme_dnr say which (the error bdev's injected failures). NVMe: that status.
};
const char* io_status_name(IoStatus status) noexcept;

// Most segments one BdevIo may carry: the kernel's IOV_MAX, the limit of readv/writev.
inline constexpr unsigned kIovCountMax = 1024;

// Completions a poll() delivers at most when the caller has no budget of its own (STYLE 4).
inline constexpr unsigned kPollBudgetDefault = 32;

struct BdevIo;
// Called once per accepted I/O, from IoChannel::poll() (or the channel's destructor, with
// IoStatus::aborted) on the owner thread. The BdevIo is the caller's again when it runs, so the
// callback may resubmit it on the same channel (it completes at a later poll, never this one).
using IoCompletionFn = void (*)(BdevIo& io, void* ctx);

// One request. Caller-owned and preallocated (e.g. one per NVMe command slot); the channel
// borrows it from a successful submit() until the callback runs.
struct BdevIo {
  // ---- Set by the caller before submit() ----
  IoType type = IoType::read;
  uint64_t offset_blocks = 0;
  uint64_t num_blocks = 0;        // >= 1, except for flush (0 allowed)
  const iovec* iov = nullptr;     // read/write: segments totalling num_blocks * block_size_bytes,
                                  // each aligned to Bdev::buffer_alignment_bytes()
  unsigned iovcnt = 0;            // read/write: 1..kIovCountMax; other types: 0
  IoCompletionFn done = nullptr;  // required
  void* done_ctx = nullptr;       // passed to done as is

  // ---- Set by the channel: valid when done runs ----
  IoStatus status = IoStatus::success;
  uint8_t nvme_sct = 0;   // for nvme_error: Status Code Type (0..7), else 0
  uint8_t nvme_sc = 0;    // for nvme_error: Status Code, else 0
  bool nvme_dnr = false;  // for nvme_error: Do Not Retry, else false
  int os_errno = 0;       // for io_error / no_space: the errno from the backend, else 0

  // ---- Owned by the channel while the I/O is outstanding; the caller never touches them ----
  ListNode channel_node;          // the backend's queue of outstanding I/Os
  uint64_t submit_ns = 0;         // Clock time at submit(), for latency statistics
  uint64_t backend_word[2] = {};  // backend scratch (uring: phase and zero-fill progress)
};

// Cumulative statistics of one bdev: the sum over its live and already destroyed channels.
struct IoStats {
  std::array<uint64_t, kIoTypeCount> ops{};    // successful completions, indexed by IoType
  std::array<uint64_t, kIoTypeCount> bytes{};  // their lengths (range length for write_zeroes
                                               // and unmap; flush counts 0)
  uint64_t errors = 0;                         // completions with any status other than success
  uint64_t latency_ns_total = 0;  // sum over all completions of delivery time - submit time
  uint64_t latency_ns_max = 0;    // the largest single latency seen

  uint64_t ops_of(IoType type) const noexcept { return ops[static_cast<unsigned>(type)]; }
  uint64_t bytes_of(IoType type) const noexcept { return bytes[static_cast<unsigned>(type)]; }
  uint64_t completions() const noexcept;  // all ops plus errors
};

// RFC 4122 UUID, the namespace's NVMe UUID / NGUID later.
using Uuid = std::array<uint8_t, 16>;
bool uuid_is_null(const Uuid& uuid) noexcept;
// A random (version 4) UUID from getrandom(2).
Uuid uuid_generate() noexcept;
// "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" plus the terminating NUL.
inline constexpr unsigned kUuidStringSize = 37;
void uuid_format(const Uuid& uuid, char (&text)[kUuidStringSize]) noexcept;

class Bdev;

// Per-channel counters. Written only by the owner thread (relaxed load + store, no locked
// instruction), read by Bdev::stats() from any thread.
struct ChannelCounters {
  std::atomic<uint64_t> ops[kIoTypeCount] = {};
  std::atomic<uint64_t> bytes[kIoTypeCount] = {};
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> latency_ns_total{0};
  std::atomic<uint64_t> latency_ns_max{0};

  void add_to(IoStats& stats) const noexcept;
};

// One reactor thread's queue to a Bdev: made by Bdev::create_channel() on that thread and used
// and destroyed only there (a debug build asserts it). Holds at most queue_depth_max() I/Os.
// Must be destroyed before its Bdev. Destroying a channel with I/Os outstanding waits until the
// backend has released their buffers, then completes each with IoStatus::aborted from the
// destructor; those callbacks must not use the channel.
class IoChannel {
 public:
  IoChannel(const IoChannel&) = delete;
  IoChannel& operator=(const IoChannel&) = delete;
  virtual ~IoChannel();

  // Owner thread. Checks io and hands it to the backend; never calls io.done. Errors (io is
  // untouched and still the caller's):
  //   not_supported     io.type is not in the bdev's supported types
  //   out_of_range      [offset_blocks, offset_blocks + num_blocks) is not inside the bdev
  //                     (checked without overflow)
  //   invalid_argument  num_blocks is 0 (except flush); iov total != num_blocks * block size;
  //                     iovcnt is 0 or > kIovCountMax for read/write, or not 0 otherwise;
  //                     a segment not aligned to buffer_alignment_bytes()
  //   busy              queue_depth_max() I/Os are outstanding: poll, then retry
  [[nodiscard]] Result<void> submit(BdevIo& io) noexcept;

  // Owner thread. Delivers up to `budget` completions, calling each io.done here, and sends
  // the I/Os submitted since the last poll to the device (one system call at most: one
  // doorbell per poll). Returns the number of completions delivered.
  unsigned poll(unsigned budget = kPollBudgetDefault) noexcept;

  // A file descriptor that becomes readable when completions are waiting, for a reactor that
  // sleeps in interrupt mode; the reactor read(2)s its 8-byte counter to re-arm it. -1 when
  // the backend has none: then keep polling while outstanding() > 0. I/Os submitted since the
  // last poll() reach the device only at the next poll(), so poll once before sleeping.
  virtual int interrupt_fd() const noexcept { return -1; }

  // Owner thread: I/Os accepted by submit() whose callback has not run yet.
  uint32_t outstanding() const noexcept { return outstanding_; }
  uint32_t queue_depth_max() const noexcept { return queue_depth_max_; }
  Bdev& bdev() const noexcept { return bdev_; }

 protected:
  // Registers the channel with bdev (setup path: takes the bdev's channel-list lock).
  explicit IoChannel(Bdev& bdev) noexcept;

  // The backend's half of submit(): io is valid and fits the queue depth. Queue it (device work
  // may start now, but io.done must not be called). Errors are returned to the submitter.
  virtual Result<void> queue_io(BdevIo& io) noexcept = 0;
  // The backend's half of poll(): deliver up to budget completions through complete().
  virtual unsigned poll_completions(unsigned budget) noexcept = 0;

  // Backends call this exactly once per accepted I/O: records statistics, frees the queue slot
  // and runs the callback. `now_ns` is from clock(), read once per poll by the caller. For
  // IoStatus::nvme_error the backend sets io.nvme_sct / nvme_sc / nvme_dnr first.
  void complete(BdevIo& io, IoStatus status, int os_errno, uint64_t now_ns) noexcept;

  const Clock& clock() const noexcept { return clock_; }
  const ThreadOwner& owner() const noexcept { return owner_; }

 private:
  friend class Bdev;

  Bdev& bdev_;
  const Clock& clock_;
  ThreadOwner owner_;
  uint32_t outstanding_ = 0;
  uint32_t queue_depth_max_;
  ListNode bdev_node_;  // on Bdev::channels_, under Bdev::channels_mutex_
  ChannelCounters counters_;
};

// A block device. Its geometry is fixed at creation and readable from any thread; channels are
// per thread. Created by a backend's create_*_bdev() on a setup path.
class Bdev {
 public:
  // What a backend tells the base class; checked by the backend's create function first.
  struct Params {
    const char* backend_name = "";  // static string
    std::string name;
    uint32_t block_size_bytes = 0;
    uint64_t block_count = 0;  // block_count * block_size_bytes fits in 64 bits
    Uuid uuid{};               // all zero: one is generated
    IoTypeMask io_types = kAllIoTypes;
    uint32_t queue_depth_max = 0;
    uint32_t buffer_alignment_bytes = 1;  // a power of two
    const Clock* clock = nullptr;
    // Identifiers the device itself reports (nvme: Identify Namespace); all zero: none.
    std::array<uint8_t, 16> nguid{};
    std::array<uint8_t, 8> eui64{};
  };

  Bdev(const Bdev&) = delete;
  Bdev& operator=(const Bdev&) = delete;
  // Every channel must already be destroyed (asserted).
  virtual ~Bdev();

  const std::string& name() const noexcept { return name_; }
  const char* backend_name() const noexcept { return backend_name_; }  // "null", "malloc", ...
  uint32_t block_size_bytes() const noexcept { return block_size_bytes_; }
  uint64_t block_count() const noexcept { return block_count_; }
  uint64_t size_bytes() const noexcept { return block_count_ * block_size_bytes_; }
  const Uuid& uuid() const noexcept { return uuid_; }
  // True when Params::uuid was all zero (no configured UUID, or a device that reports none)
  // and uuid() is random, new at every start: the target then derives a stable namespace UUID.
  bool uuid_generated() const noexcept { return uuid_generated_; }
  IoTypeMask supported_io_types() const noexcept { return io_types_; }
  bool supports(IoType type) const noexcept;
  // Depth of each channel (from the backend's options).
  uint32_t queue_depth_max() const noexcept { return queue_depth_max_; }
  // Every iov_base and iov_len must be a multiple of this (O_DIRECT needs it); 1 means any.
  uint32_t buffer_alignment_bytes() const noexcept { return buffer_alignment_bytes_; }

  // Makes a channel owned by the calling thread (setup path: may allocate and make system
  // calls). Errors: no_memory, or the backend's resource errors (io_uring setup, eventfd).
  [[nodiscard]] virtual Result<std::unique_ptr<IoChannel>> create_channel() noexcept = 0;

  const std::array<uint8_t, 16>& nguid() const noexcept { return nguid_; }
  const std::array<uint8_t, 8>& eui64() const noexcept { return eui64_; }

  // Hot removal. The backend calls notify_removed() once when the device is gone (any
  // thread: nvme's recovery thread); the callback then runs on that thread, so it must only do
  // thread-safe things (the target removes the namespaces on the bdev). I/O after that fails.
  using RemovedFn = void (*)(void* ctx, Bdev& bdev);
  void set_removed_callback(RemovedFn fn, void* ctx) noexcept;  // setup path, before I/O
  bool removed() const noexcept { return removed_.load(std::memory_order_acquire); }

  // Claims (setup path). A bdev built on top of another one (delay, error) claims its base for
  // as long as it lives, so the base cannot be claimed twice, removed from a BdevRegistry,
  // or back a namespace (its I/O would bypass the bdev on top). Errors: busy (already
  // claimed). release_claim() by the claimer only; claimed_by() from any thread.
  [[nodiscard]] Result<void> claim(const Bdev& by) noexcept;
  void release_claim(const Bdev& by) noexcept;
  const Bdev* claimed_by() const noexcept { return claimed_by_.load(std::memory_order_acquire); }

  // Any thread. Sums the counters of live channels with those of destroyed ones; a channel in
  // the middle of poll() may be counted partly (counters are read one by one).
  IoStats stats() const noexcept;
  // Any thread: live channels.
  size_t channel_count() const noexcept;

 protected:
  explicit Bdev(Params params) noexcept;

  const Clock& clock() const noexcept { return *clock_; }
  void notify_removed() noexcept;

 private:
  friend class IoChannel;

  const char* backend_name_;
  std::string name_;
  uint32_t block_size_bytes_;
  uint64_t block_count_;
  Uuid uuid_;
  bool uuid_generated_;
  IoTypeMask io_types_;
  uint32_t queue_depth_max_;
  uint32_t buffer_alignment_bytes_;
  const Clock* clock_;
  std::array<uint8_t, 16> nguid_;
  std::array<uint8_t, 8> eui64_;
  std::atomic<bool> removed_{false};
  std::atomic<const Bdev*> claimed_by_{nullptr};
  RemovedFn removed_fn_ = nullptr;
  void* removed_ctx_ = nullptr;

  // Setup path only: channels come and go under this lock; stats() reads under it.
  mutable std::mutex channels_mutex_;
  mutable IntrusiveList<IoChannel, &IoChannel::bdev_node_> channels_;  // stats() walks it
  IoStats closed_stats_;
};

}  // namespace nvmf::bdev
