// The core on real reactor threads (ReactorGroup): admin queue on one thread, I/O queue on
// another, namespaces added and removed from a third while I/O runs. Every interaction with a
// queue is a message to its reactor, as a transport's would be.
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "fake_transport.h"
#include "reactor/group.h"

namespace nvmf::target::testing {
namespace {

struct Call {
  std::function<void()> fn;
  std::atomic<bool> done{false};
};

void call_message(void* ctx) {
  auto* call = static_cast<Call*>(ctx);
  call->fn();
  call->done.store(true, std::memory_order_release);
}

// Runs fn on the reactor's thread and waits for it.
void run_on(reactor::Reactor& reactor, std::function<void()> fn) {
  Call call;
  call.fn = std::move(fn);
  while (!reactor.send(&call_message, &call)) std::this_thread::yield();
  while (!call.done.load(std::memory_order_acquire)) std::this_thread::yield();
}

// Submits on the queue's reactor and waits (polling from here) until it completed.
Completion execute_on(FakeQueue& queue, const spec::Sqe& sqe, const std::vector<uint8_t>& h2c = {},
                      uint32_t c2h_length = 0) {
  uint16_t cid = 0;
  run_on(queue.reactor(), [&] { cid = queue.submit(sqe, h2c, c2h_length); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool done = false;
  Completion completion;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    run_on(queue.reactor(), [&] {
      done = queue.completed(cid);
      if (done) completion = queue.completion(cid);
    });
  }
  EXPECT_TRUE(done) << "CID " << cid;
  return completion;
}

TEST(ThreadedTargetTest, AdminAndIoOnDifferentThreadsWithNamespaceChurn) {
  reactor::ReactorGroupOpts group_opts;
  group_opts.reactor_count = 2;
  group_opts.reactor.mode = reactor::Mode::adaptive;  // sleeps when idle: kind to shared CI cores
  auto group = reactor::ReactorGroup::start(group_opts);
  ASSERT_TRUE(group.has_value());
  reactor::Reactor& admin_reactor = (*group)->reactor(0);
  reactor::Reactor& io_reactor = (*group)->reactor(1);

  auto made = Target::create(TargetOpts{});
  ASSERT_TRUE(made.has_value());
  std::unique_ptr<Target> target = std::move(*made);
  bdev::MallocBdevOpts malloc_opts;
  malloc_opts.name = "ThreadedMalloc";
  malloc_opts.block_count = 4096;
  auto bdev = bdev::create_malloc_bdev(malloc_opts);
  ASSERT_TRUE(bdev.has_value());
  SubsystemOpts subsystem;
  subsystem.nqn = kSubsystemNqn;
  subsystem.allow_any_host = true;
  ASSERT_TRUE(target->add_subsystem(subsystem).has_value());
  NamespaceOpts ns;
  ns.nsid = 1;
  ns.bdev = bdev->get();
  ASSERT_TRUE(target->add_namespace(kSubsystemNqn, ns).has_value());

  std::unique_ptr<FakeQueue> admin;
  std::unique_ptr<FakeQueue> io;
  run_on(admin_reactor, [&] { admin = std::make_unique<FakeQueue>(*target, admin_reactor, 32); });
  Completion done =
      execute_on(*admin, connect_sqe(0, 32, 30000), connect_data(kSubsystemNqn, Host{}, 0xFFFF));
  ASSERT_TRUE(done.ok());
  const auto cntlid = static_cast<uint16_t>(done.cqe.cdw0);
  ASSERT_TRUE(execute_on(*admin, spec::to_sqe(spec::make_property_set(0, spec::property_offset::cc,
                                                                      cc_enable_value())))
                  .ok());
  ASSERT_TRUE(execute_on(*admin, spec::make_set_features(0, spec::feature::number_of_queues,
                                                         spec::encode_number_of_queues(1, 1)))
                  .ok());
  uint16_t aer = 0;
  run_on(admin_reactor,
         [&] { aer = admin->submit(spec::make_sqe(spec::admin_opcode::async_event_request, 0)); });
  run_on(io_reactor, [&] { io = std::make_unique<FakeQueue>(*target, io_reactor, 128); });
  ASSERT_TRUE(
      execute_on(*io, connect_sqe(1, 128), connect_data(kSubsystemNqn, Host{}, cntlid)).ok());

  // A third thread adds and removes NSID 2 while I/O runs on NSID 1 and 2.
  std::atomic<bool> stop{false};
  std::atomic<int> churns{0};
  std::thread churn([&] {
    while (!stop.load()) {
      NamespaceOpts extra;
      extra.nsid = 2;
      extra.bdev = bdev->get();
      EXPECT_TRUE(target->add_namespace(kSubsystemNqn, extra).has_value());
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      EXPECT_TRUE(target->remove_namespace(kSubsystemNqn, 2).has_value());
      ++churns;
    }
  });
  int ns2_ok = 0;
  for (uint32_t i = 0; i < 100; ++i) {
    const std::vector<uint8_t> data = pattern(4096, static_cast<uint8_t>(i));
    const uint64_t lba = (i * 8) % 4000;
    ASSERT_TRUE(execute_on(*io, io_sqe(spec::nvm_opcode::write, 1, lba, 8), data).ok());
    const Completion read = execute_on(*io, io_sqe(spec::nvm_opcode::read, 1, lba, 8), {}, 4096);
    ASSERT_TRUE(read.ok());
    ASSERT_EQ(read.data, data);
    // NSID 2 comes and goes: either answer is fine, nothing else is.
    const Completion maybe = execute_on(*io, io_sqe(spec::nvm_opcode::read, 2, lba, 8), {}, 4096);
    if (maybe.ok()) {
      ++ns2_ok;
    } else {
      EXPECT_EQ(maybe.status().sc, spec::sc_generic::invalid_namespace_or_format);
    }
    if (i % 25 == 0) {
      ASSERT_TRUE(execute_on(*admin, spec::make_sqe(spec::admin_opcode::keep_alive, 0)).ok());
    }
  }
  stop = true;
  churn.join();
  EXPECT_GT(churns.load(), 0);
  // The held AER was answered with a namespace notice at some point.
  bool aer_done = false;
  run_on(admin_reactor, [&] { aer_done = admin->completed(aer); });
  EXPECT_TRUE(aer_done);

  // Shutdown as the daemon does: queues go on their reactors, then each reactor is released.
  run_on(io_reactor, [&] {
    EXPECT_TRUE(io->destroy());
    io.reset();
    EXPECT_TRUE(target->release_reactor(io_reactor).has_value());
  });
  run_on(admin_reactor, [&] {
    EXPECT_TRUE(admin->destroy());
    admin.reset();
    EXPECT_TRUE(target->release_reactor(admin_reactor).has_value());
  });
  (*group)->stop();
  target.reset();
  EXPECT_EQ((*bdev)->channel_count(), 0u);
  (void)ns2_ok;
}

}  // namespace
}  // namespace nvmf::target::testing
