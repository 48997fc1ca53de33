#include "fake_transport.h"

#include <cstring>

namespace nvmf::target::testing {

FakeQueue::FakeQueue(Target& target, reactor::Reactor& reactor, uint32_t queue_depth)
    : target_(target), reactor_(reactor) {
  TransportOps ops;
  ops.request_complete = &FakeQueue::on_complete;
  ops.qpair_disconnect = &FakeQueue::on_disconnect;
  ops.request_released = &FakeQueue::on_released;
  ops.abort_request = &FakeQueue::on_abort;
  ops.ctx = this;
  auto created = target_.create_qpair(reactor, ops, queue_depth);
  EXPECT_TRUE(created.has_value());
  if (created) qpair_ = *created;
}

FakeQueue::~FakeQueue() { EXPECT_TRUE(qpair_ == nullptr) << "queue pair not destroyed"; }

bool FakeQueue::destroy(StuckCommands stuck) {
  if (qpair_ == nullptr) return true;
  auto destroyed = target_.destroy_qpair(*qpair_, stuck);
  if (!destroyed) return false;
  qpair_ = nullptr;
  return true;
}

FakeQueue::Slot& FakeQueue::free_slot() {
  for (auto& slot : slots_) {
    if (!slot->busy) return *slot;
  }
  slots_.push_back(std::make_unique<Slot>());
  return *slots_.back();
}

uint16_t FakeQueue::submit(spec::Sqe sqe, const std::vector<uint8_t>& h2c, uint32_t c2h_length,
                           unsigned segments) {
  Slot& slot = prepare(sqe, h2c, c2h_length, segments);
  execute(slot.req);
  return slot.cid;
}

uint16_t FakeQueue::hold(spec::Sqe sqe, bool in_transfer, const std::vector<uint8_t>& h2c) {
  Slot& slot = prepare(sqe, h2c, 0, 1);
  slot.held = in_transfer ? Held::in_transfer : Held::waiting;
  return slot.cid;
}

void FakeQueue::end_transfer(uint16_t cid) {
  for (auto& slot : slots_) {
    if (!slot->busy || slot->cid != cid || slot->held == Held::no) continue;
    const bool aborted = slot->held == Held::in_transfer_aborted;
    slot->held = Held::no;
    if (aborted) {
      refuse_aborted(slot->req);
    } else {
      execute(slot->req);
    }
    return;
  }
  ADD_FAILURE() << "CID " << cid << " is not held";
}

TransportAbort FakeQueue::on_abort(void* ctx, Qpair& qpair, uint16_t cid) {
  auto* queue = static_cast<FakeQueue*>(ctx);
  EXPECT_EQ(&qpair, queue->qpair_);
  ++queue->abort_queries_;
  for (auto& slot : queue->slots_) {
    if (!slot->busy || slot->cid != cid) continue;
    switch (slot->held) {
      case Held::waiting:
        slot->held = Held::no;
        refuse(slot->req, spec::generic_status(spec::sc_generic::abort_requested));
        return TransportAbort::aborted;
      case Held::in_transfer:
      case Held::in_transfer_aborted:
        slot->held = Held::in_transfer_aborted;
        return TransportAbort::after_transfer;
      case Held::no:
        break;
    }
  }
  return TransportAbort::not_found;
}

void FakeQueue::on_released(void* ctx, Request& req) {
  auto* queue = static_cast<FakeQueue*>(ctx);
  auto* slot = static_cast<Slot*>(req.transport_ctx);
  EXPECT_NE(slot, nullptr);
  EXPECT_EQ(req.state, RequestState::free);
  ++queue->released_;
  if (slot != nullptr) slot->busy = false;
}

FakeQueue::Slot& FakeQueue::prepare(spec::Sqe sqe, const std::vector<uint8_t>& h2c,
                                    uint32_t c2h_length, unsigned segments) {
  Slot& slot = free_slot();
  slot.busy = true;
  slot.held = Held::no;
  slot.cid = next_cid_++;
  if (next_cid_ == 0) next_cid_ = 1;
  sqe.cid = slot.cid;
  slot.buffer = h2c.empty() ? std::vector<uint8_t>(c2h_length, 0xEE) : h2c;
  Request& req = slot.req;
  req = Request{};
  req.cmd = sqe;
  req.qpair = qpair_;
  req.xfer = xfer_direction(sqe);
  req.transport_ctx = &slot;
  req.length = static_cast<uint32_t>(slot.buffer.size());
  req.iovcnt = 0;
  if (!slot.buffer.empty()) {
    const size_t count = std::max(1u, std::min(segments, kRequestIovMax));
    const size_t chunk = (slot.buffer.size() + count - 1) / count;
    for (size_t offset = 0; offset < slot.buffer.size(); offset += chunk) {
      req.iov[req.iovcnt].iov_base = slot.buffer.data() + offset;
      req.iov[req.iovcnt].iov_len = std::min(chunk, slot.buffer.size() - offset);
      ++req.iovcnt;
    }
  }
  return slot;
}

uint16_t FakeQueue::submit_with_length(spec::Sqe sqe, uint32_t length,
                                       const std::vector<uint8_t>& h2c) {
  Slot& slot = free_slot();
  slot.busy = true;
  slot.cid = next_cid_++;
  sqe.cid = slot.cid;
  slot.buffer = h2c.empty() ? std::vector<uint8_t>(length, 0) : h2c;
  Request& req = slot.req;
  req = Request{};
  req.cmd = sqe;
  req.qpair = qpair_;
  req.xfer = xfer_direction(sqe);
  req.length = length;
  if (!slot.buffer.empty()) {
    req.iov[0].iov_base = slot.buffer.data();
    req.iov[0].iov_len = std::min<size_t>(slot.buffer.size(), length);
    req.iovcnt = 1;
  }
  execute(req);
  return sqe.cid;
}

void FakeQueue::on_complete(void* ctx, Request& req) {
  auto* queue = static_cast<FakeQueue*>(ctx);
  auto* slot = static_cast<Slot*>(req.transport_ctx);
  if (slot == nullptr) {  // submit_with_length leaves transport_ctx unset: find the slot
    for (auto& candidate : queue->slots_) {
      if (&candidate->req == &req) slot = candidate.get();
    }
  }
  EXPECT_NE(slot, nullptr);
  EXPECT_EQ(req.state, RequestState::free);
  Completion completion;
  completion.cqe = req.rsp;
  if (req.xfer == XferDirection::controller_to_host) completion.data = slot->buffer;
  queue->completions_.emplace_back(slot->cid, std::move(completion));
  slot->busy = false;
}

void FakeQueue::on_disconnect(void* ctx, Qpair& qpair) {
  auto* queue = static_cast<FakeQueue*>(ctx);
  EXPECT_EQ(&qpair, queue->qpair_);
  ++queue->disconnects_;
}

bool FakeQueue::completed(uint16_t cid) const {
  for (const auto& [id, completion] : completions_) {
    if (id == cid) return true;
  }
  return false;
}

Completion FakeQueue::completion(uint16_t cid) const {
  for (auto it = completions_.rbegin(); it != completions_.rend(); ++it) {
    if (it->first == cid) return it->second;
  }
  ADD_FAILURE() << "no completion for CID " << cid;
  return {};
}

Request* FakeQueue::request(uint16_t cid) const {
  for (const auto& slot : slots_) {
    if (slot->busy && slot->cid == cid) return &slot->req;
  }
  return nullptr;
}

spec::Sqe connect_sqe(uint16_t qid, uint32_t sq_entries, uint32_t kato_ms, uint8_t cattr) {
  return spec::to_sqe(spec::make_connect_command(0, qid, sq_entries, kato_ms, cattr));
}

std::vector<uint8_t> connect_data(const std::string& subnqn, const Host& host, uint16_t cntlid) {
  spec::ConnectData data{};
  std::memcpy(data.hostid, host.id.data(), sizeof(data.hostid));
  data.cntlid = cntlid;
  spec::put_nul_padded(data.subnqn, subnqn);
  spec::put_nul_padded(data.hostnqn, host.nqn);
  std::vector<uint8_t> bytes(sizeof(data));
  std::memcpy(bytes.data(), &data, sizeof(data));
  return bytes;
}

spec::Sqe io_sqe(uint8_t opcode, uint32_t nsid, uint64_t lba, uint32_t blocks) {
  spec::Sqe sqe = spec::make_sqe(opcode, 0, nsid);
  spec::rw_set_range(sqe, lba, blocks);
  return sqe;
}

std::vector<uint8_t> pattern(size_t size, uint8_t seed) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 9));
  return bytes;
}

uint32_t cc_enable_value() {
  spec::CcFields cc;
  cc.en = true;
  cc.iosqes = 6;
  cc.iocqes = 4;
  return spec::encode_cc(cc);
}

void TargetTest::SetUp() { build(); }

void TargetTest::build() {
  auto target = Target::create(opts_);
  ASSERT_TRUE(target.has_value());
  target_ = std::move(*target);

  bdev::MallocBdevOpts malloc_opts;
  malloc_opts.name = "Malloc0";
  malloc_opts.block_size_bytes = kMallocBlockSize;
  malloc_opts.block_count = kMallocBlocks;
  malloc_opts.clock = &harness_.clock();
  auto made_malloc = bdev::create_malloc_bdev(malloc_opts);
  ASSERT_TRUE(made_malloc.has_value());
  malloc_ = std::move(*made_malloc);

  bdev::NullBdevOpts null_opts;
  null_opts.name = "Null0";
  null_opts.block_size_bytes = kNullBlockSize;
  null_opts.block_count = kNullBlocks;
  null_opts.clock = &harness_.clock();
  auto made_null = bdev::create_null_bdev(null_opts);
  ASSERT_TRUE(made_null.has_value());
  null_ = std::move(*made_null);

  SubsystemOpts subsystem;
  subsystem.nqn = kSubsystemNqn;
  subsystem.serial_number = "SN0001";
  subsystem.model_number = "Test Model";
  subsystem.allow_any_host = true;
  subsystem.max_namespaces = 8;
  ASSERT_TRUE(target_->add_subsystem(subsystem).has_value());
  NamespaceOpts ns1;
  ns1.nsid = 1;
  ns1.bdev = malloc_.get();
  ASSERT_TRUE(target_->add_namespace(kSubsystemNqn, ns1).has_value());
  NamespaceOpts ns2;
  ns2.nsid = 2;
  ns2.bdev = null_.get();
  ASSERT_TRUE(target_->add_namespace(kSubsystemNqn, ns2).has_value());
}

void TargetTest::teardown_queues() {
  for (int round = 0; round < 1000; ++round) {
    bool all = true;
    for (auto& queue : queues_) all = queue->destroy() && all;
    if (all) break;
    harness_.poll_round();
  }
  harness_.poll_until_idle(100);
  queues_.clear();
}

void TargetTest::TearDown() {
  teardown_queues();
  target_.reset();
  malloc_.reset();
  null_.reset();
}

FakeQueue& TargetTest::new_queue(size_t reactor_index, uint32_t depth) {
  queues_.push_back(std::make_unique<FakeQueue>(*target_, harness_.reactor(reactor_index), depth));
  return *queues_.back();
}

Completion TargetTest::wait(FakeQueue& queue, uint16_t cid, int max_rounds) {
  const bool done = harness_.poll_until([&] { return queue.completed(cid); }, max_rounds);
  EXPECT_TRUE(done) << "CID " << cid << " did not complete";
  if (!done) return {};
  return queue.completion(cid);
}

Completion TargetTest::run(FakeQueue& queue, const spec::Sqe& sqe, const std::vector<uint8_t>& h2c,
                           uint32_t c2h_length, unsigned segments) {
  const uint16_t cid = queue.submit(sqe, h2c, c2h_length, segments);
  return wait(queue, cid);
}

FakeQueue& TargetTest::connect_admin(uint16_t* cntlid, const std::string& nqn, const Host& host,
                                     uint32_t kato_ms, uint32_t sq_entries) {
  FakeQueue& queue = new_queue(0, sq_entries);
  const Completion done =
      run(queue, connect_sqe(0, sq_entries, kato_ms), connect_data(nqn, host, 0xFFFF));
  EXPECT_TRUE(done.ok()) << spec::status_name(done.status(), true);
  if (cntlid != nullptr) *cntlid = static_cast<uint16_t>(done.cqe.cdw0);
  return queue;
}

Completion TargetTest::property_set(FakeQueue& queue, uint32_t offset, uint64_t value) {
  return run(queue, spec::to_sqe(spec::make_property_set(0, offset, value)));
}

Completion TargetTest::property_get(FakeQueue& queue, uint32_t offset) {
  return run(queue, spec::to_sqe(spec::make_property_get(0, offset)));
}

void TargetTest::enable(FakeQueue& admin) {
  EXPECT_TRUE(property_set(admin, spec::property_offset::cc, cc_enable_value()).ok());
  const Completion csts = property_get(admin, spec::property_offset::csts);
  EXPECT_TRUE(spec::csts_rdy(static_cast<uint32_t>(spec::property_get_value(csts.cqe))));
}

FakeQueue& TargetTest::bring_up(uint16_t* cntlid, const Host& host) {
  FakeQueue& admin = connect_admin(cntlid, kSubsystemNqn, host);
  enable(admin);
  const Completion queues =
      run(admin, spec::make_set_features(0, spec::feature::number_of_queues,
                                         spec::encode_number_of_queues(4, 4)));
  EXPECT_TRUE(queues.ok());
  return admin;
}

FakeQueue& TargetTest::connect_io(uint16_t cntlid, uint16_t qid, const Host& host,
                                  size_t reactor_index, uint32_t sq_entries) {
  FakeQueue& queue = new_queue(reactor_index, sq_entries);
  const Completion done =
      run(queue, connect_sqe(qid, sq_entries), connect_data(kSubsystemNqn, host, cntlid));
  EXPECT_TRUE(done.ok()) << spec::status_name(done.status(), true);
  EXPECT_EQ(done.cqe.cdw0 & 0xFFFF, cntlid);
  return queue;
}

Completion TargetTest::connect_io_expect_failure(FakeQueue& queue, uint16_t cntlid, uint16_t qid,
                                                 const Host& host, uint32_t sq_entries) {
  const Completion done =
      run(queue, connect_sqe(qid, sq_entries), connect_data(kSubsystemNqn, host, cntlid));
  EXPECT_FALSE(done.ok());
  return done;
}

}  // namespace nvmf::target::testing
