// The fixture of the initiator library's end-to-end tests: the in-process target of
// SimTargetFixture (2-reactor harness on a FakeClock, sim fabric, RDMA target transport on
// 10.0.0.1:4420) with three subsystems, and a libnvmf_host Host on the sim's peer device
// ("sim1") and the same FakeClock. The Host's blocking calls pump the target through
// HostOpts::idle; the I/O helpers here do the same by hand: submit, then
// { process_completions(); poll_round(); } until the callbacks ran, within a bounded number
// of rounds.
//
// Subsystems, each with one malloc bdev as NSID 1 and a listener on 10.0.0.1:4420 (so that
// the discovery log lists it):
//   kNqn512        512-byte blocks, any host
//   kNqn4k         4096-byte blocks, any host
//   kNqnRestricted 512-byte blocks, only kAllowedHostNqn
//
// The suites whose target runs on reactor threads (ReactorThreadsTarget, sim_target_fixture.h)
// use no fixture: connect_threaded() gives them a Host and a controller.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bdev/malloc_bdev.h"
#include "common/clock.h"
#include "harness_transport_opts.h"
#include "nvmf/host.h"
#include "reactor/harness.h"
#include "spec/spec.h"
#include "target/target.h"
#include "transport_rdma/target_transport.h"
#include "verbs/sim/sim.h"

namespace nvmf::e2e {

inline constexpr const char* kHostTargetAddress = "10.0.0.1";
inline constexpr uint16_t kHostTargetPort = 4420;

inline constexpr const char* kNqn512 = "nqn.2026-11.io.nvmf-rdma:host-e2e-512";
inline constexpr const char* kNqn4k = "nqn.2026-11.io.nvmf-rdma:host-e2e-4k";
inline constexpr const char* kNqnRestricted = "nqn.2026-11.io.nvmf-rdma:host-e2e-restricted";
inline constexpr const char* kSerial512 = "HOSTE2E0000000000512";  // 20 characters: the whole SN
inline constexpr const char* kModel512 = "nvmf-rdma host e2e 512";
inline constexpr const char* kSerial4k = "HOSTE2E4K";  // shorter: the host trims the padding
inline constexpr const char* kModel4k = "nvmf-rdma host e2e 4k";

// The identity every test connects with unless it is about host NQNs.
inline constexpr const char* kHostNqn =
    "nqn.2014-08.org.nvmexpress:uuid:2f0e0d0c-0b0a-0908-0706-050403020100";
inline constexpr std::array<uint8_t, 16> kHostId = {0x2f, 0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 0x09, 0x08,
                                                    0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x00};
inline constexpr const char* kAllowedHostNqn = "nqn.2026-11.io.nvmf-rdma:host-allowed";
inline constexpr const char* kDeniedHostNqn = "nqn.2026-11.io.nvmf-rdma:host-denied";

inline constexpr uint32_t kBlocks512 = 8192;  // 4 MiB
inline constexpr uint32_t kBlocks4k = 1024;   // 4 MiB
inline constexpr uint32_t kBlocksRestricted = 2048;

// Rounds of { process_completions; poll_round } before an I/O counts as lost. The raw host
// of the target suites waits 20000 rounds for one response; a full queue of 127 needs no more.
inline constexpr int kMaxRounds = 20000;

// One request's completion as its callback saw it.
struct Completion {
  int calls = 0;
  spec::Status status{};
  bool ok() const { return calls == 1 && status.is_success(); }
};

inline void on_complete(void* ctx, const spec::Status& status) {
  auto* completion = static_cast<Completion*>(ctx);
  ++completion->calls;
  completion->status = status;
}

inline std::string describe(const spec::Status& status) {
  char text[160];
  std::snprintf(text, sizeof(text), "SCT %u SC %#x (%s)%s", status.sct, status.sc,
                spec::status_name(status.sct, status.sc), status.dnr ? " DNR" : "");
  return text;
}

inline std::string describe(const Error& error) {
  char text[200];
  return error_describe(error, text, sizeof(text));
}

inline bool is_sq_deletion_abort(const spec::Status& status) {
  return status.sct == spec::sct::generic && status.sc == spec::sc_generic::aborted_sq_deletion;
}

inline std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}
inline bool contains_nocase(const std::string& text, const std::string& what) {
  return lower(text).find(lower(what)) != std::string::npos;
}

// Deterministic bytes: byte i of a pattern depends on i and the seed, never repeats within
// 64 KiB, so a misplaced block shows.
inline uint8_t pattern_byte(uint32_t seed, size_t i) {
  return static_cast<uint8_t>((i * 131 + (i >> 8) * 7 + seed * 29 + 1) & 0xFF);
}
inline void fill_pattern(void* buffer, size_t bytes, uint32_t seed) {
  auto* p = static_cast<uint8_t*>(buffer);
  for (size_t i = 0; i < bytes; ++i) p[i] = pattern_byte(seed, i);
}
inline ::testing::AssertionResult has_pattern(const void* buffer, size_t bytes, uint32_t seed) {
  const auto* p = static_cast<const uint8_t*>(buffer);
  for (size_t i = 0; i < bytes; ++i) {
    if (p[i] != pattern_byte(seed, i)) {
      return ::testing::AssertionFailure()
             << "byte " << i << " of " << bytes << " is " << int{p[i]} << ", expected "
             << int{pattern_byte(seed, i)} << " (seed " << seed << ")";
    }
  }
  return ::testing::AssertionSuccess();
}
inline ::testing::AssertionResult all_zero(const void* buffer, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(buffer);
  for (size_t i = 0; i < bytes; ++i) {
    if (p[i] != 0) {
      return ::testing::AssertionFailure()
             << "byte " << i << " of " << bytes << " is " << int{p[i]} << ", expected 0";
    }
  }
  return ::testing::AssertionSuccess();
}

// A buffer from Host::dma_alloc, freed with the test scope (before the fixture's Host goes).
class DmaBuffer {
 public:
  DmaBuffer(host::Host& host, size_t bytes) : host_(&host), bytes_(bytes) {
    data_ = host.dma_alloc(bytes);
  }
  ~DmaBuffer() {
    if (data_ != nullptr) host_->dma_free(data_);
  }
  DmaBuffer(const DmaBuffer&) = delete;
  DmaBuffer& operator=(const DmaBuffer&) = delete;
  uint8_t* data() const { return static_cast<uint8_t*>(data_); }
  size_t size() const { return bytes_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  host::Host* host_;
  void* data_ = nullptr;
  size_t bytes_;
};

// HostOpts::idle where the target runs on threads of its own: nothing to pump.
inline void yield_idle(void*) { std::this_thread::yield(); }

// A Host and one controller of a target on reactor threads (connect_threaded()).
struct ThreadedHost {
  std::unique_ptr<host::Host> host;
  std::unique_ptr<host::Controller> controller;  // goes first
  host::Namespace* ns = nullptr;                 // NSID 1
};

// A Host on `provider` whose blocking calls yield, and a controller of `subnqn` at
// 10.0.0.1:4420 connected as kHostNqn / kHostId with the rest of `opts`. Fails the test
// (fatally) where a step fails: call as ASSERT_NO_FATAL_FAILURE(connect_threaded(...)).
inline void connect_threaded(verbs::Provider& provider, const char* subnqn,
                             host::ControllerOpts opts, ThreadedHost* out) {
  host::HostOpts host_opts;
  host_opts.provider = &provider;
  host_opts.idle = &yield_idle;
  auto created = host::Host::create(host_opts);
  ASSERT_TRUE(created) << describe(created.error());
  out->host = std::move(*created);
  host::TransportId id;
  id.traddr = kHostTargetAddress;
  id.subnqn = subnqn;
  opts.hostnqn = kHostNqn;
  opts.hostid = kHostId;
  std::string message;
  auto controller = out->host->connect(id, opts, &message);
  ASSERT_TRUE(controller) << describe(controller.error()) << ": " << message;
  out->controller = std::move(*controller);
  out->ns = out->controller->ns(1);
  ASSERT_NE(out->ns, nullptr);
}

class HostFixture : public ::testing::Test {
 protected:
  // Hooks for suites that need another HCA profile or target transport options.
  virtual verbs::sim::SimOpts fabric_opts() const { return verbs::sim::SimOpts{}; }
  virtual transport_rdma::RdmaTargetOpts transport_opts() const {
    return transport_rdma::RdmaTargetOpts{};
  }

  void SetUp() override {
    verbs::sim::SimOpts sim_opts = fabric_opts();
    sim_opts.clock = &harness_.clock();
    auto provider = verbs::sim::SimProvider::create(sim_opts);
    ASSERT_TRUE(provider);
    target_provider_ = std::move(*provider);
    auto peer = target_provider_->create_peer("sim1");
    ASSERT_TRUE(peer);
    host_provider_ = std::move(*peer);

    auto target = target::Target::create(target::TargetOpts{});
    ASSERT_TRUE(target);
    target_ = std::move(*target);
    bdev512_ = make_bdev("Malloc512", 512, kBlocks512);
    bdev4k_ = make_bdev("Malloc4k", 4096, kBlocks4k);
    bdev_restricted_ = make_bdev("MallocRestricted", 512, kBlocksRestricted);
    ASSERT_TRUE(bdev512_ && bdev4k_ && bdev_restricted_);

    target::SubsystemOpts s512;
    s512.nqn = kNqn512;
    s512.serial_number = kSerial512;
    s512.model_number = kModel512;
    s512.allow_any_host = true;
    ASSERT_NO_FATAL_FAILURE(add_subsystem(s512, bdev512_.get()));
    target::SubsystemOpts s4k;
    s4k.nqn = kNqn4k;
    s4k.serial_number = kSerial4k;
    s4k.model_number = kModel4k;
    s4k.allow_any_host = true;
    ASSERT_NO_FATAL_FAILURE(add_subsystem(s4k, bdev4k_.get()));
    target::SubsystemOpts restricted;
    restricted.nqn = kNqnRestricted;
    restricted.allow_any_host = false;
    restricted.hosts = {kAllowedHostNqn};
    ASSERT_NO_FATAL_FAILURE(add_subsystem(restricted, bdev_restricted_.get()));

    auto transport = transport_rdma::RdmaTargetTransport::create(
        *target_provider_, *target_, {&harness_.reactor(0), &harness_.reactor(1)},
        harness_transport_opts(transport_opts()));
    ASSERT_TRUE(transport);
    transport_ = std::move(*transport);
    ASSERT_TRUE(transport_->listen(kHostTargetAddress, kHostTargetPort));

    host::HostOpts host_opts;
    host_opts.provider = host_provider_.get();
    host_opts.idle = &HostFixture::idle;
    host_opts.idle_ctx = this;
    host_opts.clock = &harness_.clock();  // keep-alive and timeouts on the target's fake time
    auto created = host::Host::create(host_opts);
    ASSERT_TRUE(created) << describe(created.error());
    host_ = std::move(*created);
  }

  void TearDown() override {
    // Tests free their qpairs and controllers at the end of their bodies; the Host goes first
    // so the target sees every connection the library made go away.
    host_.reset();
    idle_clock_step_ms_ = 0;
    if (transport_) {
      for (int i = 0; i < kMaxRounds && transport_->connection_count() != 0; ++i) {
        harness_.poll_round();
      }
      EXPECT_EQ(transport_->connection_count(), 0u)
          << "the host library left connections behind after its objects were destroyed";
      for (const char* nqn : {kNqn512, kNqn4k, kNqnRestricted, host::kDiscoveryNqn}) {
        EXPECT_EQ(target_->controller_count(nqn), 0u) << nqn << ": controllers left behind";
      }
      transport_->begin_shutdown();
      for (int i = 0; i < kMaxRounds && !transport_->drained(); ++i) harness_.poll_round();
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

  void add_subsystem(const target::SubsystemOpts& opts, bdev::Bdev* bdev) {
    ASSERT_TRUE(target_->add_subsystem(opts)) << opts.nqn;
    target::NamespaceOpts ns;
    ns.bdev = bdev;
    ASSERT_TRUE(target_->add_namespace(opts.nqn, ns)) << opts.nqn;
    target::ListenerAddress address;
    address.traddr = kHostTargetAddress;
    address.trsvcid = std::to_string(kHostTargetPort);
    ASSERT_TRUE(target_->add_listener(opts.nqn, address)) << opts.nqn;
  }

  // HostOpts::idle: one round of the target's reactors; some tests also move the fake clock.
  // Watchdog: the fake clock stands still, so a blocking call waiting for something that never
  // comes would spin forever; after kIdleWatchdogRounds rounds in one test the clock jumps
  // past every timeout of the library so the call returns, and the test fails.
  static void idle(void* ctx) {
    auto* self = static_cast<HostFixture*>(ctx);
    self->harness_.poll_round();
    if (self->idle_clock_step_ms_ != 0)
      self->harness_.clock().advance_ms(self->idle_clock_step_ms_);
    if (self->idle_action_ && --self->idle_action_countdown_ == 0) {
      auto action = std::move(self->idle_action_);
      self->idle_action_ = nullptr;
      action();
    }
    if (++self->idle_rounds_ % kIdleWatchdogRounds == 0) {
      ADD_FAILURE() << "a blocking host call pumped " << self->idle_rounds_
                    << " idle rounds: moving the clock 10 minutes to time it out";
      self->harness_.clock().advance_ms(600000);
    }
  }
  static constexpr uint64_t kIdleWatchdogRounds = 2000000;

  static host::TransportId trid(const char* subnqn, uint16_t port = kHostTargetPort) {
    host::TransportId id;
    id.traddr = kHostTargetAddress;
    id.trsvcid = std::to_string(port);
    id.subnqn = subnqn;
    return id;
  }

  // kHostNqn, no keep-alive (the target's clock only moves when a test says so).
  static host::ControllerOpts controller_opts(uint16_t io_queues = 1) {
    host::ControllerOpts opts;
    opts.hostnqn = kHostNqn;
    opts.hostid = kHostId;
    opts.io_queue_count = io_queues;
    opts.keep_alive_timeout_ms = 0;
    return opts;
  }

  // controller_opts() with error recovery on fake-time scale: reconnect after 200 ms, give up
  // after `ctrl_loss_ms`.
  static host::ControllerOpts recovery_opts(uint16_t io_queues = 1, uint32_t ctrl_loss_ms = 5000) {
    host::ControllerOpts opts = controller_opts(io_queues);
    opts.reconnect_delay_ms = 200;
    opts.ctrl_loss_timeout_ms = ctrl_loss_ms;
    return opts;
  }

  // Connects or records a failure (with the library's message) and returns nullptr.
  std::unique_ptr<host::Controller> connect(const char* subnqn,
                                            const host::ControllerOpts& opts = controller_opts()) {
    std::string message;
    auto controller = host_->connect(trid(subnqn), opts, &message);
    if (!controller) {
      ADD_FAILURE() << "connect to " << subnqn << ": " << describe(controller.error()) << ": "
                    << message;
      return nullptr;
    }
    if (*controller == nullptr) ADD_FAILURE() << "connect returned a null controller";
    return std::move(*controller);
  }

  std::unique_ptr<host::IoQpair> alloc_qpair(host::Controller& controller,
                                             const host::IoQpairOpts& opts = {}) {
    std::string message;
    auto qpair = controller.alloc_io_qpair(opts, &message);
    if (!qpair) {
      ADD_FAILURE() << "alloc_io_qpair: " << describe(qpair.error()) << ": " << message;
      return nullptr;
    }
    return std::move(*qpair);
  }

  // One round of the whole system as the tests drive it: the host's qpairs, then the target.
  void round(const std::vector<host::IoQpair*>& qpairs) {
    for (host::IoQpair* qpair : qpairs) qpair->process_completions();
    harness_.poll_round();
  }

  // Rounds until done() holds; false after kMaxRounds.
  template <typename Done>
  bool run_until(const std::vector<host::IoQpair*>& qpairs, Done done,
                 int max_rounds = kMaxRounds) {
    for (int i = 0; i < max_rounds; ++i) {
      if (done()) return true;
      round(qpairs);
    }
    return done();
  }

  static bool all_called(const std::vector<Completion>& completions) {
    for (const Completion& c : completions) {
      if (c.calls == 0) return false;
    }
    return true;
  }

  // Submits one command (`submit(cb, ctx)` returns the submit call's Result) and runs until
  // its callback ran. Success when submitted, called back exactly once, and the status is
  // Successful Completion.
  template <typename Submit>
  ::testing::AssertionResult run_io(host::IoQpair& qpair, Submit submit) {
    Completion completion;
    Result<void> submitted = submit(&on_complete, &completion);
    if (!submitted) {
      return ::testing::AssertionFailure() << "submit failed: " << describe(submitted.error());
    }
    if (completion.calls != 0) {
      return ::testing::AssertionFailure() << "callback ran inside the submit call";
    }
    if (!run_until({&qpair}, [&] { return completion.calls != 0; })) {
      return ::testing::AssertionFailure() << "no completion after " << kMaxRounds
                                           << " rounds (outstanding " << qpair.outstanding() << ")";
    }
    // A few more rounds: a second call of the same callback would show here.
    for (int i = 0; i < 8; ++i) round({&qpair});
    if (completion.calls != 1) {
      return ::testing::AssertionFailure() << "callback ran " << completion.calls << " times";
    }
    if (!completion.status.is_success()) {
      return ::testing::AssertionFailure() << "status " << describe(completion.status);
    }
    return ::testing::AssertionSuccess();
  }

  // Expects a submit call to fail with `code` and its callback never to run.
  template <typename Submit>
  ::testing::AssertionResult refused(host::IoQpair& qpair, Errc code, Submit submit) {
    Completion completion;
    Result<void> submitted = submit(&on_complete, &completion);
    for (int i = 0; i < 64; ++i) round({&qpair});
    if (submitted) {
      return ::testing::AssertionFailure()
             << "submit succeeded (callback calls " << completion.calls << ", status "
             << describe(completion.status) << "), expected " << errc_name(code);
    }
    if (submitted.error().code != code) {
      return ::testing::AssertionFailure() << "submit failed with " << describe(submitted.error())
                                           << ", expected " << errc_name(code);
    }
    if (completion.calls != 0) {
      return ::testing::AssertionFailure()
             << "the refused command's callback ran " << completion.calls << " times";
    }
    return ::testing::AssertionSuccess();
  }

  reactor::ReactorHarness harness_{2};
  uint64_t idle_clock_step_ms_ = 0;  // fake time added per idle() round (CM timeouts)
  uint64_t idle_rounds_ = 0;
  // Runs once, at the idle_action_countdown_-th idle() round from now: a change to the target
  // in the middle of a blocking host call.
  std::function<void()> idle_action_;
  int idle_action_countdown_ = 0;
  std::unique_ptr<verbs::sim::SimProvider> target_provider_;
  std::unique_ptr<verbs::sim::SimProvider> host_provider_;
  std::unique_ptr<bdev::Bdev> bdev512_;
  std::unique_ptr<bdev::Bdev> bdev4k_;
  std::unique_ptr<bdev::Bdev> bdev_restricted_;
  std::unique_ptr<bdev::Bdev> bdev_extra_;  // hot-added by the async event test
  std::unique_ptr<target::Target> target_;
  std::unique_ptr<transport_rdma::RdmaTargetTransport> transport_;
  std::unique_ptr<host::Host> host_;
};

}  // namespace nvmf::e2e
