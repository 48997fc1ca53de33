// One NBD queue's requests as NVMe commands on one namespace, over the I/O queue pair of the
// reactor that owns the queue. A request larger than one command may carry (the controller's
// MDTS for reads and writes, the library's 65536 blocks for write zeroes and deallocate) is
// split into commands that go out as the queue pair has room, so even a whole-device discard
// (mkfs sends one) never needs more slots than the queue pair has; the request completes when
// its last command has.
//
// Controller loss (daemon.h): hold() makes commands aborted by a queue pair's deletion go out
// again in full later instead of failing; rebind() moves the backend to the namespace and
// queue pair of the reconnected controller and sends what waits; fail_all() ends the hold at
// the loss timeout: what waits, and every later request, fails with EIO.
//
// Owner thread: the reactor's. Nothing here allocates after construction.
#pragma once

#include <cstdint>
#include <vector>

#include "nbd/queue.h"
#include "nvmf/host.h"

namespace nvmf::hostd {

class NamespaceBackend final : public nbd::Backend {
 public:
  // `slots`: the NBD queue's request slots (tags are 0..slots-1). `max_transfer_bytes`: the
  // controller's MDTS (0 = none reported).
  NamespaceBackend(host::Namespace& ns, host::IoQpair& qpair, uint32_t slots,
                   uint32_t max_transfer_bytes);
  void set_queue(nbd::Queue& queue) noexcept { queue_ = &queue; }
  void hold() noexcept { holding_ = true; }
  void rebind(host::Namespace& ns, host::IoQpair& qpair) noexcept;
  void fail_all() noexcept;

  bool submit(const nbd::Request& request) noexcept override;
  int process() noexcept override;

  uint64_t commands_submitted() const noexcept { return commands_submitted_; }

 private:
  struct Slot {
    NamespaceBackend* owner = nullptr;
    uint32_t tag = 0;
    nbd::Op op = nbd::Op::read;
    uint8_t* buffer = nullptr;  // read/write: where the next command's data goes
    uint64_t next_lba = 0;
    uint64_t blocks_left = 0;   // not yet sent
    uint32_t commands_out = 0;  // sent, not yet completed
    int error = 0;              // first failure's errno
    bool redo = false;          // a command was aborted while holding: resend it all
    uint64_t first_lba = 0;     // the request as it came, for a redo
    uint64_t total_blocks = 0;
    uint8_t* first_buffer = nullptr;
    bool queued = false;  // in the waiting ring: commands left to send
  };
  static void on_command_done(void* ctx, const spec::Status& status);
  // Sends commands of `slot` while the queue pair has room (a refused submit other than busy
  // fails the request).
  void send_commands(Slot& slot) noexcept;
  void enqueue(Slot& slot) noexcept;
  Result<void> send_one(Slot& slot, uint32_t blocks) noexcept;
  uint32_t max_blocks(nbd::Op op) const noexcept;
  void finish_if_done(Slot& slot) noexcept;
  void resume_waiting() noexcept;
  void restart(Slot& slot) noexcept;

  host::Namespace* ns_;
  host::IoQpair* qpair_;
  nbd::Queue* queue_ = nullptr;
  uint32_t max_rw_blocks_;
  std::vector<Slot> slots_;
  // Slots with commands still to send, oldest first (a ring of tags: each slot is in it at
  // most once, so `slots` entries are enough).
  std::vector<uint32_t> waiting_;
  uint32_t waiting_head_ = 0;
  uint32_t waiting_count_ = 0;
  uint64_t commands_submitted_ = 0;
  bool holding_ = false;
  bool failed_ = false;  // the controller is lost: every request fails
};

// The errno an NBD reply carries for an NVMe status (the kernel turns any non-zero into an
// I/O error; the value is for the daemon's log and for tests).
int errno_of_status(const spec::Status& status) noexcept;

}  // namespace nvmf::hostd
