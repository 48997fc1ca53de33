// The sim provider: fabric, devices, key tables, PD / MR / MW / CQ / SRQ. The WQE engine is
// in sim_qp.cpp, the CM in sim_cm.cpp.
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "common/util.h"
#include "verbs/sim/sim_internal.h"

NVMF_LOG_COMPONENT(sim);

namespace nvmf::verbs::sim {

// ---------------------------------------------------------------------------------------
// Names, options

const char* sim_profile_name(SimProfile profile) noexcept {
  switch (profile) {
    case SimProfile::rxe:
      return "rxe";
    case SimProfile::mlx5_2017:
      return "mlx5-2017";
    case SimProfile::mlx5_fenced:
      return "mlx5-fenced";
    case SimProfile::adversarial:
      return "adversarial";
    case SimProfile::mlx5_2017_rare:
      return "mlx5-2017-rare";
  }
  return "unknown";
}

bool sim_profile_parse(const char* text, SimProfile* profile) noexcept {
  if (text == nullptr) return false;
  for (SimProfile candidate : {SimProfile::rxe, SimProfile::mlx5_2017, SimProfile::mlx5_fenced,
                               SimProfile::adversarial, SimProfile::mlx5_2017_rare}) {
    if (std::strcmp(text, sim_profile_name(candidate)) == 0) {
      *profile = candidate;
      return true;
    }
  }
  return false;
}

const char* send_fence_name(SendFence fence) noexcept {
  switch (fence) {
    case SendFence::profile:
      return "profile";
    case SendFence::reads:
      return "reads";
    case SendFence::key_updates:
      return "key-updates";
  }
  return "unknown";
}

bool send_fence_parse(const char* text, SendFence* fence) noexcept {
  if (text == nullptr) return false;
  for (SendFence candidate : {SendFence::profile, SendFence::reads, SendFence::key_updates}) {
    if (std::strcmp(text, send_fence_name(candidate)) == 0) {
      *fence = candidate;
      return true;
    }
  }
  return false;
}

SendFence sim_send_fence(const SimOpts& opts) noexcept {
  if (opts.send_fence != SendFence::profile) return opts.send_fence;
  // rxe implements the IBTA fence; for mlx5 the profiles keep their documented rule (the
  // fence orders key updates), which is not proven for real ConnectX hardware.
  return opts.profile == SimProfile::rxe ? SendFence::reads : SendFence::key_updates;
}

DeviceCaps sim_default_caps() {
  DeviceCaps caps;
  caps.name = "sim0";
  caps.max_qp_wr = 32768;  // ConnectX-5
  caps.max_sge = 30;       // ConnectX-5
  caps.max_cqe = 4194303;  // 2^22 - 1
  caps.max_srq_wr = 32767;
  caps.max_qp_rd_atom = 16;
  caps.max_qp_init_rd_atom = 16;
  caps.max_mr_size = UINT64_MAX;
  caps.max_mw = 1u << 24;  // the 24-bit key index
  caps.memory_window_type2 = true;
  caps.memory_management_extensions = true;
  return caps;
}

std::string opts_to_json(const SimOpts& opts) {
  char text[1024];
  std::snprintf(text, sizeof(text),
                "{\"profile\": \"%s\", \"seed\": %" PRIu64
                ", \"mkey_commit_lag_steps\": %u, \"mkey_commit_slow_one_in\": %u, "
                "\"send_fence\": \"%s\", "
                "\"adversarial_completion_delay_steps\": %u, \"rnr_timer_ns\": %" PRIu64
                ", "
                "\"cm_connect_timeout_ms\": %" PRIu64
                ", \"max_inline_data\": %u, "
                "\"device\": \"%s\", \"max_qp_wr\": %u, \"max_sge\": %u, \"max_cqe\": %u, "
                "\"max_srq_wr\": %u, \"max_qp_rd_atom\": %u, \"max_qp_init_rd_atom\": %u, "
                "\"max_mw\": %u, \"memory_window_type2\": %s, "
                "\"memory_management_extensions\": %s}",
                sim_profile_name(opts.profile), opts.seed, opts.mkey_commit_lag_steps,
                opts.mkey_commit_slow_one_in, send_fence_name(sim_send_fence(opts)),
                opts.adversarial_completion_delay_steps, opts.rnr_timer_ns,
                opts.cm_connect_timeout_ms, opts.max_inline_data, opts.caps.name.c_str(),
                opts.caps.max_qp_wr, opts.caps.max_sge, opts.caps.max_cqe, opts.caps.max_srq_wr,
                opts.caps.max_qp_rd_atom, opts.caps.max_qp_init_rd_atom, opts.caps.max_mw,
                opts.caps.memory_window_type2 ? "true" : "false",
                opts.caps.memory_management_extensions ? "true" : "false");
  return text;
}

// ---------------------------------------------------------------------------------------
// eventfd helpers

int make_event_fd() noexcept { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

void signal_event_fd(int fd) noexcept {
  if (fd < 0) return;
  const uint64_t one = 1;
  // EAGAIN only when the counter would overflow: it is readable then anyway.
  [[maybe_unused]] ssize_t written = write(fd, &one, sizeof(one));
}

bool drain_event_fd(int fd) noexcept {
  if (fd < 0) return false;
  uint64_t value = 0;
  return read(fd, &value, sizeof(value)) == static_cast<ssize_t>(sizeof(value));
}

// ---------------------------------------------------------------------------------------
// Fabric

Fabric::Fabric(const SimOpts& options)
    : opts(options),
      clock(options.clock != nullptr ? *options.clock : MonotonicClock::instance()),
      rng(options.seed) {}

Fabric::~Fabric() { active_.clear(); }

void Fabric::progress() noexcept {
  if (active_.empty()) {
    idle_.store(true, std::memory_order_release);
    return;
  }
  // One step of every busy QP's clock per call: a lagging LOCAL_INV or a held-back completion
  // lands after a bounded number of calls even when nothing else is posted.
  for (SimQp& qp : active_) qp.tick();

  const bool adversarial = opts.profile == SimProfile::adversarial;
  // Rounds until nothing changes: a SEND that executes on one QP can unblock or fail its peer.
  // The bound only guards against a bug turning into a hang.
  constexpr int kRoundsMax = 16;
  for (int round = 0; round < kRoundsMax; ++round) {
    if (adversarial && active_.size() > 1) {
      // Random QP order: rotate the list by a random amount.
      for (uint64_t n = rng.below(active_.size()); n > 0; --n) {
        SimQp* front = active_.pop_front();
        active_.push_back(*front);
      }
    }
    bool changed = false;
    SimQp* qp = active_.empty() ? nullptr : &active_.front();
    while (qp != nullptr) {
      SimQp* next = active_.next_of(*qp);
      // adversarial: a random execution budget per QP and call, so doorbelled WQEs may still
      // be waiting when the call returns (hardware is asynchronous).
      const uint32_t budget = adversarial ? 1 + static_cast<uint32_t>(rng.below(4)) : UINT32_MAX;
      changed |= qp->run(budget);
      qp = next;
    }
    if (!changed || adversarial) break;
  }
  SimQp* qp = active_.empty() ? nullptr : &active_.front();
  while (qp != nullptr) {
    SimQp* next = active_.next_of(*qp);
    if (!qp->has_work()) active_.remove(*qp);
    qp = next;
  }
  idle_.store(active_.empty(), std::memory_order_release);
}

// ---------------------------------------------------------------------------------------
// Device and key table

bool SimDevice::add_payload_skip_range(uint64_t addr, uint64_t length) noexcept {
  if (payload_skip_count_ == payload_skip_ranges_.size()) return false;
  payload_skip_ranges_[payload_skip_count_++] = AddressRange{addr, addr + length};
  return true;
}

bool SimDevice::add_slot(KeySlot& slot, uint8_t key8) {
  uint32_t index = 0;
  const bool table_full = slots_.size() > caps_.max_mw || slots_.size() > 0xFFFFFFu;
  if (!free_indices_.empty() && (table_full || slots_.size() >= caps_.max_mw / 2)) {
    index = free_indices_.front();
    free_indices_.pop_front();
  } else if (table_full) {
    return false;
  } else {
    // Fresh indices while there are plenty: a stale key never matches a new slot by chance.
    index = static_cast<uint32_t>(slots_.size());
    slots_.push_back(nullptr);
  }
  slot.index = index;
  slot.generation = fabric_.next_generation();
  slot.key8 = key8;
  slots_[index] = &slot;
  return true;
}

void SimDevice::remove_slot(KeySlot& slot) noexcept {
  if (slot.index == 0 || slot.index >= slots_.size() || slots_[slot.index] != &slot) return;
  slots_[slot.index] = nullptr;
  free_indices_.push_back(slot.index);  // setup path: may allocate
}

SimDevice::SimDevice(Fabric& fabric, const DeviceCaps& caps, uint32_t first_index)
    : fabric_(fabric), caps_(caps), slots_(first_index, nullptr), async_fd_(make_event_fd()) {}

SimDevice::~SimDevice() {
  if (async_fd_ >= 0) close(async_fd_);
}

bool SimDevice::poll_async_event(AsyncEvent* event) noexcept {
  if (!has_async_events_.load(std::memory_order_acquire)) return false;
  std::lock_guard lock(fabric_.mu);
  if (async_events_.empty()) return false;
  *event = async_events_.front();
  async_events_.pop_front();
  if (async_events_.empty()) {
    has_async_events_.store(false, std::memory_order_release);
    drain_event_fd(async_fd_);
  }
  return true;
}

void SimDevice::raise(const AsyncEvent& event) noexcept {
  const bool was_empty = async_events_.empty();
  async_events_.push_back(event);  // faults and injections only: may allocate
  ++counters.async_events;
  has_async_events_.store(true, std::memory_order_release);
  if (was_empty) signal_event_fd(async_fd_);
  NVMF_DEBUGLOG(sim, "%s: async event %s (QP %u)", caps_.name.c_str(),
                async_event_type_name(event.type), event.qp_num);
}

Result<std::unique_ptr<ProtectionDomain>> SimDevice::allocate_pd() noexcept {
  // The PD keeps the fabric (and so this device) alive while it exists.
  return std::unique_ptr<ProtectionDomain>(
      std::make_unique<SimPd>(fabric_.shared_from_this(), *this));
}

// ---------------------------------------------------------------------------------------
// PD, MR, MW

Result<std::unique_ptr<MemoryRegion>> SimPd::register_memory(void* addr, size_t length,
                                                             uint32_t access) noexcept {
  constexpr uint32_t kKnown =
      kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessMwBind;
  if (addr == nullptr || length == 0 || (access & ~kKnown) != 0 ||
      length > device_.caps().max_mr_size) {
    return Unexpected(Errc::invalid_argument, "register_memory: bad address, length or access");
  }
  // As ibv_reg_mr: remote write needs local write.
  if ((access & kAccessRemoteWrite) != 0 && (access & kAccessLocalWrite) == 0) {
    return Unexpected(Errc::invalid_argument, "register_memory: remote write without local write");
  }
  auto mr = std::make_unique<SimMr>(device_);
  mr->addr_ = reinterpret_cast<uint64_t>(addr);
  mr->length_ = length;
  mr->access_ = access;
  mr->slot.kind = KeySlot::Kind::mr;
  mr->slot.pd = this;
  mr->slot.addr = mr->addr_;
  mr->slot.length = length;
  mr->slot.access = access;
  mr->slot.valid = true;
  mr->slot.visible_valid = true;
  {
    std::lock_guard lock(device_.fabric().mu);
    if (!device_.add_slot(mr->slot, static_cast<uint8_t>(device_.fabric().rng.next()))) {
      return Unexpected(Errc::no_memory, "register_memory: key table full (caps.max_mw)");
    }
  }
  mr->lkey_ = mr->slot.key();
  // As rxe: an MR without remote access has rkey 0.
  mr->rkey_ = (access & (kAccessRemoteRead | kAccessRemoteWrite)) != 0 ? mr->lkey_ : 0;
  return std::unique_ptr<MemoryRegion>(std::move(mr));
}

SimMr::SimMr(SimDevice& device) noexcept
    : fabric_(device.fabric().shared_from_this()), device_(device) {}

SimMr::~SimMr() {
  std::lock_guard lock(device_.fabric().mu);
  for (KeySlot* other : device_.slots()) {
    if (other != nullptr && other->parent_mr == &slot) {
      // Hardware refuses to deregister an MR with bound windows (EBUSY); a destructor cannot
      // fail, so the windows become FREE and the caller hears about it.
      NVMF_WARNLOG(sim, "MR 0x%x destroyed with window 0x%x still bound: window freed", slot.key(),
                   other->key());
      other->valid = false;
      other->visible_valid = false;
      other->bound_qp = nullptr;
      other->parent_mr = nullptr;
    }
  }
  device_.remove_slot(slot);
}

Result<std::unique_ptr<MemoryWindow>> SimPd::allocate_window() noexcept {
  if (!device_.caps().memory_window_type2) {
    return Unexpected(Errc::not_supported, "allocate_window: no type-2 memory windows");
  }
  auto mw = std::make_unique<SimMw>(device_);
  mw->slot.kind = KeySlot::Kind::mw;
  mw->slot.pd = this;
  {
    std::lock_guard lock(device_.fabric().mu);
    if (!device_.add_slot(mw->slot, static_cast<uint8_t>(device_.fabric().rng.next()))) {
      return Unexpected(Errc::no_memory, "allocate_window: key table full (caps.max_mw)");
    }
  }
  mw->posted_rkey_ = mw->slot.key();
  return std::unique_ptr<MemoryWindow>(std::move(mw));
}

SimMw::SimMw(SimDevice& device) noexcept
    : fabric_(device.fabric().shared_from_this()), device_(device) {}

SimMw::~SimMw() {
  std::lock_guard lock(device_.fabric().mu);
  device_.remove_slot(slot);
}

// ---------------------------------------------------------------------------------------
// CQ

Result<std::unique_ptr<CompletionQueue>> SimPd::create_cq(const CqOpts& opts) noexcept {
  if (opts.depth == 0 || opts.depth > device_.caps().max_cqe) {
    return Unexpected(Errc::invalid_argument, "create_cq: depth is 0 or above max_cqe");
  }
  int fd = -1;
  if (opts.with_event_fd) {
    fd = make_event_fd();
    if (fd < 0) return Unexpected(make_system_error(errno, "create_cq: eventfd"));
  }
  const auto depth = static_cast<uint32_t>(round_up_power_of_two(opts.depth));
  return std::unique_ptr<CompletionQueue>(std::make_unique<SimCq>(device_, depth, fd));
}

SimCq::SimCq(SimDevice& device, uint32_t depth, int event_fd)
    : fabric_(device.fabric().shared_from_this()),
      device_(device),
      depth_(depth),
      mask_(depth - 1),
      event_fd_(event_fd),
      ring_(depth) {}

SimCq::~SimCq() {
  if (event_fd_ >= 0) close(event_fd_);
}

int SimCq::reap_unlocked(std::span<WorkCompletion> out) noexcept {
  // Nothing could produce a completion while no QP has work, so a poll need not progress
  // the fabric; and a CQ that never had a delay holds no entry that must wait. (A poll is
  // only counted, for poll-count delays, on the locked path: such CQs never come here.)
  if (!device_.fabric().idle()) return -1;
  const uint64_t tail = tail_.load(std::memory_order_acquire);
  // After tail_: set_delay() comes before any push it delays, so an entry seen here that
  // might be delayed comes with ever_delayed_ set.
  if (ever_delayed_.load(std::memory_order_relaxed)) return -1;
  uint64_t head = head_.load(std::memory_order_relaxed);
  int reaped = 0;
  while (static_cast<size_t>(reaped) < out.size() && head != tail) {
    out[static_cast<size_t>(reaped++)] = ring_[head & mask_].wc;
    ++head;
  }
  // Frees the slots for push. Not when nothing was reaped: a store makes the line the
  // producer reads on every push this thread's again, for nothing.
  if (reaped > 0) head_.store(head, std::memory_order_release);
  return reaped;
}

int SimCq::poll(std::span<WorkCompletion> out) noexcept {
  const int unlocked = reap_unlocked(out);
  if (unlocked >= 0) return unlocked;
  Fabric& fabric = device_.fabric();
  std::lock_guard lock(fabric.mu);
  fabric.progress();
  ++polls_;
  int reaped = 0;
  uint64_t now = 0;
  uint64_t head = head_.load(std::memory_order_relaxed);
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  while (static_cast<size_t>(reaped) < out.size() && head != tail) {
    const Entry& entry = ring_[head & mask_];
    if (entry.ready_poll > polls_) break;
    if (entry.ready_ns != 0) {
      if (now == 0) now = fabric.now_ns();
      if (now < entry.ready_ns) break;
    }
    out[static_cast<size_t>(reaped++)] = entry.wc;
    ++head;
  }
  head_.store(head, std::memory_order_release);
  return reaped;
}

void SimCq::overrun(const WorkCompletion& wc) noexcept {
  ++device_.counters.cq_overruns;
  NVMF_ERRLOG(sim, "CQ overrun (depth %u): completion of wr_id 0x%" PRIx64 " dropped", depth_,
              wc.wr_id);
  fail();  // hardware: CQ_ERR, and the CQ writes nothing more
}

void SimCq::delay(Entry& entry) noexcept {
  entry.ready_poll = polls_ + delay_.polls;
  entry.ready_ns = delay_.delay_ns != 0 ? device_.fabric().now_ns() + delay_.delay_ns : 0;
  if (delay_left_ != UINT32_MAX) --delay_left_;
}

void SimCq::signal() noexcept {
  armed_ = false;
  signal_event_fd(event_fd_);
}

void SimCq::fail() noexcept {
  if (failed_) return;
  failed_ = true;
  AsyncEvent event;
  event.type = AsyncEventType::cq_error;
  event.cq = this;
  device_.raise(event);
}

void SimCq::set_delay(const CompletionDelay& delay) noexcept {
  ever_delayed_.store(true, std::memory_order_release);
  delay_ = delay;
  delay_left_ = delay.count;
}

Result<void> SimCq::arm() noexcept {
  if (event_fd_ < 0) return Unexpected(Errc::bad_state, "arm: CQ created without an event fd");
  std::lock_guard lock(device_.fabric().mu);
  armed_ = true;
  return {};
}

Result<void> SimCq::consume_event() noexcept {
  if (event_fd_ < 0) return Unexpected(Errc::bad_state, "consume_event: no event fd");
  if (!drain_event_fd(event_fd_)) return Unexpected(Errc::busy, "consume_event: no event");
  return {};
}

// ---------------------------------------------------------------------------------------
// Receive rings and SRQ

void RecvRing::init(uint32_t wr, uint32_t sge) {
  const uint64_t capacity = round_up_power_of_two(wr);
  wqes.resize(capacity);
  max_sge = sge;
  max_wr = static_cast<uint32_t>(capacity);
  sges.resize(capacity * sge);
  mask = capacity - 1;
}

Result<std::unique_ptr<SharedReceiveQueue>> SimPd::create_srq(const SrqOpts& opts) noexcept {
  const DeviceCaps& caps = device_.caps();
  if (caps.max_srq_wr == 0) return Unexpected(Errc::not_supported, "create_srq: no SRQ");
  if (opts.max_wr == 0 || opts.max_wr > caps.max_srq_wr || opts.max_sge == 0 ||
      opts.max_sge > caps.max_sge) {
    return Unexpected(Errc::invalid_argument, "create_srq: max_wr or max_sge out of range");
  }
  return std::unique_ptr<SharedReceiveQueue>(
      std::make_unique<SimSrq>(device_, opts.max_wr, opts.max_sge));
}

SimSrq::SimSrq(SimDevice& device, uint32_t max_wr, uint32_t max_sge)
    : fabric_(device.fabric().shared_from_this()), device_(device) {
  ring.init(max_wr, max_sge);
}

Result<void> SimSrq::flush() noexcept {
  Fabric& fabric = device_.fabric();
  std::lock_guard lock(fabric.mu);
  if (ring.db != ring.tail) {
    device_.counters.recv += ring.tail - ring.db;
    ++device_.counters.doorbells;
    ring.db = ring.tail;
  }
  fabric.progress();
  return {};
}

// ---------------------------------------------------------------------------------------
// SimProvider

Result<std::unique_ptr<SimProvider>> SimProvider::create(const SimOpts& opts) {
  if (opts.caps.name.empty() || opts.caps.max_qp_wr == 0 || opts.caps.max_sge == 0 ||
      opts.caps.max_cqe == 0 || opts.caps.max_mw < 2) {
    return Unexpected(Errc::invalid_argument, "SimOpts: caps need a name and non-zero limits");
  }
  if (opts.mkey_commit_lag_steps > 1000000) {
    return Unexpected(Errc::invalid_argument, "SimOpts: mkey_commit_lag_steps above 1e6");
  }
  if (opts.mkey_commit_slow_one_in == 0) {
    return Unexpected(Errc::invalid_argument, "SimOpts: mkey_commit_slow_one_in is 0");
  }
  if (static_cast<uint8_t>(opts.send_fence) > static_cast<uint8_t>(SendFence::key_updates) ||
      static_cast<uint8_t>(opts.profile) > static_cast<uint8_t>(SimProfile::mlx5_2017_rare)) {
    return Unexpected(Errc::invalid_argument, "SimOpts: unknown profile or send_fence");
  }
  auto fabric = std::make_shared<Fabric>(opts);
  fabric->devices.push_back(std::make_unique<SimDevice>(*fabric, opts.caps, 1));
  SimDevice* device = fabric->devices.back().get();
  NVMF_INFOLOG(sim, "sim fabric created: %s", opts_to_json(opts).c_str());
  return std::unique_ptr<SimProvider>(new SimProvider(std::move(fabric), device));  // setup-path
}

Result<std::unique_ptr<SimProvider>> SimProvider::create_peer(const std::string& device_name) {
  std::lock_guard lock(fabric_->mu);
  if (device_name.empty()) return Unexpected(Errc::invalid_argument, "create_peer: no name");
  for (const auto& device : fabric_->devices) {
    if (device->caps().name == device_name) {
      return Unexpected(Errc::already_exists, "create_peer: device name in use");
    }
  }
  DeviceCaps caps = fabric_->opts.caps;
  caps.name = device_name;
  // 0x1000 indexes apart: far more keys than a test registers.
  const auto first_index = static_cast<uint32_t>(fabric_->devices.size() * 0x1000 + 1);
  fabric_->devices.push_back(std::make_unique<SimDevice>(*fabric_, caps, first_index));
  return std::unique_ptr<SimProvider>(
      new SimProvider(fabric_, fabric_->devices.back().get()));  // setup-path
}

SimProvider::SimProvider(std::shared_ptr<Fabric> fabric, SimDevice* device) noexcept
    : fabric_(std::move(fabric)), device_(device) {}

SimProvider::~SimProvider() = default;

std::vector<std::string> SimProvider::device_names() const { return {device_->caps().name}; }

Device& SimProvider::device() noexcept { return *device_; }

const SimOpts& SimProvider::opts() const noexcept { return fabric_->opts; }

Result<std::unique_ptr<CmChannel>> SimProvider::create_cm_channel() noexcept {
  const int fd = make_event_fd();
  if (fd < 0) return Unexpected(make_system_error(errno, "create_cm_channel: eventfd"));
  return std::unique_ptr<CmChannel>(std::make_unique<SimCmChannel>(fabric_, *device_, fd));
}

void SimProvider::progress() noexcept {
  std::lock_guard lock(fabric_->mu);
  fabric_->cm_progress();
  fabric_->progress();
}

void SimProvider::fail_next_wrs(uint32_t count, WcStatus status) noexcept {
  std::lock_guard lock(fabric_->mu);
  fabric_->set_fault(count, status);
}

Result<void> SimProvider::fail_next_wrs(QueuePair& qp, uint32_t count, WcStatus status) noexcept {
  auto* sim_qp = dynamic_cast<SimQp*>(&qp);
  if (sim_qp == nullptr) return Unexpected(Errc::invalid_argument, "fail_next_wrs: not a sim QP");
  std::lock_guard lock(fabric_->mu);
  sim_qp->set_fault(count, status);
  return {};
}

Result<void> SimProvider::drop_connection(CmId& id) noexcept {
  auto* sim_id = dynamic_cast<SimCmId*>(&id);
  if (sim_id == nullptr) return Unexpected(Errc::invalid_argument, "drop_connection: not a sim id");
  std::lock_guard lock(fabric_->mu);
  if (sim_id->state != SimCmId::State::connected) {
    return Unexpected(Errc::bad_state, "drop_connection: not connected");
  }
  sim_id->tear_down(true);
  fabric_->progress();
  return {};
}

Result<void> SimProvider::delay_completions(CompletionQueue& cq,
                                            const CompletionDelay& delay) noexcept {
  auto* sim_cq = dynamic_cast<SimCq*>(&cq);
  if (sim_cq == nullptr) return Unexpected(Errc::invalid_argument, "delay_completions: not sim");
  std::lock_guard lock(fabric_->mu);
  sim_cq->set_delay(delay);
  return {};
}

Result<void> SimProvider::inject_async_event(const AsyncEvent& event) noexcept {
  if (static_cast<size_t>(event.type) >= kAsyncEventTypeCount) {
    return Unexpected(Errc::invalid_argument, "inject_async_event: unknown type");
  }
  std::lock_guard lock(fabric_->mu);
  auto qp_of_device = [this](uint32_t qp_num) -> SimQp* {
    for (SimCmId* id : fabric_->ids) {
      auto* qp = static_cast<SimQp*>(id->qp());
      if (qp != nullptr && &id->dev == device_ && qp->qp_num() == qp_num) return qp;
    }
    return nullptr;
  };
  switch (event.type) {
    case AsyncEventType::qp_fatal:
    case AsyncEventType::qp_request_error:
    case AsyncEventType::qp_access_error:
    case AsyncEventType::wq_fatal: {
      SimQp* qp = qp_of_device(event.qp_num);
      if (qp == nullptr)
        return Unexpected(Errc::invalid_argument, "inject_async_event: no such QP");
      qp->enter_error();
      break;
    }
    case AsyncEventType::cq_error: {
      // Only CQs of this device may be named; the sim keeps no CQ table, so the pointer's
      // dynamic type and device say it.
      auto* cq = dynamic_cast<SimCq*>(const_cast<CompletionQueue*>(event.cq));
      if (cq == nullptr || &cq->device() != device_) {
        return Unexpected(Errc::invalid_argument, "inject_async_event: not a CQ of this device");
      }
      cq->fail();  // raises the event itself
      fabric_->progress();
      return {};
    }
    case AsyncEventType::device_fatal:
      for (SimCmId* id : fabric_->ids) {
        if (&id->dev == device_ && id->qp() != nullptr)
          static_cast<SimQp*>(id->qp())->enter_error();
      }
      break;
    default:
      break;
  }
  device_->raise(event);
  fabric_->progress();
  return {};
}

void SimProvider::refuse_connections(const std::string& address, uint16_t port, RefuseMode mode) {
  std::lock_guard lock(fabric_->mu);
  if (mode == RefuseMode::none) {
    fabric_->refusing.erase({address, port});
  } else {
    fabric_->refusing[{address, port}] = mode;
  }
}

void SimProvider::set_unreachable(const std::string& address, bool unreachable) {
  std::lock_guard lock(fabric_->mu);
  if (unreachable) {
    fabric_->unreachable.insert(address);
  } else {
    fabric_->unreachable.erase(address);
  }
}

Result<void> SimProvider::skip_payloads(const void* addr, size_t bytes) noexcept {
  const auto begin = reinterpret_cast<uint64_t>(addr);
  if (bytes == 0 || begin + bytes < begin) {
    return Unexpected(Errc::invalid_argument, "skip_payloads: an empty or wrapping range");
  }
  std::lock_guard lock(fabric_->mu);
  if (!device_->add_payload_skip_range(begin, bytes)) {
    return Unexpected(Errc::invalid_argument, "skip_payloads: kPayloadSkipRangesMax ranges");
  }
  return {};
}

SimCounters SimProvider::counters() const noexcept {
  std::lock_guard lock(fabric_->mu);
  return device_->counters;
}

std::vector<uint32_t> SimProvider::qp_nums() const {
  std::vector<uint32_t> numbers;
  std::lock_guard lock(fabric_->mu);
  for (SimCmId* id : fabric_->ids) {
    if (&id->dev == device_ && id->qp() != nullptr) numbers.push_back(id->qp()->qp_num());
  }
  std::sort(numbers.begin(), numbers.end());
  return numbers;
}

const CompletionQueue* SimProvider::send_cq_of(uint32_t qp_num) const noexcept {
  std::lock_guard lock(fabric_->mu);
  for (SimCmId* id : fabric_->ids) {
    auto* qp = static_cast<SimQp*>(id->qp());
    if (&id->dev == device_ && qp != nullptr && qp->qp_num() == qp_num) return &qp->send_cq();
  }
  return nullptr;
}

void SimProvider::reset_counters() noexcept {
  std::lock_guard lock(fabric_->mu);
  device_->counters = SimCounters{};
}

KeyState SimProvider::key_state(uint32_t key) const noexcept {
  std::lock_guard lock(fabric_->mu);
  const KeySlot* slot = device_->slot_by_key(key);
  if (slot == nullptr || slot->key8 != (key & 0xFFu)) return KeyState::unknown;
  return slot->valid ? KeyState::valid : KeyState::free;
}

}  // namespace nvmf::verbs::sim
