// A connected host/target pair on the sim provider, and work-request builders, for the sim
// tests. The host is the active side (initiator), the target the passive side.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "verbs/sim/sim.h"
#include "verbs/verbs.h"

namespace nvmf::verbs::sim::test {

inline constexpr size_t kBufferBytes = 64 * 1024;
inline constexpr uint32_t kAllAccess =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessMwBind;
inline constexpr const char* kTargetAddress = "10.0.0.1";
inline constexpr uint16_t kTargetPort = 4420;

// One end of a connection: its CM channel and id, PD, CQs, optional SRQ, QP and one MR over a
// 64 KiB buffer. Members are declared so that destruction runs children first.
struct Side {
  std::unique_ptr<CmChannel> channel;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> send_cq;
  std::unique_ptr<CompletionQueue> recv_cq;
  std::unique_ptr<SharedReceiveQueue> srq;
  std::vector<uint8_t> buffer = std::vector<uint8_t>(kBufferBytes, 0);
  std::unique_ptr<MemoryRegion> mr;
  std::unique_ptr<CmId> id;  // owns the QP: destroyed first
  QueuePair* qp = nullptr;

  uint64_t addr(size_t offset = 0) const {
    return reinterpret_cast<uint64_t>(buffer.data()) + offset;
  }
  Sge sge(size_t offset, uint32_t length) const { return {addr(offset), length, mr->lkey()}; }
};

struct PairOpts {
  SimOpts sim{};
  bool target_srq = false;
  bool two_devices = false;  // host on a second device of the same fabric
  ConnectParams host_params{};
  ConnectParams target_params{};
  uint32_t host_mr_access = kAllAccess;
  uint32_t target_mr_access = kAccessLocalWrite | kAccessRemoteRead | kAccessRemoteWrite;
  uint32_t queue_depth = 64;
  uint32_t max_inline_data = 0;
  bool connect = true;  // false: stop after both QPs exist and the target has adopted
};

class SimPair {
 public:
  explicit SimPair(const PairOpts& opts = {});
  ~SimPair();

  SimProvider& target_provider() { return *provider_; }
  SimProvider& host_provider() { return host_provider_ != nullptr ? *host_provider_ : *provider_; }

  // Polls `cq` until `want` completions arrived or `polls_max` polls were made.
  std::vector<WorkCompletion> collect(CompletionQueue& cq, size_t want, int polls_max = 400);
  // Polls every CQ of both sides `polls` times; returns what each got.
  struct Drained {
    std::vector<WorkCompletion> host_send, host_recv, target_send, target_recv;
  };
  Drained drain(int polls = 50);

  // Posts `count` receives of `length` bytes each (target: on the SRQ when there is one),
  // at `offset` + i * length in the side's buffer, with wr_ids first_id + i; then flushes.
  void post_recvs(Side& side, uint32_t count, size_t offset = 0, uint32_t length = 4096,
                  uint64_t first_id = 1000);

  // Waits for one CM event on `channel` (the fabric progresses while waiting).
  static bool wait_event(CmChannel& channel, CmEvent* event, int polls_max = 100);

  std::unique_ptr<SimProvider> provider_;
  std::unique_ptr<SimProvider> host_provider_;
  Side target;
  Side host;
  std::unique_ptr<CmId> listener;  // in target.channel: destroyed before it
};

// Work-request builders.
inline SendWr send_wr(uint64_t wr_id, const Sge* sge, uint32_t flags = kWrSignaled) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::send;
  wr.flags = flags;
  wr.sg_list = sge;
  wr.num_sge = sge != nullptr ? 1 : 0;
  return wr;
}

inline SendWr send_inv_wr(uint64_t wr_id, const Sge* sge, uint32_t key,
                          uint32_t flags = kWrSignaled) {
  SendWr wr = send_wr(wr_id, sge, flags);
  wr.opcode = WrOpcode::send_with_inv;
  wr.invalidate_rkey = key;
  return wr;
}

inline SendWr rdma_wr(WrOpcode opcode, uint64_t wr_id, const Sge* sge, uint64_t remote_addr,
                      uint32_t rkey, uint32_t flags = kWrSignaled) {
  SendWr wr = send_wr(wr_id, sge, flags);
  wr.opcode = opcode;
  wr.remote_addr = remote_addr;
  wr.rkey = rkey;
  return wr;
}

inline SendWr local_inv_wr(uint64_t wr_id, uint32_t key, uint32_t flags = kWrSignaled) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::local_inv;
  wr.flags = flags;
  wr.invalidate_rkey = key;
  return wr;
}

inline SendWr bind_wr(uint64_t wr_id, MemoryWindow& mw, const MemoryRegion& mr, uint64_t addr,
                      uint64_t length, uint32_t access, uint32_t rkey,
                      uint32_t flags = kWrSignaled) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::bind_mw;
  wr.flags = flags;
  wr.bind.mw = &mw;
  wr.bind.mr = &mr;
  wr.bind.addr = addr;
  wr.bind.length = length;
  wr.bind.access = access;
  wr.bind.rkey = rkey;
  return wr;
}

inline void fill(std::vector<uint8_t>& buffer, size_t offset, size_t length, uint8_t seed) {
  for (size_t i = 0; i < length; ++i) buffer[offset + i] = static_cast<uint8_t>(seed + i * 7);
}

inline bool filled(const std::vector<uint8_t>& buffer, size_t offset, size_t length, uint8_t seed) {
  for (size_t i = 0; i < length; ++i) {
    if (buffer[offset + i] != static_cast<uint8_t>(seed + i * 7)) return false;
  }
  return true;
}

// Counts completions of `status` in `wcs`.
inline size_t count_status(const std::vector<WorkCompletion>& wcs, WcStatus status) {
  size_t n = 0;
  for (const auto& wc : wcs) n += wc.status == status ? 1 : 0;
  return n;
}

}  // namespace nvmf::verbs::sim::test
