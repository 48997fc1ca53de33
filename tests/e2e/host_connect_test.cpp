// libnvmf_host against the in-process target, control path: discovery, controller bring-up
// and what Identify reported, the errors of a refused connect (host not allowed, unknown
// subsystem, no listener), keep-alive on the fake clock, an asynchronous event, disconnect.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "host_fixture.h"

namespace nvmf::e2e {
namespace {

using host::ControllerOpts;
using host::DiscoveryEntry;
using host::TransportId;

class HostConnectTest : public HostFixture {};

const DiscoveryEntry* find_entry(const std::vector<DiscoveryEntry>& entries, const char* nqn) {
  for (const DiscoveryEntry& entry : entries) {
    if (entry.subnqn == nqn) return &entry;
  }
  return nullptr;
}

std::string list_entries(const std::vector<DiscoveryEntry>& entries) {
  std::string text;
  for (const DiscoveryEntry& entry : entries) text += "\n  " + entry.trid().to_string();
  return text;
}

TEST_F(HostConnectTest, DiscoverListsTheSubsystemsThisHostMaySee) {
  std::string message;
  auto entries = host_->discover(trid(host::kDiscoveryNqn), controller_opts(), &message);
  ASSERT_TRUE(entries) << describe(entries.error()) << ": " << message;
  // The restricted subsystem does not allow kHostNqn: the target leaves it out of this host's
  // log (as SPDK and Linux do).
  EXPECT_EQ(entries->size(), 2u) << list_entries(*entries);
  EXPECT_EQ(find_entry(*entries, kNqnRestricted), nullptr) << list_entries(*entries);
  for (const char* nqn : {kNqn512, kNqn4k}) {
    const DiscoveryEntry* entry = find_entry(*entries, nqn);
    ASSERT_NE(entry, nullptr) << nqn << " missing from" << list_entries(*entries);
    EXPECT_EQ(entry->trtype, spec::trtype::rdma) << nqn;
    EXPECT_EQ(entry->adrfam, spec::adrfam::ipv4) << nqn;
    EXPECT_EQ(entry->subtype, spec::subsystem_type::nvm) << nqn;
    EXPECT_EQ(entry->traddr, kHostTargetAddress) << nqn;
    EXPECT_EQ(entry->trsvcid, "4420") << nqn;
    EXPECT_EQ(entry->cntlid, spec::cntlid_dynamic) << nqn;
    EXPECT_NE(entry->portid, 0) << nqn;

    const TransportId id = entry->trid();
    EXPECT_EQ(lower(id.trtype), "rdma");
    EXPECT_EQ(lower(id.adrfam), "ipv4");
    EXPECT_EQ(id.traddr, kHostTargetAddress);
    EXPECT_EQ(id.trsvcid, "4420");
    EXPECT_EQ(id.port(), kHostTargetPort);
    EXPECT_EQ(id.subnqn, nqn);
    // The string form parses back to the same address.
    std::string parse_message;
    auto parsed = TransportId::parse(id.to_string(), &parse_message);
    ASSERT_TRUE(parsed) << id.to_string() << ": " << parse_message;
    EXPECT_EQ(parsed->traddr, id.traddr);
    EXPECT_EQ(parsed->trsvcid, id.trsvcid);
    EXPECT_EQ(parsed->subnqn, id.subnqn);
  }
  // Both entries lead to their subsystem.
  for (const char* nqn : {kNqn512, kNqn4k}) {
    std::string connect_message;
    auto controller =
        host_->connect(find_entry(*entries, nqn)->trid(), controller_opts(), &connect_message);
    ASSERT_TRUE(controller) << nqn << ": " << describe(controller.error()) << ": "
                            << connect_message;
    EXPECT_EQ((*controller)->data().subnqn, nqn);
    EXPECT_EQ((*controller)->trid().subnqn, nqn);
    ASSERT_TRUE((*controller)->disconnect());
  }
}

TEST_F(HostConnectTest, DiscoverShowsTheRestrictedSubsystemToItsHostAndDisconnects) {
  ControllerOpts opts = controller_opts();
  opts.hostnqn = kAllowedHostNqn;
  std::string message;
  auto entries = host_->discover(trid(host::kDiscoveryNqn), opts, &message);
  ASSERT_TRUE(entries) << describe(entries.error()) << ": " << message;
  EXPECT_EQ(entries->size(), 3u) << list_entries(*entries);
  EXPECT_NE(find_entry(*entries, kNqnRestricted), nullptr) << list_entries(*entries);
  // The subnqn of the trid given to discover() is ignored.
  auto again = host_->discover(trid(kNqn512), opts, &message);
  ASSERT_TRUE(again) << describe(again.error()) << ": " << message;
  EXPECT_EQ(again->size(), 3u) << list_entries(*again);
  // discover() disconnected from the discovery controller: no connection stays behind.
  for (int i = 0; i < kMaxRounds && transport_->connection_count() != 0; ++i) harness_.poll_round();
  EXPECT_EQ(transport_->connection_count(), 0u);
  EXPECT_EQ(target_->controller_count(host::kDiscoveryNqn), 0u);
}

// The discovery log changes in the middle of discover() (a listener is added at the k-th idle
// round, for every k that falls inside the call): the result is the log before or after the
// change, never a mixture (the library re-reads while GENCTR changes).
TEST_F(HostConnectTest, DiscoveryLogChangingWhileBeingReadIsNeverTorn) {
  target::ListenerAddress extra;
  extra.traddr = kHostTargetAddress;
  extra.trsvcid = "4421";
  auto key = [](const DiscoveryEntry& e) { return e.subnqn + "@" + e.traddr + ":" + e.trsvcid; };
  const std::set<std::string> before = {std::string(kNqn512) + "@10.0.0.1:4420",
                                        std::string(kNqn4k) + "@10.0.0.1:4420"};
  std::set<std::string> after = before;
  after.insert(std::string(kNqn512) + "@10.0.0.1:4421");
  int saw_before = 0;
  int saw_after = 0;
  bool changed = false;
  for (int k = 1; k <= 200; ++k) {
    changed = false;
    idle_action_countdown_ = k;
    idle_action_ = [&] {
      ASSERT_TRUE(target_->add_listener(kNqn512, extra));
      changed = true;
    };
    std::string message;
    auto entries = host_->discover(trid(host::kDiscoveryNqn), controller_opts(), &message);
    idle_action_ = nullptr;
    ASSERT_TRUE(entries) << "k " << k << ": " << describe(entries.error()) << ": " << message;
    std::set<std::string> got;
    for (const DiscoveryEntry& entry : *entries) got.insert(key(entry));
    EXPECT_EQ(got.size(), entries->size()) << "k " << k << ": duplicate entries";
    if (got == before) {
      ++saw_before;
    } else if (got == after) {
      ++saw_after;
      EXPECT_TRUE(changed) << "k " << k;
    } else {
      ADD_FAILURE() << "k " << k << ": a torn discovery log:" << list_entries(*entries);
    }
    if (!changed) break;  // discover() took fewer than k idle rounds: every k was covered
    ASSERT_TRUE(target_->remove_listener(kNqn512, extra));
  }
  RecordProperty("saw_before", saw_before);
  RecordProperty("saw_after", saw_after);
  EXPECT_FALSE(changed) << "discover() still running after 200 idle rounds";
  EXPECT_GT(saw_before, 0);
  EXPECT_GT(saw_after, 0);
}

TEST_F(HostConnectTest, ConnectReportsWhatIdentifySaid) {
  ControllerOpts opts = controller_opts(2);
  auto controller = connect(kNqn512, opts);
  ASSERT_NE(controller, nullptr);
  EXPECT_TRUE(controller->connected());
  EXPECT_EQ(target_->controller_count(kNqn512), 1u);

  const host::ControllerData& data = controller->data();
  EXPECT_NE(data.cntlid, 0);
  EXPECT_NE(data.cntlid, spec::cntlid_dynamic);
  EXPECT_EQ(data.serial_number, kSerial512);
  EXPECT_EQ(data.model_number, kModel512);
  EXPECT_FALSE(data.firmware_revision.empty());
  EXPECT_EQ(data.subnqn, kNqn512);
  EXPECT_EQ(data.vs, spec::make_version(1, 3, 0));
  EXPECT_EQ(data.cap & 0xFFFF, 127u) << "CAP.MQES: 128 entries, 0's based";
  EXPECT_EQ(data.max_transfer_bytes, 1048576u) << "MDTS 8 of 4 KiB pages";
  EXPECT_EQ(data.in_capsule_data_bytes, 4096u) << "IOCCSZ * 16 - 64";
  EXPECT_EQ(data.namespace_count, 32u) << "TargetOpts::max_namespaces_default";
  EXPECT_GE(data.io_queues_granted, opts.io_queue_count);
  EXPECT_EQ(data.io_queue_size, 128u);

  const TransportId& id = controller->trid();
  EXPECT_EQ(id.traddr, kHostTargetAddress);
  EXPECT_EQ(id.trsvcid, "4420");
  EXPECT_EQ(id.subnqn, kNqn512);

  ASSERT_EQ(controller->active_namespaces(), std::vector<uint32_t>{1});
  host::Namespace* ns = controller->ns(1);
  ASSERT_NE(ns, nullptr);
  EXPECT_EQ(ns->id(), 1u);
  EXPECT_EQ(ns->block_size(), 512u);
  EXPECT_EQ(ns->block_count(), kBlocks512);
  EXPECT_EQ(ns->capacity_bytes(), uint64_t{kBlocks512} * 512);
  EXPECT_EQ(ns->uuid(), bdev512_->uuid()) << host::uuid_to_string(ns->uuid());
  EXPECT_EQ(controller->ns(2), nullptr);
  EXPECT_EQ(controller->ns(0), nullptr);

  EXPECT_EQ(controller->stats().io_qpairs_allocated, 0u);
  auto qpair = alloc_qpair(*controller);
  ASSERT_NE(qpair, nullptr);
  EXPECT_EQ(qpair->qid(), 1);
  EXPECT_TRUE(qpair->connected());
  EXPECT_EQ(qpair->depth(), 127u) << "128 entries, one kept free";
  EXPECT_EQ(qpair->outstanding(), 0u);
  EXPECT_EQ(controller->stats().io_qpairs_allocated, 1u);
  qpair.reset();

  ASSERT_TRUE(controller->disconnect());
  EXPECT_FALSE(controller->connected());
  ASSERT_TRUE(controller->disconnect()) << "disconnect is idempotent";
  for (int i = 0; i < kMaxRounds &&
                  (target_->controller_count(kNqn512) != 0 || transport_->connection_count() != 0);
       ++i) {
    harness_.poll_round();
  }
  EXPECT_EQ(target_->controller_count(kNqn512), 0u);
  EXPECT_EQ(transport_->connection_count(), 0u);
}

TEST_F(HostConnectTest, FourKibNamespaceGeometry) {
  auto controller = connect(kNqn4k);
  ASSERT_NE(controller, nullptr);
  EXPECT_EQ(controller->data().serial_number, kSerial4k) << "SN padding trimmed";
  EXPECT_EQ(controller->data().model_number, kModel4k);
  ASSERT_EQ(controller->active_namespaces(), std::vector<uint32_t>{1});
  host::Namespace* ns = controller->ns(1);
  ASSERT_NE(ns, nullptr);
  EXPECT_EQ(ns->block_size(), 4096u);
  EXPECT_EQ(ns->block_count(), kBlocks4k);
  EXPECT_EQ(ns->uuid(), bdev4k_->uuid());
}

TEST_F(HostConnectTest, TwoControllersOfOneHostAreIndependent) {
  auto first = connect(kNqn512);
  auto second = connect(kNqn512);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(first->data().cntlid, second->data().cntlid);
  EXPECT_EQ(target_->controller_count(kNqn512), 2u);
  ASSERT_TRUE(first->disconnect());
  auto qpair = alloc_qpair(*second);
  ASSERT_NE(qpair, nullptr);
  DmaBuffer buffer(*host_, 4096);
  ASSERT_TRUE(buffer);
  host::Namespace* ns = second->ns(1);
  ASSERT_NE(ns, nullptr);
  EXPECT_TRUE(run_io(*qpair, [&](host::IoCallback cb, void* ctx) {
    return ns->read(*qpair, buffer.data(), 0, 8, cb, ctx);
  }));
}

TEST_F(HostConnectTest, HostNotAllowedIsRefusedWithConnectInvalidHost) {
  ControllerOpts opts = controller_opts();
  opts.hostnqn = kDeniedHostNqn;
  std::string message;
  auto denied = host_->connect(trid(kNqnRestricted), opts, &message);
  ASSERT_FALSE(denied) << "a host the subsystem does not list got a controller";
  RecordProperty("message", message);
  EXPECT_TRUE(contains_nocase(message, "Invalid Host")) << "message: " << message;
  EXPECT_EQ(target_->controller_count(kNqnRestricted), 0u);

  opts.hostnqn = kAllowedHostNqn;
  message.clear();
  auto allowed = host_->connect(trid(kNqnRestricted), opts, &message);
  ASSERT_TRUE(allowed) << describe(allowed.error()) << ": " << message;
  EXPECT_EQ((*allowed)->data().subnqn, kNqnRestricted);
  EXPECT_EQ(target_->controller_count(kNqnRestricted), 1u);
  host::Namespace* ns = (*allowed)->ns(1);
  ASSERT_NE(ns, nullptr);
  EXPECT_EQ(ns->block_count(), kBlocksRestricted);
}

TEST_F(HostConnectTest, UnknownSubsystemIsAClearError) {
  std::string message;
  auto controller = host_->connect(trid("nqn.2026-11.io.nvmf-rdma:no-such-subsystem"),
                                   controller_opts(), &message);
  ASSERT_FALSE(controller);
  RecordProperty("message", message);
  // The target answers Connect Invalid Parameters pointing at SUBNQN in the Connect data.
  EXPECT_TRUE(contains_nocase(message, "Invalid Parameters")) << "message: " << message;
  EXPECT_TRUE(contains_nocase(message, "SUBNQN")) << "message: " << message;
  // The failed bring-up left nothing behind: the host still works.
  for (int i = 0; i < kMaxRounds && transport_->connection_count() != 0; ++i) harness_.poll_round();
  EXPECT_EQ(transport_->connection_count(), 0u) << "the refused admin queue was not torn down";
  EXPECT_NE(connect(kNqn512), nullptr);
}

TEST_F(HostConnectTest, NoListenerOnThePortIsRefused) {
  std::string message;
  auto controller = host_->connect(trid(kNqn512, 4421), controller_opts(), &message);
  ASSERT_FALSE(controller);
  RecordProperty("message", message);
  // The sim's CM answers a REQ to a port without a listener with a REJ (ECONNREFUSED), as
  // rdma_cm does on RoCE.
  EXPECT_EQ(controller.error().code, Errc::connection_refused) << describe(controller.error());
  EXPECT_TRUE(contains_nocase(message, "refused") || contains_nocase(message, "reject") ||
              contains_nocase(message, "unreachable"))
      << "message: " << message;

  message.clear();
  auto entries = host_->discover(trid(host::kDiscoveryNqn, 4421), controller_opts(), &message);
  ASSERT_FALSE(entries);
  EXPECT_FALSE(message.empty());
  EXPECT_NE(connect(kNqn512), nullptr) << "the host works after a refused connect";
}

TEST_F(HostConnectTest, UnreachableAddressTimesOut) {
  host_provider_->set_unreachable("10.0.0.9", true);
  // The sim times the resolve out on the fake clock: let every idle round move it.
  idle_clock_step_ms_ = 1;
  TransportId id = trid(kNqn512);
  id.traddr = "10.0.0.9";
  ControllerOpts opts = controller_opts();
  opts.connect_timeout_ms = 500;
  std::string message;
  auto controller = host_->connect(id, opts, &message);
  idle_clock_step_ms_ = 0;
  ASSERT_FALSE(controller);
  RecordProperty("message", message);
  EXPECT_EQ(controller.error().code, Errc::timed_out) << describe(controller.error());
  EXPECT_TRUE(contains_nocase(message, "unreachable") || contains_nocase(message, "time"))
      << "message: " << message;
}

// Keep-alive: the library sends Keep Alive every KATO/2 from process_admin_completions(). The
// target (on the fake clock) would end the controller after KATO without one.
TEST_F(HostConnectTest, KeepAliveIsSentEveryHalfKatoAndKeepsTheControllerAlive) {
  constexpr uint32_t kKatoMs = 2000;
  ControllerOpts opts = controller_opts();
  opts.keep_alive_timeout_ms = kKatoMs;
  auto controller = connect(kNqn512, opts);
  ASSERT_NE(controller, nullptr);
  auto qpair = alloc_qpair(*controller);
  ASSERT_NE(qpair, nullptr);

  const uint64_t before = controller->stats().keep_alives_sent;
  constexpr uint32_t kStepMs = 50;
  for (uint32_t elapsed = 0; elapsed <= kKatoMs / 2 + 2 * kStepMs; elapsed += kStepMs) {
    harness_.clock().advance_ms(kStepMs);
    controller->process_admin_completions();
    for (int i = 0; i < 4; ++i) round({qpair.get()});
  }
  const uint64_t after_half = controller->stats().keep_alives_sent;
  EXPECT_GT(after_half, before) << "no Keep Alive after KATO/2 + 100 ms of (fake) time";

  // Five KATOs later the controller is still alive on the target and serves I/O.
  for (uint32_t elapsed = 0; elapsed < 5 * kKatoMs; elapsed += kStepMs) {
    harness_.clock().advance_ms(kStepMs);
    controller->process_admin_completions();
    for (int i = 0; i < 4; ++i) round({qpair.get()});
  }
  EXPECT_GE(controller->stats().keep_alives_sent, after_half + 8)
      << "about one Keep Alive per KATO/2 expected";
  EXPECT_LE(controller->stats().keep_alives_sent, after_half + 5 * kKatoMs / kStepMs)
      << "more than one Keep Alive per poll";
  EXPECT_TRUE(controller->connected());
  EXPECT_EQ(target_->controller_count(kNqn512), 1u) << "the target expired the controller";
  DmaBuffer buffer(*host_, 4096);
  ASSERT_TRUE(buffer);
  host::Namespace* ns = controller->ns(1);
  ASSERT_NE(ns, nullptr);
  EXPECT_TRUE(run_io(*qpair, [&](host::IoCallback cb, void* ctx) {
    return ns->read(*qpair, buffer.data(), 0, 8, cb, ctx);
  }));
}

TEST_F(HostConnectTest, NoKeepAliveWhenKatoIsZero) {
  auto controller = connect(kNqn512);  // KATO 0
  ASSERT_NE(controller, nullptr);
  for (int step = 0; step < 100; ++step) {
    harness_.clock().advance_ms(100);
    controller->process_admin_completions();
    harness_.poll_round();
  }
  EXPECT_EQ(controller->stats().keep_alives_sent, 0u);
  EXPECT_TRUE(controller->connected());
  EXPECT_EQ(target_->controller_count(kNqn512), 1u);
}

// A namespace added while the controller is connected: the target sends a Namespace Attribute
// Changed event through the Async Event Request the library keeps outstanding.
TEST_F(HostConnectTest, NamespaceAddedRaisesAnAsyncEvent) {
  auto controller = connect(kNqn512);
  ASSERT_NE(controller, nullptr);
  const uint64_t before = controller->stats().async_events;
  bdev_extra_ = make_bdev("MallocExtra", 512, 1024);
  ASSERT_TRUE(bdev_extra_);
  target::NamespaceOpts ns;
  ns.bdev = bdev_extra_.get();
  auto nsid = target_->add_namespace(kNqn512, ns);
  ASSERT_TRUE(nsid);
  EXPECT_EQ(*nsid, 2u);
  for (int i = 0; i < kMaxRounds && controller->stats().async_events == before; ++i) {
    controller->process_admin_completions();
    harness_.poll_round();
  }
  EXPECT_GT(controller->stats().async_events, before);
  // Later events still arrive: the library re-armed its Async Event Request and read the
  // Changed Namespace List log page (the target masks the event type until the page is read,
  // as the base spec says).
  const uint64_t after_first = controller->stats().async_events;
  ASSERT_TRUE(target_->remove_namespace(kNqn512, 2));
  for (int i = 0; i < kMaxRounds && controller->stats().async_events == after_first; ++i) {
    controller->process_admin_completions();
    harness_.poll_round();
  }
  EXPECT_GT(controller->stats().async_events, after_first) << "AER not re-armed";
  EXPECT_TRUE(controller->connected());
}

}  // namespace
}  // namespace nvmf::e2e
