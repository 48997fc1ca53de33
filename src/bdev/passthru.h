// Pieces of the bdevs that are built on another bdev (delay, error); not part of the layer's
// interface. Such a bdev's channel owns one channel of its base, made on the same thread, and
// sends the base a ShadowIo of its own for each caller I/O: the caller's BdevIo stays on the
// wrapper's queues (its channel_node and backend_word are the wrapper's), the base fills in
// the shadow's, and the shadow's callback brings the result back. One shadow per slot of the
// queue depth, made with the channel: the data path allocates nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "bdev/bdev_internal.h"

namespace nvmf::bdev::detail {

struct ShadowIo : BdevIo {
  BdevIo* original = nullptr;  // the caller's I/O this one carries to the base
};

class ShadowPool {
 public:
  // Setup path: `count` shadows, each calling `done(shadow, ctx)` when the base completes it.
  ShadowPool(uint32_t count, IoCompletionFn done, void* ctx) : slots_(count) {  // setup-path
    for (ShadowIo& slot : slots_) {
      slot.done = done;
      slot.done_ctx = ctx;
      free_.push_back(slot);
    }
  }
  ShadowPool(const ShadowPool&) = delete;
  ShadowPool& operator=(const ShadowPool&) = delete;
  ~ShadowPool() { free_.clear(); }

  // A shadow describing `original` (type, range and segments), or nullptr when every one is
  // out. A wrapper whose depth is its base's never runs out: each shadow out belongs to an
  // I/O of the wrapper still outstanding.
  ShadowIo* take(BdevIo& original) noexcept {
    BdevIo* free = free_.pop_front();
    if (free == nullptr) return nullptr;
    auto* shadow = static_cast<ShadowIo*>(free);
    shadow->type = original.type;
    shadow->offset_blocks = original.offset_blocks;
    shadow->num_blocks = original.num_blocks;
    shadow->iov = original.iov;
    shadow->iovcnt = original.iovcnt;
    shadow->original = &original;
    return shadow;
  }

  // Back on the free list; the base has delivered it (its callback runs) or refused it.
  void give_back(ShadowIo& shadow) noexcept {
    shadow.original = nullptr;
    free_.push_back(shadow);
  }

  // The result the base gave `shadow`, onto the caller's I/O (complete() sets status and
  // errno from its arguments; the NVMe status travels in the fields).
  static void copy_result(const ShadowIo& shadow, BdevIo& original) noexcept {
    original.status = shadow.status;
    original.os_errno = shadow.os_errno;
    original.nvme_sct = shadow.nvme_sct;
    original.nvme_sc = shadow.nvme_sc;
    original.nvme_dnr = shadow.nvme_dnr;
  }

 private:
  std::vector<ShadowIo> slots_;
  IoQueue free_;  // through BdevIo::channel_node, which the base uses only while it holds one
};

// The base's channel for a wrapper's channel on the calling thread; errors are the base's.
inline Result<std::unique_ptr<IoChannel>> open_base_channel(Bdev& base, const std::string& name) {
  auto channel = base.create_channel();
  if (!channel) {
    NVMF_ERRLOG(bdev, "bdev '%s': no channel of its base '%s': %s", name.c_str(),
                base.name().c_str(), channel.error().detail);
  }
  return channel;
}

// Checks shared by the wrappers' create functions: the name, a clock, and a base that no
// other bdev claims yet (the claim itself is taken once the wrapper exists).
inline Result<void> validate_wrapper_opts(const char* backend, const std::string& name,
                                          const Bdev& base, const Clock* clock) noexcept {
  if (name.empty() || name.size() > kNameLengthMax) {
    NVMF_ERRLOG(bdev, "%s bdev: name must be 1 to %zu characters (got %zu)", backend,
                kNameLengthMax, name.size());
    return Unexpected(Errc::invalid_argument, "name");
  }
  if (clock == nullptr) {
    NVMF_ERRLOG(bdev, "%s bdev '%s': clock is null", backend, name.c_str());
    return Unexpected(Errc::invalid_argument, "clock");
  }
  if (const Bdev* user = base.claimed_by(); user != nullptr) {
    NVMF_ERRLOG(bdev, "%s bdev '%s': base '%s' is already the base of '%s'", backend, name.c_str(),
                base.name().c_str(), user->name().c_str());
    return Unexpected(Errc::busy, "base_bdev: already the base of another bdev");
  }
  return {};
}

// A wrapper's parameters: its own backend, name, UUID and clock; the geometry, I/O types,
// depth and alignment of its base, which it passes every I/O to.
inline Bdev::Params wrapper_params(const char* backend, const std::string& name, const Uuid& uuid,
                                   const Bdev& base, const Clock* clock) {
  return Bdev::Params{.backend_name = backend,
                      .name = name,
                      .block_size_bytes = base.block_size_bytes(),
                      .block_count = base.block_count(),
                      .uuid = uuid,
                      .io_types = base.supported_io_types(),
                      .queue_depth_max = base.queue_depth_max(),
                      .buffer_alignment_bytes = base.buffer_alignment_bytes(),
                      .clock = clock};
}

// Takes the claim on `base` for the new `wrapper`, which releases it when destroyed.
inline Result<void> claim_base(Bdev& base, const Bdev& wrapper) noexcept {
  if (auto claimed = base.claim(wrapper); !claimed) {
    // validate_wrapper_opts saw it free; only a racing claim on another thread gets here.
    return Unexpected(Errc::busy, "base_bdev: already the base of another bdev");
  }
  return {};
}

}  // namespace nvmf::bdev::detail
