// ModelController: creation, BAR0 registers, the enable / reset / shutdown state machine,
// doorbells, completion posting, fault injection and the IOMMU check. Admin commands are in
// model_admin.cpp, NVM commands and PRP / SGL walking in model_io.cpp.
#include "nvme_pcie/model/model_controller.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "common/log.h"
#include "common/util.h"
#include "spec/fabrics.h"
#include "spec/pcie.h"

NVMF_LOG_COMPONENT(nvme_model);

namespace nvmf::nvme_pcie::model {

namespace {

namespace reg = spec::pcie::reg;
namespace offset = spec::property_offset;

constexpr uint32_t kAdminQid = 0;
// Identify Controller ACL / AERL are 0's based: 4 Aborts and 4 AERs outstanding at most.
constexpr uint32_t kAsyncEventsMax = 4;
constexpr size_t kChangedNamespacesMax = 1024;  // entries of log page 04h

const char* check_opts(const ModelOpts& opts) noexcept {
  if (opts.mqes < 1 || opts.mqes > 0xFFFF) return "mqes must be 1..65535 (0's based)";
  if (opts.dstrd > 15) return "dstrd must be 0..15";
  if (opts.timeout_500ms == 0) return "timeout_500ms must be at least 1";
  if (opts.mpsmin > opts.mpsmax || opts.mpsmax > 15) return "need mpsmin <= mpsmax <= 15";
  if (opts.io_queue_pairs_max < 1 || opts.io_queue_pairs_max > 0xFFFE) {
    return "io_queue_pairs_max must be 1..65534";
  }
  if (opts.serial.size() > 20) return "serial is longer than 20 characters (Identify SN)";
  if (opts.model_number.size() > 40) return "model_number is longer than 40 characters (MN)";
  if (opts.firmware.size() > 8) return "firmware is longer than 8 characters (FR)";
  if (opts.namespaces.size() > kChangedNamespacesMax) return "more than 1024 namespaces";
  return nullptr;
}

const char* check_namespace(const ModelNamespace& ns) noexcept {
  if (ns.nsid == spec::nsid_none || ns.nsid >= 0xFFFFFFFE) {
    return "namespace nsid must be 1..FFFFFFFDh";
  }
  if (ns.block_size_bytes != 512 && ns.block_size_bytes != 4096) {
    return "namespace block_size_bytes must be 512 or 4096";
  }
  if (ns.block_count == 0) return "namespace block_count is 0";
  if (ns.block_count > (uint64_t{1} << 48) / ns.block_size_bytes) {
    return "namespace larger than 256 TiB";
  }
  return nullptr;
}

uint64_t make_cap(const ModelOpts& opts) noexcept {
  spec::CapFields fields;
  fields.mqes = opts.mqes;
  fields.cqr = true;  // I/O queues must be physically contiguous (PC = 1)
  fields.to = opts.timeout_500ms;
  fields.dstrd = opts.dstrd;
  fields.nssrs = opts.nssr_supported;
  fields.css = spec::cap_css_bit::nvm;
  fields.mpsmin = opts.mpsmin;
  fields.mpsmax = opts.mpsmax;
  return spec::encode_cap(fields);
}

uint32_t low_half(uint64_t value) noexcept { return static_cast<uint32_t>(value); }
uint32_t high_half(uint64_t value) noexcept { return static_cast<uint32_t>(value >> 32); }
uint64_t with_low_half(uint64_t value, uint32_t low) noexcept {
  return (value & 0xFFFFFFFF00000000ull) | low;
}
uint64_t with_high_half(uint64_t value, uint32_t high) noexcept {
  return (value & 0xFFFFFFFFull) | (uint64_t{high} << 32);
}

}  // namespace

// --- Creation ---

Result<std::unique_ptr<ModelController>> ModelController::create(const ModelOpts& opts) {
  if (const char* problem = check_opts(opts)) {
    NVMF_ERRLOG(nvme_model, "%s: %s", opts.name.c_str(), problem);
    return Unexpected(Errc::invalid_argument, problem);
  }
  env::PosixMemoryOpts memory_opts;
  memory_opts.hugepages = env::HugepageMode::off;
  auto dma_memory = env::PosixMemoryBackend::create(memory_opts);
  if (!dma_memory) return Unexpected(dma_memory.error());
  // Namespace storage: lazily faulted zero pages, so a large namespace costs only what is
  // written. A backend of its own keeps it out of the device's DMA reach.
  memory_opts.populate = false;
  auto storage_memory = env::PosixMemoryBackend::create(memory_opts);
  if (!storage_memory) return Unexpected(storage_memory.error());

  std::unique_ptr<ModelController> model(new ModelController(  // setup-path
      opts, std::move(*dma_memory), std::move(*storage_memory)));
  if (auto created = model->create_namespaces(); !created) return Unexpected(created.error());
  NVMF_INFOLOG(nvme_model, "%s: %zu namespace(s), %u I/O queue pairs, MQES %u, MDTS %u",
               opts.name.c_str(), model->namespaces_.size(), opts.io_queue_pairs_max, opts.mqes,
               opts.mdts);
  return model;
}

ModelController::ModelController(const ModelOpts& opts,
                                 std::unique_ptr<env::PosixMemoryBackend> dma_memory,
                                 std::unique_ptr<env::PosixMemoryBackend> storage_memory) noexcept
    : opts_(opts),
      cap_(make_cap(opts)),
      vs_(spec::make_version(1, 4)),
      doorbell_stride_bytes_(spec::pcie::doorbell_stride_bytes(cap_)),
      dma_memory_(std::move(dma_memory)),
      storage_memory_(std::move(storage_memory)) {
  sqs_.resize(size_t{opts.io_queue_pairs_max} + 1);
  cqs_.resize(size_t{opts.io_queue_pairs_max} + 1);
  held_.reserve(256);
  changed_nsids_.reserve(kChangedNamespacesMax);
  queues_granted_sq_ = opts.io_queue_pairs_max;
  queues_granted_cq_ = opts.io_queue_pairs_max;
  write_cache_enabled_ = opts.volatile_write_cache;
}

ModelController::~ModelController() {
  // Storage regions go back to their backend before it is destroyed (member order would
  // destroy namespaces_ after storage_memory_).
  namespaces_.clear();
}

Result<void> ModelController::create_namespaces() noexcept {
  std::vector<ModelNamespace> sorted = opts_.namespaces;
  std::sort(sorted.begin(), sorted.end(),
            [](const ModelNamespace& a, const ModelNamespace& b) { return a.nsid < b.nsid; });
  namespaces_.reserve(sorted.size());
  for (size_t i = 0; i < sorted.size(); ++i) {
    const char* problem = check_namespace(sorted[i]);
    if (problem == nullptr && i > 0 && sorted[i - 1].nsid == sorted[i].nsid) {
      problem = "two namespaces with the same nsid";
    }
    if (problem != nullptr) {
      NVMF_ERRLOG(nvme_model, "%s: nsid %u: %s", opts_.name.c_str(), sorted[i].nsid, problem);
      return Unexpected(Errc::invalid_argument, problem);
    }
    auto storage = storage_memory_->allocate(sorted[i].block_count * sorted[i].block_size_bytes, 0);
    if (!storage) return Unexpected(storage.error());
    NamespaceState& ns = namespaces_.emplace_back();
    ns.config = sorted[i];
    ns.active = sorted[i].active;
    ns.storage = std::move(*storage);
    nn_ = sorted[i].nsid;
  }
  return {};
}

uint32_t ModelController::bar0_size_bytes() const noexcept {
  return reg::doorbell_base +
         2u * (uint32_t{opts_.io_queue_pairs_max} + 1) * doorbell_stride_bytes_;
}

// --- Registers ---

uint32_t ModelController::read32(uint32_t offset) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (removed_.load(std::memory_order_relaxed)) return 0xFFFFFFFF;
  return read32_locked(offset);
}

uint64_t ModelController::read64(uint32_t offset) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (removed_.load(std::memory_order_relaxed)) return ~uint64_t{0};
  switch (offset) {
    case offset::cap:
      return cap_;
    case reg::asq:
      return asq_;
    case reg::acq:
      return acq_;
    default:
      return uint64_t{read32_locked(offset)} | (uint64_t{read32_locked(offset + 4)} << 32);
  }
}

uint32_t ModelController::read32_locked(uint32_t offset) noexcept {
  switch (offset) {
    case offset::cap:
      return low_half(cap_);
    case offset::cap + 4:
      return high_half(cap_);
    case offset::vs:
      return vs_;
    case offset::cc:
      return cc_;
    case offset::csts:
      return read_csts_locked();
    case offset::nssr:
      return 0;  // reads as 0 ("NVMe" is write-only in effect)
    case reg::aqa:
      return aqa_;
    case reg::asq:
      return low_half(asq_);
    case reg::asq + 4:
      return high_half(asq_);
    case reg::acq:
      return low_half(acq_);
    case reg::acq + 4:
      return high_half(acq_);
    default:
      return 0;  // INTMS/INTMC (interrupts are not modelled), reserved, doorbells
  }
}

// CSTS reads are the model's clock: the RDY and SHST delays count them down.
uint32_t ModelController::read_csts_locked() noexcept {
  if (state_ == State::enabling || state_ == State::disabling) {
    if (ready_countdown_reads_ > 0) {
      --ready_countdown_reads_;
    } else if (state_ == State::enabling) {
      state_ = State::ready;
      NVMF_INFOLOG(nvme_model, "%s: ready", opts_.name.c_str());
    } else {
      state_ = State::disabled;
    }
  }
  if (shutdown_ == Shutdown::occurring) {
    if (shutdown_countdown_reads_ > 0) {
      --shutdown_countdown_reads_;
    } else {
      shutdown_ = Shutdown::complete;
    }
  }
  spec::CstsFields csts;
  csts.rdy = state_ == State::ready || state_ == State::disabling;
  csts.cfs = state_ == State::failed || fatal_;
  csts.shst = shutdown_ == Shutdown::none        ? spec::shutdown_status::normal
              : shutdown_ == Shutdown::occurring ? spec::shutdown_status::occurring
                                                 : spec::shutdown_status::complete;
  csts.nssro = nssr_occurred_;
  return spec::encode_csts(csts);
}

void ModelController::write32(uint32_t offset, uint32_t value) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (removed_.load(std::memory_order_relaxed)) return;
  if (offset >= reg::doorbell_base) {
    write_doorbell_locked(offset, value);
    return;
  }
  switch (offset) {
    case offset::cc:
      write_cc_locked(value);
      break;
    case offset::csts:
      if (spec::csts_nssro(value)) nssr_occurred_ = false;  // NSSRO is RW1C
      break;
    case offset::nssr:
      write_nssr_locked(value);
      break;
    case reg::aqa:
      aqa_ = value & 0x0FFF0FFF;  // ASQS 11:0, ACQS 27:16, the rest reserved
      break;
    case reg::asq:
      asq_ = with_low_half(asq_, value);
      break;
    case reg::asq + 4:
      asq_ = with_high_half(asq_, value);
      break;
    case reg::acq:
      acq_ = with_low_half(acq_, value);
      break;
    case reg::acq + 4:
      acq_ = with_high_half(acq_, value);
      break;
    default:
      break;  // CAP, VS (read-only), INTMS / INTMC (no interrupts), reserved
  }
}

void ModelController::write64(uint32_t offset, uint64_t value) noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (removed_.load(std::memory_order_relaxed)) return;
    if (offset == reg::asq) {
      asq_ = value;
      return;
    }
    if (offset == reg::acq) {
      acq_ = value;
      return;
    }
  }
  write32(offset, low_half(value));
  write32(offset + 4, high_half(value));
}

void ModelController::write_cc_locked(uint32_t value) noexcept {
  const bool was_enabled = spec::cc_en(cc_);
  const bool enable = spec::cc_en(value);
  const uint8_t old_shn = spec::cc_shn(cc_);
  cc_ = value;
  if (!was_enabled && enable) {
    enable_locked();
  } else if (was_enabled && !enable) {
    reset_locked();
    // RDY, when it was set, lingers for ready_delay_reads CSTS reads.
    const bool rdy_set = state_ == State::ready;
    state_ = rdy_set && opts_.ready_delay_reads > 0 ? State::disabling : State::disabled;
    ready_countdown_reads_ = opts_.ready_delay_reads;
  }
  const uint8_t shn = spec::cc_shn(value);
  if (enable && old_shn == spec::shutdown_notification::none &&
      shn != spec::shutdown_notification::none && shutdown_ == Shutdown::none) {
    // Normal and abrupt shutdown look the same here: no cache to flush, nothing in flight.
    shutdown_ = Shutdown::occurring;
    shutdown_countdown_reads_ = opts_.shutdown_delay_reads;
    NVMF_INFOLOG(nvme_model, "%s: shutdown notification (SHN %u)", opts_.name.c_str(), shn);
  }
}

void ModelController::write_nssr_locked(uint32_t value) noexcept {
  if (!opts_.nssr_supported || value != spec::nssr_reset_value) return;
  NVMF_NOTICELOG(nvme_model, "%s: NVM subsystem reset", opts_.name.c_str());
  reset_locked();
  cc_ = 0;
  state_ = State::disabled;
  nssr_occurred_ = true;
}

// Why the configuration cannot be enabled, or nullptr.
const char* ModelController::check_enable_config_locked() noexcept {
  const uint8_t mps = spec::cc_mps(cc_);
  if (mps < opts_.mpsmin || mps > opts_.mpsmax) return "CC.MPS outside CAP.MPSMIN..MPSMAX";
  if (spec::cc_css(cc_) != spec::command_set_select::nvm) return "CC.CSS is not NVM";
  if (spec::cc_ams(cc_) != 0) return "CC.AMS is not round robin";
  const uint32_t sq_entries = spec::pcie::aqa_sq_entries(aqa_);
  const uint32_t cq_entries = spec::pcie::aqa_cq_entries(aqa_);
  if (sq_entries < 2 || cq_entries < 2) return "AQA: admin queues need 2 entries or more";
  const uint64_t page = uint64_t{4096} << mps;
  if (asq_ % page != 0 || acq_ % page != 0) return "ASQ/ACQ not aligned to the memory page";
  if (dma_pointer_locked(asq_, uint64_t{sq_entries} * sizeof(spec::Sqe)) == nullptr) {
    return "ASQ outside DMA memory";
  }
  if (dma_pointer_locked(acq_, uint64_t{cq_entries} * sizeof(spec::Cqe)) == nullptr) {
    return "ACQ outside DMA memory";
  }
  return nullptr;
}

void ModelController::enable_locked() noexcept {
  if (state_ == State::disabling) state_ = State::disabled;  // the reset is already done
  if (const char* problem = check_enable_config_locked()) {
    NVMF_WARNLOG(nvme_model, "%s: CC.EN = 1 refused, CSTS.CFS set: %s", opts_.name.c_str(),
                 problem);
    state_ = State::failed;
    return;
  }
  page_size_bytes_ = 4096u << spec::cc_mps(cc_);
  SubmissionQueue& sq = sqs_[kAdminQid];
  sq = SubmissionQueue{};
  sq.exists = true;
  sq.entries = spec::pcie::aqa_sq_entries(aqa_);
  sq.base = reinterpret_cast<uint8_t*>(asq_);
  CompletionQueue& cq = cqs_[kAdminQid];
  cq.exists = true;
  cq.entries = spec::pcie::aqa_cq_entries(aqa_);
  cq.base = reinterpret_cast<uint8_t*>(acq_);
  cq.tail = cq.head = 0;
  cq.phase = true;
  cq.sq_users = 1;
  cq.waiting.resize(cq.entries);
  cq.waiting_first = cq.waiting_count = 0;
  ready_countdown_reads_ = opts_.ready_delay_reads;
  state_ = ready_countdown_reads_ == 0 ? State::ready : State::enabling;
}

// Controller Level Reset: queues, held commands, AERs, features and fatal status go away.
// What the host has not consumed is dropped without a completion, as hardware does.
void ModelController::reset_locked() noexcept {
  ++stats_.resets;
  for (SubmissionQueue& sq : sqs_) sq = SubmissionQueue{};
  for (CompletionQueue& cq : cqs_) {
    cq.exists = false;
    cq.sq_users = 0;
    cq.waiting_count = 0;
  }
  if (!held_.empty()) {
    NVMF_INFOLOG(nvme_model, "%s: reset drops %zu held command(s)", opts_.name.c_str(),
                 held_.size());
  }
  held_.clear();
  fatal_ = false;
  shutdown_ = Shutdown::none;
  queues_granted_sq_ = opts_.io_queue_pairs_max;
  queues_granted_cq_ = opts_.io_queue_pairs_max;
  write_cache_enabled_ = opts_.volatile_write_cache;
  async_event_config_ = 0;
  keep_alive_timeout_ms_ = 0;
  // An event raised but not sent stays pending for the next AER; the log page survives too
  // (it describes the subsystem, not the controller's session).
  namespace_event_masked_ = false;
  // Armed stall() / fail_next() injections stay armed: the test asked for them.
}

// --- Doorbells ---

// Why a doorbell write must be ignored, or nullptr.
const char* ModelController::doorbell_problem_locked(uint32_t offset,
                                                     uint32_t value) const noexcept {
  const uint32_t relative = offset - reg::doorbell_base;
  if (relative % doorbell_stride_bytes_ != 0) return "not on the doorbell stride";
  if (state_ != State::ready) return "controller not ready";
  const uint32_t index = relative / doorbell_stride_bytes_;
  const uint32_t qid = index / 2;
  if (qid >= sqs_.size()) return "beyond the last queue";
  if (index % 2 == 0) {
    if (!sqs_[qid].exists) return "no such queue";
    return value < sqs_[qid].entries ? nullptr : "value out of range";
  }
  const CompletionQueue& cq = cqs_[qid];
  if (!cq.exists) return "no such queue";
  if (value >= cq.entries) return "value out of range";
  const uint32_t posted = (cq.tail + cq.entries - cq.head) % cq.entries;
  const uint32_t consumed = (value + cq.entries - cq.head) % cq.entries;
  return consumed <= posted ? nullptr : "head passes entries not posted yet";
}

void ModelController::write_doorbell_locked(uint32_t offset, uint32_t value) noexcept {
  const uint32_t index = (offset - reg::doorbell_base) / doorbell_stride_bytes_;
  const uint16_t qid = static_cast<uint16_t>(index / 2);
  const bool is_cq = index % 2 == 1;
  if (const char* problem = doorbell_problem_locked(offset, value)) {
    ++stats_.invalid_doorbell_writes;
    NVMF_WARNLOG(nvme_model, "%s: ignored %s doorbell write of %u to queue %u: %s",
                 opts_.name.c_str(), is_cq ? "CQ head" : "SQ tail", value, index / 2, problem);
    return;
  }
  if (is_cq) {
    ++stats_.cq_head_doorbell_writes;
    cqs_[qid].head = value;
    if (!fatal_) flush_waiting_locked(cqs_[qid]);
    return;
  }
  ++stats_.sq_tail_doorbell_writes;
  sqs_[qid].tail = value;
  process_sq_locked(qid);
}

bool ModelController::fetching_allowed_locked() const noexcept {
  return state_ == State::ready && !fatal_ && shutdown_ == Shutdown::none &&
         !removed_.load(std::memory_order_relaxed);
}

void ModelController::process_sq_locked(uint16_t sqid) noexcept {
  SubmissionQueue& sq = sqs_[sqid];
  // A command may delete its own queue's neighbours but never this SQ while it is being
  // fetched: Delete I/O SQ comes on the admin queue, which is never deleted.
  while (sq.exists && sq.head != sq.tail && fetching_allowed_locked()) {
    spec::Sqe sqe;
    std::memcpy(&sqe, sq.base + size_t{sq.head} * sizeof(spec::Sqe), sizeof(sqe));
    sq.head = (sq.head + 1) % sq.entries;
    process_command_locked(sqid, sqe);
  }
}

void ModelController::process_command_locked(uint16_t sqid, const spec::Sqe& sqe) noexcept {
  const bool admin = sqid == kAdminQid;
  (admin ? stats_.admin_commands : stats_.io_commands)[sqe.opcode]++;
  Outcome outcome;
  if (!take_injection_locked(admin, sqe.opcode, &outcome)) {
    if (outcome.held) {
      held_.push_back(HeldCommand{sqe, sqid, HeldKind::stalled});
      return;
    }
    outcome = execute_locked(sqid, sqe);
    if (outcome.held) return;
  }
  post_locked(sqid, sqe.cid, outcome);
}

// True when an injected failure decided the outcome; a stall sets outcome->held instead.
bool ModelController::take_injection_locked(bool admin, uint8_t opcode, Outcome* outcome) noexcept {
  Injection& injection = (admin ? admin_injections_ : io_injections_)[opcode];
  if (injection.fail_count > 0) {
    --injection.fail_count;
    outcome->status = injection.fail_status;
    return true;
  }
  if (injection.stall_count > 0) {
    --injection.stall_count;
    outcome->held = true;
  }
  return false;
}

ModelController::Outcome ModelController::execute_locked(uint16_t sqid,
                                                         const spec::Sqe& sqe) noexcept {
  if (sqe.fuse() != spec::fuse::normal) {
    return Outcome{spec::generic_status(spec::sc_generic::invalid_field, true), 0, false};
  }
  return sqid == kAdminQid ? execute_admin_locked(sqe) : execute_io_locked(sqe);
}

// --- Completions ---

bool ModelController::cq_full(const CompletionQueue& cq) noexcept {
  return (cq.tail + 1) % cq.entries == cq.head;
}

void ModelController::post_locked(uint16_t sqid, uint16_t cid, const Outcome& outcome) noexcept {
  const SubmissionQueue& sq = sqs_[sqid];
  CompletionQueue& cq = cqs_[sq.cqid];
  if (!sq.exists || !cq.exists || fatal_) return;
  spec::Cqe cqe{};
  cqe.cdw0 = outcome.cdw0;
  cqe.sqhd = static_cast<uint16_t>(sq.head);
  cqe.sqid = sqid;
  cqe.cid = cid;
  cqe.set_status(outcome.status, false);  // the phase is added when it is written
  if (cq.waiting_count > 0 || cq_full(cq)) {
    if (cq.waiting_count == cq.waiting.size()) {
      // Unwrap into a larger ring (rare: a host with more outstanding than its SQs hold).
      std::vector<spec::Cqe> larger(cq.waiting.size() * 2 + 1);
      for (uint32_t i = 0; i < cq.waiting_count; ++i) {
        larger[i] = cq.waiting[(cq.waiting_first + i) % cq.waiting.size()];
      }
      cq.waiting = std::move(larger);
      cq.waiting_first = 0;
    }
    cq.waiting[(cq.waiting_first + cq.waiting_count) % cq.waiting.size()] = cqe;
    ++cq.waiting_count;
    return;
  }
  write_cqe_locked(cq, cqe);
}

void ModelController::write_cqe_locked(CompletionQueue& cq, const spec::Cqe& cqe) noexcept {
  uint8_t* slot = cq.base + size_t{cq.tail} * sizeof(spec::Cqe);
  // The host may poll this CQ from another thread: write everything but the status first,
  // then publish the status (with the new phase tag) with a release store, as the PCIe write
  // ordering of one CQE posting makes it visible last on real hardware.
  std::memcpy(slot, &cqe, offsetof(spec::Cqe, status));
  const uint16_t status = static_cast<uint16_t>((cqe.status & ~1u) | (cq.phase ? 1u : 0u));
  std::atomic_ref<uint16_t>(*reinterpret_cast<uint16_t*>(slot + offsetof(spec::Cqe, status)))
      .store(status, std::memory_order_release);
  cq.tail = (cq.tail + 1) % cq.entries;
  if (cq.tail == 0) cq.phase = !cq.phase;
  ++stats_.completions_posted;
}

void ModelController::flush_waiting_locked(CompletionQueue& cq) noexcept {
  while (cq.waiting_count > 0 && !cq_full(cq)) {
    write_cqe_locked(cq, cq.waiting[cq.waiting_first]);
    cq.waiting_first = (cq.waiting_first + 1) % static_cast<uint32_t>(cq.waiting.size());
    --cq.waiting_count;
  }
}

// Completes held_[index] with `status` and removes it, keeping arrival order.
void ModelController::complete_held_locked(size_t index, spec::Status status) noexcept {
  const HeldCommand command = held_[index];
  held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(index));
  post_locked(command.sqid, command.sqe.cid, Outcome{status, 0, false});
}

// --- Fault injection ---

void ModelController::stall(uint8_t opcode, bool admin, unsigned count) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  (admin ? admin_injections_ : io_injections_)[opcode].stall_count = count;
}

unsigned ModelController::release_stalled() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (removed_.load(std::memory_order_relaxed) || fatal_) return 0;
  unsigned released = 0;
  for (size_t i = 0; i < held_.size();) {
    if (held_[i].kind != HeldKind::stalled) {
      ++i;
      continue;
    }
    const HeldCommand command = held_[i];
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
    const Outcome outcome = execute_locked(command.sqid, command.sqe);
    if (!outcome.held) post_locked(command.sqid, command.sqe.cid, outcome);
    ++released;
    // Executing may have appended to held_ (an AER); those sit behind i and are skipped.
  }
  return released;
}

unsigned ModelController::stalled_count() const noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<unsigned>(std::count_if(held_.begin(), held_.end(), [](const HeldCommand& c) {
    return c.kind == HeldKind::stalled;
  }));
}

void ModelController::fail_next(uint8_t opcode, spec::Status status, unsigned count,
                                bool admin) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  Injection& injection = (admin ? admin_injections_ : io_injections_)[opcode];
  injection.fail_count = count;
  injection.fail_status = status;
}

void ModelController::inject_fatal() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  NVMF_NOTICELOG(nvme_model, "%s: injected controller fatal status", opts_.name.c_str());
  fatal_ = true;
}

void ModelController::remove() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  NVMF_NOTICELOG(nvme_model, "%s: surprise removal", opts_.name.c_str());
  removed_.store(true, std::memory_order_relaxed);
}

bool ModelController::removed() const noexcept { return removed_.load(std::memory_order_relaxed); }

void ModelController::raise_namespace_changed(uint32_t nsid) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (removed_.load(std::memory_order_relaxed)) return;
  if (std::find(changed_nsids_.begin(), changed_nsids_.end(), nsid) == changed_nsids_.end()) {
    if (changed_nsids_.size() < kChangedNamespacesMax) {
      changed_nsids_.push_back(nsid);
    } else {
      changed_overflow_ = true;
    }
  }
  if (!namespace_event_masked_) namespace_event_pending_ = true;
  deliver_namespace_event_locked();
}

// Completes the oldest outstanding AER with the pending notice, if both exist.
void ModelController::deliver_namespace_event_locked() noexcept {
  if (!namespace_event_pending_ || fatal_ || state_ != State::ready) return;
  for (size_t i = 0; i < held_.size(); ++i) {
    if (held_[i].kind != HeldKind::async_event) continue;
    const HeldCommand command = held_[i];
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
    namespace_event_pending_ = false;
    namespace_event_masked_ = true;
    const uint32_t dw0 = spec::encode_async_event(
        spec::async_event_type::notice, spec::async_event_notice::namespace_attribute_changed,
        spec::log_page::changed_namespace_list);
    post_locked(command.sqid, command.sqe.cid, Outcome{spec::status_success, dw0, false});
    return;
  }
}

Result<void> ModelController::set_namespace_active(uint32_t nsid, bool active) noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    NamespaceState* found = nullptr;
    for (NamespaceState& ns : namespaces_) {
      if (ns.config.nsid == nsid) found = &ns;
    }
    if (found == nullptr) {
      return Unexpected(Errc::not_found, "set_namespace_active: no such nsid in ModelOpts");
    }
    found->active = active;
  }
  raise_namespace_changed(nsid);
  return {};
}

// --- Observation ---

ModelStats ModelController::stats() const noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::span<uint8_t> ModelController::namespace_data(uint32_t nsid) noexcept {
  // namespaces_ is never resized after create(), so no lock is needed to find one.
  for (NamespaceState& ns : namespaces_) {
    if (ns.config.nsid == nsid) {
      return {static_cast<uint8_t*>(ns.storage.addr()),
              ns.config.block_count * ns.config.block_size_bytes};
    }
  }
  return {};
}

// --- IOMMU emulation ---

uint64_t ModelController::dma_address(const void* p, size_t length) const noexcept {
  const uint64_t iova = dma_memory_->iova_of(p, length);
  if (iova != env::kBadIova) return iova;
  if (opts_.shared_dma_memory != nullptr) {
    const uint64_t shared = opts_.shared_dma_memory->iova_of(p, length);
    // Only memory whose IOVA is its address can be reached by this in-process device.
    if (shared == reinterpret_cast<uintptr_t>(p)) return shared;
  }
  const auto address = reinterpret_cast<uintptr_t>(p);
  if (length == 0) length = 1;
  for (const AllowedRange& range : allowed_) {
    const uintptr_t base = range.base.load(std::memory_order_acquire);
    if (base == 0) continue;
    const size_t range_bytes = range.length_bytes.load(std::memory_order_relaxed);
    if (address >= base && range_within(address - base, length, range_bytes)) return address;
  }
  return env::kBadIova;
}

Result<void> ModelController::allow_dma(const void* p, size_t length) noexcept {
  if (p == nullptr || length == 0) {
    return Unexpected(Errc::invalid_argument, "allow_dma: null or empty range");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (AllowedRange& range : allowed_) {
    if (range.base.load(std::memory_order_relaxed) != 0) continue;
    range.length_bytes.store(length, std::memory_order_relaxed);
    range.base.store(reinterpret_cast<uintptr_t>(p), std::memory_order_release);
    return {};
  }
  return Unexpected(Errc::out_of_range, "allow_dma: all kAllowedRangesMax slots in use");
}

void ModelController::revoke_dma(const void* p) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  for (AllowedRange& range : allowed_) {
    if (range.base.load(std::memory_order_relaxed) == reinterpret_cast<uintptr_t>(p)) {
      range.base.store(0, std::memory_order_release);
    }
  }
}

// [iova, iova + length) is reachable when each 4 KiB piece of it lies in a live DMA region or
// an allowed range: regions are page-granular, so a piece never straddles two of them.
bool ModelController::dma_reachable_locked(uint64_t iova, uint64_t length_bytes) const noexcept {
  constexpr uint64_t kPiece = 4096;
  if (length_bytes == 0) length_bytes = 1;
  if (iova == 0 || iova + length_bytes < iova) return false;
  const uint64_t end = iova + length_bytes;
  for (uint64_t at = iova; at < end;) {
    const uint64_t piece_end = std::min(end, align_down(at, kPiece) + kPiece);
    const void* p = reinterpret_cast<const void*>(at);
    if (dma_address(p, piece_end - at) != at) return false;
    at = piece_end;
  }
  return true;
}

uint8_t* ModelController::dma_pointer_locked(uint64_t iova, uint64_t length_bytes) noexcept {
  if (dma_reachable_locked(iova, length_bytes)) return reinterpret_cast<uint8_t*>(iova);
  ++stats_.dma_faults;
  NVMF_WARNLOG(nvme_model, "%s: DMA fault: IOVA 0x%llx + %llu is not mapped for the device",
               opts_.name.c_str(), static_cast<unsigned long long>(iova),
               static_cast<unsigned long long>(length_bytes));
  return nullptr;
}

}  // namespace nvmf::nvme_pcie::model
