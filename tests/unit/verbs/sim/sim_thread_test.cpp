// The two sides of a connection driven from two threads at once, as reactors will: the host
// thread sends commands and polls its CQs, the target thread answers each with an RDMA WRITE
// into the host's buffer and a SEND. Data is checked on both sides. Run under
// -DNVMF_SANITIZE=thread to check the sim's locking.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <span>
#include <string>
#include <thread>

#include "sim_test_util.h"

namespace nvmf::verbs::sim::test {
namespace {

constexpr uint32_t kCommands = 2000;
constexpr uint32_t kSlots = 16;        // commands in flight at most
constexpr uint32_t kDataBytes = 1024;  // written by the target per command

void run_two_threads(SimProfile profile) {
  PairOpts opts;
  opts.sim.profile = profile;
  opts.sim.seed = 99;
  opts.queue_depth = 64;
  SimPair pair(opts);
  ASSERT_NE(pair.target.qp, nullptr);
  // Host buffer: [0, 16K) data slots; [32K, 32K+16*64) command capsules; [48K..) responses.
  // Target buffer: [48K..) command receives; [0, 16K) data sources; [32K..) responses.
  pair.post_recvs(pair.target, kSlots, 48 * 1024, 64, 0);
  pair.post_recvs(pair.host, kSlots, 48 * 1024, 64, 0);

  std::atomic<bool> target_failed{false};
  std::thread target([&] {
    Side& t = pair.target;
    const uint64_t host_data = pair.host.addr(0);
    const uint32_t host_rkey = pair.host.mr->rkey();
    uint32_t answered = 0;
    WorkCompletion wcs[16];
    while (answered < kCommands && !target_failed) {
      const int n = t.recv_cq->poll(std::span<WorkCompletion>(wcs, 16));
      for (int i = 0; i < n; ++i) {
        if (wcs[i].status != WcStatus::success || wcs[i].byte_len != 4) {
          target_failed = true;
          break;
        }
        const uint64_t slot = wcs[i].wr_id;  // receive slot
        uint32_t command = 0;
        std::memcpy(&command, &t.buffer[48 * 1024 + slot * 64], 4);
        const uint32_t data_slot = command % kSlots;
        std::memset(&t.buffer[data_slot * kDataBytes], static_cast<int>(command & 0xFF),
                    kDataBytes);
        Sge data = t.sge(data_slot * kDataBytes, kDataBytes);
        std::memcpy(&t.buffer[32 * 1024 + data_slot * 64], &command, 4);
        Sge response = t.sge(32 * 1024 + data_slot * 64, 4);
        Sge recv = t.sge(48 * 1024 + slot * 64, 64);
        if (!t.qp->post_recv({slot, &recv, 1}) ||
            !t.qp->post_send(rdma_wr(WrOpcode::rdma_write, 1, &data,
                                     host_data + data_slot * kDataBytes, host_rkey, 0)) ||
            !t.qp->post_send(send_wr(2, &response, 0))) {
          target_failed = true;
          break;
        }
        ++answered;
      }
      if (!t.qp->flush()) target_failed = true;
      const int sent = t.send_cq->poll(std::span<WorkCompletion>(wcs, 16));
      for (int i = 0; i < sent; ++i) target_failed = true;  // all unsignaled: none expected
    }
  });

  // The host loop returns instead of asserting so the target thread is always joined.
  auto host_loop = [&]() -> std::string {
    Side& h = pair.host;
    uint32_t sent = 0, done = 0;
    WorkCompletion wcs[16];
    while (done < kCommands) {
      if (target_failed) return "the target thread failed";
      while (sent < kCommands && sent - done < kSlots) {
        const uint32_t slot = sent % kSlots;
        std::memcpy(&h.buffer[32 * 1024 + slot * 64], &sent, 4);
        Sge capsule = h.sge(32 * 1024 + slot * 64, 4);
        if (!h.qp->post_send(send_wr(sent, &capsule))) return "post_send failed";
        ++sent;
      }
      if (!h.qp->flush()) return "flush failed";
      int n = h.send_cq->poll(std::span<WorkCompletion>(wcs, 16));
      for (int i = 0; i < n; ++i) {
        if (wcs[i].status != WcStatus::success) return "a SEND failed";
      }
      n = h.recv_cq->poll(std::span<WorkCompletion>(wcs, 16));
      for (int i = 0; i < n; ++i) {
        if (wcs[i].status != WcStatus::success) return "a receive failed";
        const uint64_t slot = wcs[i].wr_id;
        uint32_t command = 0;
        std::memcpy(&command, &h.buffer[48 * 1024 + slot * 64], 4);
        if (command != done) return "responses out of order";
        // The WRITE before the response has landed: RC orders it before the SEND.
        const uint8_t* data = &h.buffer[(command % kSlots) * kDataBytes];
        const auto expected = static_cast<uint8_t>(command & 0xFF);
        if (data[0] != expected || data[kDataBytes - 1] != expected) return "data not there";
        Sge recv = h.sge(48 * 1024 + slot * 64, 64);
        if (!h.qp->post_recv({slot, &recv, 1})) return "post_recv failed";
        ++done;
      }
    }
    return "";
  };
  const std::string host_failure = host_loop();
  if (!host_failure.empty()) target_failed = true;  // stops the target thread
  target.join();
  EXPECT_EQ(host_failure, "");
  EXPECT_FALSE(target_failed);
}

TEST(SimThreads, TwoThreadsDriveTheTwoSidesUnderRxe) { run_two_threads(SimProfile::rxe); }

TEST(SimThreads, TwoThreadsDriveTheTwoSidesUnderAdversarial) {
  run_two_threads(SimProfile::adversarial);
}

}  // namespace
}  // namespace nvmf::verbs::sim::test
