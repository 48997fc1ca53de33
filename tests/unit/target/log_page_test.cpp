// Get Log Page: Error, SMART / Health, Changed Namespace List, Discovery; offsets, partial
// reads, GENCTR.
#include "fake_transport.h"

namespace nvmf::target::testing {
namespace {

class LogPageTest : public TargetTest {
 protected:
  void SetUp() override {
    TargetTest::SetUp();
    admin_ = &bring_up(&cntlid_);
  }
  Completion log(FakeQueue& queue, uint8_t lid, uint32_t length, uint64_t offset = 0,
                 uint32_t nsid = spec::nsid_all, bool rae = false, uint32_t buffer = 0) {
    return run(queue, spec::make_get_log_page(0, lid, length, offset, nsid, 0, rae), {},
               buffer == 0 ? length : buffer);
  }
  FakeQueue* admin_ = nullptr;
  uint16_t cntlid_ = 0;
};

TEST_F(LogPageTest, ErrorLogHasNoEntries) {
  const Completion done = log(*admin_, spec::log_page::error_information, 64);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(as<spec::ErrorInformationEntry>(done.data).error_count, 0u);  // 0 = invalid entry
}

TEST_F(LogPageTest, SmartLogCountsHostCommandsAndDataUnits) {
  FakeQueue& io = connect_io(cntlid_, 1);
  // 1000 blocks of 512 bytes = exactly one data unit; one more block rounds up to two.
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(
        run(io, io_sqe(spec::nvm_opcode::write, 1, uint64_t(i) * 250, 250), pattern(250 * 512, 1))
            .ok());
  }
  ASSERT_TRUE(run(io, io_sqe(spec::nvm_opcode::write, 1, 1000, 1), pattern(512, 2)).ok());
  ASSERT_TRUE(run(io, io_sqe(spec::nvm_opcode::read, 1, 0, 8), {}, 4096).ok());
  const Completion done = log(*admin_, spec::log_page::smart_health, 512);
  ASSERT_TRUE(done.ok());
  const auto smart = as<spec::SmartHealthLog>(done.data);
  EXPECT_EQ(smart.host_write_commands.low, 5u);
  EXPECT_EQ(smart.host_read_commands.low, 1u);
  EXPECT_EQ(smart.data_units_written.low, 2u);
  EXPECT_EQ(smart.data_units_read.low, 1u);
  // Per-namespace SMART is not supported.
  EXPECT_EQ(log(*admin_, spec::log_page::smart_health, 512, 0, 1).status().sc,
            spec::sc_generic::invalid_field);
}

TEST_F(LogPageTest, OffsetsMustBeAlignedAndInsideThePage) {
  EXPECT_EQ(log(*admin_, spec::log_page::smart_health, 4, 512).status().sc,
            spec::sc_generic::invalid_field);
  EXPECT_EQ(log(*admin_, spec::log_page::smart_health, 4, 4096).status().sc,
            spec::sc_generic::invalid_field);
  // Unaligned offset (make_get_log_page asserts dword alignment, so patch LPOL).
  spec::Sqe sqe = spec::make_get_log_page(0, spec::log_page::smart_health, 4, 0);
  sqe.cdw12 = 2;
  EXPECT_EQ(run(*admin_, sqe, {}, 4).status().sc, spec::sc_generic::invalid_field);
}

TEST_F(LogPageTest, PartialReadSpanningTheEndReturnsWhatExists) {
  FakeQueue& io = connect_io(cntlid_, 1);
  ASSERT_TRUE(run(io, io_sqe(spec::nvm_opcode::write, 1, 0, 1), pattern(512, 1)).ok());
  const Completion whole = log(*admin_, spec::log_page::smart_health, 512);
  // Offset 64 (host_read_commands...) for 512 bytes: 448 bytes of page, then zeroes.
  const Completion tail = log(*admin_, spec::log_page::smart_health, 512, 64);
  ASSERT_TRUE(tail.ok());
  EXPECT_TRUE(std::equal(whole.data.begin() + 64, whole.data.end(), tail.data.begin()));
  EXPECT_TRUE(
      std::all_of(tail.data.begin() + 448, tail.data.end(), [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(as<uint64_t>(tail.data, 80 - 64), 1u);  // host_write_commands at byte 80
}

TEST_F(LogPageTest, LengthLargerThanBufferIsSglLengthInvalid) {
  const Completion done =
      log(*admin_, spec::log_page::smart_health, 512, 0, spec::nsid_all, false, 256);
  EXPECT_EQ(done.status().sc, spec::sc_generic::data_sgl_length_invalid);
}

TEST_F(LogPageTest, UnsupportedLogPagesAreInvalidField) {
  EXPECT_EQ(log(*admin_, spec::log_page::firmware_slot, 512).status().sc,
            spec::sc_generic::invalid_field);
  EXPECT_EQ(log(*admin_, spec::log_page::discovery, 1024).status().sc,
            spec::sc_generic::invalid_field);
}

TEST_F(LogPageTest, ChangedNamespaceListClearsOnReadUnlessRae) {
  NamespaceOpts ns;
  ns.nsid = 3;
  ns.bdev = malloc_.get();
  ASSERT_TRUE(target_->add_namespace(kSubsystemNqn, ns).has_value());
  ASSERT_TRUE(target_->remove_namespace(kSubsystemNqn, 2).has_value());
  harness_.poll_until_idle();
  // RAE: read but keep.
  Completion done =
      log(*admin_, spec::log_page::changed_namespace_list, 4096, 0, spec::nsid_all, true);
  ASSERT_TRUE(done.ok());
  auto list = as<spec::ChangedNamespaceList>(done.data);
  EXPECT_EQ(list.nsid[0], 3u);
  EXPECT_EQ(list.nsid[1], 2u);
  EXPECT_EQ(list.nsid[2], 0u);
  // Partial read of the second entry only.
  done = log(*admin_, spec::log_page::changed_namespace_list, 4, 4, spec::nsid_all, true);
  EXPECT_EQ(as<uint32_t>(done.data), 2u);
  // Without RAE: read, then empty.
  done = log(*admin_, spec::log_page::changed_namespace_list, 4096);
  EXPECT_EQ(as<spec::ChangedNamespaceList>(done.data).nsid[0], 3u);
  done = log(*admin_, spec::log_page::changed_namespace_list, 4096);
  EXPECT_EQ(as<spec::ChangedNamespaceList>(done.data).nsid[0], 0u);
}

// ---------------------------------------------------------------------------------------------
// Discovery

class DiscoveryTest : public TargetTest {
 protected:
  FakeQueue& discovery_controller(const Host& host = Host{}, uint32_t kato_ms = 0) {
    FakeQueue& queue = connect_admin(nullptr, std::string(spec::discovery_nqn), host, kato_ms);
    enable(queue);
    return queue;
  }
  Completion log(FakeQueue& queue, uint32_t length, uint64_t offset = 0, uint32_t buffer = 0) {
    return run(queue, spec::make_get_log_page(0, spec::log_page::discovery, length, offset, 0), {},
               buffer == 0 ? length : buffer);
  }
  ListenerAddress address(const char* traddr, const char* trsvcid = "4420") {
    ListenerAddress listener;
    listener.traddr = traddr;
    listener.trsvcid = trsvcid;
    return listener;
  }
};

TEST_F(DiscoveryTest, DiscoveryControllerIdentifiesAsSuch) {
  FakeQueue& queue = discovery_controller();
  const Completion done = run(queue, spec::make_identify(0, spec::cns::controller), {}, 4096);
  ASSERT_TRUE(done.ok());
  const auto id = as<spec::IdentifyController>(done.data);
  EXPECT_EQ(id.cntrltype, spec::controller_type::discovery);
  EXPECT_EQ(spec::get_nul_terminated(id.subnqn), spec::discovery_nqn);
  EXPECT_EQ(id.nn, 0u);
  EXPECT_EQ(id.oaes, 1u << 31);
  // Discovery controllers get a fixed activity timeout when the host asks for none.
  EXPECT_EQ(run(queue, spec::make_get_features(0, spec::feature::keep_alive_timer)).cqe.cdw0,
            120000u);
}

TEST_F(DiscoveryTest, DiscoveryControllerRefusesNvmCommands) {
  FakeQueue& queue = discovery_controller();
  EXPECT_EQ(run(queue, spec::make_identify(0, spec::cns::namespace_data, 1), {}, 4096).status().sc,
            spec::sc_generic::invalid_field);
  EXPECT_EQ(run(queue, spec::make_get_log_page(0, spec::log_page::smart_health, 512), {}, 512)
                .status()
                .sc,
            spec::sc_generic::invalid_field);
  EXPECT_EQ(run(queue, spec::make_sqe(spec::admin_opcode::abort, 0)).status().sc,
            spec::sc_generic::invalid_opcode);
  EXPECT_EQ(run(queue, spec::make_set_features(0, spec::feature::number_of_queues, 0)).status().sc,
            spec::sc_generic::invalid_field);
}

TEST_F(DiscoveryTest, LogListsEveryListenerOfAllowedSubsystems) {
  ASSERT_TRUE(target_->add_listener(kSubsystemNqn, address("192.168.1.10")).has_value());
  ListenerAddress v6 = address("fe80::1", "4421");
  v6.adrfam = spec::adrfam::ipv6;
  ASSERT_TRUE(target_->add_listener(kSubsystemNqn, v6).has_value());
  FakeQueue& queue = discovery_controller();
  const Completion done = log(queue, 3072);
  ASSERT_TRUE(done.ok());
  const auto header = as<spec::DiscoveryLogPageHeader>(done.data);
  EXPECT_EQ(header.numrec, 2u);
  EXPECT_EQ(header.recfmt, 0);
  EXPECT_EQ(header.genctr, target_->discovery_generation());
  const auto entry = as<spec::DiscoveryLogEntry>(done.data, 1024);
  EXPECT_EQ(entry.trtype, spec::trtype::rdma);
  EXPECT_EQ(entry.adrfam, spec::adrfam::ipv4);
  EXPECT_EQ(entry.subtype, spec::subsystem_type::nvm);
  EXPECT_EQ(entry.treq & spec::treq::sq_flow_control_disable_supported,
            spec::treq::sq_flow_control_disable_supported);
  EXPECT_EQ(entry.portid, 1);
  EXPECT_EQ(entry.cntlid, 0xFFFF);
  EXPECT_EQ(entry.asqsz, 128);
  EXPECT_EQ(spec::get_nul_terminated(entry.trsvcid), "4420");
  EXPECT_EQ(spec::get_nul_terminated(entry.traddr), "192.168.1.10");
  EXPECT_EQ(spec::get_nul_terminated(entry.subnqn), kSubsystemNqn);
  const spec::RdmaTsas tsas = spec::entry_rdma_tsas(entry);
  EXPECT_EQ(tsas.qptype, spec::rdma_qptype::reliable_connected);
  EXPECT_EQ(tsas.cms, spec::rdma_cms::rdma_cm);
  const auto second = as<spec::DiscoveryLogEntry>(done.data, 2048);
  EXPECT_EQ(second.adrfam, spec::adrfam::ipv6);
  EXPECT_EQ(second.portid, 2);
  EXPECT_EQ(spec::get_nul_terminated(second.traddr), "fe80::1");
}

TEST_F(DiscoveryTest, LogShowsOnlySubsystemsTheHostMayUse) {
  SubsystemOpts closed;
  closed.nqn = "nqn.2026-01.io.example:closed";
  closed.hosts = {kOtherHostNqn};
  ASSERT_TRUE(target_->add_subsystem(closed).has_value());
  ASSERT_TRUE(target_->add_listener(closed.nqn, address("10.0.0.1")).has_value());
  ASSERT_TRUE(target_->add_listener(kSubsystemNqn, address("10.0.0.1")).has_value());
  FakeQueue& mine = discovery_controller();
  auto header = as<spec::DiscoveryLogPageHeader>(log(mine, 1024).data);
  EXPECT_EQ(header.numrec, 1u);
  Host other;
  other.nqn = kOtherHostNqn;
  FakeQueue& theirs = discovery_controller(other);
  const Completion done = log(theirs, 3072);
  EXPECT_EQ(as<spec::DiscoveryLogPageHeader>(done.data).numrec, 2u);
  // Same address in two subsystems: one port ID.
  EXPECT_EQ(as<spec::DiscoveryLogEntry>(done.data, 1024).portid,
            as<spec::DiscoveryLogEntry>(done.data, 2048).portid);
}

TEST_F(DiscoveryTest, GenctrBumpsOnEveryChange) {
  FakeQueue& queue = discovery_controller();
  uint64_t last = as<spec::DiscoveryLogPageHeader>(log(queue, 1024).data).genctr;
  const auto changed = [&] {
    const uint64_t now = as<spec::DiscoveryLogPageHeader>(log(queue, 1024).data).genctr;
    const bool bumped = now > last;
    last = now;
    return bumped;
  };
  ASSERT_TRUE(target_->add_listener(kSubsystemNqn, address("10.0.0.2")).has_value());
  EXPECT_TRUE(changed());
  EXPECT_FALSE(changed());  // reading does not change it
  SubsystemOpts other;
  other.nqn = "nqn.2026-01.io.example:other";
  ASSERT_TRUE(target_->add_subsystem(other).has_value());
  EXPECT_TRUE(changed());
  ASSERT_TRUE(target_->add_host(other.nqn, kOtherHostNqn).has_value());
  EXPECT_TRUE(changed());
  ASSERT_TRUE(target_->remove_listener(kSubsystemNqn, address("10.0.0.2")).has_value());
  EXPECT_TRUE(changed());
  ASSERT_TRUE(target_->remove_subsystem(other.nqn).has_value());
  EXPECT_TRUE(changed());
}

TEST_F(DiscoveryTest, PartialReadsAndOffsets) {
  for (const char* traddr : {"10.0.0.1", "10.0.0.2", "10.0.0.3"}) {
    ASSERT_TRUE(target_->add_listener(kSubsystemNqn, address(traddr)).has_value());
  }
  FakeQueue& queue = discovery_controller();
  const Completion whole = log(queue, 4096);
  ASSERT_TRUE(whole.ok());
  // Header alone, as hosts read it first.
  Completion part = log(queue, 16);
  EXPECT_EQ(as<uint64_t>(part.data, 8), 3u);
  // The second entry alone.
  part = log(queue, 1024, 2048);
  ASSERT_TRUE(part.ok());
  EXPECT_TRUE(std::equal(part.data.begin(), part.data.end(), whole.data.begin() + 2048));
  EXPECT_EQ(spec::get_nul_terminated(as<spec::DiscoveryLogEntry>(part.data).traddr), "10.0.0.2");
  // Straddling two entries.
  part = log(queue, 1024, 1536);
  EXPECT_TRUE(std::equal(part.data.begin(), part.data.end(), whole.data.begin() + 1536));
  // Spanning the end: what exists, then zeroes.
  part = log(queue, 2048, 3584);
  EXPECT_TRUE(std::equal(part.data.begin(), part.data.begin() + 512, whole.data.begin() + 3584));
  EXPECT_TRUE(
      std::all_of(part.data.begin() + 512, part.data.end(), [](uint8_t b) { return b == 0; }));
  // Beyond the page.
  EXPECT_EQ(log(queue, 1024, 4096).status().sc, spec::sc_generic::invalid_field);
}

TEST_F(DiscoveryTest, LogChangeNoticeWhenEnabled) {
  FakeQueue& queue = discovery_controller();
  ASSERT_TRUE(
      run(queue, spec::make_set_features(0, spec::feature::async_event_configuration,
                                         spec::async_event_config_bit::discovery_log_page_change))
          .ok());
  const uint16_t aer = queue.submit(spec::make_sqe(spec::admin_opcode::async_event_request, 0));
  harness_.poll_until_idle();
  EXPECT_FALSE(queue.completed(aer));
  ASSERT_TRUE(target_->add_listener(kSubsystemNqn, address("10.0.0.9")).has_value());
  const Completion done = wait(queue, aer);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(spec::async_event_type_of(done.cqe.cdw0), spec::async_event_type::notice);
  EXPECT_EQ(spec::async_event_info_of(done.cqe.cdw0),
            spec::async_event_notice::discovery_log_page_change);
  EXPECT_EQ(spec::async_event_log_page_of(done.cqe.cdw0), spec::log_page::discovery);
}

}  // namespace
}  // namespace nvmf::target::testing
