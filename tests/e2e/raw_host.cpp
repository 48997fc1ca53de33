#include "raw_host.h"

#include <chrono>
#include <cstring>
#include <thread>

namespace nvmf::e2e {

namespace {
constexpr uint32_t kCapsuleSlots = 16;
constexpr uint32_t kCapsuleBytes = 64 + 16384;
constexpr uint32_t kResponseSlots = 64;
constexpr uint64_t kTagRecv = 1ull << 32;
constexpr uint64_t kTagSend = 2ull << 32;
constexpr uint64_t kTagBind = 3ull << 32;
}  // namespace

RawHost::RawHost(verbs::Provider& provider, std::function<void()> pump_target)
    : provider_(provider),
      pump_target_(std::move(pump_target)),
      memory_(kMemoryBytes),
      capsules_(size_t{kCapsuleSlots} * kCapsuleBytes),
      responses_(kResponseSlots) {}

RawHost::~RawHost() {
  if (connected_ && !disconnected_) {
    disconnect();
    wait_disconnected(2000);
  }
  id_.reset();
  burst_mr_.reset();
  response_mr_.reset();
  capsule_mr_.reset();
  memory_mr_.reset();
  cq_.reset();
  pd_.reset();
}

uint32_t RawHost::rkey() const { return memory_mr_ ? memory_mr_->rkey() : 0; }

void RawHost::pump() {
  if (pump_target_) {
    pump_target_();
  } else {
    // The target runs on its own threads: give them time (20000 rounds ~ 2 s or more).
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (!cq_) return;
  verbs::WorkCompletion wcs[16];
  int count = cq_->poll(std::span(wcs, 16));
  for (int i = 0; i < count; ++i) {
    const verbs::WorkCompletion& wc = wcs[i];
    if (wc.wr_id == kTagBind && wc.status == verbs::WcStatus::success) ++binds_completed_;
    if ((wc.wr_id & ~0xFFFFFFFFull) == kTagRecv) {
      if (wc.status != verbs::WcStatus::success) continue;
      uint32_t index = static_cast<uint32_t>(wc.wr_id & 0xFFFFFFFF);
      RawCompletion completion;
      std::memcpy(&completion.cqe, &responses_[index].cqe, sizeof(spec::Cqe));
      completion.remote_invalidated = wc.remote_invalidated;
      completion.invalidated_rkey = wc.invalidated_rkey;
      arrived_.push_back(completion);
      post_response_recv(index);
      (void)qp_->flush();
    }
  }
}

bool RawHost::wait_for_event(verbs::CmEventType* type, verbs::CmEvent* out, int max_rounds) {
  for (int round = 0; round < max_rounds; ++round) {
    pump();
    if (channel_->poll_event(out)) {
      *type = out->type;
      return true;
    }
  }
  return false;
}

void RawHost::post_response_recv(uint32_t index) {
  verbs::Sge sge{reinterpret_cast<uint64_t>(&responses_[index].cqe), sizeof(spec::Cqe),
                 response_mr_->lkey()};
  (void)qp_->post_recv(verbs::RecvWr{kTagRecv | index, &sge, 1});
}

RawConnectResult RawHost::connect(const std::string& address, uint16_t port, uint16_t qid,
                                  uint16_t hrqsize, uint16_t hsqsize, uint8_t responder_resources) {
  spec::RdmaCmRequest request{};
  request.recfmt = 0;
  request.qid = qid;
  request.hrqsize = hrqsize;
  request.hsqsize = hsqsize;
  return connect_raw(address, port, &request, sizeof(request), responder_resources);
}

RawConnectResult RawHost::connect_raw(const std::string& address, uint16_t port,
                                      const void* private_data, uint8_t length,
                                      uint8_t responder_resources) {
  RawConnectResult result;
  auto channel = provider_.create_cm_channel();
  if (!channel) return result;
  channel_ = std::move(*channel);
  auto id = channel_->create_id();
  if (!id) return result;
  id_ = std::move(*id);
  if (!id_->resolve(address, port, 1000)) return result;
  verbs::CmEvent event;
  verbs::CmEventType type;
  if (!wait_for_event(&type, &event) || type != verbs::CmEventType::route_resolved) return result;

  auto pd = id_->device()->allocate_pd();
  if (!pd) return result;
  pd_ = std::move(*pd);
  auto cq = pd_->create_cq(verbs::CqOpts{});
  if (!cq) return result;
  cq_ = std::move(*cq);
  const uint32_t access = verbs::kAccessLocalWrite | verbs::kAccessRemoteRead |
                          verbs::kAccessRemoteWrite | verbs::kAccessMwBind;
  memory_mr_ = std::move(*pd_->register_memory(memory_.data(), memory_.size(), access));
  capsule_mr_ = std::move(*pd_->register_memory(capsules_.data(), capsules_.size(), 0));
  response_mr_ = std::move(*pd_->register_memory(
      responses_.data(), responses_.size() * sizeof(RecvSlot), verbs::kAccessLocalWrite));
  verbs::QpOpts qp_opts;
  qp_opts.send_cq = cq_.get();
  qp_opts.recv_cq = cq_.get();
  qp_opts.max_send_wr = kCapsuleSlots * 2;
  qp_opts.max_recv_wr = kResponseSlots;
  qp_opts.max_send_sge = 2;
  auto qp = id_->create_qp(*pd_, qp_opts);
  if (!qp) return result;
  qp_ = *qp;
  for (uint32_t i = 0; i < kResponseSlots; ++i) post_response_recv(i);
  (void)qp_->flush();

  verbs::ConnectParams params;
  params.private_data = private_data;
  params.private_data_length = length;
  params.responder_resources = responder_resources;
  params.initiator_depth = 0;
  if (!id_->connect(params)) return result;
  if (!wait_for_event(&type, &event)) return result;
  if (type == verbs::CmEventType::established) {
    result.established = true;
    connected_ = true;
    spec::RdmaCmAccept accept{};
    std::memcpy(&accept, event.private_data, sizeof(accept));
    result.crqsize = accept.crqsize;
  } else if (type == verbs::CmEventType::rejected) {
    result.rejected = true;
    spec::RdmaCmReject reject{};
    std::memcpy(&reject, event.private_data, sizeof(reject));
    result.reject_status = reject.sts;
  }
  return result;
}

bool RawHost::send_capsule(const spec::Sqe& sqe, const std::vector<uint8_t>& in_capsule) {
  if (!qp_ || in_capsule.size() + 64 > kCapsuleBytes) return false;
  const uint32_t slot = next_capsule_++ % kCapsuleSlots;
  uint8_t* capsule = capsules_.data() + size_t{slot} * kCapsuleBytes;
  std::memcpy(capsule, &sqe, sizeof(sqe));
  if (!in_capsule.empty()) std::memcpy(capsule + 64, in_capsule.data(), in_capsule.size());
  verbs::Sge sge{reinterpret_cast<uint64_t>(capsule), static_cast<uint32_t>(64 + in_capsule.size()),
                 capsule_mr_->lkey()};
  verbs::SendWr wr;
  wr.wr_id = kTagSend | slot;
  wr.opcode = verbs::WrOpcode::send;
  wr.flags = verbs::kWrSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (!qp_->post_send(wr)) return false;
  return static_cast<bool>(qp_->flush());
}

bool RawHost::register_burst_buffers() {
  if (burst_mr_) return true;
  if (!pd_) return false;
  burst_capsules_.resize(size_t{kBurstMax} * (64 + kBurstCapsuleData));
  auto mr = pd_->register_memory(burst_capsules_.data(), burst_capsules_.size(), 0);
  if (!mr) return false;
  burst_mr_ = std::move(*mr);
  return true;
}

bool RawHost::send_raw_capsule(const std::vector<uint8_t>& bytes) {
  if (!qp_ || bytes.empty() || !register_burst_buffers()) return false;
  if (bytes.size() > burst_capsules_.size()) return false;
  std::memcpy(burst_capsules_.data(), bytes.data(), bytes.size());
  verbs::Sge sge{reinterpret_cast<uint64_t>(burst_capsules_.data()),
                 static_cast<uint32_t>(bytes.size()), burst_mr_->lkey()};
  verbs::SendWr wr;
  wr.wr_id = kTagSend | kCapsuleSlots;
  wr.opcode = verbs::WrOpcode::send;
  wr.flags = verbs::kWrSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (!qp_->post_send(wr)) return false;
  return static_cast<bool>(qp_->flush());
}

bool RawHost::send_burst(const std::vector<spec::Sqe>& sqes,
                         const std::vector<std::vector<uint8_t>>& in_capsule) {
  constexpr size_t kSlotBytes = 64 + kBurstCapsuleData;
  if (!qp_ || sqes.size() > kBurstMax ||
      (!in_capsule.empty() && in_capsule.size() != sqes.size())) {
    return false;
  }
  if (!register_burst_buffers()) return false;
  for (size_t i = 0; i < sqes.size(); ++i) {
    const size_t data = in_capsule.empty() ? 0 : in_capsule[i].size();
    if (data > kBurstCapsuleData) return false;
    uint8_t* capsule = burst_capsules_.data() + i * kSlotBytes;
    std::memcpy(capsule, &sqes[i], sizeof(spec::Sqe));
    if (data != 0) std::memcpy(capsule + 64, in_capsule[i].data(), data);
    verbs::Sge sge{reinterpret_cast<uint64_t>(capsule), static_cast<uint32_t>(64 + data),
                   burst_mr_->lkey()};
    verbs::SendWr wr;
    wr.wr_id = kTagSend | (kCapsuleSlots + i);
    wr.opcode = verbs::WrOpcode::send;
    wr.flags = verbs::kWrSignaled;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (!qp_->post_send(wr)) return false;
  }
  return static_cast<bool>(qp_->flush());
}

bool RawHost::wait_response(RawCompletion* completion, int max_rounds) {
  for (int round = 0; round < max_rounds; ++round) {
    if (!arrived_.empty()) {
      *completion = arrived_.front();
      arrived_.pop_front();
      return true;
    }
    pump();
  }
  return false;
}

bool RawHost::execute(const spec::Sqe& sqe, RawCompletion* completion,
                      const std::vector<uint8_t>& in_capsule) {
  return send_capsule(sqe, in_capsule) && wait_response(completion);
}

RawCompletion RawHost::fabrics_connect(uint16_t qid, uint32_t sq_entries, uint16_t cntlid,
                                       const std::string& subnqn, const std::string& hostnqn,
                                       uint32_t kato_ms) {
  spec::ConnectData data{};
  for (int i = 0; i < 16; ++i) data.hostid[i] = static_cast<uint8_t>(0xA0 + i);
  data.cntlid = cntlid;
  std::strncpy(data.subnqn, subnqn.c_str(), sizeof(data.subnqn) - 1);
  std::strncpy(data.hostnqn, hostnqn.c_str(), sizeof(data.hostnqn) - 1);
  std::memcpy(memory_.data(), &data, sizeof(data));
  spec::Sqe sqe = spec::to_sqe(spec::make_connect_command(next_cid(), qid, sq_entries, kato_ms));
  sqe.sgl1 = spec::make_keyed_data_block(address(0), sizeof(data), rkey(), false);
  RawCompletion completion;
  if (!execute(sqe, &completion)) completion.cqe.status = 0xFFFF;
  return completion;
}

RawCompletion RawHost::property_get(uint32_t offset) {
  spec::Sqe sqe = spec::to_sqe(spec::make_property_get(next_cid(), offset));
  RawCompletion completion;
  if (!execute(sqe, &completion)) completion.cqe.status = 0xFFFF;
  return completion;
}

RawCompletion RawHost::property_set(uint32_t offset, uint64_t value) {
  spec::Sqe sqe = spec::to_sqe(spec::make_property_set(next_cid(), offset, value));
  RawCompletion completion;
  if (!execute(sqe, &completion)) completion.cqe.status = 0xFFFF;
  return completion;
}

uint32_t RawHost::bind_window(uint32_t offset, uint32_t length) {
  if (!window_) {
    auto window = pd_->allocate_window();
    if (!window) return 0;
    window_ = std::move(*window);
  }
  verbs::SendWr wr;
  wr.wr_id = kTagBind;
  wr.opcode = verbs::WrOpcode::bind_mw;
  wr.flags = verbs::kWrSignaled;
  wr.bind.mw = window_.get();
  wr.bind.mr = memory_mr_.get();
  wr.bind.addr = address(offset);
  wr.bind.length = length;
  wr.bind.access = verbs::kAccessRemoteRead | verbs::kAccessRemoteWrite;
  wr.bind.rkey = window_->next_rkey();
  const uint32_t before = binds_completed_;
  if (!qp_->post_send(wr) || !qp_->flush()) return 0;
  for (int round = 0; round < 20000 && binds_completed_ == before; ++round) pump();
  return binds_completed_ == before ? 0 : wr.bind.rkey;
}

void RawHost::disconnect() {
  if (id_) (void)id_->disconnect();
}

bool RawHost::wait_disconnected(int max_rounds) {
  verbs::CmEvent event;
  verbs::CmEventType type;
  for (int round = 0; round < max_rounds; ++round) {
    if (!wait_for_event(&type, &event, 1)) continue;
    if (type == verbs::CmEventType::disconnected) {
      disconnected_ = true;
      return true;
    }
  }
  return false;
}

}  // namespace nvmf::e2e
