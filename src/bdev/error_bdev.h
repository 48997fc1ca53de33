// The error backend: a bdev on top of another one (its base) that fails chosen commands, for
// tests of error handling, retries, aborts and timeouts (SPDK's bdev_error).
//
// Geometry, supported I/O types, queue depth and buffer alignment are the base's; each channel
// opens one channel of the base on its own thread. I/O the rule does not hit passes through to
// the base untouched. The rule (ErrorInjection) picks I/O types, then of the matching I/Os
// every every_nth-th one, `count` times at most; a hit I/O never reaches the base and either
//   fail  completes at the next poll with the rule's NVMe status (IoStatus::nvme_error;
//         default SCT 0h / SC 06h Internal Error, what SPDK's error bdev answers), or
//   drop  is held: it completes only when release_dropped() says how (sent to the base after
//         all, or failed with Command Abort Requested as SPDK's error bdev on reset), or as
//         aborted when its channel is destroyed, so teardown stays bounded.
//
// The rule belongs to the bdev, not a channel: "fail the next 3 reads" counts reads from every
// reactor. It can be replaced at any time from any thread (inject / clear); I/Os submitted
// while it changes see the old rule, the new one, or none. A channel with dropped I/O keeps
// them outstanding (interrupt_fd() is -1: the reactor keeps polling).
//
// The base must outlive the error bdev, which claims it (Bdev::claim) while it lives.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "bdev/bdev.h"

namespace nvmf::bdev {

enum class ErrorAction : uint8_t {
  fail,  // complete with the rule's NVMe status
  drop,  // hold until release_dropped() or channel destruction (a command that never completes)
};
const char* error_action_name(ErrorAction action) noexcept;  // "fail", "drop"

struct ErrorInjection {
  IoTypeMask io_types = 0;  // the types the rule hits; 0: none (no injection)
  ErrorAction action = ErrorAction::fail;
  uint64_t count = 0;      // hits before the rule turns itself off; 0: no limit
  uint64_t every_nth = 1;  // of the matching I/Os, hit the every_nth-th, 2*every_nth-th, ...
  uint8_t sct = 0;         // fail: Status Code Type, 0..7 (0: Generic Command Status)
  uint8_t sc = 0x06;       // fail: Status Code (06h: Internal Error); not Successful Completion
  bool dnr = false;        // fail: Do Not Retry (a host retries a status without it)
  friend bool operator==(const ErrorInjection&, const ErrorInjection&) = default;
};

// What release_dropped() does with the dropped I/O of every channel.
enum class DroppedFate : uint8_t {
  submit,  // send them to the base: they complete as if only delayed
  abort,   // fail them with Command Abort Requested (SCT 0h, SC 07h)
};

struct ErrorBdevOpts {
  std::string name{};          // required, unique in a BdevRegistry
  std::string base_bdev{};     // the base's name, as the configuration gives it (informational:
                               // create_error_bdev takes the base itself)
  ErrorInjection injection{};  // the rule from the start (default: none)
  Uuid uuid{};                 // all zero: generated at creation
  const Clock* clock = &TscClock::instance();  // latency statistics
};

// Counts since creation (any thread).
struct ErrorBdevCounters {
  uint64_t failed = 0;   // I/Os the rule failed
  uint64_t dropped = 0;  // I/Os the rule dropped
};

class ErrorChannel;

class ErrorBdev final : public Bdev {
 public:
  ~ErrorBdev() override;

  Result<std::unique_ptr<IoChannel>> create_channel() noexcept override;

  Bdev& base() const noexcept { return base_; }

  // Any thread: replaces the rule; its count and every_nth counting start over. Errors:
  // invalid_argument (unknown io_types bits, every_nth 0, sct above 7, or a fail status of
  // Successful Completion; the detail names the field): the rule stays as it was.
  [[nodiscard]] Result<void> inject(const ErrorInjection& injection) noexcept;
  // Any thread: no rule from now on. Dropped I/O stays dropped (see release_dropped).
  void clear() noexcept;
  // Any thread: the rule as last set (with its configured count, not what is left of it).
  ErrorInjection injection() const noexcept;
  // Any thread: every I/O dropped so far meets `fate` at its channel's next poll.
  void release_dropped(DroppedFate fate) noexcept;
  ErrorBdevCounters counters() const noexcept;

  // Use create_error_bdev().
  ErrorBdev(Params params, Bdev& base) noexcept;

 private:
  friend class ErrorChannel;
  friend Result<std::unique_ptr<Bdev>> create_error_bdev(const ErrorBdevOpts& opts,
                                                         Bdev& base) noexcept;

  enum class Verdict : uint8_t { pass, fail, drop };
  // Data path, any channel: whether the rule hits an I/O of `type`; for fail, the status.
  Verdict decide(IoType type, uint8_t* sct, uint8_t* sc, bool* dnr) noexcept;

  Bdev& base_;
  bool holds_claim_ = false;  // released by the destructor

  // The rule as channels read it: a sequence lock without retries. version_ is odd while
  // inject() writes; a reader that sees it odd or changed lets its I/O pass.
  std::atomic<uint64_t> version_{0};
  std::atomic<uint32_t> io_types_{0};
  std::atomic<uint32_t> status_word_{0};  // action, sct, sc, dnr, limited (pack_status)
  std::atomic<uint64_t> every_nth_{1};
  std::atomic<uint64_t> matched_{0};    // matching I/Os seen since the rule was set
  std::atomic<uint64_t> remaining_{0};  // hits left when the rule is limited
  std::atomic<uint64_t> failed_{0};
  std::atomic<uint64_t> dropped_{0};
  // release_dropped(): channels compare the generation with the one they last handled.
  std::atomic<uint64_t> release_generation_{0};
  std::atomic<uint8_t> release_fate_{0};

  mutable std::mutex setup_mutex_;  // inject() / injection(); never taken on the data path
  ErrorInjection injection_{};
};

// Makes an error bdev on `base` (setup path) and claims the base. Errors: invalid_argument
// (name, clock, the injection's fields: the detail names the field), busy (base_bdev: already
// claimed by another bdev), no_memory.
[[nodiscard]] Result<std::unique_ptr<Bdev>> create_error_bdev(const ErrorBdevOpts& opts,
                                                              Bdev& base) noexcept;

// The error bdev behind `bdev`, or nullptr when it is of another backend.
ErrorBdev* as_error_bdev(Bdev& bdev) noexcept;
const ErrorBdev* as_error_bdev(const Bdev& bdev) noexcept;

std::string opts_to_json(const ErrorBdevOpts& opts);

}  // namespace nvmf::bdev
