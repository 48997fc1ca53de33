// The target on real reactor threads (as nvmf_tgt runs it), in interrupt and poll mode, with a
// raw host on the test thread: connections land on both reactors, data round-trips, and the
// shutdown sequence (begin_shutdown, drain, release_reactor, stop) leaves nothing behind.
// Run under -DNVMF_SANITIZE=thread to check the acceptor/poll-group hand-offs.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "raw_host.h"
#include "sim_target_fixture.h"
#include "spec/spec.h"
#include "target/target.h"
#include "verbs/sim/sim.h"

namespace nvmf::e2e {
namespace {

constexpr const char* kNqn = "nqn.2026-11.io.nvmf-rdma:threads";
constexpr const char* kHostNqn =
    "nqn.2014-08.org.nvmexpress:uuid:1f0e0d0c-0b0a-0908-0706-050403020100";

void serve_and_shut_down(reactor::Mode mode) {
  ReactorThreadsTarget threaded;
  ReactorThreadsTarget::Opts target_opts;
  target_opts.nqn = kNqn;
  target_opts.mode = mode;
  ASSERT_NO_FATAL_FAILURE(threaded.start(target_opts));
  verbs::sim::SimProvider& host_provider = threaded.host_provider();
  target::Target& target = threaded.target();

  // The host part runs in a lambda so that a failed ASSERT still reaches the shutdown below.
  auto exercise = [&] {
    // The target runs on its own threads: the host only pumps itself.
    RawHost admin(host_provider, nullptr);
    ASSERT_TRUE(admin.connect("10.0.0.1", 4420, 0, 32, 31).established);
    RawCompletion connect = admin.fabrics_connect(0, 32, 0xFFFF, kNqn, kHostNqn, 10000);
    ASSERT_TRUE(connect.ok());
    const auto cntlid = static_cast<uint16_t>(connect.cqe.cdw0 & 0xFFFF);
    spec::CcFields cc;
    cc.en = true;
    cc.iosqes = 6;
    cc.iocqes = 4;
    ASSERT_TRUE(admin.property_set(spec::property_offset::cc, spec::encode_cc(cc)).ok());

    // Two I/O queues: round-robin puts them on different reactors than the admin queue.
    std::vector<std::unique_ptr<RawHost>> queues;
    for (uint16_t qid = 1; qid <= 2; ++qid) {
      queues.push_back(std::make_unique<RawHost>(host_provider, nullptr));
      ASSERT_TRUE(queues.back()->connect("10.0.0.1", 4420, qid, 32, 31).established);
      ASSERT_TRUE(queues.back()->fabrics_connect(qid, 32, cntlid, kNqn, kHostNqn).ok());
    }
    for (int round = 0; round < 50; ++round) {
      for (size_t q = 0; q < queues.size(); ++q) {
        RawHost& io = *queues[q];
        const uint64_t lba = (round * 2 + q) * 8;
        for (uint32_t i = 0; i < 4096; ++i) io.memory()[i] = static_cast<uint8_t>(i + lba + round);
        spec::Sqe write = spec::make_sqe(spec::nvm_opcode::write, io.next_cid(), 1);
        spec::rw_set_range(write, lba, 8);
        write.sgl1 = spec::make_keyed_data_block(io.address(0), 4096, io.rkey(), false);
        RawCompletion done;
        ASSERT_TRUE(io.execute(write, &done));
        ASSERT_TRUE(done.ok());
        spec::Sqe read = spec::make_sqe(spec::nvm_opcode::read, io.next_cid(), 1);
        spec::rw_set_range(read, lba, 8);
        read.sgl1 = spec::make_keyed_data_block(io.address(8192), 4096, io.rkey(), false);
        ASSERT_TRUE(io.execute(read, &done));
        ASSERT_TRUE(done.ok());
        ASSERT_EQ(std::memcmp(io.memory(), io.memory() + 8192, 4096), 0) << "round " << round;
      }
    }
    EXPECT_EQ(target.controller_count(kNqn), 1u);
  };  // hosts disconnect when their RawHosts go
  exercise();

  threaded.shut_down();
  EXPECT_EQ(target.controller_count(kNqn), 0u);
}

TEST(TargetThreads, ServeAndShutDownInInterruptMode) {
  serve_and_shut_down(reactor::Mode::interrupt);
}
TEST(TargetThreads, ServeAndShutDownInPollMode) { serve_and_shut_down(reactor::Mode::poll); }

}  // namespace
}  // namespace nvmf::e2e
