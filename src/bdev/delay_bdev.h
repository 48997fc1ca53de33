// The delay backend: a bdev on top of another one (its base) that adds latency to each I/O
// and can stall all of its I/O on demand; for tests of timeouts, aborts and slow namespaces
// (SPDK's bdev_delay, simplified to fixed latencies plus jitter).
//
// Geometry, supported I/O types, queue depth and buffer alignment are the base's; each channel
// opens one channel of the base on its own thread. An I/O goes to the base at submit() and its
// completion, with the base's status and data, reaches the caller `latency` after the base
// delivered it, at the first poll() from then on:
//   read                          read_latency_us
//   write, write_zeroes, unmap    write_latency_us (they change data)
//   flush                         flush_latency_us
// plus, when jitter_us is set, a uniform random 0..jitter_us of its own per I/O. Completions
// may then overtake one another: order is kept only where the base keeps it and the delays
// agree (equal delays keep the base's order).
//
// stall() holds every I/O of the bdev on every channel, none failed: new ones wait before the
// base (in submission order), and completions wait after it. release() lets them go at each
// channel's next poll: the held ones go to the base, the completions already due are
// delivered. Destroying a channel completes what it holds as aborted, after the base channel's
// own teardown: bounded by the base's teardown plus a walk of the held I/O.
//
// The base must outlive the delay bdev, which claims it (Bdev::claim) while it lives.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "bdev/bdev.h"

namespace nvmf::bdev {

// Each latency and the jitter: at most 60 s (hosts time an I/O out after 30 s by default, so
// more is a unit mistake).
inline constexpr uint64_t kDelayLatencyMaxUs = uint64_t{60} * 1000 * 1000;

struct DelayLatency {
  uint64_t read_latency_us = 0;
  uint64_t write_latency_us = 0;  // also write_zeroes and unmap
  uint64_t flush_latency_us = 0;
  uint64_t jitter_us = 0;  // 0: every I/O of a type gets exactly its latency
};

struct DelayBdevOpts {
  std::string name{};       // required, unique in a BdevRegistry
  std::string base_bdev{};  // the base's name, as the configuration gives it (informational:
                            // create_delay_bdev takes the base itself)
  DelayLatency latency{};
  Uuid uuid{};                                 // all zero: generated at creation
  const Clock* clock = &TscClock::instance();  // delays and latency; tests use FakeClock (the
                                               // base's clock should be the same one)
};

class DelayChannel;

class DelayBdev final : public Bdev {
 public:
  ~DelayBdev() override;

  Result<std::unique_ptr<IoChannel>> create_channel() noexcept override;

  Bdev& base() const noexcept { return base_; }

  // Any thread. While stalled, no I/O of this bdev reaches its base or its caller.
  void stall() noexcept { stalled_.store(true, std::memory_order_release); }
  void release() noexcept { stalled_.store(false, std::memory_order_release); }
  bool stalled() const noexcept { return stalled_.load(std::memory_order_acquire); }

  // Any thread: the latencies for completions the base delivers from now on. Errors:
  // invalid_argument (a value above kDelayLatencyMaxUs; the detail names it).
  [[nodiscard]] Result<void> set_latency(const DelayLatency& latency) noexcept;
  DelayLatency latency() const noexcept;

  // Use create_delay_bdev().
  DelayBdev(Params params, Bdev& base, const DelayLatency& latency) noexcept;

 private:
  friend class DelayChannel;

  friend Result<std::unique_ptr<Bdev>> create_delay_bdev(const DelayBdevOpts& opts,
                                                         Bdev& base) noexcept;

  Bdev& base_;
  bool holds_claim_ = false;  // released by the destructor
  std::atomic<bool> stalled_{false};
  // Nanoseconds, read by every channel for each completion (relaxed: a change may reach an
  // I/O a little late, never tear a value).
  std::atomic<uint64_t> read_latency_ns_{0};
  std::atomic<uint64_t> write_latency_ns_{0};
  std::atomic<uint64_t> flush_latency_ns_{0};
  std::atomic<uint64_t> jitter_ns_{0};
};

// Makes a delay bdev on `base` (setup path) and claims the base. Errors: invalid_argument
// (name, clock, a latency: the detail names the field), busy (base_bdev: already claimed by
// another bdev), no_memory.
[[nodiscard]] Result<std::unique_ptr<Bdev>> create_delay_bdev(const DelayBdevOpts& opts,
                                                              Bdev& base) noexcept;

// The delay bdev behind `bdev`, or nullptr when it is of another backend.
DelayBdev* as_delay_bdev(Bdev& bdev) noexcept;
const DelayBdev* as_delay_bdev(const Bdev& bdev) noexcept;

std::string opts_to_json(const DelayBdevOpts& opts);

}  // namespace nvmf::bdev
