// A raw, capsule-level NVMe/RDMA host for end-to-end tests of the target: it speaks verbs to
// the simulated HCA directly, builds every SQE and SGL by hand and checks the bytes that come
// back, with no initiator library in between. Everything runs on the test thread; pump()
// polls the target's reactors (a ReactorHarness) and this host's CQ and CM channel.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "spec/spec.h"
#include "verbs/verbs.h"

namespace nvmf::e2e {

struct RawCompletion {
  spec::Cqe cqe{};
  bool remote_invalidated = false;
  uint32_t invalidated_rkey = 0;
  spec::Status status() const { return cqe.decoded_status(); }
  bool ok() const { return status().is_success(); }
};

struct RawConnectResult {
  bool established = false;
  bool rejected = false;
  uint16_t reject_status = 0;  // NVMe/RDMA REJ STS from the private data
  uint16_t crqsize = 0;        // from the accept's private data
};

class RawHost {
 public:
  // `pump_target` polls the target side once (e.g. harness.poll_round()); without one (the
  // target on its own threads) each pump sleeps 100 us instead.
  RawHost(verbs::Provider& provider, std::function<void()> pump_target);
  ~RawHost();

  // Connects a queue: CM REQ private data {RECFMT, QID, HRQSIZE, HSQSIZE} (or raw bytes).
  RawConnectResult connect(const std::string& address, uint16_t port, uint16_t qid,
                           uint16_t hrqsize, uint16_t hsqsize, uint8_t responder_resources = 16);
  RawConnectResult connect_raw(const std::string& address, uint16_t port, const void* private_data,
                               uint8_t length, uint8_t responder_resources = 16);
  bool connected() const { return connected_; }

  // Host memory the target reaches with RDMA, registered for remote read and write: 8 MiB, room
  // for 1 MiB (MDTS) transfers split into pieces with gaps between them.
  static constexpr uint32_t kMemoryBytes = 8u << 20;
  uint8_t* memory() { return memory_.data(); }
  uint32_t rkey() const;
  uint64_t address(uint32_t offset) const {
    return reinterpret_cast<uint64_t>(memory_.data()) + offset;
  }

  // Sends `sqe` (+ in-capsule bytes) and waits for its response. Returns false on timeout.
  bool execute(const spec::Sqe& sqe, RawCompletion* completion,
               const std::vector<uint8_t>& in_capsule = {});
  // Sends without waiting; collect with wait_response().
  bool send_capsule(const spec::Sqe& sqe, const std::vector<uint8_t>& in_capsule = {});
  bool wait_response(RawCompletion* completion, int max_rounds = 20000);
  // Sends up to kBurstMax capsules back to back, each from its own buffer, with one doorbell
  // and without waiting: all of them are in flight at once. `in_capsule` is empty or holds one
  // byte vector (at most kBurstCapsuleData bytes) per SQE. Collect with wait_response(). The
  // buffers are reused by the next send_burst() / send_raw_capsule(): call again once the
  // responses are in.
  static constexpr uint32_t kBurstMax = 32;
  static constexpr uint32_t kBurstCapsuleData = 4096;
  bool send_burst(const std::vector<spec::Sqe>& sqes,
                  const std::vector<std::vector<uint8_t>>& in_capsule = {});
  // Sends `bytes` as one capsule exactly as given (even shorter than an SQE), without waiting.
  bool send_raw_capsule(const std::vector<uint8_t>& bytes);

  // Admin bring-up helpers. Connect data is sent keyed from host memory at offset 0.
  RawCompletion fabrics_connect(uint16_t qid, uint32_t sq_entries, uint16_t cntlid,
                                const std::string& subnqn, const std::string& hostnqn,
                                uint32_t kato_ms = 0);
  RawCompletion property_get(uint32_t offset);
  RawCompletion property_set(uint32_t offset, uint64_t value);

  // Binds a type-2 window over [offset, offset + length) of host memory on this QP and waits
  // for the bind to complete; returns the window's key (0 on failure).
  uint32_t bind_window(uint32_t offset, uint32_t length);

  void pump();
  void disconnect();
  bool wait_disconnected(int max_rounds = 20000);
  uint16_t next_cid() { return ++cid_; }

 private:
  struct RecvSlot {
    spec::Cqe cqe;
  };
  bool register_burst_buffers();
  bool wait_for_event(verbs::CmEventType* type, verbs::CmEvent* out, int max_rounds = 20000);
  void post_response_recv(uint32_t index);

  verbs::Provider& provider_;
  std::function<void()> pump_target_;
  std::unique_ptr<verbs::CmChannel> channel_;
  std::unique_ptr<verbs::CmId> id_;
  std::unique_ptr<verbs::ProtectionDomain> pd_;
  std::unique_ptr<verbs::CompletionQueue> cq_;
  std::unique_ptr<verbs::MemoryRegion> memory_mr_;
  std::unique_ptr<verbs::MemoryRegion> capsule_mr_;
  std::unique_ptr<verbs::MemoryRegion> response_mr_;
  std::unique_ptr<verbs::MemoryWindow> window_;
  std::unique_ptr<verbs::MemoryRegion> burst_mr_;  // burst buffers, registered on first use
  std::vector<uint8_t> burst_capsules_;
  uint32_t binds_completed_ = 0;
  std::vector<uint8_t> memory_;
  std::vector<uint8_t> capsules_;    // send buffers: 16 slots of 64 B + 16 KiB
  std::vector<RecvSlot> responses_;  // receive buffers for response capsules
  std::deque<RawCompletion> arrived_;
  verbs::QueuePair* qp_ = nullptr;
  bool connected_ = false;
  bool disconnected_ = false;
  uint32_t next_capsule_ = 0;
  uint16_t cid_ = 0;
};

}  // namespace nvmf::e2e
