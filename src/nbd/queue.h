// One NBD socket's request state machine: the server side of a socket the kernel's nbd driver
// was given (one per hardware queue of /dev/nbdN). Reads request headers and write payloads,
// hands each request to a Backend, writes replies in completion order.
//
// Owner thread: the reactor that created the Queue; every public method (complete() too) is
// called on it (debug builds check). The data path (poll, complete) allocates nothing, takes
// no lock and throws nothing: every slot and its buffer are made by create().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/intrusive_list.h"
#include "common/result.h"
#include "common/util.h"
#include "nbd/wire.h"

namespace nvmf::nbd {

enum class Op : uint8_t { read, write, flush, trim, write_zeroes };
const char* op_name(Op op) noexcept;

// What the backend executes. Valid (aligned, inside the device, within max_request_bytes for
// read/write) by the time the backend sees it: the Queue answers the rest itself.
struct Request {
  Op op;
  uint64_t offset_bytes;
  uint32_t length_bytes;  // 0 for flush; >= 1 block otherwise
  void* buffer;           // read/write: the slot's buffer (length_bytes valid); else nullptr
  bool fua;               // NBD_CMD_FLAG_FUA: complete only once the data is durable
  uint32_t tag;           // give back to Queue::complete(); 0 .. QueueOpts::slots - 1
  bool no_hole;           // write_zeroes: NBD_CMD_FLAG_NO_HOLE, do not deallocate the range
};

// Implemented by the daemon (an NVMe namespace on an I/O queue pair). Virtual once per
// request; per-request work behind it is the daemon's concrete code.
class Backend {
 public:
  virtual ~Backend() = default;
  // Starts `request`; returns false when it cannot now (queue full, reconnecting): the Queue
  // keeps it and retries at a later poll(), in order. After true, the backend calls
  // Queue::complete(tag, errno_value) exactly once (0 = success), from within Queue::poll() ->
  // Backend::process(), from within this submit() itself, or from any code on the same
  // thread. Until then the backend owns request.buffer (it may DMA into it).
  virtual bool submit(const Request& request) noexcept = 0;
  // Reaps completions (calls Queue::complete for them). Returns how many.
  virtual int process() noexcept = 0;
};

struct QueueOpts {
  // Requests in flight on this socket: the kernel's nbd tag set depth is 128 per hw queue,
  // so more slots are never used and fewer stop reading the socket (backpressure).
  uint32_t slots = 128;
  // A read/write above this is answered EINVAL (logged once per queue: the daemon sets the
  // device's max_sectors_kb to this). Each slot's buffer has this size.
  uint32_t max_request_bytes = 128 * 1024;
  // Device size: requests beyond it are answered EINVAL (read, trim) or ENOSPC (write, write
  // zeroes) as proto.md asks. The kernel never sends those; a test peer may. 0: not checked.
  uint64_t size_bytes = 0;
  // Offsets and lengths must be multiples (else EINVAL). A power of two.
  uint32_t block_size_bytes = 512;
  // Writes, trims and write zeroes are answered EPERM (proto.md) when set.
  bool read_only = false;
  // Setup-path allocator for each slot's buffer (the daemon passes Host::dma_alloc); both
  // nullptr = aligned_alloc of 4096-byte aligned memory.
  void* (*alloc)(void* ctx, size_t bytes) = nullptr;
  void (*free)(void* ctx, void* buffer) = nullptr;
  void* alloc_ctx = nullptr;
  // Names the queue in log lines ("nbd0 q1"); empty: "fd N".
  std::string name;
};

// Counters since create(). Requests are counted when their header arrives, by type; bytes
// when they complete successfully.
struct QueueStats {
  uint64_t requests = 0;  // every request header except NBD_CMD_DISC
  uint64_t reads = 0;
  uint64_t writes = 0;
  uint64_t flushes = 0;
  uint64_t trims = 0;
  uint64_t write_zeroes = 0;
  uint64_t errors = 0;  // replies with a non-zero error (the Queue's or the backend's)
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  uint64_t busy_retries = 0;     // Backend::submit() returned false
  uint64_t protocol_errors = 0;  // bad magic, unknown command: the queue stops reading
};

enum class QueueState : uint8_t {
  running,   // reading requests
  draining,  // peer closed, protocol error, DISC or drain(): no new requests; waiting for
             // the ones taken to complete (and their replies to go out if the peer is there)
  closed,    // nothing in flight, nothing to send; the Queue may be destroyed
};
const char* queue_state_name(QueueState state) noexcept;

class Queue {
 public:
  // `fd`: a connected stream socket (made non-blocking here). The Queue owns and closes it,
  // also when create() fails. Errors: invalid_argument (options, fd not a stream socket),
  // no_memory (a slot buffer).
  static Result<std::unique_ptr<Queue>> create(int fd, Backend& backend, const QueueOpts& opts);
  // Requires nothing in flight (asserts; a release build leaks the slot buffers rather than
  // free memory the backend may still write). Frees the slot buffers, closes the fd.
  ~Queue();
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // One round: reads what the socket has (headers and write payloads, partial reads kept),
  // submits to the backend (earlier refused ones first), calls backend.process(), writes
  // replies (partial writes kept; read data after the reply header). Never blocks. Returns
  // work done: requests taken + submitted + completions reaped + replies finished (0 = idle).
  int poll() noexcept;
  // From the backend, once per submitted request. `error`: 0 or a positive errno; values the
  // NBD protocol does not define go out as EIO (EDQUOT and EFBIG as ENOSPC). The reply is
  // written at the next poll() (wants_write() turns true: a completion that came from outside
  // this queue's poll(), e.g. a shared backend's, needs one more).
  void complete(uint32_t tag, int error) noexcept;
  // Stop taking requests (the daemon disconnects the device): in-flight ones finish and are
  // answered if the socket still works.
  void drain() noexcept;

  // Makes the calling thread the owner. create() makes the creating thread the owner; a
  // daemon that creates queues on one thread and polls them on a reactor calls this there.
  void take_ownership() noexcept { owner_.reset_to_current(); }

  QueueState state() const noexcept { return state_; }
  uint32_t in_flight() const noexcept { return in_flight_; }  // submitted, not completed
  int fd() const noexcept { return fd_; }  // for epoll: EPOLLIN, and EPOLLOUT if wants_write()
  bool wants_write() const noexcept;       // replies wait for socket space
  const QueueStats& stats() const noexcept { return stats_; }

 private:
  enum class SlotState : uint8_t {
    free,       // on free_: waits for a request header
    receiving,  // rx_slot_: its write payload is arriving into its buffer
    queued,     // on queued_: waits for Backend::submit() to take it
    in_flight,  // the backend owns it (and its buffer) until complete()
    replying,   // on replies_: its reply waits to be written
  };
  struct Slot {
    ListNode link;  // on free_, queued_ or replies_ (at most one)
    SlotState state = SlotState::free;
    bool discard = false;        // receiving: payload too large, read and dropped (error set)
    uint32_t error = 0;          // the reply's error, decided before the reply is queued
    uint32_t payload_bytes = 0;  // receiving: bytes of payload still to read
    uint8_t handle[8] = {};
    Request request{};
    void* buffer = nullptr;
    wire::SimpleReply reply{};
  };
  using SlotList = IntrusiveList<Slot, &Slot::link>;

  Queue(int fd, Backend& backend, const QueueOpts& opts) noexcept;
  Result<void> allocate_buffers() noexcept;

  // Receive side.
  int receive() noexcept;
  size_t recv_some(void* to, size_t bytes) noexcept;
  bool fill_staging() noexcept;
  bool receive_payload() noexcept;
  void take_header() noexcept;
  uint32_t check_request(Slot& slot, wire::Command type, uint16_t flags) noexcept;
  uint32_t check_range(Slot& slot, bool is_write) noexcept;
  void payload_done(Slot& slot) noexcept;
  void protocol_error(const char* what, uint32_t value) noexcept;
  void count_request(wire::Command type) noexcept;

  // Backend side.
  int submit_queued() noexcept;
  void finish(Slot& slot, uint32_t error) noexcept;

  // Send side.
  int send_replies() noexcept;
  int reply_consumed(size_t bytes) noexcept;
  static size_t reply_bytes(const Slot& slot) noexcept;

  // Lifecycle.
  void start_draining(bool peer_gone) noexcept;
  void release(Slot& slot) noexcept;
  void update_closed() noexcept;
  const char* name() const noexcept { return name_.c_str(); }

  int fd_;
  Backend& backend_;
  QueueOpts opts_;
  std::string name_;
  ThreadOwner owner_;
  QueueState state_ = QueueState::running;
  bool peer_gone_ = false;  // EOF or a socket error: nothing more is read or written
  bool logged_too_large_ = false;
  uint32_t in_flight_ = 0;

  std::vector<Slot> slots_;
  SlotList free_;
  SlotList queued_;              // refused or not yet offered to the backend, in arrival order
  SlotList replies_;             // completed, in completion order; the front may be partly written
  size_t reply_sent_bytes_ = 0;  // of the front of replies_
  Slot* rx_slot_ = nullptr;      // the write whose payload is arriving

  // Received bytes not yet parsed: headers, and payload bytes that came with them (one recv
  // often brings many headers, and a small write's payload with its header).
  std::vector<uint8_t> staging_;
  size_t staging_begin_ = 0;
  size_t staging_end_ = 0;

  QueueStats stats_;
};

// The errno a reply carries for a backend's error: proto.md allows EPERM, EIO, ENOMEM,
// EINVAL, ENOSPC, EOVERFLOW, ENOTSUP, ESHUTDOWN; EDQUOT and EFBIG become ENOSPC, the rest EIO.
uint32_t reply_error_of(int error) noexcept;

}  // namespace nvmf::nbd
