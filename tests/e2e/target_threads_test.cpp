// The target on real reactor threads (as nvmf_tgt runs it), in interrupt and poll mode, with a
// raw host on the test thread: connections land on both reactors, data round-trips, and the
// shutdown sequence (begin_shutdown, drain, release_reactor, stop) leaves nothing behind.
// Run under -DNVMF_SANITIZE=thread to check the acceptor/poll-group hand-offs.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "bdev/malloc_bdev.h"
#include "raw_host.h"
#include "reactor/group.h"
#include "spec/spec.h"
#include "target/target.h"
#include "transport_rdma/target_transport.h"
#include "verbs/sim/sim.h"

namespace nvmf::e2e {
namespace {

constexpr const char* kNqn = "nqn.2026-11.io.nvmf-rdma:threads";
constexpr const char* kHostNqn =
    "nqn.2014-08.org.nvmexpress:uuid:1f0e0d0c-0b0a-0908-0706-050403020100";

// Runs fn on the reactor's thread and waits for it.
template <typename Fn>
void run_on(reactor::Reactor& reactor, Fn&& fn) {
  reactor::run_and_wait(reactor, std::forward<Fn>(fn));
}

void serve_and_shut_down(reactor::Mode mode) {
  auto provider = verbs::sim::SimProvider::create();
  ASSERT_TRUE(provider);
  auto host_provider = (*provider)->create_peer("sim1");
  ASSERT_TRUE(host_provider);
  bdev::MallocBdevOpts bdev_opts;
  bdev_opts.name = "Malloc0";
  bdev_opts.block_count = 8192;
  auto bdev = bdev::create_malloc_bdev(bdev_opts);
  ASSERT_TRUE(bdev);
  auto target = target::Target::create(target::TargetOpts{});
  ASSERT_TRUE(target);
  target::SubsystemOpts subsystem;
  subsystem.nqn = kNqn;
  subsystem.allow_any_host = true;
  ASSERT_TRUE((*target)->add_subsystem(subsystem));
  target::NamespaceOpts ns;
  ns.bdev = bdev->get();
  ASSERT_TRUE((*target)->add_namespace(kNqn, ns));

  reactor::ReactorGroupOpts group_opts;
  group_opts.reactor_count = 2;
  group_opts.reactor.mode = mode;
  auto group = reactor::ReactorGroup::start(group_opts);
  ASSERT_TRUE(group);
  std::vector<reactor::Reactor*> reactors = {&(*group)->reactor(0), &(*group)->reactor(1)};
  std::unique_ptr<transport_rdma::RdmaTargetTransport> transport;
  run_on(*reactors[0], [&] {
    auto created = transport_rdma::RdmaTargetTransport::create(**provider, **target, reactors,
                                                               transport_rdma::RdmaTargetOpts{});
    ASSERT_TRUE(created);
    transport = std::move(*created);
    ASSERT_TRUE(transport->listen("10.0.0.1", 4420));
  });
  ASSERT_NE(transport, nullptr);

  // The host part runs in a lambda so that a failed ASSERT still reaches the shutdown below.
  auto exercise = [&] {
    // The target runs on its own threads: the host only pumps itself.
    RawHost admin(**host_provider, nullptr);
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
      queues.push_back(std::make_unique<RawHost>(**host_provider, nullptr));
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
    EXPECT_EQ((*target)->controller_count(kNqn), 1u);
  };  // hosts disconnect when their RawHosts go
  exercise();

  run_on(*reactors[0], [&] { transport->begin_shutdown(); });
  bool drained = false;
  for (int i = 0; i < 3000 && !drained; ++i) {
    run_on(*reactors[0], [&] { drained = transport->drained(); });
    if (!drained) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(drained);
  for (reactor::Reactor* reactor : reactors) {
    run_on(*reactor, [&] { (void)(*target)->release_reactor(*reactor); });
  }
  (*group)->stop();
  for (reactor::Reactor* reactor : reactors) reactor->take_ownership();
  EXPECT_EQ((*target)->controller_count(kNqn), 0u);
  transport.reset();
  target->reset();
}

TEST(TargetThreads, ServeAndShutDownInInterruptMode) {
  serve_and_shut_down(reactor::Mode::interrupt);
}
TEST(TargetThreads, ServeAndShutDownInPollMode) { serve_and_shut_down(reactor::Mode::poll); }

}  // namespace
}  // namespace nvmf::e2e
