#include "bdev/delay_bdev.h"

#include <cinttypes>
#include <new>
#include <vector>

#include "bdev/passthru.h"

namespace nvmf::bdev {

namespace {

constexpr uint64_t kNsPerUs = 1000;

Result<void> validate_latency(const std::string& name, const DelayLatency& latency) noexcept {
  const struct {
    const char* field;
    uint64_t value_us;
  } values[] = {{"read_latency_us", latency.read_latency_us},
                {"write_latency_us", latency.write_latency_us},
                {"flush_latency_us", latency.flush_latency_us},
                {"jitter_us", latency.jitter_us}};
  for (const auto& value : values) {
    if (value.value_us > kDelayLatencyMaxUs) {
      NVMF_ERRLOG(bdev, "delay bdev '%s': %s %" PRIu64 " is above %" PRIu64, name.c_str(),
                  value.field, value.value_us, kDelayLatencyMaxUs);
      return Unexpected(Errc::invalid_argument, value.field);
    }
  }
  return {};
}

// I/Os the base completed, waiting for their due time: a binary min-heap on (due time,
// arrival sequence) in an array sized by the queue depth, so equal due times leave in the
// order the base delivered them. The key lives in the I/O: backend_word[0] is the due time,
// backend_word[1] the sequence.
class DueHeap {
 public:
  explicit DueHeap(uint32_t capacity) : items_(capacity) {}  // setup-path

  bool empty() const noexcept { return size_ == 0; }
  size_t size() const noexcept { return size_; }
  BdevIo& top() const noexcept { return *items_[0]; }

  void push(BdevIo& io) noexcept {
    assert(size_ < items_.size() && "more I/Os waiting than the queue depth");
    size_t at = size_++;
    while (at > 0) {
      const size_t parent = (at - 1) / 2;
      if (!before(io, *items_[parent])) break;
      items_[at] = items_[parent];
      at = parent;
    }
    items_[at] = &io;
  }

  BdevIo& pop() noexcept {
    BdevIo& first = *items_[0];
    BdevIo* last = items_[--size_];
    size_t at = 0;
    while (true) {
      size_t child = 2 * at + 1;
      if (child >= size_) break;
      if (child + 1 < size_ && before(*items_[child + 1], *items_[child])) ++child;
      if (!before(*items_[child], *last)) break;
      items_[at] = items_[child];
      at = child;
    }
    if (size_ > 0) items_[at] = last;
    return first;
  }

 private:
  static bool before(const BdevIo& a, const BdevIo& b) noexcept {
    if (a.backend_word[0] != b.backend_word[0]) return a.backend_word[0] < b.backend_word[0];
    return a.backend_word[1] < b.backend_word[1];
  }

  std::vector<BdevIo*> items_;
  size_t size_ = 0;
};

}  // namespace

// Where a caller's I/O is while the channel owns it:
//   held_            stalled (or behind stalled ones) before the base; goes at the next poll
//                    without a stall
//   at the base      a shadow carries it (the caller's BdevIo is on no list)
//   due_             the base delivered it; its result is in the BdevIo, waiting for its due
//                    time and for no stall
class DelayChannel final : public IoChannel {
 public:
  DelayChannel(DelayBdev& bdev, std::unique_ptr<IoChannel> base) noexcept
      : IoChannel(bdev),
        bdev_(bdev),
        shadows_(bdev.queue_depth_max(), base_done, this),
        due_(bdev.queue_depth_max()),
        base_(std::move(base)),
        // Any nonzero seed will do; the address keeps channels apart.
        random_state_(reinterpret_cast<uintptr_t>(this) | 1) {}

  ~DelayChannel() override {
    owner().check();
    now_ns_ = clock().now_ns();
    closing_ = true;
    // The base's teardown completes what it still holds: base_done aborts those.
    base_.reset();
    while (BdevIo* io = held_.pop_front()) complete(*io, IoStatus::aborted, 0, now_ns_);
    while (!due_.empty()) complete(due_.pop(), IoStatus::aborted, 0, now_ns_);
  }

 private:
  Result<void> queue_io(BdevIo& io) noexcept override {
    // Behind held I/Os too, so that a release keeps the submission order.
    if (!held_.empty() || bdev_.stalled()) {
      held_.push_back(io);
      return {};
    }
    return send_to_base(io);
  }

  unsigned poll_completions(unsigned budget) noexcept override {
    now_ns_ = clock().now_ns();
    const bool stalled = bdev_.stalled();
    if (!stalled) {
      while (BdevIo* io = held_.pop_front()) {
        if (Result<void> sent = send_to_base(*io); !sent) {
          // Cannot happen with the base's geometry and depth; fail it rather than lose it.
          io->status = IoStatus::io_error;
          io->os_errno = errc_to_errno(sent.error().code);
          make_due(*io, 0);
        }
      }
    }
    base_->poll(budget);  // base_done puts each completion on due_
    if (stalled) return 0;
    unsigned delivered = 0;
    while (delivered < budget && !due_.empty() && due_.top().backend_word[0] <= now_ns_) {
      BdevIo& io = due_.pop();
      complete(io, io.status, io.os_errno, now_ns_);  // the base's result, kept in io
      ++delivered;
    }
    return delivered;
  }

  Result<void> send_to_base(BdevIo& io) noexcept {
    detail::ShadowIo* shadow = shadows_.take(io);
    assert(shadow != nullptr && "a shadow per outstanding I/O");
    Result<void> sent = base_->submit(*shadow);
    if (!sent) shadows_.give_back(*shadow);
    return sent;
  }

  static void base_done(BdevIo& done, void* ctx) {
    auto& channel = *static_cast<DelayChannel*>(ctx);
    auto& shadow = static_cast<detail::ShadowIo&>(done);
    BdevIo& io = *shadow.original;
    detail::ShadowPool::copy_result(shadow, io);
    channel.shadows_.give_back(shadow);
    if (channel.closing_) {
      channel.complete(io, IoStatus::aborted, 0, channel.now_ns_);
      return;
    }
    channel.make_due(io, channel.delay_ns(io.type));
  }

  void make_due(BdevIo& io, uint64_t delay_ns) noexcept {
    io.backend_word[0] = now_ns_ + delay_ns;
    io.backend_word[1] = sequence_++;
    due_.push(io);
  }

  uint64_t delay_ns(IoType type) noexcept {
    uint64_t delay = 0;
    switch (type) {
      case IoType::read:
        delay = bdev_.read_latency_ns_.load(std::memory_order_relaxed);
        break;
      case IoType::write:
      case IoType::write_zeroes:
      case IoType::unmap:
        delay = bdev_.write_latency_ns_.load(std::memory_order_relaxed);
        break;
      case IoType::flush:
        delay = bdev_.flush_latency_ns_.load(std::memory_order_relaxed);
        break;
    }
    const uint64_t jitter = bdev_.jitter_ns_.load(std::memory_order_relaxed);
    if (jitter != 0) delay += next_random() % (jitter + 1);
    return delay;
  }

  // xorshift64* (Vigna): a few instructions, good enough to spread test latencies.
  uint64_t next_random() noexcept {
    random_state_ ^= random_state_ >> 12;
    random_state_ ^= random_state_ << 25;
    random_state_ ^= random_state_ >> 27;
    return random_state_ * 0x2545F4914F6CDD1DULL;
  }

  DelayBdev& bdev_;
  detail::ShadowPool shadows_;
  DueHeap due_;
  detail::IoQueue held_;
  std::unique_ptr<IoChannel> base_;
  uint64_t random_state_;
  uint64_t sequence_ = 0;
  uint64_t now_ns_ = 0;   // read once per poll (and in the destructor) for completions
  bool closing_ = false;  // in the destructor: what the base gives back completes as aborted
};

DelayBdev::DelayBdev(Params params, Bdev& base, const DelayLatency& latency) noexcept
    : Bdev(std::move(params)), base_(base) {
  (void)set_latency(latency);  // validated by create_delay_bdev
}

DelayBdev::~DelayBdev() {
  if (holds_claim_) base_.release_claim(*this);
}

Result<void> DelayBdev::set_latency(const DelayLatency& latency) noexcept {
  if (Result<void> valid = validate_latency(name(), latency); !valid) return valid;
  read_latency_ns_.store(latency.read_latency_us * kNsPerUs, std::memory_order_relaxed);
  write_latency_ns_.store(latency.write_latency_us * kNsPerUs, std::memory_order_relaxed);
  flush_latency_ns_.store(latency.flush_latency_us * kNsPerUs, std::memory_order_relaxed);
  jitter_ns_.store(latency.jitter_us * kNsPerUs, std::memory_order_relaxed);
  return {};
}

DelayLatency DelayBdev::latency() const noexcept {
  return DelayLatency{
      .read_latency_us = read_latency_ns_.load(std::memory_order_relaxed) / kNsPerUs,
      .write_latency_us = write_latency_ns_.load(std::memory_order_relaxed) / kNsPerUs,
      .flush_latency_us = flush_latency_ns_.load(std::memory_order_relaxed) / kNsPerUs,
      .jitter_us = jitter_ns_.load(std::memory_order_relaxed) / kNsPerUs};
}

Result<std::unique_ptr<IoChannel>> DelayBdev::create_channel() noexcept {
  try {
    auto base = detail::open_base_channel(base_, name());
    if (!base) return Unexpected(base.error());
    return std::unique_ptr<IoChannel>(
        std::make_unique<DelayChannel>(*this, std::move(*base)));  // setup-path
  } catch (const std::bad_alloc&) {
    return Unexpected(Errc::no_memory, "delay channel");
  }
}

Result<std::unique_ptr<Bdev>> create_delay_bdev(const DelayBdevOpts& opts, Bdev& base) noexcept {
  constexpr const char* kBackend = "delay";
  if (auto valid = detail::validate_wrapper_opts(kBackend, opts.name, base, opts.clock); !valid) {
    return Unexpected(valid.error());
  }
  if (auto valid = validate_latency(opts.name, opts.latency); !valid) {
    return Unexpected(valid.error());
  }
  try {
    auto bdev = std::make_unique<DelayBdev>(  // setup-path
        detail::wrapper_params(kBackend, opts.name, opts.uuid, base, opts.clock), base,
        opts.latency);
    if (auto claimed = detail::claim_base(base, *bdev); !claimed)
      return Unexpected(claimed.error());
    bdev->holds_claim_ = true;
    NVMF_INFOLOG(bdev,
                 "delay bdev '%s' on '%s': read %" PRIu64 " us, write %" PRIu64
                 " us, flush %" PRIu64 " us, jitter %" PRIu64 " us",
                 opts.name.c_str(), base.name().c_str(), opts.latency.read_latency_us,
                 opts.latency.write_latency_us, opts.latency.flush_latency_us,
                 opts.latency.jitter_us);
    return std::unique_ptr<Bdev>(std::move(bdev));
  } catch (const std::bad_alloc&) {
    return Unexpected(Errc::no_memory, "delay bdev");
  }
}

DelayBdev* as_delay_bdev(Bdev& bdev) noexcept {
  if (std::string_view(bdev.backend_name()) != "delay") return nullptr;
  return static_cast<DelayBdev*>(&bdev);
}

const DelayBdev* as_delay_bdev(const Bdev& bdev) noexcept {
  if (std::string_view(bdev.backend_name()) != "delay") return nullptr;
  return static_cast<const DelayBdev*>(&bdev);
}

std::string opts_to_json(const DelayBdevOpts& opts) {
  detail::JsonObjectWriter json;
  json.add_string("name", opts.name);
  json.add_string("base_bdev", opts.base_bdev);
  json.add_number("read_latency_us", opts.latency.read_latency_us);
  json.add_number("write_latency_us", opts.latency.write_latency_us);
  json.add_number("flush_latency_us", opts.latency.flush_latency_us);
  json.add_number("jitter_us", opts.latency.jitter_us);
  json.add_uuid("uuid", opts.uuid);
  return json.finish();
}

}  // namespace nvmf::bdev
