#include "target_harness.h"

#include <algorithm>
#include <cstring>

#include "bdev/malloc_bdev.h"
#include "bdev/null_bdev.h"

namespace nvmf::fuzz {

using target::execute;
using target::kRequestIovMax;
using target::NamespaceOpts;
using target::refuse;
using target::RequestState;
using target::SubsystemInfo;
using target::SubsystemOpts;
using target::TransportOps;
using target::xfer_direction;
using target::XferDirection;

namespace {
// Queue pairs one input may have at once (each costs slots and a poll-group entry).
constexpr size_t kQueuesMax = 12;
// Poll rounds a command may take before the harness calls it stuck (a malloc or null bdev
// completes within a round or two).
constexpr int kRoundsPerCommand = 1000;
// Rounds of destroy + poll the teardown may take: requests inside a bdev finish first.
constexpr int kTeardownRounds = 1000;

// Every input makes its reactors again; the default ring of 4096 messages costs more page
// faults than the rest of an input. 64 is plenty for two reactors and a dozen queue pairs,
// and small enough that a full ring (send() answering busy) is reachable.
reactor::ReactorOpts reactor_opts() {
  reactor::ReactorOpts opts;
  opts.message_ring_size = 64;
  return opts;
}
}  // namespace

// ---- FakeQueue ----

FakeQueue::FakeQueue(Target& target, reactor::Reactor& reactor, uint32_t depth) : target_(target) {
  TransportOps ops;
  ops.request_complete = &FakeQueue::on_complete;
  ops.qpair_disconnect = &FakeQueue::on_disconnect;
  ops.request_released = &FakeQueue::on_released;
  ops.ctx = this;
  auto created = target_.create_qpair(reactor, ops, depth);
  FUZZ_CHECK(created.has_value());
  qpair_ = *created;
  for (uint32_t i = 0; i < depth; ++i) slots_.push_back(std::make_unique<Slot>());
}

FakeQueue::~FakeQueue() { FUZZ_CHECK_MSG(qpair_ == nullptr, "queue pair not destroyed"); }

uint32_t FakeQueue::outstanding() const {
  uint32_t count = 0;
  for (const auto& slot : slots_) count += slot->busy ? 1 : 0;
  return count;
}

int FakeQueue::submit(const spec::Sqe& sqe, const std::vector<uint8_t>& h2c, uint32_t c2h_length,
                      unsigned segments, uint8_t fill) {
  FUZZ_CHECK(qpair_ != nullptr);
  int index = -1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i]->busy && !slots_[i]->done) {
      index = static_cast<int>(i);
      break;
    }
  }
  if (index < 0) return -1;
  Slot& slot = *slots_[static_cast<size_t>(index)];
  Request& req = slot.req;
  req = Request{};
  req.cmd = sqe;
  req.qpair = qpair_;
  req.xfer = xfer_direction(sqe);
  req.transport_ctx = &slot;
  slot.segments.clear();
  // What the SGL described: the host's data, or the buffer its read lands in. A command that
  // moves no data has none, whatever its SGL says (the parser answers "none" for it).
  const bool h2c_data = req.xfer == XferDirection::host_to_controller;
  const size_t total = h2c_data                                        ? h2c.size()
                       : req.xfer == XferDirection::controller_to_host ? c2h_length
                                                                       : 0;
  req.length = static_cast<uint32_t>(total);
  if (total != 0) {
    const size_t count = std::clamp<size_t>(segments, 1, kRequestIovMax);
    const size_t chunk = (total + count - 1) / count;
    for (size_t offset = 0; offset < total; offset += chunk) {
      const size_t n = std::min(chunk, total - offset);
      if (h2c_data) {
        slot.segments.emplace_back(h2c.begin() + static_cast<ptrdiff_t>(offset),
                                   h2c.begin() + static_cast<ptrdiff_t>(offset + n));
      } else {
        slot.segments.emplace_back(n, fill);
      }
      req.iov[req.iovcnt].iov_base = slot.segments.back().data();
      req.iov[req.iovcnt].iov_len = n;
      ++req.iovcnt;
    }
  }
  slot.busy = true;
  if (req.xfer == XferDirection::bidirectional) {
    // transport_rdma::parse_command_sgl's answer to such an opcode.
    refuse(req, spec::generic_status(spec::sc_generic::invalid_opcode, true));
  } else {
    execute(req);
  }
  return index;
}

bool FakeQueue::take_completion(int index, Completion* out) {
  Slot& slot = *slots_.at(static_cast<size_t>(index));
  if (!slot.done) return false;
  slot.done = false;
  if (out != nullptr) {
    out->cqe = slot.cqe;
    out->data.clear();
    if (slot.req.xfer == XferDirection::controller_to_host) {
      for (const auto& segment : slot.segments) {
        out->data.insert(out->data.end(), segment.begin(), segment.end());
      }
    }
  }
  return true;
}

void FakeQueue::forget_completions() {
  for (auto& slot : slots_) slot->done = false;
}

void FakeQueue::on_complete(void* ctx, Request& req) {
  auto* queue = static_cast<FakeQueue*>(ctx);
  auto* slot = static_cast<Slot*>(req.transport_ctx);
  FUZZ_CHECK(slot != nullptr && &slot->req == &req);
  FUZZ_CHECK_MSG(slot->busy, "request_complete twice for one execute");
  FUZZ_CHECK(req.qpair == queue->qpair_);
  FUZZ_CHECK(req.state == RequestState::free);
  FUZZ_CHECK(req.rsp.cid == req.cmd.cid);
  FUZZ_CHECK(req.rsp.sqid == queue->qpair_->qid());
  FUZZ_CHECK((req.rsp.status & 1u) == 0);  // the phase tag belongs to PCIe
  slot->busy = false;
  slot->done = true;
  slot->cqe = req.rsp;
}

void FakeQueue::on_released(void* ctx, Request& req) {
  // Only after destroy_qpair gave up on a bdev, which malloc and null bdevs never make it do
  // within the harness's rounds; the slot is free again either way.
  (void)ctx;
  auto* slot = static_cast<Slot*>(req.transport_ctx);
  FUZZ_CHECK(slot != nullptr && &slot->req == &req);
  slot->busy = false;
}

void FakeQueue::on_disconnect(void* ctx, Qpair& qpair) {
  auto* queue = static_cast<FakeQueue*>(ctx);
  FUZZ_CHECK(&qpair == queue->qpair_);
  ++queue->disconnects_;
  FUZZ_CHECK_MSG(queue->disconnects_ == 1, "qpair_disconnect twice for one queue pair");
}

bool FakeQueue::destroy() {
  if (qpair_ == nullptr) return true;
  auto destroyed = target_.destroy_qpair(*qpair_);
  if (!destroyed) {
    FUZZ_CHECK(destroyed.error().code == Errc::busy);
    FUZZ_CHECK(qpair_->in_bdev() != 0);
    return false;
  }
  qpair_ = nullptr;
  // Everything the core held without a bdev was completed by destroy_qpair.
  FUZZ_CHECK_MSG(outstanding() == 0, "destroy_qpair left requests uncompleted");
  return true;
}

// ---- TargetHarness ----

TargetHarness::TargetHarness(const TargetOpts& opts) : reactors_(2, reactor_opts()) {
  auto target = Target::create(opts);
  FUZZ_CHECK(target.has_value());
  target_ = std::move(*target);

  bdev::MallocBdevOpts malloc_opts;
  malloc_opts.name = "Malloc0";
  malloc_opts.block_size_bytes = kMallocBlockSize;
  malloc_opts.block_count = kMallocBlocks;
  malloc_opts.clock = &reactors_.clock();
  auto made_malloc = bdev::create_malloc_bdev(malloc_opts);
  FUZZ_CHECK(made_malloc.has_value());
  malloc_ = std::move(*made_malloc);

  bdev::NullBdevOpts null_opts;
  null_opts.name = "Null0";
  null_opts.block_size_bytes = kNullBlockSize;
  null_opts.block_count = kNullBlocks;
  null_opts.clock = &reactors_.clock();
  auto made_null = bdev::create_null_bdev(null_opts);
  FUZZ_CHECK(made_null.has_value());
  null_ = std::move(*made_null);
}

TargetHarness::~TargetHarness() {
  for (int round = 0; round < kTeardownRounds; ++round) {
    bool all = true;
    for (auto& queue : queues_) all = queue->destroy() && all;
    if (all) break;
    reactors_.poll_round();
  }
  for (auto& queue : queues_) FUZZ_CHECK_MSG(queue->destroyed(), "a queue pair never let go");
  queues_.clear();
  FUZZ_CHECK_MSG(reactors_.poll_until_idle() > 0, "reactors busy after teardown (livelock)");
  for (const SubsystemInfo& info : target_->subsystems_info()) {
    FUZZ_CHECK_MSG(info.controllers.empty(), "a controller outlived its queue pairs");
  }
  for (size_t i = 0; i < reactors_.size(); ++i) {
    auto released = target_->release_reactor(reactors_.reactor(i));
    FUZZ_CHECK(released.has_value() || released.error().code == Errc::not_found);
  }
  target_.reset();
  malloc_.reset();
  null_.reset();
}

void TargetHarness::add_default_subsystem(bool allow_any_host) {
  SubsystemOpts subsystem;
  subsystem.nqn = kSubsystemNqn;
  subsystem.serial_number = "SN0001";
  subsystem.model_number = "Fuzz Model";
  subsystem.allow_any_host = allow_any_host;
  subsystem.hosts = {kHostNqn};
  subsystem.max_namespaces = 8;
  FUZZ_CHECK(target_->add_subsystem(subsystem).has_value());
  NamespaceOpts ns1;
  ns1.nsid = 1;
  ns1.bdev = malloc_.get();
  FUZZ_CHECK(target_->add_namespace(kSubsystemNqn, ns1).has_value());
  NamespaceOpts ns2;
  ns2.nsid = 2;
  ns2.bdev = null_.get();
  FUZZ_CHECK(target_->add_namespace(kSubsystemNqn, ns2).has_value());
}

FakeQueue& TargetHarness::new_queue(size_t reactor_index, uint32_t depth) {
  queues_.push_back(
      std::make_unique<FakeQueue>(*target_, reactors_.reactor(reactor_index % 2), depth));
  return *queues_.back();
}

bool TargetHarness::run(FakeQueue& queue, const spec::Sqe& sqe, const std::vector<uint8_t>& h2c,
                        uint32_t c2h_length, Completion* out) {
  const int slot = queue.submit(sqe, h2c, c2h_length, 1);
  if (slot < 0) return false;
  for (int round = 0; round < kRoundsPerCommand; ++round) {
    if (queue.take_completion(slot, out)) return true;
    reactors_.poll_round();
  }
  return queue.take_completion(slot, out);
}

void TargetHarness::reap_disconnected() {
  for (auto it = queues_.begin(); it != queues_.end();) {
    FakeQueue& queue = **it;
    if (queue.disconnect_asked() && queue.destroy()) {
      it = queues_.erase(it);
    } else {
      ++it;
    }
  }
}

bool TargetHarness::bring_up(uint16_t* cntlid) {
  FakeQueue& admin = new_queue(0, 32);
  Completion done;
  const spec::Sqe connect = spec::to_sqe(spec::make_connect_command(1, 0, 32, 10000, 0));
  if (!run(admin, connect, connect_data(kSubsystemNqn, spec::cntlid_dynamic), 0, &done) ||
      !done.status().is_success()) {
    return false;
  }
  *cntlid = static_cast<uint16_t>(done.cqe.cdw0 & 0xFFFF);
  if (!run(admin,
           spec::to_sqe(spec::make_property_set(2, spec::property_offset::cc, cc_enable_value())),
           {}, 0, &done) ||
      !done.status().is_success()) {
    return false;
  }
  if (!run(admin,
           spec::make_set_features(3, spec::feature::number_of_queues,
                                   spec::encode_number_of_queues(4, 4)),
           {}, 0, &done) ||
      !done.status().is_success()) {
    return false;
  }
  FakeQueue& io = new_queue(1, 32);
  const spec::Sqe io_connect = spec::to_sqe(spec::make_connect_command(4, 1, 32, 0, 0));
  return run(io, io_connect, connect_data(kSubsystemNqn, *cntlid), 0, &done) &&
         done.status().is_success();
}

void TargetHarness::run_records(Input& in, unsigned records_max) {
  for (unsigned record = 0; record < records_max && !in.empty(); ++record) {
    const uint8_t op = in.byte() % 8;
    switch (op) {
      case 0:
      case 1:
      case 2:
      case 3: {
        const uint8_t which = in.byte();
        spec::Sqe sqe;
        in.take_bytes(&sqe, sizeof(sqe));
        const uint32_t length = std::min<uint32_t>(in.take<uint16_t>(), kDataBytesMax);
        const uint8_t segments = in.byte();
        std::vector<uint8_t> h2c;
        if (xfer_direction(sqe) == XferDirection::host_to_controller) h2c = in.take_vector(length);
        if (queues_.empty()) break;
        FakeQueue& queue = *queues_[which % queues_.size()];
        if (queue.disconnect_asked()) break;  // the transport stopped receiving on it
        const int slot = queue.submit(sqe, h2c, length, segments);
        if (check_defined_bytes_ && slot >= 0) check_defined_bytes(queue, slot, sqe, length);
        break;
      }
      case 4: {
        const unsigned rounds = 1 + in.byte() % 16;
        for (unsigned i = 0; i < rounds; ++i) reactors_.poll_round();
        break;
      }
      case 5:
        reactors_.advance_ms(in.take<uint16_t>());
        break;
      case 6: {
        const uint8_t reactor_index = in.byte();
        const uint32_t depth = 1 + in.byte() % kQueueDepthMax;
        if (queues_.size() < kQueuesMax) new_queue(reactor_index, depth);
        break;
      }
      case 7: {
        const uint8_t which = in.byte();
        if (queues_.empty()) break;
        const size_t index = which % queues_.size();
        if (queues_[index]->destroy())
          queues_.erase(queues_.begin() + static_cast<ptrdiff_t>(index));
        break;
      }
    }
    // Completions were checked in the callback; drop them so their slots are used again.
    for (auto& queue : queues_) queue->forget_completions();
    reap_disconnected();
  }
}

void TargetHarness::check_defined_bytes(FakeQueue& queue, int slot, const spec::Sqe& sqe,
                                        uint32_t length) {
  // Identify reads state the input cannot change in between, so a second run must return
  // the same bytes whatever the buffer held before. It completes at once (no bdev).
  if (sqe.opcode != spec::admin_opcode::identify || queue.qpair() == nullptr ||
      !queue.qpair()->connected() || !queue.qpair()->is_admin()) {
    return;
  }
  Completion first;
  if (!queue.take_completion(slot, &first) || !first.status().is_success()) return;
  const int again = queue.submit(sqe, {}, length, 1, 0x11);
  FUZZ_CHECK(again >= 0);
  Completion second;
  FUZZ_CHECK_MSG(queue.take_completion(again, &second), "Identify did not complete at once");
  FUZZ_CHECK(second.status().is_success());
  FUZZ_CHECK_MSG(first.data == second.data, "Identify left bytes of the buffer undefined");
}

std::vector<uint8_t> connect_data(const std::string& subnqn, uint16_t cntlid,
                                  const std::string& hostnqn) {
  spec::ConnectData data{};
  std::memcpy(data.hostid, kHostId.data(), sizeof(data.hostid));
  data.cntlid = cntlid;
  spec::put_nul_padded(data.subnqn, subnqn);
  spec::put_nul_padded(data.hostnqn, hostnqn);
  std::vector<uint8_t> bytes(sizeof(data));
  std::memcpy(bytes.data(), &data, sizeof(data));
  return bytes;
}

uint32_t cc_enable_value() {
  spec::CcFields cc;
  cc.en = true;
  cc.iosqes = 6;
  cc.iocqes = 4;
  return spec::encode_cc(cc);
}

}  // namespace nvmf::fuzz
