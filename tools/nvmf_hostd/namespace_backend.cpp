#include "namespace_backend.h"

#include <algorithm>
#include <cerrno>

#include "spec/status.h"

namespace nvmf::hostd {

namespace {

// The library refuses more blocks than this in one command (include/nvmf/host.h).
constexpr uint32_t kLibraryMaxBlocks = 65536;
// Without an MDTS, reads and writes still go out in pieces of this size.
constexpr uint32_t kDefaultTransferBytes = 128 * 1024;

}  // namespace

int errno_of_status(const spec::Status& status) noexcept {
  if (status.is_success()) return 0;
  if (status.sct == spec::sct::generic) {
    switch (status.sc) {
      case spec::sc_generic::lba_out_of_range:
      case spec::sc_generic::capacity_exceeded:
        return ENOSPC;
      case spec::sc_generic::invalid_field:
        return EINVAL;
      default:
        break;
    }
  }
  return EIO;
}

NamespaceBackend::NamespaceBackend(host::Namespace& ns, host::IoQpair& qpair, uint32_t slots,
                                   uint32_t max_transfer_bytes)
    : ns_(&ns), qpair_(&qpair) {
  const uint32_t transfer = max_transfer_bytes != 0 ? max_transfer_bytes : kDefaultTransferBytes;
  max_rw_blocks_ = std::max<uint32_t>(1, std::min(transfer / ns.block_size(), kLibraryMaxBlocks));
  slots_.resize(slots);    // setup-path
  waiting_.resize(slots);  // setup-path
  for (uint32_t tag = 0; tag < slots; ++tag) {
    slots_[tag].owner = this;
    slots_[tag].tag = tag;
  }
}

uint32_t NamespaceBackend::max_blocks(nbd::Op op) const noexcept {
  return op == nbd::Op::read || op == nbd::Op::write ? max_rw_blocks_ : kLibraryMaxBlocks;
}

bool NamespaceBackend::submit(const nbd::Request& request) noexcept {
  if (request.tag >= slots_.size()) {
    queue_->complete(request.tag, EINVAL);  // cannot happen with a Queue of `slots` slots
    return true;
  }
  if (failed_) {
    queue_->complete(request.tag, EIO);
    return true;
  }
  Slot& slot = slots_[request.tag];
  slot.op = request.op;
  slot.first_buffer = static_cast<uint8_t*>(request.buffer);
  slot.first_lba = request.offset_bytes / ns_->block_size();
  slot.total_blocks = request.length_bytes / ns_->block_size();
  if (request.op == nbd::Op::flush) slot.total_blocks = 1;  // one command, no range
  slot.commands_out = 0;
  slot.queued = false;
  restart(slot);
  if (waiting_count_ != 0 || holding_) {
    // Requests already waiting go first, so that a large one is not overtaken forever; while
    // holding, the queue pair is the lost controller's and takes nothing.
    enqueue(slot);
    return true;
  }
  send_commands(slot);
  if (slot.commands_out == 0 && slot.error == 0) return false;  // busy: the Queue retries
  if (slot.blocks_left != 0 && slot.error == 0) enqueue(slot);
  finish_if_done(slot);
  return true;
}

void NamespaceBackend::restart(Slot& slot) noexcept {
  slot.buffer = slot.first_buffer;
  slot.next_lba = slot.first_lba;
  slot.blocks_left = slot.total_blocks;
  slot.error = 0;
  slot.redo = false;
}

void NamespaceBackend::enqueue(Slot& slot) noexcept {
  slot.queued = true;
  waiting_[(waiting_head_ + waiting_count_) % waiting_.size()] = slot.tag;
  ++waiting_count_;
}

void NamespaceBackend::send_commands(Slot& slot) noexcept {
  while (slot.blocks_left != 0 && slot.error == 0) {
    const uint32_t blocks =
        static_cast<uint32_t>(std::min<uint64_t>(slot.blocks_left, max_blocks(slot.op)));
    auto sent = send_one(slot, blocks);
    if (!sent) {
      if (sent.error().code == Errc::busy) return;  // the queue pair is full
      slot.error = sent.error().code == Errc::invalid_argument ? EINVAL : EIO;
      slot.blocks_left = 0;
      return;
    }
    ++slot.commands_out;
    ++commands_submitted_;
    slot.next_lba += blocks;
    slot.blocks_left -= blocks;
    if (slot.op == nbd::Op::read || slot.op == nbd::Op::write) {
      slot.buffer += uint64_t{blocks} * ns_->block_size();
    }
  }
}

Result<void> NamespaceBackend::send_one(Slot& slot, uint32_t blocks) noexcept {
  switch (slot.op) {
    case nbd::Op::read:
      return ns_->read(*qpair_, slot.buffer, slot.next_lba, blocks, on_command_done, &slot);
    case nbd::Op::write:
      return ns_->write(*qpair_, slot.buffer, slot.next_lba, blocks, on_command_done, &slot);
    case nbd::Op::flush:
      return ns_->flush(*qpair_, on_command_done, &slot);
    case nbd::Op::trim:
      return ns_->deallocate(*qpair_, slot.next_lba, blocks, on_command_done, &slot);
    case nbd::Op::write_zeroes:
      return ns_->write_zeroes(*qpair_, slot.next_lba, blocks, on_command_done, &slot);
  }
  return Unexpected(Errc::invalid_argument, "unknown op");
}

void NamespaceBackend::on_command_done(void* ctx, const spec::Status& status) {
  auto& slot = *static_cast<Slot*>(ctx);
  NamespaceBackend& self = *slot.owner;
  --slot.commands_out;
  if (self.holding_ && status.sct == spec::sct::generic &&
      status.sc == spec::sc_generic::aborted_sq_deletion) {
    // The queue pair went with the lost controller: the whole request goes out again on the
    // next one (reads and writes of the same blocks are safe to repeat).
    slot.redo = true;
    slot.blocks_left = 0;
  } else if (slot.error == 0) {
    slot.error = errno_of_status(status);
  }
  if (slot.error != 0) slot.blocks_left = 0;  // send no more of a failed request
  if (slot.redo) {
    if (slot.commands_out != 0) return;
    self.restart(slot);
    if (!slot.queued) self.enqueue(slot);
    return;
  }
  self.finish_if_done(slot);
}

void NamespaceBackend::finish_if_done(Slot& slot) noexcept {
  if (slot.queued || slot.redo || slot.commands_out != 0) return;
  if (slot.blocks_left != 0 && slot.error == 0) return;
  queue_->complete(slot.tag, slot.error);
}

void NamespaceBackend::rebind(host::Namespace& ns, host::IoQpair& qpair) noexcept {
  ns_ = &ns;
  qpair_ = &qpair;
  holding_ = false;
  resume_waiting();
}

void NamespaceBackend::fail_all() noexcept {
  holding_ = false;
  failed_ = true;
  for (Slot& slot : slots_) {
    if (!slot.redo) continue;
    slot.redo = false;  // its last aborted command, when it comes, fails it
    slot.error = EIO;
  }
  while (waiting_count_ != 0) {
    Slot& slot = slots_[waiting_[waiting_head_]];
    waiting_head_ = static_cast<uint32_t>((waiting_head_ + 1) % waiting_.size());
    --waiting_count_;
    slot.queued = false;
    slot.blocks_left = 0;
    if (slot.error == 0) slot.error = EIO;
    finish_if_done(slot);
  }
}

void NamespaceBackend::resume_waiting() noexcept {
  if (holding_) return;  // the queue pair is the lost controller's: wait for rebind()
  while (waiting_count_ != 0) {
    Slot& slot = slots_[waiting_[waiting_head_]];
    send_commands(slot);
    if (slot.blocks_left != 0 && slot.error == 0) return;  // the queue pair is full again
    waiting_head_ = static_cast<uint32_t>((waiting_head_ + 1) % waiting_.size());
    --waiting_count_;
    slot.queued = false;
    finish_if_done(slot);
  }
}

int NamespaceBackend::process() noexcept {
  if (failed_) return 0;
  const int done = qpair_->process_completions();
  if (waiting_count_ != 0) resume_waiting();
  return done;
}

}  // namespace nvmf::hostd
