#include "bdev/error_bdev.h"

#include <algorithm>
#include <cinttypes>
#include <new>

#include "bdev/passthru.h"

namespace nvmf::bdev {

namespace {

// Status Code Type is three bits of the Status Field (NVMe base spec, "Status Field").
constexpr uint8_t kSctMax = 7;
// What release_dropped(DroppedFate::abort) answers: Generic Command Status, Command Abort
// Requested, as SPDK's error bdev completes its pending I/O on reset (ABORTED).
constexpr uint8_t kSctGeneric = 0;
constexpr uint8_t kScAbortRequested = 0x07;

// ErrorBdev::status_word_: everything a hit needs besides the counts, in one word so that it is
// read in one load.
constexpr uint32_t kActionDrop = 1u << 0;  // else fail
constexpr uint32_t kDnr = 1u << 1;
constexpr uint32_t kLimited = 1u << 2;  // count != 0: remaining_ counts down
constexpr unsigned kSctShift = 8;
constexpr unsigned kScShift = 16;

uint32_t pack_status(const ErrorInjection& injection) noexcept {
  uint32_t word = 0;
  if (injection.action == ErrorAction::drop) word |= kActionDrop;
  if (injection.dnr) word |= kDnr;
  if (injection.count != 0) word |= kLimited;
  word |= uint32_t{injection.sct} << kSctShift;
  word |= uint32_t{injection.sc} << kScShift;
  return word;
}

Result<void> validate_injection(const std::string& name, const ErrorInjection& injection) noexcept {
  if ((injection.io_types & ~kAllIoTypes) != 0) {
    NVMF_ERRLOG(bdev, "error bdev '%s': io_types 0x%" PRIx32 " has unknown bits", name.c_str(),
                injection.io_types);
    return Unexpected(Errc::invalid_argument, "io_types");
  }
  if (injection.every_nth == 0) {
    NVMF_ERRLOG(bdev, "error bdev '%s': every_nth is 0 (1 hits every matching I/O)", name.c_str());
    return Unexpected(Errc::invalid_argument, "every_nth");
  }
  if (injection.action != ErrorAction::fail && injection.action != ErrorAction::drop) {
    return Unexpected(Errc::invalid_argument, "action");
  }
  if (injection.sct > kSctMax) {
    NVMF_ERRLOG(bdev, "error bdev '%s': sct %u is above %u", name.c_str(), injection.sct, kSctMax);
    return Unexpected(Errc::invalid_argument, "sct");
  }
  if (injection.sct == 0 && injection.sc == 0) {
    NVMF_ERRLOG(bdev, "error bdev '%s': sct 0 / sc 0 is Successful Completion, not a failure",
                name.c_str());
    return Unexpected(Errc::invalid_argument, "sc");
  }
  return {};
}

}  // namespace

const char* error_action_name(ErrorAction action) noexcept {
  return action == ErrorAction::drop ? "drop" : "fail";
}

// Where a caller's I/O is while the channel owns it:
//   at the base  a shadow carries it (the caller's BdevIo is on no list)
//   failed_      hit by the rule (or a dropped one aborted): its status is in the BdevIo,
//                delivered at the next poll
//   dropped_     hit by a drop rule: waits for release_dropped() or the destructor
class ErrorChannel final : public IoChannel {
 public:
  ErrorChannel(ErrorBdev& bdev, std::unique_ptr<IoChannel> base) noexcept
      : IoChannel(bdev),
        bdev_(bdev),
        shadows_(bdev.queue_depth_max(), base_done, this),
        base_(std::move(base)),
        release_seen_(bdev.release_generation_.load(std::memory_order_acquire)) {}

  ~ErrorChannel() override {
    owner().check();
    now_ns_ = clock().now_ns();
    closing_ = true;
    // The base's teardown completes what it still holds: base_done aborts those.
    base_.reset();
    while (BdevIo* io = failed_.pop_front()) complete(*io, IoStatus::aborted, 0, now_ns_);
    while (BdevIo* io = dropped_.pop_front()) complete(*io, IoStatus::aborted, 0, now_ns_);
  }

 private:
  Result<void> queue_io(BdevIo& io) noexcept override {
    uint8_t sct = 0;
    uint8_t sc = 0;
    bool dnr = false;
    switch (bdev_.decide(io.type, &sct, &sc, &dnr)) {
      case ErrorBdev::Verdict::pass:
        return send_to_base(io);
      case ErrorBdev::Verdict::fail:
        fail_later(io, sct, sc, dnr);
        return {};
      case ErrorBdev::Verdict::drop:
        dropped_.push_back(io);
        return {};
    }
    return send_to_base(io);
  }

  unsigned poll_completions(unsigned budget) noexcept override {
    now_ns_ = clock().now_ns();
    const uint64_t generation = bdev_.release_generation_.load(std::memory_order_acquire);
    if (generation != release_seen_) {
      release_seen_ = generation;
      release(static_cast<DroppedFate>(bdev_.release_fate_.load(std::memory_order_relaxed)));
    }
    unsigned delivered = base_->poll(budget);  // base_done completes each one
    // Only I/Os failed before this point: one resubmitted from a callback waits for the next.
    const size_t limit = std::min<size_t>(budget - delivered, failed_.size());
    for (size_t i = 0; i < limit; ++i) {
      BdevIo& io = *failed_.pop_front();
      complete(io, io.status, io.os_errno, now_ns_);
      ++delivered;
    }
    return delivered;
  }

  void release(DroppedFate fate) noexcept {
    while (BdevIo* io = dropped_.pop_front()) {
      if (fate == DroppedFate::abort) {
        fail_later(*io, kSctGeneric, kScAbortRequested, false);
      } else if (Result<void> sent = send_to_base(*io); !sent) {
        // Cannot happen with the base's geometry and depth; fail it rather than lose it.
        io->status = IoStatus::io_error;
        io->os_errno = errc_to_errno(sent.error().code);
        failed_.push_back(*io);
      }
    }
  }

  void fail_later(BdevIo& io, uint8_t sct, uint8_t sc, bool dnr) noexcept {
    io.status = IoStatus::nvme_error;
    io.nvme_sct = sct;
    io.nvme_sc = sc;
    io.nvme_dnr = dnr;
    failed_.push_back(io);
  }

  Result<void> send_to_base(BdevIo& io) noexcept {
    detail::ShadowIo* shadow = shadows_.take(io);
    assert(shadow != nullptr && "a shadow per outstanding I/O");
    Result<void> sent = base_->submit(*shadow);
    if (!sent) shadows_.give_back(*shadow);
    return sent;
  }

  static void base_done(BdevIo& done, void* ctx) {
    auto& channel = *static_cast<ErrorChannel*>(ctx);
    auto& shadow = static_cast<detail::ShadowIo&>(done);
    BdevIo& io = *shadow.original;
    detail::ShadowPool::copy_result(shadow, io);
    channel.shadows_.give_back(shadow);
    if (channel.closing_) {
      channel.complete(io, IoStatus::aborted, 0, channel.now_ns_);
      return;
    }
    channel.complete(io, io.status, io.os_errno, channel.now_ns_);
  }

  ErrorBdev& bdev_;
  detail::ShadowPool shadows_;
  detail::IoQueue failed_;
  detail::IoQueue dropped_;
  std::unique_ptr<IoChannel> base_;
  uint64_t release_seen_;  // the release_dropped() generation this channel last handled
  uint64_t now_ns_ = 0;    // read once per poll (and in the destructor) for completions
  bool closing_ = false;   // in the destructor: what the base gives back completes as aborted
};

ErrorBdev::ErrorBdev(Params params, Bdev& base) noexcept : Bdev(std::move(params)), base_(base) {}

ErrorBdev::~ErrorBdev() {
  if (holds_claim_) base_.release_claim(*this);
}

ErrorBdev::Verdict ErrorBdev::decide(IoType type, uint8_t* sct, uint8_t* sc, bool* dnr) noexcept {
  const uint64_t version = version_.load(std::memory_order_acquire);
  if ((version & 1) != 0) return Verdict::pass;  // inject() is writing the rule
  if ((io_types_.load(std::memory_order_relaxed) & io_type_bit(type)) == 0) return Verdict::pass;
  const uint32_t word = status_word_.load(std::memory_order_relaxed);
  const uint64_t every_nth = every_nth_.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (version_.load(std::memory_order_relaxed) != version) return Verdict::pass;

  const uint64_t seen = matched_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (seen % every_nth != 0) return Verdict::pass;
  if ((word & kLimited) != 0) {
    uint64_t left = remaining_.load(std::memory_order_relaxed);
    do {
      if (left == 0) return Verdict::pass;  // used up
    } while (!remaining_.compare_exchange_weak(left, left - 1, std::memory_order_relaxed));
  }
  if ((word & kActionDrop) != 0) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return Verdict::drop;
  }
  failed_.fetch_add(1, std::memory_order_relaxed);
  *sct = static_cast<uint8_t>(word >> kSctShift);
  *sc = static_cast<uint8_t>(word >> kScShift);
  *dnr = (word & kDnr) != 0;
  return Verdict::fail;
}

Result<void> ErrorBdev::inject(const ErrorInjection& injection) noexcept {
  if (Result<void> valid = validate_injection(name(), injection); !valid) return valid;
  std::lock_guard<std::mutex> lock(setup_mutex_);
  const uint64_t version = version_.load(std::memory_order_relaxed);
  version_.store(version + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  io_types_.store(injection.io_types, std::memory_order_relaxed);
  status_word_.store(pack_status(injection), std::memory_order_relaxed);
  every_nth_.store(injection.every_nth, std::memory_order_relaxed);
  matched_.store(0, std::memory_order_relaxed);
  remaining_.store(injection.count, std::memory_order_relaxed);
  version_.store(version + 2, std::memory_order_release);
  injection_ = injection;
  if (injection.io_types != 0) {
    NVMF_INFOLOG(bdev,
                 "error bdev '%s': %s io_types 0x%" PRIx32 ", every %" PRIu64 ", count %" PRIu64
                 ", sct %u sc 0x%02x%s",
                 name().c_str(), error_action_name(injection.action), injection.io_types,
                 injection.every_nth, injection.count, injection.sct, injection.sc,
                 injection.dnr ? " dnr" : "");
  }
  return {};
}

void ErrorBdev::clear() noexcept { (void)inject(ErrorInjection{}); }

ErrorInjection ErrorBdev::injection() const noexcept {
  std::lock_guard<std::mutex> lock(setup_mutex_);
  return injection_;
}

void ErrorBdev::release_dropped(DroppedFate fate) noexcept {
  std::lock_guard<std::mutex> lock(setup_mutex_);
  release_fate_.store(static_cast<uint8_t>(fate), std::memory_order_relaxed);
  release_generation_.fetch_add(1, std::memory_order_release);
}

ErrorBdevCounters ErrorBdev::counters() const noexcept {
  return ErrorBdevCounters{.failed = failed_.load(std::memory_order_relaxed),
                           .dropped = dropped_.load(std::memory_order_relaxed)};
}

Result<std::unique_ptr<IoChannel>> ErrorBdev::create_channel() noexcept {
  try {
    auto base = detail::open_base_channel(base_, name());
    if (!base) return Unexpected(base.error());
    return std::unique_ptr<IoChannel>(
        std::make_unique<ErrorChannel>(*this, std::move(*base)));  // setup-path
  } catch (const std::bad_alloc&) {
    return Unexpected(Errc::no_memory, "error channel");
  }
}

Result<std::unique_ptr<Bdev>> create_error_bdev(const ErrorBdevOpts& opts, Bdev& base) noexcept {
  constexpr const char* kBackend = "error";
  if (auto valid = detail::validate_wrapper_opts(kBackend, opts.name, base, opts.clock); !valid) {
    return Unexpected(valid.error());
  }
  if (auto valid = validate_injection(opts.name, opts.injection); !valid) {
    return Unexpected(valid.error());
  }
  try {
    auto bdev = std::make_unique<ErrorBdev>(  // setup-path
        detail::wrapper_params(kBackend, opts.name, opts.uuid, base, opts.clock), base);
    if (auto claimed = detail::claim_base(base, *bdev); !claimed)
      return Unexpected(claimed.error());
    bdev->holds_claim_ = true;
    (void)bdev->inject(opts.injection);  // validated above
    NVMF_INFOLOG(bdev, "error bdev '%s' on '%s'", opts.name.c_str(), base.name().c_str());
    return std::unique_ptr<Bdev>(std::move(bdev));
  } catch (const std::bad_alloc&) {
    return Unexpected(Errc::no_memory, "error bdev");
  }
}

ErrorBdev* as_error_bdev(Bdev& bdev) noexcept {
  if (std::string_view(bdev.backend_name()) != "error") return nullptr;
  return static_cast<ErrorBdev*>(&bdev);
}

const ErrorBdev* as_error_bdev(const Bdev& bdev) noexcept {
  if (std::string_view(bdev.backend_name()) != "error") return nullptr;
  return static_cast<const ErrorBdev*>(&bdev);
}

std::string opts_to_json(const ErrorBdevOpts& opts) {
  detail::JsonObjectWriter json;
  json.add_string("name", opts.name);
  json.add_string("base_bdev", opts.base_bdev);
  json.add_number("io_types", opts.injection.io_types);
  json.add_string("action", error_action_name(opts.injection.action));
  json.add_number("count", opts.injection.count);
  json.add_number("every_nth", opts.injection.every_nth);
  json.add_number("sct", opts.injection.sct);
  json.add_number("sc", opts.injection.sc);
  json.add_bool("dnr", opts.injection.dnr);
  json.add_uuid("uuid", opts.uuid);
  return json.finish();
}

}  // namespace nvmf::bdev
