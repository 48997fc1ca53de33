// The host queue's wr_id: which WR completed, packed into the 64 bits verbs gives back.
// Layout: kind (4 bits) | send-queue sequence (24) | window (20) | CID or receive index (16).
// The sequence tells how many send WRs a completion retires (a signaled success retires the
// unsignaled WRs before it), so the queue knows when the HCA has handed everything back. The
// window field holds any window of the largest pool, deferred's 2 x 65536 (key_policy.h).
// Header-only; any thread.
#pragma once

#include <cstdint>

#include "memreg/key_policy.h"

namespace nvmf::transport_rdma::host_wr {

inline constexpr uint64_t kKindCapsule = 1;
inline constexpr uint64_t kKindBind = 2;
inline constexpr uint64_t kKindLocalInv = 3;
inline constexpr uint64_t kKindDrain = 4;
inline constexpr uint64_t kKindRecv = 8;
inline constexpr uint32_t kSeqMask = 0xFFFFFF;
inline constexpr uint32_t kWindowMask = 0xFFFFF;
static_assert(2 * memreg::kKeyPolicyDepthMax <= kWindowMask,
              "the wr_id window field must hold every window of a deferred pool");

constexpr uint64_t make_wr_id(uint64_t kind, uint32_t seq, uint32_t window, uint32_t cid) {
  return (kind << 60) | (uint64_t{seq & kSeqMask} << 36) | (uint64_t{window & kWindowMask} << 16) |
         (cid & 0xFFFF);
}
constexpr uint64_t wr_kind(uint64_t wr_id) { return wr_id >> 60; }
constexpr uint32_t wr_seq(uint64_t wr_id) { return static_cast<uint32_t>(wr_id >> 36) & kSeqMask; }
constexpr uint32_t wr_window(uint64_t wr_id) {
  return static_cast<uint32_t>(wr_id >> 16) & kWindowMask;
}
constexpr uint32_t wr_cid(uint64_t wr_id) { return static_cast<uint32_t>(wr_id) & 0xFFFF; }

}  // namespace nvmf::transport_rdma::host_wr
