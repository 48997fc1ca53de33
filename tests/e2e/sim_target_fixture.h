// The fixture both in-process target suites share: a 2-reactor harness on a FakeClock, a sim
// fabric with a target device and a host device ("sim1"), one malloc bdev, a Target with one
// subsystem exporting it, and the RDMA target transport listening on 10.0.0.1:4420. Hosts are
// RawHosts pumping the harness. TearDown shuts the transport down and checks it drained.
// ReactorThreadsTarget, below, is the same target on real reactor threads instead.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "bdev/malloc_bdev.h"
#include "harness_transport_opts.h"
#include "raw_host.h"
#include "reactor/group.h"
#include "reactor/harness.h"
#include "target/target.h"
#include "transport_rdma/target_transport.h"
#include "verbs/sim/sim.h"

namespace nvmf::e2e {

inline constexpr const char* kSimTargetAddress = "10.0.0.1";
inline constexpr uint16_t kSimTargetPort = 4420;
// The host NQN the raw hosts of these suites connect with.
inline constexpr const char* kSimHostNqn =
    "nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100";

class SimTargetFixture : public ::testing::Test {
 protected:
  // What the one subsystem looks like; the bdev is attached as NSID 1.
  virtual target::SubsystemOpts subsystem_opts() const = 0;
  virtual uint32_t block_size() const { return 512; }
  virtual uint64_t block_count() const { return 8192; }
  virtual target::TargetOpts target_opts() const { return {}; }

  // A subsystem any host may use, with defaults otherwise: what most suites serve.
  static target::SubsystemOpts open_subsystem(const char* nqn) {
    target::SubsystemOpts subsystem;
    subsystem.nqn = nqn;
    subsystem.allow_any_host = true;
    return subsystem;
  }

  void SetUp() override {
    verbs::sim::SimOpts sim_opts;
    sim_opts.clock = &harness_.clock();
    auto provider = verbs::sim::SimProvider::create(sim_opts);
    ASSERT_TRUE(provider);
    target_provider_ = std::move(*provider);
    auto peer = target_provider_->create_peer("sim1");
    ASSERT_TRUE(peer);
    host_provider_ = std::move(*peer);

    bdev_ = make_bdev("Malloc0", block_size(), block_count());
    ASSERT_TRUE(bdev_);
    auto target = target::Target::create(target_opts());
    ASSERT_TRUE(target);
    target_ = std::move(*target);
    const target::SubsystemOpts subsystem = subsystem_opts();
    ASSERT_TRUE(target_->add_subsystem(subsystem));
    target::NamespaceOpts ns;
    ns.bdev = bdev_.get();
    ASSERT_TRUE(target_->add_namespace(subsystem.nqn, ns));

    auto transport = transport_rdma::RdmaTargetTransport::create(
        *target_provider_, *target_, {&harness_.reactor(0), &harness_.reactor(1)}, opts_);
    ASSERT_TRUE(transport);
    transport_ = std::move(*transport);
    ASSERT_TRUE(transport_->listen(kSimTargetAddress, kSimTargetPort));
  }

  void TearDown() override {
    hosts_.clear();
    if (transport_) {
      transport_->begin_shutdown();
      for (int i = 0; i < 20000 && !transport_->drained(); ++i) harness_.poll_round();
      EXPECT_TRUE(transport_->drained()) << "connections left after shutdown";
      harness_.poll_until_idle();
      transport_.reset();
    }
    target_.reset();
  }

  static std::unique_ptr<bdev::Bdev> make_bdev(const char* name, uint32_t block_size_bytes,
                                               uint64_t blocks) {
    bdev::MallocBdevOpts opts;
    opts.name = name;
    opts.block_size_bytes = block_size_bytes;
    opts.block_count = blocks;
    auto made = bdev::create_malloc_bdev(opts);
    return made ? std::move(*made) : nullptr;
  }

  RawHost& new_host() {
    hosts_.push_back(std::make_unique<RawHost>(*host_provider_, [this] { harness_.poll_round(); }));
    return *hosts_.back();
  }

  // A new host with I/O queue `qid` (depth 64) of controller `cntlid` of the subsystem,
  // connected as kSimHostNqn.
  RawHost& bring_up_io(uint16_t cntlid, uint16_t qid = 1) {
    RawHost& io = new_host();
    EXPECT_TRUE(io.connect(kSimTargetAddress, kSimTargetPort, qid, 64, 63).established);
    EXPECT_TRUE(io.fabrics_connect(qid, 64, cntlid, subsystem_opts().nqn, kSimHostNqn).ok());
    return io;
  }

  reactor::ReactorHarness harness_{2};
  transport_rdma::RdmaTargetOpts opts_ = harness_transport_opts();
  std::unique_ptr<verbs::sim::SimProvider> target_provider_;
  std::unique_ptr<verbs::sim::SimProvider> host_provider_;
  std::unique_ptr<bdev::Bdev> bdev_;
  std::unique_ptr<target::Target> target_;
  std::unique_ptr<transport_rdma::RdmaTargetTransport> transport_;
  std::vector<std::unique_ptr<RawHost>> hosts_;
};

// The in-process target on real reactor threads, as nvmf_tgt runs it (no harness: the
// monotonic clock, the reactors wait on their own): a sim fabric with a host device ("sim1"),
// one malloc bdev of 512-byte blocks as NSID 1 of a subsystem any host may use, a
// ReactorGroup, and the RDMA target transport listening on 10.0.0.1:4420, made on reactor 0.
// The test's hosts run on the test's own threads. shut_down() is nvmf_tgt's sequence:
// begin_shutdown, wait until drained, release_reactor on each reactor, stop the reactors,
// free the transport; the Target stays until the destructor, for the checks after it. The
// destructor shuts down what a failed test left running.
class ReactorThreadsTarget {
 public:
  struct Opts {
    const char* nqn = nullptr;
    const char* bdev_name = "Malloc0";
    uint64_t block_count = 8192;
    unsigned reactor_count = 2;
    reactor::Mode mode = reactor::Mode::interrupt;
  };

  ReactorThreadsTarget() = default;
  ReactorThreadsTarget(const ReactorThreadsTarget&) = delete;
  ReactorThreadsTarget& operator=(const ReactorThreadsTarget&) = delete;
  ~ReactorThreadsTarget() {
    shut_down();
    target_.reset();  // before the reactors it ran on go (with group_)
  }

  // Fails the test (fatally) where a step fails: call as ASSERT_NO_FATAL_FAILURE(start(...)).
  void start(const Opts& opts) {
    auto provider = verbs::sim::SimProvider::create();
    ASSERT_TRUE(provider);
    target_provider_ = std::move(*provider);
    auto peer = target_provider_->create_peer("sim1");
    ASSERT_TRUE(peer);
    host_provider_ = std::move(*peer);
    bdev::MallocBdevOpts bdev_opts;
    bdev_opts.name = opts.bdev_name;
    bdev_opts.block_count = opts.block_count;
    auto bdev = bdev::create_malloc_bdev(bdev_opts);
    ASSERT_TRUE(bdev);
    bdev_ = std::move(*bdev);
    auto target = target::Target::create(target::TargetOpts{});
    ASSERT_TRUE(target);
    target_ = std::move(*target);
    target::SubsystemOpts subsystem;
    subsystem.nqn = opts.nqn;
    subsystem.allow_any_host = true;
    ASSERT_TRUE(target_->add_subsystem(subsystem));
    target::NamespaceOpts ns;
    ns.bdev = bdev_.get();
    ASSERT_TRUE(target_->add_namespace(opts.nqn, ns));

    reactor::ReactorGroupOpts group_opts;
    group_opts.reactor_count = opts.reactor_count;
    group_opts.reactor.mode = opts.mode;
    auto group = reactor::ReactorGroup::start(group_opts);
    ASSERT_TRUE(group);
    group_ = std::move(*group);
    for (size_t i = 0; i < group_->size(); ++i) reactors_.push_back(&group_->reactor(i));
    reactor::run_and_wait(*reactors_[0], [&] {
      auto created = transport_rdma::RdmaTargetTransport::create(
          *target_provider_, *target_, reactors_, transport_rdma::RdmaTargetOpts{});
      ASSERT_TRUE(created);
      transport_ = std::move(*created);
      ASSERT_TRUE(transport_->listen(kSimTargetAddress, kSimTargetPort));
    });
    ASSERT_NE(transport_, nullptr);
  }

  // Idempotent. Call once the hosts are gone (their connections then drain).
  void shut_down() {
    if (group_ == nullptr || shut_down_) return;
    shut_down_ = true;
    if (transport_ != nullptr) {
      reactor::run_and_wait(*reactors_[0], [&] { transport_->begin_shutdown(); });
      bool drained = false;
      for (int i = 0; i < 3000 && !drained; ++i) {
        reactor::run_and_wait(*reactors_[0], [&] { drained = transport_->drained(); });
        if (!drained) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      EXPECT_TRUE(drained) << "connections left after shutdown";
      for (reactor::Reactor* reactor : reactors_) {
        reactor::run_and_wait(*reactor, [&] { (void)target_->release_reactor(*reactor); });
      }
    }
    group_->stop();
    for (reactor::Reactor* reactor : reactors_) reactor->take_ownership();
    transport_.reset();
  }

  verbs::sim::SimProvider& host_provider() { return *host_provider_; }
  target::Target& target() { return *target_; }
  const std::vector<reactor::Reactor*>& reactors() const { return reactors_; }

 private:
  std::unique_ptr<verbs::sim::SimProvider> target_provider_;
  std::unique_ptr<verbs::sim::SimProvider> host_provider_;
  std::unique_ptr<bdev::Bdev> bdev_;
  std::unique_ptr<target::Target> target_;
  std::unique_ptr<reactor::ReactorGroup> group_;
  std::vector<reactor::Reactor*> reactors_;
  std::unique_ptr<transport_rdma::RdmaTargetTransport> transport_;
  bool shut_down_ = false;
};

}  // namespace nvmf::e2e
