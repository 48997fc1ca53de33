// nvmf_hostd's daemon in process: the target on real reactor threads over the simulated HCA
// (as tests/e2e/host_threads_test.cpp), the Daemon on its own admin and I/O reactors, and a
// socket-pair exporter in place of the kernel's NBD driver, so the test plays the kernel: it
// writes NBD requests on each "hardware queue" socket and checks the replies and the data.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"

#include "bdev/malloc_bdev.h"
#include "daemon.h"
#include "nbd/wire.h"
#include "reactor/group.h"
#include "rpc_methods.h"
#include "target/target.h"
#include "transport_rdma/target_transport.h"
#include "verbs/sim/sim.h"

namespace nvmf::hostd {
namespace {

namespace wire = nbd::wire;

constexpr const char* kNqn = "nqn.2026-12.io.nvmf-rdma:hostd";
constexpr const char* kHostNqn =
    "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-000000000001";
constexpr uint32_t kBlocks = 8192;  // 4 MiB of 512-byte blocks
// The target's MDTS: 16 KiB, so a 128 KiB request travels as 8 commands.
constexpr uint32_t kTargetMaxIo = 16 * 1024;

// The kernel's side of one device: the sockets the exporter was given.
struct FakeDevice {
  ExportedDevice device;
  DeviceGeometry geometry;
  std::vector<int> fds;
  bool flushed = false;
  bool detached = false;
};

class FakeExporter final : public DeviceExporter {
 public:
  ~FakeExporter() override {
    for (auto& device : devices)
      for (int fd : device.fds) close(fd);
  }
  Result<ExportedDevice> attach(const DeviceGeometry& geometry, std::vector<int> kernel_fds,
                                std::string* message) override {
    if (refuse) {
      for (int fd : kernel_fds) close(fd);
      *message = "refused by the test";
      return Unexpected(Errc::busy, "attach");
    }
    FakeDevice device;
    device.device.index = static_cast<int>(devices.size());
    device.device.path = "/dev/nbd" + std::to_string(device.device.index);
    device.geometry = geometry;
    device.fds = std::move(kernel_fds);
    devices.push_back(device);
    return device.device;
  }
  Result<void> flush(const ExportedDevice& device, std::string*) override {
    devices[device.index].flushed = true;
    return {};
  }
  // As the kernel does: a disconnect request on each socket, then the sockets close.
  Result<void> detach(const ExportedDevice& device, std::string*) override {
    FakeDevice& fake = devices[device.index];
    for (int& fd : fake.fds) {
      const wire::Request disc = wire::make_request(wire::Command::disconnect, 0, 0, 0, 0);
      (void)!write(fd, &disc, sizeof(disc));
      close(fd);
      fd = -1;
    }
    fake.detached = true;
    return {};
  }
  std::vector<FakeDevice> devices;
  bool refuse = false;
};

bool write_all(int fd, const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (bytes != 0) {
    const ssize_t n = write(fd, p, bytes);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool read_all(int fd, void* data, size_t bytes) {
  auto* p = static_cast<uint8_t*>(data);
  while (bytes != 0) {
    const ssize_t n = read(fd, p, bytes);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

// One request and its reply, as the kernel's nbd driver sends and reads them; the reply's
// error (0 = success), -1 when the socket failed or the reply does not match.
int transact(int fd, wire::Command command, uint64_t handle, uint64_t offset, uint32_t length,
             void* data) {
  const wire::Request request = wire::make_request(command, 0, handle, offset, length);
  if (!write_all(fd, &request, sizeof(request))) return -1;
  if (command == wire::Command::write && !write_all(fd, data, length)) return -1;
  wire::SimpleReply reply{};
  if (!read_all(fd, &reply, sizeof(reply))) return -1;
  if (reply.magic() != wire::kSimpleReplyMagic) return -1;
  if (std::memcmp(reply.handle, &handle, sizeof(handle)) != 0) return -1;
  if (reply.error() == 0 && command == wire::Command::read && !read_all(fd, data, length)) {
    return -1;
  }
  return static_cast<int>(reply.error());
}

std::vector<uint8_t> pattern(size_t bytes, uint8_t seed) {
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i * 7 + (i >> 9) + seed);
  return data;
}

class HostdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto provider = verbs::sim::SimProvider::create();
    ASSERT_TRUE(provider);
    target_provider_ = std::move(*provider);
    auto peer = target_provider_->create_peer("sim1");
    ASSERT_TRUE(peer);
    host_provider_ = std::move(*peer);
    bdev::MallocBdevOpts bdev_opts;
    bdev_opts.name = "MallocHostd";
    bdev_opts.block_count = kBlocks;
    auto bdev = bdev::create_malloc_bdev(bdev_opts);
    ASSERT_TRUE(bdev);
    bdev_ = std::move(*bdev);
    target::TargetOpts target_opts;
    target_opts.max_io_size = kTargetMaxIo;
    auto target = target::Target::create(target_opts);
    ASSERT_TRUE(target);
    target_ = std::move(*target);
    target::SubsystemOpts subsystem;
    subsystem.nqn = kNqn;
    subsystem.allow_any_host = true;
    ASSERT_TRUE(target_->add_subsystem(subsystem));
    target::NamespaceOpts ns_opts;
    ns_opts.bdev = bdev_.get();
    ASSERT_TRUE(target_->add_namespace(kNqn, ns_opts));

    reactor::ReactorGroupOpts group_opts;
    group_opts.reactor_count = 2;
    group_opts.reactor.mode = reactor::Mode::interrupt;
    auto group = reactor::ReactorGroup::start(group_opts);
    ASSERT_TRUE(group);
    group_ = std::move(*group);
    std::vector<reactor::Reactor*> reactors = {&group_->reactor(0), &group_->reactor(1)};
    transport_rdma::RdmaTargetOpts transport_opts;
    transport_opts.max_io_size = kTargetMaxIo;
    reactor::run_and_wait(*reactors[0], [&] {
      auto created = transport_rdma::RdmaTargetTransport::create(*target_provider_, *target_,
                                                                 reactors, transport_opts);
      ASSERT_TRUE(created);
      transport_ = std::move(*created);
      ASSERT_TRUE(transport_->listen("10.0.0.1", 4420));
    });
    ASSERT_NE(transport_, nullptr);

    DaemonOpts opts;
    opts.io_reactors = 2;
    opts.mode = reactor::Mode::interrupt;
    opts.provider = host_provider_.get();
    opts.slots_per_queue = 16;
    opts.admin_poll_ms = 20;
    std::string message;
    auto daemon = Daemon::start(opts, exporter_, &message);
    ASSERT_TRUE(daemon) << message;
    daemon_ = std::move(*daemon);
  }

  void TearDown() override {
    daemon_.reset();
    if (transport_) {
      reactor::run_and_wait(group_->reactor(0), [&] { transport_->begin_shutdown(); });
      for (int i = 0; i < 500; ++i) {
        bool drained = false;
        reactor::run_and_wait(group_->reactor(0), [&] { drained = transport_->drained(); });
        if (drained) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      for (size_t r = 0; r < 2; ++r) {
        reactor::run_and_wait(group_->reactor(r),
                              [&] { (void)target_->release_reactor(group_->reactor(r)); });
      }
    }
    if (group_) group_->stop();
    if (group_) {
      for (size_t r = 0; r < 2; ++r) group_->reactor(r).take_ownership();
    }
    transport_.reset();
    target_.reset();
  }

  ConnectRequest request() const {
    ConnectRequest request;
    request.trid.traddr = "10.0.0.1";
    request.trid.subnqn = kNqn;
    request.opts.hostnqn = kHostNqn;
    request.opts.hostid[0] = 1;
    return request;
  }

  size_t target_controllers() {
    for (int i = 0; i < 500 && target_->controller_count(kNqn) != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return target_->controller_count(kNqn);
  }

  std::unique_ptr<verbs::sim::SimProvider> target_provider_;
  std::unique_ptr<verbs::Provider> host_provider_;
  std::unique_ptr<bdev::Bdev> bdev_;
  std::unique_ptr<target::Target> target_;
  std::unique_ptr<reactor::ReactorGroup> group_;
  std::unique_ptr<transport_rdma::RdmaTargetTransport> transport_;
  FakeExporter exporter_;
  std::unique_ptr<Daemon> daemon_;
};

TEST_F(HostdTest, ConnectExportsTheNamespaceOnOneSocketPerReactor) {
  std::string message;
  auto answer = daemon_->connect(request(), &message);
  ASSERT_TRUE(answer) << message;
  EXPECT_EQ((*answer)["name"], "nvmf0");
  EXPECT_EQ((*answer)["state"], "live");
  EXPECT_EQ((*answer)["io_queues"], 2);
  EXPECT_EQ((*answer)["hostnqn"], kHostNqn);
  ASSERT_EQ((*answer)["namespaces"].size(), 1u);
  EXPECT_EQ((*answer)["namespaces"][0]["device"], "/dev/nbd0");
  EXPECT_EQ((*answer)["namespaces"][0]["size_bytes"], uint64_t{kBlocks} * 512);
  ASSERT_EQ(exporter_.devices.size(), 1u);
  EXPECT_EQ(exporter_.devices[0].fds.size(), 2u);
  EXPECT_EQ(exporter_.devices[0].geometry.block_size_bytes, 512u);
  EXPECT_EQ(daemon_->list()["controllers"].size(), 1u);
}

TEST_F(HostdTest, WritesReadBackOnEverySocketAcrossSplitCommands) {
  std::string message;
  ASSERT_TRUE(daemon_->connect(request(), &message)) << message;
  const std::vector<int>& fds = exporter_.devices.at(0).fds;
  // 128 KiB: eight 16 KiB commands at the target's MDTS.
  std::vector<uint8_t> data = pattern(128 * 1024, 3);
  ASSERT_EQ(transact(fds[0], wire::Command::write, 1, 64 * 1024, data.size(), data.data()), 0);
  std::vector<uint8_t> back(data.size());
  ASSERT_EQ(transact(fds[1], wire::Command::read, 2, 64 * 1024, back.size(), back.data()), 0);
  EXPECT_EQ(back, data);
  EXPECT_EQ(transact(fds[1], wire::Command::flush, 3, 0, 0, nullptr), 0);
}

TEST_F(HostdTest, TrimAndWriteZeroesPassThrough) {
  std::string message;
  ASSERT_TRUE(daemon_->connect(request(), &message)) << message;
  const int fd = exporter_.devices.at(0).fds[0];
  std::vector<uint8_t> data = pattern(8192, 9);
  ASSERT_EQ(transact(fd, wire::Command::write, 1, 0, data.size(), data.data()), 0);
  ASSERT_EQ(transact(fd, wire::Command::write_zeroes, 2, 0, 4096, nullptr), 0);
  std::vector<uint8_t> back(data.size());
  ASSERT_EQ(transact(fd, wire::Command::read, 3, 0, back.size(), back.data()), 0);
  EXPECT_EQ(std::vector<uint8_t>(back.begin(), back.begin() + 4096), std::vector<uint8_t>(4096));
  EXPECT_TRUE(std::equal(back.begin() + 4096, back.end(), data.begin() + 4096));
  // The whole device in one discard (mkfs sends one): more commands than the queue pair holds.
  EXPECT_EQ(transact(fd, wire::Command::trim, 4, 0, kBlocks * 512, nullptr), 0);
}

TEST_F(HostdTest, ManyRequestsInFlightOnBothSockets) {
  std::string message;
  ASSERT_TRUE(daemon_->connect(request(), &message)) << message;
  const std::vector<int>& fds = exporter_.devices.at(0).fds;
  // 32 writes per socket sent before any reply is read: more than the 16 slots per queue, so
  // the daemon stops reading until slots free (backpressure), and loses none.
  constexpr int kPerSocket = 32;
  constexpr uint32_t kBytes = 4096;
  for (size_t s = 0; s < fds.size(); ++s) {
    for (int i = 0; i < kPerSocket; ++i) {
      const uint64_t offset = (s * kPerSocket + i) * uint64_t{kBytes};
      std::vector<uint8_t> data = pattern(kBytes, static_cast<uint8_t>(s * 64 + i));
      const wire::Request write_request =
          wire::make_request(wire::Command::write, 0, i, offset, kBytes);
      ASSERT_TRUE(write_all(fds[s], &write_request, sizeof(write_request)));
      ASSERT_TRUE(write_all(fds[s], data.data(), data.size()));
    }
  }
  for (size_t s = 0; s < fds.size(); ++s) {
    std::vector<bool> seen(kPerSocket);
    for (int i = 0; i < kPerSocket; ++i) {
      wire::SimpleReply reply{};
      ASSERT_TRUE(read_all(fds[s], &reply, sizeof(reply)));
      EXPECT_EQ(reply.error(), 0u);
      uint64_t handle = 0;
      std::memcpy(&handle, reply.handle, sizeof(handle));
      ASSERT_LT(handle, uint64_t{kPerSocket});
      EXPECT_FALSE(seen[handle]);
      seen[handle] = true;
    }
  }
  for (int i = 0; i < 2 * kPerSocket; ++i) {
    std::vector<uint8_t> back(kBytes);
    ASSERT_EQ(transact(fds[i % 2], wire::Command::read, 100 + i, i * uint64_t{kBytes}, kBytes,
                       back.data()),
              0);
    EXPECT_EQ(back, pattern(kBytes, static_cast<uint8_t>((i / kPerSocket) * 64 + i % kPerSocket)))
        << "block " << i;
  }
}

TEST_F(HostdTest, OutOfRangeAndOversizedRequestsFailWithoutHarm) {
  std::string message;
  ASSERT_TRUE(daemon_->connect(request(), &message)) << message;
  const int fd = exporter_.devices.at(0).fds[0];
  std::vector<uint8_t> data(4096);
  EXPECT_NE(transact(fd, wire::Command::read, 1, uint64_t{kBlocks} * 512, 4096, data.data()), 0);
  EXPECT_EQ(transact(fd, wire::Command::read, 2, 0, 4096, data.data()), 0);
}

TEST_F(HostdTest, ASecondConnectToTheSameSubsystemIsRefused) {
  std::string message;
  ASSERT_TRUE(daemon_->connect(request(), &message)) << message;
  auto again = daemon_->connect(request(), &message);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, Errc::already_exists);
  EXPECT_EQ(message, std::string("already connected to ") + kNqn + " at 10.0.0.1:4420 (nvmf0)");
}

TEST_F(HostdTest, ConnectToAnUnknownSubsystemSaysWhy) {
  ConnectRequest bad = request();
  bad.trid.subnqn = "nqn.2026-12.io.nvmf-rdma:nothing";
  std::string message;
  auto answer = daemon_->connect(bad, &message);
  ASSERT_FALSE(answer);
  EXPECT_NE(message.find("refused"), std::string::npos) << message;
  EXPECT_TRUE(exporter_.devices.empty());
  EXPECT_EQ(daemon_->list()["controllers"].size(), 0u);
}

TEST_F(HostdTest, AFailedExportLeavesNothingBehind) {
  exporter_.refuse = true;
  std::string message;
  auto answer = daemon_->connect(request(), &message);
  ASSERT_FALSE(answer);
  EXPECT_EQ(message, "refused by the test");
  EXPECT_EQ(daemon_->list()["controllers"].size(), 0u);
  EXPECT_EQ(target_controllers(), 0u);
}

TEST_F(HostdTest, DisconnectByDeviceFlushesRemovesThenDisconnects) {
  std::string message;
  ASSERT_TRUE(daemon_->connect(request(), &message)) << message;
  EXPECT_EQ(target_->controller_count(kNqn), 1u);
  auto unknown = daemon_->disconnect_device("/dev/nbd9", &message);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, Errc::not_found);
  EXPECT_EQ(message, "/dev/nbd9 is not exported by nvmf_hostd");
  auto gone = daemon_->disconnect_device("nbd0", &message);
  ASSERT_TRUE(gone) << message;
  ASSERT_EQ((*gone)["disconnected"].size(), 1u);
  EXPECT_EQ((*gone)["disconnected"][0]["subnqn"], kNqn);
  EXPECT_TRUE(exporter_.devices[0].flushed);
  EXPECT_TRUE(exporter_.devices[0].detached);
  EXPECT_EQ(daemon_->list()["controllers"].size(), 0u);
  EXPECT_EQ(target_controllers(), 0u);
}

TEST_F(HostdTest, DisconnectByNqnAndAll) {
  std::string message;
  ASSERT_TRUE(daemon_->connect(request(), &message)) << message;
  auto unknown = daemon_->disconnect_nqn("nqn.2026-12.io.nvmf-rdma:other", &message);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(message, "no controller of nvmf_hostd is connected to nqn.2026-12.io.nvmf-rdma:other");
  auto gone = daemon_->disconnect_nqn(kNqn, &message);
  ASSERT_TRUE(gone) << message;
  EXPECT_EQ((*gone)["disconnected"].size(), 1u);
  ASSERT_TRUE(daemon_->connect(request(), &message)) << message;
  EXPECT_EQ(daemon_->disconnect_all()["disconnected"].size(), 1u);
  EXPECT_EQ(target_controllers(), 0u);
}

TEST_F(HostdTest, TheKernelClosingItsSocketsDoesNotHurtTheDaemon) {
  std::string message;
  ASSERT_TRUE(daemon_->connect(request(), &message)) << message;
  FakeDevice& device = exporter_.devices.at(0);
  // A write header without its payload, then the kernel side goes away.
  const wire::Request half = wire::make_request(wire::Command::write, 0, 1, 0, 4096);
  ASSERT_TRUE(write_all(device.fds[0], &half, sizeof(half)));
  for (int& fd : device.fds) {
    close(fd);
    fd = -1;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(daemon_->list()["controllers"].size(), 1u);
  auto gone = daemon_->disconnect_nqn(kNqn, &message);
  EXPECT_TRUE(gone) << message;
}

// Log lines from every thread (the daemon logs on its admin reactor), under a lock.
class ThreadSafeLog {
 public:
  ThreadSafeLog() { log_set_sink(&ThreadSafeLog::sink, this); }
  ~ThreadSafeLog() { log_reset_sink(); }
  bool contains(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::string& line : lines_) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  }
  bool wait_for(const std::string& text, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!contains(text)) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

 private:
  static void sink(LogLevel, const char*, const char* line, void* ctx) {
    auto& self = *static_cast<ThreadSafeLog*>(ctx);
    std::lock_guard<std::mutex> lock(self.mutex_);
    self.lines_.emplace_back(line);
  }
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

// The target drops the controller (its subsystem deleted, as `nvmfctl tgt subsystem_delete`
// does) and comes back within the loss timeout: the daemon logs its schedule, holds a write
// the kernel sent meanwhile, reconnects to a new controller and sends it; nothing is lost.
TEST_F(HostdTest, AControllerLostAndBackWithinTheLossTimeoutLosesNothing) {
  ThreadSafeLog log;
  ConnectRequest connect = request();
  connect.opts.reconnect_delay_ms = 300;
  connect.opts.ctrl_loss_timeout_ms = 20000;
  std::string message;
  ASSERT_TRUE(daemon_->connect(connect, &message)) << message;
  const std::vector<int>& fds = exporter_.devices.at(0).fds;
  std::vector<uint8_t> before = pattern(64 * 1024, 1);
  ASSERT_EQ(transact(fds[0], wire::Command::write, 1, 0, before.size(), before.data()), 0);

  ASSERT_TRUE(target_->remove_subsystem(kNqn, target::ConnectedControllers::disconnect));
  for (int i = 0; i < 500 && target_->removed_controller_count(kNqn) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(log.wait_for("lost its admin queue", std::chrono::seconds(10)));
  EXPECT_EQ(daemon_->list()["controllers"][0]["state"], "reconnecting");
  // Sent while the controller is away: held.
  std::vector<uint8_t> during = pattern(64 * 1024, 2);
  const wire::Request held =
      wire::make_request(wire::Command::write, 0, 2, 64 * 1024, during.size());
  ASSERT_TRUE(write_all(fds[1], &held, sizeof(held)));
  ASSERT_TRUE(write_all(fds[1], during.data(), during.size()));
  ASSERT_TRUE(log.wait_for("attempt 2 of 66", std::chrono::seconds(10)));
  EXPECT_TRUE(log.contains("s before the controller is lost"));

  target::SubsystemOpts subsystem;
  subsystem.nqn = kNqn;
  subsystem.allow_any_host = true;
  ASSERT_TRUE(target_->add_subsystem(subsystem));
  target::NamespaceOpts ns_opts;
  ns_opts.bdev = bdev_.get();
  ASSERT_TRUE(target_->add_namespace(kNqn, ns_opts));
  ASSERT_TRUE(log.wait_for("Successfully reconnected", std::chrono::seconds(10)));
  // The library logs the reconnect before the daemon's list shows it (seen under ASan in CI).
  bool live = false;
  for (int i = 0; i < 1000 && !live; ++i) {
    live = daemon_->list()["controllers"][0]["state"] == "live";
    if (!live) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(live) << daemon_->list().dump();

  wire::SimpleReply reply{};
  ASSERT_TRUE(read_all(fds[1], &reply, sizeof(reply)));
  EXPECT_EQ(reply.error(), 0u);
  std::vector<uint8_t> back(128 * 1024);
  ASSERT_EQ(transact(fds[0], wire::Command::read, 3, 0, back.size(), back.data()), 0);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), back.begin()));
  EXPECT_TRUE(std::equal(during.begin(), during.end(), back.begin() + before.size()));
}

// Past the loss timeout the daemon gives up: what it held fails with an error, later requests
// fail at once, and a disconnect still cleans up.
TEST_F(HostdTest, AControllerLostForGoodFailsItsRequestsAfterTheLossTimeout) {
  ThreadSafeLog log;
  ConnectRequest connect = request();
  connect.opts.reconnect_delay_ms = 200;
  connect.opts.ctrl_loss_timeout_ms = 1000;
  std::string message;
  ASSERT_TRUE(daemon_->connect(connect, &message)) << message;
  const std::vector<int>& fds = exporter_.devices.at(0).fds;
  ASSERT_TRUE(target_->remove_subsystem(kNqn, target::ConnectedControllers::disconnect));
  ASSERT_TRUE(log.wait_for("lost its admin queue", std::chrono::seconds(10)));
  std::vector<uint8_t> data(4096);
  EXPECT_EQ(transact(fds[0], wire::Command::read, 1, 0, data.size(), data.data()),
            static_cast<int>(wire::kErrorIo));
  EXPECT_TRUE(
      log.wait_for("controller loss timeout (1 s) reached: giving up", std::chrono::seconds(10)));
  EXPECT_EQ(daemon_->list()["controllers"][0]["state"], "lost");
  EXPECT_EQ(transact(fds[1], wire::Command::read, 2, 0, data.size(), data.data()),
            static_cast<int>(wire::kErrorIo));
  auto gone = daemon_->disconnect_nqn(kNqn, &message);
  EXPECT_TRUE(gone) << message;
}

// --- the RPC params ---

TEST(HostdRpcParams, ConnectDecodesEveryKey) {
  const Json params = {{"traddr", "10.0.0.1"},
                       {"trsvcid", "4421"},
                       {"subnqn", kNqn},
                       {"hostnqn", kHostNqn},
                       {"hostid", "00000000-0000-4000-8000-000000000001"},
                       {"nr_io_queues", 3},
                       {"queue_size", 64},
                       {"keep_alive_tmo", 5},
                       {"reconnect_delay", 2},
                       {"ctrl_loss_tmo", 30},
                       {"memreg", "sagi"}};
  const ConnectRequest request = parse_connect_params(params);
  EXPECT_EQ(request.trid.traddr, "10.0.0.1");
  EXPECT_EQ(request.trid.trsvcid, "4421");
  EXPECT_EQ(request.trid.subnqn, kNqn);
  EXPECT_EQ(request.opts.hostnqn, kHostNqn);
  EXPECT_EQ(request.opts.hostid[15], 1);
  EXPECT_EQ(request.nr_io_queues, 3);
  EXPECT_EQ(request.opts.io_queue_size, 64);
  EXPECT_EQ(request.opts.keep_alive_timeout_ms, 5000u);
  EXPECT_EQ(request.opts.reconnect_delay_ms, 2000u);
  EXPECT_EQ(request.opts.ctrl_loss_timeout_ms, 30000u);
  EXPECT_EQ(request.opts.memreg, host::MemregPolicy::sagi);
  EXPECT_FALSE(request.ctrl_loss_forever);
  const ConnectRequest forever =
      parse_connect_params({{"traddr", "10.0.0.1"}, {"subnqn", kNqn}, {"ctrl_loss_tmo", -1}});
  EXPECT_TRUE(forever.ctrl_loss_forever);
}

std::string param_error(const Json& params) {
  try {
    parse_connect_params(params);
  } catch (const rpc::ParamError& error) {
    return error.message;
  }
  return "";
}

TEST(HostdRpcParams, BadParamsNameTheField) {
  EXPECT_EQ(param_error({{"subnqn", kNqn}}), "params.traddr: required");
  EXPECT_NE(param_error({{"traddr", "10.0.0.1"}, {"subnqn", kNqn}, {"memreg", "fast"}})
                .find("params.memreg"),
            std::string::npos);
  EXPECT_NE(param_error({{"traddr", "10.0.0.1"}, {"subnqn", kNqn}, {"hostid", "xyz"}})
                .find("params.hostid"),
            std::string::npos);
  EXPECT_NE(param_error({{"traddr", "10.0.0.1"}, {"subnqn", kNqn}, {"trtype", "tcp"}})
                .find("params.trtype"),
            std::string::npos);
  EXPECT_NE(param_error({{"traddr", "10.0.0.1"}, {"subnqn", kNqn}, {"colour", 1}}).find("colour"),
            std::string::npos);
  EXPECT_NE(param_error({{"traddr", "10.0.0.1"}, {"subnqn", "not an nqn"}}), "");
}

TEST_F(HostdTest, RpcMethodsAnswerThroughTheDispatcher) {
  rpc::Dispatcher dispatcher;
  register_rpc_methods(dispatcher, *daemon_);
  const std::string list =
      dispatcher.handle(R"({"jsonrpc":"2.0","method":"list","id":1})", nullptr);
  EXPECT_EQ(Json::parse(list)["result"]["controllers"].size(), 0u) << list;
  const std::string both = dispatcher.handle(
      R"({"jsonrpc":"2.0","method":"disconnect","params":{"subnqn":"a","device":"b"},"id":2})",
      nullptr);
  EXPECT_EQ(Json::parse(both)["error"]["code"], rpc::error_code::invalid_params) << both;
  const std::string missing = dispatcher.handle(
      R"({"jsonrpc":"2.0","method":"disconnect","params":{"device":"/dev/nbd3"},"id":3})", nullptr);
  EXPECT_EQ(Json::parse(missing)["error"]["code"], rpc::error_code::not_found) << missing;
  const std::string connect = dispatcher.handle(
      std::string(
          R"({"jsonrpc":"2.0","method":"connect","id":4,"params":{"traddr":"10.0.0.1","subnqn":")") +
          kNqn + R"(","hostnqn":")" + kHostNqn + R"("}})",
      nullptr);
  EXPECT_EQ(Json::parse(connect)["result"]["namespaces"][0]["device"], "/dev/nbd0") << connect;
  const std::string again = dispatcher.handle(
      std::string(
          R"({"jsonrpc":"2.0","method":"connect","id":5,"params":{"traddr":"10.0.0.1","subnqn":")") +
          kNqn + R"(","hostnqn":")" + kHostNqn + R"("}})",
      nullptr);
  EXPECT_EQ(Json::parse(again)["error"]["code"], rpc::error_code::exists) << again;
}

}  // namespace
}  // namespace nvmf::hostd
