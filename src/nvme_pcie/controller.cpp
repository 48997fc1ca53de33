// Controller bring-up, the admin queue, and recovery (reset, abort, removal). The data path is
// in io_queue.cpp.
#include "nvme_pcie/controller.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <unistd.h>

#include "common/log.h"
#include "spec/pcie.h"

NVMF_LOG_COMPONENT(nvme_pcie);

namespace nvmf::nvme_pcie {

using namespace std::chrono_literals;
namespace reg = spec::pcie::reg;
namespace offset = spec::property_offset;

namespace {

// CIDs from this value up are Asynchronous Event Requests; admin commands count below it.
constexpr uint16_t kAerCidBase = 0xFF00;
// AERs kept outstanding: namespace notices need one; a second covers the window between a
// completion and its replacement.
constexpr uint32_t kAersWanted = 2;
// The shortest wait for RDY/SHST we accept, whatever CAP.TO says (QEMU reports 15 s, some
// controllers report 0).
constexpr uint32_t kReadyTimeoutMinMs = 500;

void sleep_a_little(int spins) {
  // Busy for the first spins (admin commands usually finish in microseconds), then yield CPU.
  if (spins < 1000) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(100us);
  }
}

}  // namespace

const char* controller_state_name(ControllerState state) noexcept {
  switch (state) {
    case ControllerState::live:
      return "live";
    case ControllerState::resetting:
      return "resetting";
    case ControllerState::failed:
      return "failed";
    case ControllerState::removed:
      return "removed";
    case ControllerState::shut_down:
      return "shut down";
  }
  return "?";
}

std::string ControllerOpts::to_json() const {
  return "{\"admin_queue_entries\":" + std::to_string(admin_queue_entries) +
         ",\"io_queue_entries\":" + std::to_string(io_queue_entries) +
         ",\"io_queues_requested\":" + std::to_string(io_queues_requested) +
         ",\"max_transfer_bytes\":" + std::to_string(max_transfer_bytes) +
         ",\"admin_timeout_ms\":" + std::to_string(admin_timeout_ms) +
         ",\"io_timeout_ms\":" + std::to_string(io_timeout_ms) +
         ",\"health_check_interval_ms\":" + std::to_string(health_check_interval_ms) +
         ",\"bounce_buffers_per_queue\":" + std::to_string(bounce_buffers_per_queue) + "}";
}

// The admin SQ and CQ, a 4 KiB buffer for command data, and the AERs in flight.
struct Controller::AdminQueue {
  env::DmaRegion sq_region;
  env::DmaRegion cq_region;
  env::DmaRegion data_region;
  spec::Sqe* sq = nullptr;
  volatile spec::Cqe* cq = nullptr;
  uint32_t entries = 0;
  uint32_t sq_tail = 0;
  uint32_t cq_head = 0;
  bool phase = true;
  uint16_t next_cid = 0;
  uint32_t aers_outstanding = 0;
  uint16_t next_aer_cid = kAerCidBase;
};

Controller::Controller(std::unique_ptr<PciDevice> device, const ControllerOpts& opts)
    : device_(std::move(device)), opts_(opts) {}

Result<std::unique_ptr<Controller>> Controller::create(std::unique_ptr<PciDevice> device,
                                                       const ControllerOpts& opts) {
  if (!device) return Unexpected(Errc::invalid_argument, "no device");
  if (opts.admin_queue_entries < 2 || opts.admin_queue_entries > 4096 ||
      opts.io_queue_entries < 2 || opts.io_queue_entries > 65536 ||
      opts.max_transfer_bytes < spec::pcie::memory_page_size_bytes ||
      opts.max_transfer_bytes % spec::pcie::memory_page_size_bytes != 0 || opts.clock == nullptr) {
    return Unexpected(Errc::invalid_argument, "controller options out of range");
  }
  std::unique_ptr<Controller> controller(new Controller(std::move(device), opts));  // setup-path
  if (auto up = controller->bring_up(); !up) {
    NVMF_ERRLOG(nvme_pcie, "%s: bring-up failed: %s", controller->address().c_str(),
                up.error().detail);
    return Unexpected(up.error());
  }
  controller->recovery_thread_ = std::thread([c = controller.get()] { c->recovery_main(); });
  return controller;
}

Controller::~Controller() {
  {
    std::lock_guard<std::mutex> lock(recovery_mutex_);
    recovery_stop_ = true;
  }
  recovery_wake_.notify_all();
  if (recovery_thread_.joinable()) recovery_thread_.join();
  std::lock_guard<std::mutex> lock(admin_mutex_);
  if (!io_queues_.empty()) NVMF_ERRLOG(nvme_pcie, "%s: destroyed with I/O queues", address().c_str());
  if (state() == ControllerState::live) {
    if (auto down = shutdown_locked(); !down) {
      NVMF_WARNLOG(nvme_pcie, "%s: shutdown: %s", address().c_str(), down.error().detail);
    }
  }
}

const NamespaceInfo* Controller::find_namespace(uint32_t nsid) const noexcept {
  for (const NamespaceInfo& ns : namespaces_) {
    if (ns.nsid == nsid) return &ns;
  }
  return nullptr;
}

ControllerStats Controller::stats() const noexcept {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return stats_;
}

void Controller::count(uint64_t ControllerStats::*field) noexcept {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  ++(stats_.*field);
}

void Controller::set_namespace_changed_callback(NamespaceChangedFn fn, void* ctx) noexcept {
  std::lock_guard<std::mutex> lock(admin_mutex_);
  namespace_changed_fn_ = fn;
  namespace_changed_ctx_ = ctx;
}

void Controller::set_removed_callback(RemovedFn fn, void* ctx) noexcept {
  std::lock_guard<std::mutex> lock(admin_mutex_);
  removed_fn_ = fn;
  removed_ctx_ = ctx;
}

// ---- bring-up ----

Result<void> Controller::bring_up() {
  std::lock_guard<std::mutex> lock(admin_mutex_);
  cap_ = device_->read64(offset::cap);
  if (cap_ == ~uint64_t{0}) return Unexpected(Errc::io_error, "CAP reads all ones: device gone");
  if ((spec::cap_css(cap_) & spec::cap_css_bit::nvm) == 0) {
    return Unexpected(Errc::not_supported, "controller does not support the NVM command set");
  }
  if (spec::cap_mpsmin(cap_) != 0) {
    return Unexpected(Errc::not_supported, "CAP.MPSMIN is above 4 KiB");
  }
  doorbell_stride_bytes_ = spec::pcie::doorbell_stride_bytes(cap_);
  io_queue_entries_ = std::min(opts_.io_queue_entries, spec::cap_mqes(cap_) + 1);
  if (auto step = disable_and_wait(); !step) return step;
  if (auto step = setup_admin_queue(); !step) return step;
  if (auto step = enable_and_wait(); !step) return step;
  if (auto step = identify_all(); !step) return step;
  if (auto step = set_queue_count(); !step) return step;
  enable_async_events_locked();
  post_async_event_requests_locked();
  state_.store(ControllerState::live, std::memory_order_release);
  int model_length = sizeof(identify_.mn);
  while (model_length > 0 && (identify_.mn[model_length - 1] == ' ' || identify_.mn[model_length - 1] == 0)) {
    --model_length;
  }
  NVMF_NOTICELOG(nvme_pcie,
                 "%s: %.*s, %zu namespaces, %u I/O queues of %u entries, max transfer %u KiB, "
                 "doorbell stride %u B",
                 address().c_str(), model_length, reinterpret_cast<const char*>(identify_.mn),
                 namespaces_.size(), io_queues_granted_, io_queue_entries_,
                 max_transfer_bytes_ / 1024, doorbell_stride_bytes_);
  return {};
}

uint32_t Controller::ready_timeout_ms() const noexcept {
  return std::max(spec::cap_timeout_ms(cap_), kReadyTimeoutMinMs);
}

Result<void> Controller::wait_ready(bool ready, const char* step) {
  const uint64_t deadline = opts_.clock->now_ns() + uint64_t{ready_timeout_ms()} * 1000000;
  for (int spins = 0;; ++spins) {
    const uint32_t csts = device_->read32(offset::csts);
    if (csts == ~uint32_t{0}) return Unexpected(Errc::io_error, "CSTS reads all ones: device gone");
    if (ready && spec::csts_cfs(csts)) return Unexpected(Errc::io_error, "controller fatal status");
    if (spec::csts_rdy(csts) == ready) return {};
    if (opts_.clock->now_ns() > deadline) return Unexpected(Errc::timed_out, step);
    sleep_a_little(spins);
  }
}

Result<void> Controller::disable_and_wait() {
  const uint32_t cc = device_->read32(offset::cc);
  if (spec::cc_en(cc)) {
    // Clearing EN while RDY is still 0 (the controller is coming up) is undefined: let it
    // finish first, as the kernel and SPDK do. A controller stuck in CFS never gets RDY.
    const uint32_t csts = device_->read32(offset::csts);
    if (!spec::csts_rdy(csts) && !spec::csts_cfs(csts)) {
      if (auto up = wait_ready(true, "CSTS.RDY = 1 before disabling"); !up) return up;
    }
    device_->write32(offset::cc, cc & ~1u);
  }
  return wait_ready(false, "CSTS.RDY did not clear within CAP.TO after CC.EN = 0");
}

Result<void> Controller::setup_admin_queue() {
  if (!admin_) {
    auto admin = std::make_unique<AdminQueue>();
    admin->entries = std::min(opts_.admin_queue_entries, spec::pcie::admin_queue_entries_max);
    env::MemoryBackend& memory = device_->dma_memory();
    auto sq = memory.allocate(admin->entries * sizeof(spec::Sqe), spec::pcie::memory_page_size_bytes);
    auto cq = memory.allocate(admin->entries * sizeof(spec::Cqe), spec::pcie::memory_page_size_bytes);
    auto data = memory.allocate(spec::identify_data_size, spec::pcie::memory_page_size_bytes);
    if (!sq || !cq || !data) return Unexpected(Errc::no_memory, "admin queue memory");
    admin->sq_region = std::move(*sq);
    admin->cq_region = std::move(*cq);
    admin->data_region = std::move(*data);
    admin->sq = static_cast<spec::Sqe*>(admin->sq_region.addr());
    admin->cq = static_cast<volatile spec::Cqe*>(admin->cq_region.addr());
    admin_ = std::move(admin);
  }
  AdminQueue& admin = *admin_;
  std::memset(admin.sq_region.addr(), 0, admin.sq_region.size_bytes());
  std::memset(admin.cq_region.addr(), 0, admin.cq_region.size_bytes());
  admin.sq_tail = 0;
  admin.cq_head = 0;
  admin.phase = true;
  admin.aers_outstanding = 0;
  device_->write32(reg::aqa, spec::pcie::make_aqa(admin.entries, admin.entries));
  device_->write64(reg::asq, admin.sq_region.iova(admin.sq_region.addr()));
  device_->write64(reg::acq, admin.cq_region.iova(admin.cq_region.addr()));
  return {};
}

Result<void> Controller::enable_and_wait() {
  spec::CcFields cc;
  cc.en = true;
  cc.css = spec::command_set_select::nvm;
  cc.mps = 0;  // 4 KiB pages
  cc.iosqes = spec::pcie::io_sq_entry_size_log2;
  cc.iocqes = spec::pcie::io_cq_entry_size_log2;
  device_->write32(offset::cc, spec::encode_cc(cc));
  return wait_ready(true, "CSTS.RDY did not set within CAP.TO after CC.EN = 1");
}

Result<void> Controller::identify_all() {
  const env::DmaRegion& data = admin_->data_region;
  auto done = admin_command_locked(spec::make_identify(0, spec::cns::controller), &data);
  if (!done) return Unexpected(done.error());
  std::memcpy(&identify_, data.addr(), sizeof(identify_));
  max_transfer_bytes_ = opts_.max_transfer_bytes;
  if (identify_.mdts != 0 && identify_.mdts < 20) {
    max_transfer_bytes_ =
        std::min(max_transfer_bytes_, spec::pcie::memory_page_size_bytes << identify_.mdts);
  }
  sgl_supported_ = (identify_.sgls & 0x3) != 0;
  auto listed = admin_command_locked(spec::make_identify(0, spec::cns::active_namespace_list), &data);
  if (!listed) return Unexpected(listed.error());
  uint32_t nsids[1024];
  std::memcpy(nsids, data.addr(), sizeof(nsids));
  namespaces_.clear();
  for (uint32_t nsid : nsids) {
    if (nsid == 0) break;
    if (auto ns = identify_namespace(nsid); !ns) return ns;
  }
  return {};
}

Result<void> Controller::identify_namespace(uint32_t nsid) {
  const env::DmaRegion& data = admin_->data_region;
  auto done = admin_command_locked(spec::make_identify(0, spec::cns::namespace_data, nsid), &data);
  if (!done) return Unexpected(done.error());
  spec::IdentifyNamespace id;
  std::memcpy(&id, data.addr(), sizeof(id));
  if (id.nsze == 0) return {};  // allocated but not active
  NamespaceInfo ns;
  ns.nsid = nsid;
  const uint8_t format = id.flbas & 0xF;
  ns.block_size_bytes = 1u << id.lbaf[format].lbads;
  ns.block_count = id.nsze;
  ns.dlfeat = id.dlfeat;
  std::memcpy(ns.nguid.data(), id.nguid, sizeof(id.nguid));
  std::memcpy(ns.eui64.data(), id.eui64, sizeof(id.eui64));
  if (id.lbaf[format].ms != 0 || ns.block_size_bytes < 512) {
    NVMF_WARNLOG(nvme_pcie, "%s: namespace %u: LBA format with metadata or below 512 B: skipped",
                 address().c_str(), nsid);
    return {};
  }
  // The descriptor list is optional before NVMe 1.3: a failure leaves NGUID/EUI64 from above.
  std::memset(data.addr(), 0, data.size_bytes());
  auto listed =
      admin_command_locked(spec::make_identify(0, spec::cns::namespace_id_descriptor_list, nsid), &data);
  spec::NamespaceIdentifiers ids;
  if (listed && spec::decode_ns_id_descriptor_list(static_cast<const uint8_t*>(data.addr()),
                                                   spec::identify_data_size, &ids) &&
      ids.has_uuid) {
    std::memcpy(ns.uuid.data(), ids.uuid, sizeof(ids.uuid));
  }
  namespaces_.push_back(ns);
  return {};
}

Result<void> Controller::set_queue_count() {
  const uint32_t wanted = std::clamp<uint32_t>(opts_.io_queues_requested, 1, 65535);
  const uint32_t dword = (wanted - 1) | ((wanted - 1) << 16);
  auto done = admin_command_locked(
      spec::make_set_features(0, spec::feature::number_of_queues, dword), nullptr);
  if (!done) return Unexpected(done.error());
  const uint32_t sqs = (done->cdw0 & 0xFFFF) + 1;
  const uint32_t cqs = (done->cdw0 >> 16) + 1;
  io_queues_granted_ = std::min({sqs, cqs, wanted});
  qid_in_use_.assign(io_queues_granted_ + 1, false);
  return {};
}

void Controller::enable_async_events_locked() {
  auto done = admin_command_locked(
      spec::make_set_features(0, spec::feature::async_event_configuration,
                              spec::async_event_config_bit::namespace_attribute),
      nullptr);
  if (!done) {
    NVMF_INFOLOG(nvme_pcie, "%s: namespace attribute notices not enabled: %s", address().c_str(),
                 done.error().detail);
  }
}

// ---- admin queue ----

void Controller::admin_push_locked(spec::Sqe sqe) {
  AdminQueue& admin = *admin_;
  admin.sq[admin.sq_tail] = sqe;
  admin.sq_tail = (admin.sq_tail + 1) % admin.entries;
  device_->write32(spec::pcie::sq_tail_doorbell(0, doorbell_stride_bytes_), admin.sq_tail);
}

// Takes the next CQE if its phase says it is new; writes the head doorbell.
bool Controller::admin_reap_locked(spec::Cqe* out) {
  AdminQueue& admin = *admin_;
  volatile spec::Cqe& slot = admin.cq[admin.cq_head];
  const uint16_t status = slot.status;
  if (spec::status_field_phase(status) != admin.phase) return false;
  std::atomic_thread_fence(std::memory_order_acquire);  // the rest of the entry after its phase
  out->cdw0 = slot.cdw0;
  out->cdw1 = slot.cdw1;
  out->sqhd = slot.sqhd;
  out->sqid = slot.sqid;
  out->cid = slot.cid;
  out->status = status;
  if (++admin.cq_head == admin.entries) {
    admin.cq_head = 0;
    admin.phase = !admin.phase;
  }
  device_->write32(spec::pcie::cq_head_doorbell(0, doorbell_stride_bytes_), admin.cq_head);
  return true;
}

Result<spec::Cqe> Controller::admin_command_locked(spec::Sqe sqe, const env::DmaRegion* data,
                                                   uint32_t timeout_ms) {
  AdminQueue& admin = *admin_;
  sqe.cid = admin.next_cid;
  admin.next_cid = static_cast<uint16_t>((admin.next_cid + 1) % kAerCidBase);
  // Commands built for Fabrics say SGL; a PCIe admin command carries PRPs (the queue
  // creation commands come with PRP1 set to the queue's base already).
  sqe.set_psdt(spec::psdt::prp);
  if (data != nullptr) spec::pcie::sqe_set_prps(sqe, data->iova(data->addr()), 0);
  admin_push_locked(sqe);
  if (timeout_ms == 0) timeout_ms = opts_.admin_timeout_ms;
  const uint64_t deadline = opts_.clock->now_ns() + uint64_t{timeout_ms} * 1000000;
  for (int spins = 0;; ++spins) {
    spec::Cqe cqe;
    while (admin_reap_locked(&cqe)) {
      if (cqe.cid >= kAerCidBase) {
        handle_async_event_locked(cqe);
        continue;
      }
      if (cqe.cid != sqe.cid) continue;  // a late answer to a command that timed out
      if (!cqe.decoded_status().is_success()) {
        NVMF_INFOLOG(nvme_pcie, "%s: admin opcode %02xh failed: %s", address().c_str(),
                     sqe.opcode, spec::status_name(cqe.decoded_status()));
        return Unexpected(Errc::io_error, "admin command failed");
      }
      return cqe;
    }
    if (opts_.clock->now_ns() > deadline) {
      NVMF_ERRLOG(nvme_pcie, "%s: admin opcode %02xh timed out after %u ms", address().c_str(),
                  sqe.opcode, timeout_ms);
      return Unexpected(Errc::timed_out, "admin command timed out");
    }
    sleep_a_little(spins);
  }
}

void Controller::post_async_event_requests_locked() {
  AdminQueue& admin = *admin_;
  const uint32_t limit = std::min<uint32_t>(kAersWanted, uint32_t{identify_.aerl} + 1);
  while (admin.aers_outstanding < limit) {
    spec::Sqe sqe = spec::pcie::make_pcie_sqe(spec::admin_opcode::async_event_request,
                                              admin.next_aer_cid);
    admin.next_aer_cid = admin.next_aer_cid == 0xFFFE ? kAerCidBase : admin.next_aer_cid + 1;
    admin_push_locked(sqe);
    ++admin.aers_outstanding;
  }
}

void Controller::poll_admin_locked() {
  spec::Cqe cqe;
  while (admin_reap_locked(&cqe)) {
    if (cqe.cid >= kAerCidBase) handle_async_event_locked(cqe);
  }
}

void Controller::handle_async_event_locked(const spec::Cqe& cqe) {
  AdminQueue& admin = *admin_;
  if (admin.aers_outstanding > 0) --admin.aers_outstanding;
  if (!cqe.decoded_status().is_success()) return;  // aborted at a reset, or a limit: not re-posted
  count(&ControllerStats::async_events);
  const uint8_t type = spec::async_event_type_of(cqe.cdw0);
  const uint8_t info = spec::async_event_info_of(cqe.cdw0);
  NVMF_NOTICELOG(nvme_pcie, "%s: asynchronous event type %u info %u log page %02xh",
                 address().c_str(), type, info, spec::async_event_log_page_of(cqe.cdw0));
  if (type == spec::async_event_type::notice &&
      info == spec::async_event_notice::namespace_attribute_changed) {
    // Reading the Changed Namespace List re-arms the notice ("Asynchronous Event Request").
    const env::DmaRegion& data = admin.data_region;
    (void)admin_command_locked(
        spec::make_get_log_page(0, 0x04, spec::identify_data_size, 0, spec::nsid_all), &data);
    if (namespace_changed_fn_ != nullptr) namespace_changed_fn_(namespace_changed_ctx_, *this);
  }
  post_async_event_requests_locked();
}

// ---- I/O queue creation ----

Result<std::unique_ptr<IoQueue>> Controller::create_io_queue() {
  std::lock_guard<std::mutex> lock(admin_mutex_);
  if (state() != ControllerState::live) {
    return Unexpected(Errc::bad_state, "controller is not live");
  }
  uint16_t qid = 0;
  for (uint32_t candidate = 1; candidate < qid_in_use_.size(); ++candidate) {
    if (!qid_in_use_[candidate]) {
      qid = static_cast<uint16_t>(candidate);
      break;
    }
  }
  if (qid == 0) return Unexpected(Errc::busy, "every granted I/O queue is in use");
  std::unique_ptr<IoQueue> queue(new IoQueue(*this, qid, io_queue_entries_));  // setup-path
  if (auto allocated = queue->allocate(); !allocated) return Unexpected(allocated.error());
  if (auto created = create_device_queues_locked(*queue); !created) {
    return Unexpected(created.error());
  }
  qid_in_use_[qid] = true;
  io_queues_.push_back(queue.get());
  return queue;
}

Result<void> Controller::create_device_queues_locked(IoQueue& queue) {
  auto cq = admin_command_locked(
      spec::pcie::make_create_io_cq(0, queue.qid_, queue.entries_,
                                    queue.cq_region_.iova(queue.cq_region_.addr())),
      nullptr);
  if (!cq) return Unexpected(cq.error());
  auto sq = admin_command_locked(
      spec::pcie::make_create_io_sq(0, queue.qid_, queue.entries_,
                                    queue.sq_region_.iova(queue.sq_region_.addr()), queue.qid_),
      nullptr);
  if (!sq) return Unexpected(sq.error());
  return {};
}

Result<void> Controller::delete_device_queues_locked(IoQueue& queue, uint32_t timeout_ms) {
  auto sq = admin_command_locked(
      spec::pcie::make_delete_io_queue(spec::admin_opcode::delete_io_sq, 0, queue.qid_), nullptr,
      timeout_ms);
  if (!sq) return Unexpected(sq.error());
  auto cq = admin_command_locked(
      spec::pcie::make_delete_io_queue(spec::admin_opcode::delete_io_cq, 0, queue.qid_), nullptr,
      timeout_ms);
  if (!cq) return Unexpected(cq.error());
  return {};
}

void Controller::destroy_io_queue(IoQueue& queue) {
  std::lock_guard<std::mutex> lock(admin_mutex_);
  if (state() == ControllerState::live) (void)delete_device_queues_locked(queue, 0);
  qid_in_use_[queue.qid_] = false;
  io_queues_.erase(std::find(io_queues_.begin(), io_queues_.end(), &queue));
}

// ---- recovery ----

void Controller::request_recovery() noexcept {
  {
    std::lock_guard<std::mutex> lock(recovery_mutex_);
    recovery_requested_ = true;
  }
  recovery_wake_.notify_all();
}

void Controller::recovery_main() {
  std::unique_lock<std::mutex> lock(recovery_mutex_);
  while (!recovery_stop_) {
    recovery_wake_.wait_for(lock, std::chrono::milliseconds(opts_.health_check_interval_ms),
                            [&] { return recovery_stop_ || recovery_requested_; });
    if (recovery_stop_) break;
    recovery_requested_ = false;
    lock.unlock();
    {
      std::lock_guard<std::mutex> admin_lock(admin_mutex_);
      const ControllerState current = state();
      if (current == ControllerState::live || current == ControllerState::resetting) {
        check_health_locked();
        if (state() == ControllerState::live) poll_admin_locked();
        if (state() == ControllerState::live) check_timeouts_locked();
      }
    }
    lock.lock();
  }
}

void Controller::check_health_locked() {
  if (removal_requested()) {
    mark_removed_locked("the kernel asks for the device back (hot removal)");
    // No queue may touch BAR0 once it is unmapped: wait for owners inside submit()/poll().
    for (IoQueue* queue : io_queues_) {
      while (queue->active_.load(std::memory_order_seq_cst)) std::this_thread::yield();
    }
    device_->release();
    NVMF_NOTICELOG(nvme_pcie, "%s: device released to the kernel", address().c_str());
    return;
  }
  const uint32_t csts = device_->read32(offset::csts);
  if (csts == ~uint32_t{0}) {
    mark_removed_locked("registers read all ones (surprise removal)");
    return;
  }
  if (spec::csts_cfs(csts)) {
    NVMF_ERRLOG(nvme_pcie, "%s: controller fatal status (CSTS.CFS): resetting", address().c_str());
    (void)reset_locked();
  }
}

bool Controller::removal_requested() noexcept {
  const int fd = device_->removal_request_fd();
  if (fd < 0) return false;
  uint64_t count = 0;
  return read(fd, &count, sizeof(count)) == sizeof(count) && count > 0;
}

void Controller::mark_removed_locked(const char* why) {
  if (state() == ControllerState::removed) return;
  NVMF_ERRLOG(nvme_pcie, "%s: %s: device removed; its I/O fails", address().c_str(), why);
  state_.store(ControllerState::removed, std::memory_order_seq_cst);
  if (removed_fn_ != nullptr) removed_fn_(removed_ctx_, *this);
}

// A command past its deadline gets an Abort; if it is still the oldest one a timeout later,
// the controller is reset.
void Controller::check_timeouts_locked() {
  if (opts_.io_timeout_ms == 0) return;
  const uint64_t now_ms = opts_.clock->now_ns() / 1000000;
  for (IoQueue* queue : io_queues_) {
    const uint64_t oldest = queue->oldest_.load(std::memory_order_acquire);
    if (oldest == 0) continue;
    const uint64_t deadline_ms = oldest >> 16;
    const auto cid = static_cast<uint16_t>(oldest & 0xFFFF);
    if (now_ms < deadline_ms) continue;
    PendingAbort* pending = nullptr;
    for (PendingAbort& abort : pending_aborts_) {
      if (abort.queue == queue && abort.oldest == oldest) pending = &abort;
    }
    if (pending == nullptr) {
      NVMF_WARNLOG(nvme_pcie, "%s: command %u on queue %u timed out after %u ms: aborting",
                   address().c_str(), cid, queue->qid_, opts_.io_timeout_ms);
      count(&ControllerStats::timeouts);
      count(&ControllerStats::aborts_sent);
      pending_aborts_.push_back({queue, oldest, now_ms + opts_.io_timeout_ms});
      (void)admin_command_locked(spec::pcie::make_abort(0, queue->qid_, cid), nullptr);
    } else if (now_ms >= pending->escalate_at_ms) {
      NVMF_ERRLOG(nvme_pcie, "%s: command %u on queue %u still outstanding after an Abort: "
                             "resetting the controller",
                  address().c_str(), cid, queue->qid_);
      (void)reset_locked();
      return;
    }
  }
}

Result<void> Controller::reset() {
  std::lock_guard<std::mutex> lock(admin_mutex_);
  return reset_locked();
}

// Quiesces every queue, disables, re-enables, recreates the I/O queues and lets their owners
// resubmit. Caller holds admin_mutex_.
Result<void> Controller::reset_locked() {
  const ControllerState before = state();
  if (before == ControllerState::removed || before == ControllerState::shut_down) {
    return Unexpected(Errc::bad_state, "controller removed or shut down");
  }
  count(&ControllerStats::resets);
  pending_aborts_.clear();
  state_.store(ControllerState::resetting, std::memory_order_seq_cst);
  // After this, an owner entering submit() or poll() sees `resetting` and leaves the rings
  // alone; one already inside finishes first.
  for (IoQueue* queue : io_queues_) {
    while (queue->active_.load(std::memory_order_seq_cst)) std::this_thread::yield();
  }
  delete_queues_before_reset_locked();
  Result<void> result = disable_and_wait();
  if (result) result = setup_admin_queue();
  if (result) result = enable_and_wait();
  if (result) result = set_queue_count_again_locked();
  if (result) {
    enable_async_events_locked();
    for (IoQueue* queue : io_queues_) {
      queue->reset_rings();
      if (result) result = create_device_queues_locked(*queue);
    }
  }
  if (!result) {
    const uint32_t csts = device_->read32(offset::csts);
    if (csts == ~uint32_t{0}) {
      mark_removed_locked("registers read all ones after a failed reset");
    } else {
      NVMF_ERRLOG(nvme_pcie, "%s: reset failed (%s): controller failed; its I/O fails",
                  address().c_str(), result.error().detail);
      state_.store(ControllerState::failed, std::memory_order_seq_cst);
    }
    return result;
  }
  post_async_event_requests_locked();
  generation_.fetch_add(1, std::memory_order_release);
  state_.store(ControllerState::live, std::memory_order_seq_cst);
  NVMF_NOTICELOG(nvme_pcie, "%s: controller reset complete", address().c_str());
  return {};
}

// As the kernel does before it disables a controller that still answers: delete the I/O
// queues, so the controller finishes or aborts their commands in order rather than having
// them cut off by CC.EN = 0 (some devices, and QEMU under load, handle the latter badly).
// Their answers land in rings that are zeroed next. A controller in fatal status, or one that
// does not answer within a short time, is disabled at once.
void Controller::delete_queues_before_reset_locked() {
  constexpr uint32_t kDeleteTimeoutMs = 500;
  const uint32_t csts = device_->read32(offset::csts);
  if (csts == ~uint32_t{0} || spec::csts_cfs(csts) || !spec::csts_rdy(csts)) return;
  for (IoQueue* queue : io_queues_) {
    if (!delete_device_queues_locked(*queue, kDeleteTimeoutMs)) return;
  }
}

// After a reset the queue count is back to "none requested": ask again, and keep the grant we
// sized the queue table for (a controller granting fewer now is treated as failed).
Result<void> Controller::set_queue_count_again_locked() {
  const uint32_t granted = io_queues_granted_;
  auto vector = qid_in_use_;
  if (auto asked = set_queue_count(); !asked) return asked;
  const bool enough = io_queues_granted_ >= granted;
  io_queues_granted_ = granted;
  qid_in_use_ = std::move(vector);
  if (!enough) return Unexpected(Errc::io_error, "fewer I/O queues granted after the reset");
  return {};
}

Result<void> Controller::shutdown() {
  std::lock_guard<std::mutex> lock(admin_mutex_);
  return shutdown_locked();
}

Result<void> Controller::shutdown_locked() {
  const ControllerState before = state();
  if (before == ControllerState::shut_down || before == ControllerState::removed) return {};
  state_.store(ControllerState::shut_down, std::memory_order_seq_cst);
  const uint32_t cc = device_->read32(offset::cc);
  device_->write32(offset::cc, (cc & ~(0x3u << 14)) | (uint32_t{spec::shutdown_notification::normal} << 14));
  const uint64_t deadline = opts_.clock->now_ns() + uint64_t{ready_timeout_ms()} * 1000000;
  for (int spins = 0;; ++spins) {
    const uint32_t csts = device_->read32(offset::csts);
    if (csts == ~uint32_t{0}) return Unexpected(Errc::io_error, "device gone during shutdown");
    if (spec::csts_shst(csts) == spec::shutdown_status::complete) break;
    if (opts_.clock->now_ns() > deadline) {
      return Unexpected(Errc::timed_out, "CSTS.SHST did not report complete within CAP.TO");
    }
    sleep_a_little(spins);
  }
  NVMF_INFOLOG(nvme_pcie, "%s: shut down", address().c_str());
  return {};
}

}  // namespace nvmf::nvme_pcie
