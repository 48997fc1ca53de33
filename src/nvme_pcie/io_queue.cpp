// The data path: one I/O SQ + CQ pair per owner thread. Submits fill SQ entries (PRPs built
// from the caller's iovecs, or a bounce buffer when the data is not in DMA memory); poll()
// reaps CQ entries by phase tag and rings each doorbell at most once. No allocation, lock or
// system call here; the only shared state is the controller's state word and generation.
#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "nvme_pcie/controller.h"
#include "spec/pcie.h"

NVMF_LOG_COMPONENT_DECLARE(nvme_pcie);

namespace nvmf::nvme_pcie {
namespace {

// Commands one request may become (a 1 MiB read of 4 KiB-page chunks is 1..2; write zeroes of
// 4 M blocks is 64). More answers invalid_argument rather than hogging the queue.
constexpr uint32_t kChildrenMax = 64;
// iovecs one command may carry as PRP segments; beyond that the data bounces.
constexpr unsigned kSegmentsMax = 64;
constexpr uint32_t kNlbMax = spec::rw_block_count_max;
constexpr uint64_t kPageMask = spec::pcie::memory_page_size_bytes - 1;
constexpr uint32_t kDsmRangesMax = 256;  // NR is 8 bits, 0's based

// The status of a command the driver fails itself (it never reached a live controller).
constexpr spec::Status kAbortedStatus = spec::generic_status(spec::sc_generic::aborted_sq_deletion);
constexpr spec::Status kGoneStatus = spec::generic_status(spec::sc_generic::internal_error, true);

void counter_add(std::atomic<uint64_t>& counter, uint64_t value) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + value, std::memory_order_relaxed);
}

uint64_t iov_total(const iovec* iov, unsigned iovcnt) noexcept {
  uint64_t total = 0;
  for (unsigned i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  return total;
}

void copy_from_iov(const iovec* iov, unsigned iovcnt, uint8_t* destination) noexcept {
  for (unsigned i = 0; i < iovcnt; ++i) {
    std::memcpy(destination, iov[i].iov_base, iov[i].iov_len);
    destination += iov[i].iov_len;
  }
}

void copy_to_iov(const iovec* iov, unsigned iovcnt, const uint8_t* source) noexcept {
  for (unsigned i = 0; i < iovcnt; ++i) {
    std::memcpy(iov[i].iov_base, source, iov[i].iov_len);
    source += iov[i].iov_len;
  }
}

}  // namespace

// Marks the owner as inside submit()/poll() for the reset handshake. Nested use (a callback
// that submits) keeps the flag set until the outermost call leaves.
class IoQueue::ActiveScope {
 public:
  explicit ActiveScope(IoQueue& queue) noexcept : queue_(queue) {
    if (queue_.active_depth_++ == 0) queue_.active_.store(true, std::memory_order_seq_cst);
  }
  ~ActiveScope() {
    if (--queue_.active_depth_ == 0) queue_.active_.store(false, std::memory_order_release);
  }
  ActiveScope(const ActiveScope&) = delete;
  ActiveScope& operator=(const ActiveScope&) = delete;

 private:
  IoQueue& queue_;
};

IoQueue::IoQueue(Controller& controller, uint16_t qid, uint32_t entries)
    : controller_(controller), qid_(qid), entries_(entries) {
  generation_seen_ = controller.generation_.load(std::memory_order_acquire);
}

Result<void> IoQueue::allocate() {
  env::MemoryBackend& memory = controller_.device().dma_memory();
  const uint32_t page = spec::pcie::memory_page_size_bytes;
  const uint32_t commands = entries_ - 1;
  const uint32_t max_transfer = controller_.max_transfer_bytes();
  // At least one page per command: Dataset Management ranges live there too.
  prp_list_pages_per_tracker_ =
      std::max<uint32_t>(1, prp_list_pages_for(prp_pages_max(max_transfer)));
  auto sq = memory.allocate(size_t{entries_} * sizeof(spec::Sqe), page);
  auto cq = memory.allocate(size_t{entries_} * sizeof(spec::Cqe), page);
  auto prp = memory.allocate(size_t{commands} * prp_list_pages_per_tracker_ * page, page);
  const uint32_t bounce_count = controller_.opts_.bounce_buffers_per_queue;
  auto bounce = memory.allocate(std::max<size_t>(size_t{bounce_count} * max_transfer, page), page);
  if (!sq || !cq || !prp || !bounce) return Unexpected(Errc::no_memory, "I/O queue memory");
  sq_region_ = std::move(*sq);
  cq_region_ = std::move(*cq);
  prp_region_ = std::move(*prp);
  bounce_region_ = std::move(*bounce);
  sq_ = static_cast<spec::Sqe*>(sq_region_.addr());
  cq_ = static_cast<volatile spec::Cqe*>(cq_region_.addr());
  try {
    trackers_ = std::make_unique<Tracker[]>(commands);
    prp_pages_ = std::make_unique<PrpListPage[]>(size_t{commands} * prp_list_pages_per_tracker_);
    requests_ = std::make_unique<Request[]>(commands);
    free_bounce_.reserve(bounce_count);
  } catch (const std::bad_alloc&) {
    return Unexpected(Errc::no_memory, "I/O queue trackers");
  }
  auto* prp_base = static_cast<uint8_t*>(prp_region_.addr());
  for (uint32_t i = 0; i < commands * prp_list_pages_per_tracker_; ++i) {
    uint8_t* address = prp_base + size_t{i} * page;
    prp_pages_[i] = {reinterpret_cast<uint64_t*>(address), prp_region_.iova(address)};
  }
  for (uint32_t i = 0; i < commands; ++i) {
    trackers_[i].list_pages = &prp_pages_[size_t{i} * prp_list_pages_per_tracker_];
    free_trackers_.push_back(trackers_[i]);
    free_requests_.push_back(requests_[i]);
  }
  free_tracker_count_ = commands;
  auto* bounce_base = static_cast<uint8_t*>(bounce_region_.addr());
  for (uint32_t i = 0; i < bounce_count; ++i) free_bounce_.push_back(bounce_base + size_t{i} * max_transfer);
  sq_doorbell_ = spec::pcie::sq_tail_doorbell(qid_, controller_.doorbell_stride_bytes_);
  cq_doorbell_ = spec::pcie::cq_head_doorbell(qid_, controller_.doorbell_stride_bytes_);
  return {};
}

IoQueue::~IoQueue() {
  owner_.check();
  // Delete I/O SQ completes or aborts every command on the device before it answers, so after
  // this no DMA touches a buffer the callbacks below hand back.
  controller_.destroy_io_queue(*this);
  ActiveScope active(*this);
  fail_all(kAbortedStatus);
}

// ---- submit ----

Result<void> IoQueue::submit(const IoCommand& command, CompletionFn done, void* ctx) noexcept {
  owner_.check();
  ActiveScope active(*this);
  const ControllerState state = controller_.state_.load(std::memory_order_seq_cst);
  if (phase_ == QueuePhase::dead || state == ControllerState::removed ||
      state == ControllerState::failed || state == ControllerState::shut_down) {
    return Unexpected(Errc::disconnected, "controller removed, failed or shut down");
  }
  if (state != ControllerState::live ||
      generation_seen_ != controller_.generation_.load(std::memory_order_acquire)) {
    return Unexpected(Errc::busy, "controller reset in progress");
  }
  Request* request = free_requests_.pop_front();
  if (request == nullptr) return Unexpected(Errc::busy, "queue full");
  // A busy queue polls all the time and keeps now_ms_ fresh; an idle one may not have polled
  // for a long while, so its first submit reads the clock for the deadline.
  if (requests_outstanding_ == 0) now_ms_ = controller_.opts_.clock->now_ns() / 1000000;
  *request = Request{};
  request->done = done;
  request->ctx = ctx;
  Result<void> queued = Unexpected(Errc::invalid_argument, "unsupported opcode");
  switch (command.opcode) {
    case spec::nvm_opcode::read:
    case spec::nvm_opcode::write:
      queued = submit_rw(command, *request);
      break;
    case spec::nvm_opcode::flush:
    case spec::nvm_opcode::write_zeroes:
      queued = submit_simple(command, *request);
      break;
    case spec::nvm_opcode::dataset_management:
      queued = submit_deallocate(command, *request);
      break;
    default:
      break;
  }
  if (!queued) {
    free_requests_.push_front(*request);
    return queued;
  }
  ++requests_outstanding_;
  counter_add(stats_.submitted, 1);
  if (request->children_left > 1) counter_add(stats_.commands_split, 1);
  return {};
}

// Takes `count` trackers for `request` at once, or none.
bool IoQueue::take_trackers(Request& request, uint32_t count, Tracker** out) noexcept {
  if (count > free_tracker_count_) return false;
  for (uint32_t i = 0; i < count; ++i) {
    out[i] = free_trackers_.pop_front();
    out[i]->request = &request;
    out[i]->retries_left = 1;
  }
  free_tracker_count_ -= count;
  request.children_left = static_cast<uint16_t>(count);
  return true;
}

void IoQueue::return_trackers(Tracker** trackers, uint32_t count) noexcept {
  for (uint32_t i = 0; i < count; ++i) {
    trackers[i]->request = nullptr;
    free_trackers_.push_front(*trackers[i]);
  }
  free_tracker_count_ += count;
}

Result<const NamespaceInfo*> IoQueue::check_range(const IoCommand& command) const noexcept {
  const NamespaceInfo* ns = controller_.find_namespace(command.nsid);
  if (ns == nullptr) return Unexpected(Errc::not_found, "no such namespace");
  if (command.opcode == spec::nvm_opcode::flush) return ns;
  if (command.block_count == 0) return Unexpected(Errc::invalid_argument, "zero blocks");
  if (command.lba >= ns->block_count || command.block_count > ns->block_count - command.lba) {
    return Unexpected(Errc::out_of_range, "LBA range beyond the namespace");
  }
  return ns;
}

// How the caller's iovecs can go to the device: as PRPs (every byte in DMA memory, boundaries
// PRPs can express: see prp.h), as an SGL (in DMA memory, any boundaries, when the controller
// supports SGLs; dword-aligned when it asks for that), or not at all (bounce).
IoQueue::DataPointer IoQueue::data_pointer_for(const iovec* iov, unsigned iovcnt) const noexcept {
  if (iovcnt > kSegmentsMax) return DataPointer::bounce;
  const PciDevice& device = *controller_.device_;
  bool prp_possible = true;
  bool dword_aligned = true;
  for (unsigned i = 0; i < iovcnt; ++i) {
    const uint64_t iova = device.dma_address(iov[i].iov_base, iov[i].iov_len);
    if (iova == env::kBadIova) return DataPointer::bounce;
    if (((iova | iov[i].iov_len) & 0x3) != 0) dword_aligned = false;
    if (i == 0 && (iova & 0x3) != 0) prp_possible = false;
    if (i > 0 && (iova & kPageMask) != 0) prp_possible = false;
    if (i + 1 < iovcnt && ((iova + iov[i].iov_len) & kPageMask) != 0) prp_possible = false;
  }
  if (prp_possible) return DataPointer::prp;
  const uint32_t sgls = controller_.identify_.sgls & 0x3;
  const bool sgl_possible = sgls == spec::sgls_bit::supported_no_alignment ||
                            (sgls == spec::sgls_bit::supported_dword_alignment && dword_aligned);
  return sgl_possible ? DataPointer::sgl : DataPointer::bounce;
}

// PSDT 01b: one Data Block descriptor in the SQE, or a Last Segment descriptor pointing at the
// command's list page of Data Block descriptors (at most kSegmentsMax, 16 bytes each).
void IoQueue::fill_sgl(Tracker& tracker, const PrpSegment* segments, unsigned count) noexcept {
  tracker.sqe.set_psdt(spec::psdt::sgl_mptr_contiguous);
  if (count == 1) {
    tracker.sqe.sgl1 = spec::make_data_block(segments[0].iova, segments[0].length_bytes);
    return;
  }
  auto* list = reinterpret_cast<spec::SglDescriptor*>(tracker.list_pages[0].entries);
  for (unsigned i = 0; i < count; ++i) {
    list[i] = spec::make_data_block(segments[i].iova, segments[i].length_bytes);
  }
  tracker.sqe.sgl1 = spec::make_last_segment(tracker.list_pages[0].iova,
                                             count * spec::sgl_descriptor_size,
                                             spec::sgl_subtype::address);
}

// The PRP segments of bytes [offset, offset + length) of the data.
unsigned IoQueue::collect_segments(const iovec* iov, unsigned iovcnt, uint64_t offset,
                                   uint64_t length, PrpSegment* segments) const noexcept {
  const PciDevice& device = *controller_.device_;
  unsigned count = 0;
  for (unsigned i = 0; i < iovcnt && length > 0; ++i) {
    if (offset >= iov[i].iov_len) {
      offset -= iov[i].iov_len;
      continue;
    }
    const uint64_t take = std::min<uint64_t>(iov[i].iov_len - offset, length);
    const auto* base = static_cast<const uint8_t*>(iov[i].iov_base) + offset;
    segments[count++] = {device.dma_address(base, take), static_cast<uint32_t>(take)};
    length -= take;
    offset = 0;
  }
  return count;
}

Result<void> IoQueue::submit_rw(const IoCommand& command, Request& request) noexcept {
  auto ns = check_range(command);
  if (!ns) return Unexpected(ns.error());
  const uint32_t block_size = (*ns)->block_size_bytes;
  const uint64_t length = command.block_count * block_size;
  if (command.iovcnt == 0 || iov_total(command.iov, command.iovcnt) != length) {
    return Unexpected(Errc::invalid_argument, "iovec total is not block_count * block size");
  }
  const uint32_t chunk_blocks =
      std::min<uint32_t>(kNlbMax, controller_.max_transfer_bytes() / block_size);
  const uint64_t children = (command.block_count + chunk_blocks - 1) / chunk_blocks;
  if (children > kChildrenMax || children > commands_max()) {
    return Unexpected(Errc::invalid_argument, "transfer too large for one request");
  }
  iovec bounced{};
  const iovec* iov = command.iov;
  unsigned iovcnt = command.iovcnt;
  const DataPointer pointer = data_pointer_for(iov, iovcnt);
  if (pointer == DataPointer::bounce) {
    if (auto taken = take_bounce(command, length, children, request, &bounced); !taken) return taken;
    iov = &bounced;
    iovcnt = 1;
  }
  Tracker* trackers[kChildrenMax];
  if (!take_trackers(request, static_cast<uint32_t>(children), trackers)) {
    release_bounce(request);
    return Unexpected(Errc::busy, "queue full");
  }
  for (uint32_t child = 0; child < children; ++child) {
    const uint64_t first = uint64_t{child} * chunk_blocks;
    const auto blocks = static_cast<uint32_t>(std::min<uint64_t>(chunk_blocks, command.block_count - first));
    Tracker& tracker = *trackers[child];
    tracker.sqe = spec::pcie::make_pcie_sqe(command.opcode, tracker_cid(tracker), command.nsid);
    spec::rw_set_range(tracker.sqe, command.lba + first, blocks);
    spec::rw_set_fua(tracker.sqe, command.fua);
    PrpSegment segments[kSegmentsMax];
    const unsigned count = collect_segments(iov, iovcnt, first * block_size,
                                            uint64_t{blocks} * block_size, segments);
    if (pointer == DataPointer::sgl) {
      fill_sgl(tracker, segments, count);
      continue;
    }
    PrpPointers prps;
    if (auto built = build_prps(segments, count, tracker.list_pages, prp_list_pages_per_tracker_, &prps);
        !built) {
      // Cannot happen after data_pointer_for(); refuse rather than send a bad command.
      return_trackers(trackers, static_cast<uint32_t>(children));
      release_bounce(request);
      return built;
    }
    spec::pcie::sqe_set_prps(tracker.sqe, prps.prp1, prps.prp2);
  }
  for (uint32_t child = 0; child < children; ++child) push_sqe(*trackers[child]);
  return {};
}

// Data outside DMA memory (or shaped so neither PRPs nor SGLs can carry it) moves through one
// of the queue's bounce buffers: copied in now for a write, out at completion for a read.
Result<void> IoQueue::take_bounce(const IoCommand& command, uint64_t length, uint64_t children,
                                  Request& request, iovec* bounced) noexcept {
  if (length > controller_.max_transfer_bytes()) {
    return Unexpected(Errc::invalid_argument, "data outside DMA memory larger than a bounce buffer");
  }
  if (free_bounce_.empty() || children > free_tracker_count_) {
    return Unexpected(Errc::busy, "no bounce buffer free");
  }
  request.bounce = free_bounce_.back();
  free_bounce_.pop_back();
  *bounced = {request.bounce, length};
  if (command.opcode == spec::nvm_opcode::write) {
    copy_from_iov(command.iov, command.iovcnt, request.bounce);
    counter_add(stats_.bytes_copied, length);
  } else {
    request.read_iov = command.iov;
    request.read_iovcnt = command.iovcnt;
  }
  counter_add(stats_.bounced, 1);
  return {};
}

// Flush (one command) and Write Zeroes (split at NLB's 65536 blocks): no data.
Result<void> IoQueue::submit_simple(const IoCommand& command, Request& request) noexcept {
  auto ns = check_range(command);
  if (!ns) return Unexpected(ns.error());
  const bool flush = command.opcode == spec::nvm_opcode::flush;
  const uint64_t children = flush ? 1 : (command.block_count + kNlbMax - 1) / kNlbMax;
  if (children > kChildrenMax || children > commands_max()) {
    return Unexpected(Errc::invalid_argument, "range too large for one request");
  }
  Tracker* trackers[kChildrenMax];
  if (!take_trackers(request, static_cast<uint32_t>(children), trackers)) {
    return Unexpected(Errc::busy, "queue full");
  }
  for (uint32_t child = 0; child < children; ++child) {
    Tracker& tracker = *trackers[child];
    tracker.sqe = spec::pcie::make_pcie_sqe(command.opcode, tracker_cid(tracker), command.nsid);
    if (!flush) {
      const uint64_t first = uint64_t{child} * kNlbMax;
      const auto blocks = static_cast<uint32_t>(std::min<uint64_t>(kNlbMax, command.block_count - first));
      spec::rw_set_range(tracker.sqe, command.lba + first, blocks);
    }
    push_sqe(tracker);
  }
  return {};
}

// Deallocate [lba, lba + block_count) as up to 256 ranges of up to 2^32 - 1 blocks, written
// into the command's first PRP list page.
Result<void> IoQueue::submit_deallocate(const IoCommand& command, Request& request) noexcept {
  auto ns = check_range(command);
  if (!ns) return Unexpected(ns.error());
  constexpr uint64_t kRangeBlocksMax = 0xFFFFFFFF;
  const uint64_t ranges = (command.block_count + kRangeBlocksMax - 1) / kRangeBlocksMax;
  if (ranges > kDsmRangesMax) return Unexpected(Errc::invalid_argument, "range too large");
  Tracker* tracker = nullptr;
  if (!take_trackers(request, 1, &tracker)) return Unexpected(Errc::busy, "queue full");
  auto* list = reinterpret_cast<spec::DsmRange*>(tracker->list_pages[0].entries);
  for (uint64_t i = 0; i < ranges; ++i) {
    const uint64_t first = i * kRangeBlocksMax;
    list[i] = spec::DsmRange{0, static_cast<uint32_t>(std::min(kRangeBlocksMax, command.block_count - first)),
                             command.lba + first};
  }
  tracker->sqe = spec::pcie::make_pcie_sqe(spec::nvm_opcode::dataset_management,
                                           tracker_cid(*tracker), command.nsid);
  tracker->sqe.cdw10 = static_cast<uint32_t>(ranges - 1);
  tracker->sqe.cdw11 = 1u << 2;  // AD: deallocate
  spec::pcie::sqe_set_prps(tracker->sqe, tracker->list_pages[0].iova, 0);
  push_sqe(*tracker);
  return {};
}

uint16_t IoQueue::tracker_cid(const Tracker& tracker) const noexcept {
  return static_cast<uint16_t>(&tracker - trackers_.get());
}

void IoQueue::push_sqe(Tracker& tracker) noexcept {
  sq_[sq_tail_] = tracker.sqe;
  sq_tail_ = sq_tail_ + 1 == entries_ ? 0 : sq_tail_ + 1;
  const uint32_t timeout_ms = controller_.opts_.io_timeout_ms;
  tracker.deadline_ms = timeout_ms == 0 ? 0 : now_ms_ + timeout_ms;
  outstanding_.push_back(tracker);
}

// ---- completions ----

unsigned IoQueue::poll(unsigned budget) noexcept {
  owner_.check();
  ActiveScope active(*this);
  now_ms_ = controller_.opts_.clock->now_ns() / 1000000;
  const ControllerState state = controller_.state_.load(std::memory_order_seq_cst);
  if (state != ControllerState::live || phase_ == QueuePhase::dead ||
      generation_seen_ != controller_.generation_.load(std::memory_order_acquire)) {
    return poll_not_live(state);
  }
  unsigned reaped = 0;
  while (reaped < budget) {
    volatile spec::Cqe& slot = cq_[cq_head_];
    const uint16_t status = slot.status;
    if (spec::status_field_phase(status) != cq_phase_) break;
    std::atomic_thread_fence(std::memory_order_acquire);  // the entry's other fields after P
    const uint16_t cid = slot.cid;
    sq_head_ = slot.sqhd;
    if (++cq_head_ == entries_) {
      cq_head_ = 0;
      cq_phase_ = !cq_phase_;
    }
    cq_head_dirty_ = true;
    if (cid >= commands_max() || trackers_[cid].request == nullptr) {
      NVMF_WARNLOG(nvme_pcie, "%s: queue %u: completion for CID %u that is not outstanding: "
                              "ignored",
                   controller_.address().c_str(), qid_, cid);
      counter_add(stats_.spurious_completions, 1);
      continue;
    }
    complete_child(trackers_[cid], spec::decode_status_field(status));
    ++reaped;
  }
  ring_doorbells();
  publish_oldest();
  return reaped;
}

void IoQueue::ring_doorbells() noexcept {
  PciDevice& device = *controller_.device_;
  if (cq_head_dirty_) {
    device.write32(cq_doorbell_, cq_head_);
    cq_head_dirty_ = false;
    counter_add(stats_.cq_doorbells, 1);
  }
  if (sq_tail_ != sq_tail_rung_) {
    device.write32(sq_doorbell_, sq_tail_);
    sq_tail_rung_ = sq_tail_;
    counter_add(stats_.sq_doorbells, 1);
  }
}

void IoQueue::publish_oldest() noexcept {
  uint64_t oldest = 0;
  if (!outstanding_.empty()) {
    Tracker& front = outstanding_.front();
    if (front.deadline_ms != 0) oldest = (front.deadline_ms << 16) | tracker_cid(front);
  }
  if (oldest_.load(std::memory_order_relaxed) != oldest) {
    oldest_.store(oldest, std::memory_order_release);
  }
}

unsigned IoQueue::poll_not_live(ControllerState state) noexcept {
  if (phase_ == QueuePhase::dead) return 0;
  if (state == ControllerState::resetting) return 0;  // the recovery thread owns the rings now
  if (state == ControllerState::live) {
    // A reset finished: the device queues are new and empty.
    generation_seen_ = controller_.generation_.load(std::memory_order_acquire);
    const unsigned failed = resubmit_after_reset();
    ring_doorbells();
    publish_oldest();
    return failed;
  }
  phase_ = QueuePhase::dead;
  oldest_.store(0, std::memory_order_release);
  return fail_all(kGoneStatus);
}

// Each outstanding command goes again once; a command that already went twice fails.
unsigned IoQueue::resubmit_after_reset() noexcept {
  IntrusiveList<Tracker, &Tracker::link> previous;
  while (Tracker* tracker = outstanding_.pop_front()) previous.push_back(*tracker);
  unsigned failed = 0;
  while (Tracker* tracker = previous.pop_front()) {
    if (tracker->retries_left > 0) {
      --tracker->retries_left;
      counter_add(stats_.retried, 1);
      push_sqe(*tracker);
      continue;
    }
    counter_add(stats_.failed_after_reset, 1);
    outstanding_.push_back(*tracker);  // complete_child() takes it off again
    complete_child(*tracker, kAbortedStatus);
    ++failed;
  }
  return failed;
}

unsigned IoQueue::fail_all(const spec::Status& status) noexcept {
  unsigned failed = 0;
  while (!outstanding_.empty()) {
    complete_child(outstanding_.front(), status);
    ++failed;
  }
  return failed;
}

void IoQueue::complete_child(Tracker& tracker, const spec::Status& status) noexcept {
  outstanding_.remove(tracker);
  Request& request = *tracker.request;
  tracker.request = nullptr;
  free_trackers_.push_back(tracker);
  ++free_tracker_count_;
  if (!status.is_success() && request.status.is_success()) request.status = status;
  if (--request.children_left == 0) finish_request(request);
}

void IoQueue::finish_request(Request& request) noexcept {
  if (request.bounce != nullptr && request.read_iov != nullptr && request.status.is_success()) {
    copy_to_iov(request.read_iov, request.read_iovcnt, request.bounce);
    counter_add(stats_.bytes_copied, iov_total(request.read_iov, request.read_iovcnt));
  }
  release_bounce(request);
  --requests_outstanding_;
  counter_add(request.status.is_success() ? stats_.completed : stats_.failed, 1);
  const CompletionFn done = request.done;
  void* const ctx = request.ctx;
  const spec::Status status = request.status;
  // Free first, so the callback may submit again at once.
  free_requests_.push_front(request);
  done(ctx, status);
}

void IoQueue::release_bounce(Request& request) noexcept {
  if (request.bounce == nullptr) return;
  free_bounce_.push_back(request.bounce);
  request.bounce = nullptr;
}

// Called by the controller with the owner outside submit()/poll() (see ActiveScope).
void IoQueue::reset_rings() noexcept {
  std::memset(sq_region_.addr(), 0, sq_region_.size_bytes());
  std::memset(cq_region_.addr(), 0, cq_region_.size_bytes());
  sq_tail_ = 0;
  sq_tail_rung_ = 0;
  sq_head_ = 0;
  cq_head_ = 0;
  cq_phase_ = true;
  cq_head_dirty_ = false;
}

}  // namespace nvmf::nvme_pcie
