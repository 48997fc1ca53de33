// Admin commands: Identify (every CNS with byte checks), features, unknown opcodes.
#include "fake_transport.h"

namespace nvmf::target::testing {
namespace {

class AdminTest : public TargetTest {
 protected:
  void SetUp() override {
    TargetTest::SetUp();
    admin_ = &bring_up(&cntlid_);
  }
  Completion identify(uint8_t cns, uint32_t nsid = 0) {
    return run(*admin_, spec::make_identify(0, cns, nsid), {}, spec::identify_data_size);
  }
  FakeQueue* admin_ = nullptr;
  uint16_t cntlid_ = 0;
};

TEST_F(AdminTest, IdentifyControllerReportsFabricsAttributes) {
  const Completion done = identify(spec::cns::controller);
  ASSERT_TRUE(done.ok());
  ASSERT_EQ(done.data.size(), 4096u);
  const auto id = as<spec::IdentifyController>(done.data);
  EXPECT_EQ(id.cntlid, cntlid_);
  EXPECT_EQ(spec::get_space_padded(id.sn), "SN0001");
  EXPECT_EQ(id.sn[19], ' ');  // space padded, not NUL padded
  EXPECT_EQ(spec::get_space_padded(id.mn), "Test Model");
  EXPECT_EQ(spec::get_space_padded(id.fr), "0.1.0");
  EXPECT_EQ(spec::get_nul_terminated(id.subnqn), kSubsystemNqn);
  EXPECT_EQ(id.ver, spec::make_version(1, 3, 0));
  EXPECT_EQ(id.mdts, 8);  // 1048576 / 4096 = 2^8
  EXPECT_EQ(id.nn, 8u);
  EXPECT_EQ(id.oncs, spec::oncs_bit::write_zeroes | spec::oncs_bit::dataset_management);
  EXPECT_EQ(id.vwc & spec::vwc_bit::present, spec::vwc_bit::present);
  EXPECT_EQ(id.kas, 10);            // 1000 ms granularity in 100 ms units
  EXPECT_EQ(id.sgls, 0x00100005u);  // SGLs, keyed data blocks, offset (in-capsule data)
  EXPECT_EQ(id.ioccsz, (64u + 4096u) / 16u);
  EXPECT_EQ(id.iorcsz, 1u);
  EXPECT_EQ(id.icdoff, 0);
  EXPECT_EQ(id.fcatt, 0);  // dynamic controller model
  EXPECT_EQ(id.msdbd, 16);
  EXPECT_EQ(id.ofcs, spec::ofcs_bit::disconnect);
  EXPECT_EQ(id.sqes, 0x66);
  EXPECT_EQ(id.cqes, 0x44);
  EXPECT_EQ(id.maxcmd, 128);
  EXPECT_EQ(id.aerl, kAsyncEventRequestsMax - 1);
  EXPECT_EQ(id.lpa & spec::lpa_bit::extended_data, spec::lpa_bit::extended_data);
  EXPECT_EQ(id.cntrltype, spec::controller_type::io);
  EXPECT_EQ(id.oaes, 1u << 8);
  EXPECT_EQ(id.ctratt & 1u, 1u);
}

TEST_F(AdminTest, IdentifyControllerOncsDropsWhatABdevCannotDo) {
  bdev::NullBdevOpts opts;
  opts.name = "NoUnmap";
  opts.supported_io_types = bdev::kAllIoTypes & ~bdev::io_type_bit(bdev::IoType::unmap);
  auto weak = bdev::create_null_bdev(opts);
  ASSERT_TRUE(weak.has_value());
  NamespaceOpts ns;
  ns.bdev = weak->get();
  ASSERT_TRUE(target_->add_namespace(kSubsystemNqn, ns).has_value());
  const auto id = as<spec::IdentifyController>(identify(spec::cns::controller).data);
  EXPECT_EQ(id.oncs, spec::oncs_bit::write_zeroes);
  ASSERT_TRUE(target_->remove_namespace(kSubsystemNqn, 3).has_value());
  harness_.poll_until_idle();
  teardown_queues();  // channels to the bdev close before it goes
}

TEST_F(AdminTest, IdentifyNamespaceOfMallocBdev) {
  const Completion done = identify(spec::cns::namespace_data, 1);
  ASSERT_TRUE(done.ok());
  const auto ns = as<spec::IdentifyNamespace>(done.data);
  EXPECT_EQ(ns.nsze, kMallocBlocks);
  EXPECT_EQ(ns.ncap, kMallocBlocks);
  EXPECT_EQ(ns.nuse, kMallocBlocks);
  EXPECT_EQ(ns.nlbaf, 0);
  EXPECT_EQ(spec::namespace_block_size(ns), kMallocBlockSize);
  EXPECT_EQ(ns.lbaf[0].ms, 0);
  EXPECT_EQ(ns.nmic, 1);
  EXPECT_EQ(ns.dlfeat, 1);  // deallocated blocks read as zeroes
  EXPECT_EQ(ns.nvmcap.low, kMallocBlocks * kMallocBlockSize);
}

TEST_F(AdminTest, IdentifyNamespaceOfNullBdev) {
  const auto ns = as<spec::IdentifyNamespace>(identify(spec::cns::namespace_data, 2).data);
  EXPECT_EQ(ns.nsze, kNullBlocks);
  EXPECT_EQ(spec::namespace_block_size(ns), kNullBlockSize);
  EXPECT_EQ(ns.dlfeat, 0);  // a null device stores nothing, not even zeroes
}

TEST_F(AdminTest, IdentifyInactiveNamespaceIsZeroed) {
  const Completion done = identify(spec::cns::namespace_data, 5);  // within NN, not allocated
  ASSERT_TRUE(done.ok());
  ASSERT_EQ(done.data.size(), 4096u);
  // The fake fills buffers with EEh: every byte must have been zeroed.
  EXPECT_TRUE(std::all_of(done.data.begin(), done.data.end(), [](uint8_t b) { return b == 0; }));
}

TEST_F(AdminTest, IdentifyNamespaceOutsideNnIsInvalidNamespace) {
  for (const uint32_t nsid : {0u, 9u, 0xFFFFFFFFu}) {
    const Completion done = identify(spec::cns::namespace_data, nsid);
    EXPECT_EQ(done.status().sct, spec::sct::generic) << nsid;
    EXPECT_EQ(done.status().sc, spec::sc_generic::invalid_namespace_or_format) << nsid;
  }
}

TEST_F(AdminTest, IdentifyActiveNamespaceList) {
  auto list = as<spec::ActiveNamespaceList>(identify(spec::cns::active_namespace_list, 0).data);
  EXPECT_EQ(list.nsid[0], 1u);
  EXPECT_EQ(list.nsid[1], 2u);
  EXPECT_EQ(list.nsid[2], 0u);
  list = as<spec::ActiveNamespaceList>(identify(spec::cns::active_namespace_list, 1).data);
  EXPECT_EQ(list.nsid[0], 2u);
  EXPECT_EQ(list.nsid[1], 0u);
  list = as<spec::ActiveNamespaceList>(identify(spec::cns::active_namespace_list, 2).data);
  EXPECT_EQ(list.nsid[0], 0u);
  EXPECT_EQ(identify(spec::cns::active_namespace_list, 0xFFFFFFFE).status().sc,
            spec::sc_generic::invalid_namespace_or_format);
}

TEST_F(AdminTest, IdentifyNamespaceDescriptors) {
  // NS 1 has only the bdev's UUID.
  Completion done = identify(spec::cns::namespace_id_descriptor_list, 1);
  ASSERT_TRUE(done.ok());
  spec::NamespaceIdentifiers ids;
  ASSERT_TRUE(spec::decode_ns_id_descriptor_list(done.data.data(), done.data.size(), &ids));
  EXPECT_TRUE(ids.has_uuid);
  EXPECT_FALSE(ids.has_nguid);
  EXPECT_FALSE(ids.has_eui64);
  EXPECT_EQ(0, std::memcmp(ids.uuid, malloc_->uuid().data(), 16));
  // A namespace with its own identifiers reports all three, its UUID instead of the bdev's.
  NamespaceOpts opts;
  opts.nsid = 4;
  opts.bdev = malloc_.get();
  opts.uuid_set = true;
  opts.uuid = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  opts.nguid = {0xA0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xAF};
  opts.eui64 = {0xE0, 0, 0, 0, 0, 0, 0, 0xE7};
  ASSERT_TRUE(target_->add_namespace(kSubsystemNqn, opts).has_value());
  done = identify(spec::cns::namespace_id_descriptor_list, 4);
  ASSERT_TRUE(spec::decode_ns_id_descriptor_list(done.data.data(), done.data.size(), &ids));
  EXPECT_TRUE(ids.has_uuid && ids.has_nguid && ids.has_eui64);
  EXPECT_EQ(ids.uuid[0], 1);
  EXPECT_EQ(ids.uuid[15], 16);
  EXPECT_EQ(ids.nguid[15], 0xAF);
  EXPECT_EQ(ids.eui64[7], 0xE7);
  // The list starts with the EUI64 descriptor (NIDT 1, NIDL 8).
  EXPECT_EQ(done.data[0], spec::nidt::eui64);
  EXPECT_EQ(done.data[1], 8);
  const auto ns = as<spec::IdentifyNamespace>(identify(spec::cns::namespace_data, 4).data);
  EXPECT_EQ(ns.nguid[0], 0xA0);
  EXPECT_EQ(ns.eui64[0], 0xE0);
  // Inactive NSID: no descriptors.
  EXPECT_EQ(identify(spec::cns::namespace_id_descriptor_list, 6).status().sc,
            spec::sc_generic::invalid_namespace_or_format);
}

TEST_F(AdminTest, IdentifyUnsupportedCnsAndShortBuffer) {
  EXPECT_EQ(identify(spec::cns::nvm_set_list).status().sc, spec::sc_generic::invalid_field);
  const Completion short_buffer =
      run(*admin_, spec::make_identify(0, spec::cns::controller), {}, 1024);
  EXPECT_EQ(short_buffer.status().sc, spec::sc_generic::data_sgl_length_invalid);
}

TEST_F(AdminTest, UnknownAdminOpcodesAreInvalidOpcode) {
  for (const uint8_t opcode :
       {spec::admin_opcode::create_io_sq, spec::admin_opcode::delete_io_cq,
        spec::admin_opcode::namespace_management, spec::admin_opcode::format_nvm, uint8_t{0xC3}}) {
    const Completion done = run(*admin_, spec::make_sqe(opcode, 0));
    EXPECT_EQ(done.status().sct, spec::sct::generic) << int(opcode);
    EXPECT_EQ(done.status().sc, spec::sc_generic::invalid_opcode) << int(opcode);
    EXPECT_TRUE(done.status().dnr);
  }
}

TEST_F(AdminTest, NumberOfQueuesIsClampedAndZeroBased) {
  // A fresh controller: ask for more than max_qpairs_per_ctrlr - 1 = 127.
  uint16_t cntlid = 0;
  FakeQueue& admin = connect_admin(&cntlid);
  enable(admin);
  Completion done = run(admin, spec::make_set_features(0, spec::feature::number_of_queues,
                                                       spec::encode_number_of_queues(1000, 3)));
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(spec::number_of_queues_sq_count(done.cqe.cdw0), 127u);
  EXPECT_EQ(spec::number_of_queues_cq_count(done.cqe.cdw0), 3u);
  EXPECT_EQ(done.cqe.cdw0, 126u | (2u << 16));
  done = run(admin, spec::make_get_features(0, spec::feature::number_of_queues));
  EXPECT_EQ(done.cqe.cdw0, 126u | (2u << 16));
  // Only min(SQ, CQ) = 3 queue pairs can connect.
  connect_io(cntlid, 3);
  FakeQueue& fourth = new_queue(1);
  EXPECT_FALSE(connect_io_expect_failure(fourth, cntlid, 4).ok());
  // FFFFh is invalid.
  EXPECT_EQ(
      run(admin, spec::make_set_features(0, spec::feature::number_of_queues, 0xFFFF)).status().sc,
      spec::sc_generic::invalid_field);
}

TEST_F(AdminTest, NumberOfQueuesAfterIoConnectIsSequenceError) {
  connect_io(cntlid_, 1);
  const Completion done =
      run(*admin_, spec::make_set_features(0, spec::feature::number_of_queues,
                                           spec::encode_number_of_queues(8, 8)));
  EXPECT_EQ(done.status().sc, spec::sc_generic::command_sequence_error);
}

TEST_F(AdminTest, KeepAliveTimerFeatureRoundsToGranularity) {
  Completion done = run(*admin_, spec::make_get_features(0, spec::feature::keep_alive_timer));
  EXPECT_EQ(done.cqe.cdw0, kAdminKatoMs);
  ASSERT_TRUE(run(*admin_, spec::make_set_features(0, spec::feature::keep_alive_timer, 1500)).ok());
  done = run(*admin_, spec::make_get_features(0, spec::feature::keep_alive_timer));
  EXPECT_EQ(done.cqe.cdw0, 2000u);  // rounded up to KAS (1 s)
}

TEST_F(AdminTest, AsyncEventConfigurationFeature) {
  Completion done =
      run(*admin_, spec::make_get_features(0, spec::feature::async_event_configuration));
  EXPECT_EQ(done.cqe.cdw0, spec::async_event_config_bit::namespace_attribute);  // default on
  // Unsupported bits (SMART warnings) are dropped.
  ASSERT_TRUE(
      run(*admin_, spec::make_set_features(0, spec::feature::async_event_configuration, 0xFF))
          .ok());
  done = run(*admin_, spec::make_get_features(0, spec::feature::async_event_configuration));
  EXPECT_EQ(done.cqe.cdw0, 0u);
}

TEST_F(AdminTest, UnsupportedOrSavedFeatures) {
  EXPECT_EQ(run(*admin_, spec::make_get_features(0, spec::feature::arbitration)).status().sc,
            spec::sc_generic::invalid_field);
  EXPECT_EQ(
      run(*admin_, spec::make_set_features(0, spec::feature::temperature_threshold, 0)).status().sc,
      spec::sc_generic::invalid_field);
  const Completion saved =
      run(*admin_, spec::make_set_features(0, spec::feature::keep_alive_timer, 5000, true));
  EXPECT_EQ(saved.status().sct, spec::sct::command_specific);
  EXPECT_EQ(saved.status().sc, spec::sc_command::feature_id_not_saveable);
  // Volatile write cache: present and enabled by default, can be turned off.
  EXPECT_EQ(run(*admin_, spec::make_get_features(0, spec::feature::volatile_write_cache)).cqe.cdw0,
            1u);
  ASSERT_TRUE(
      run(*admin_, spec::make_set_features(0, spec::feature::volatile_write_cache, 0)).ok());
  EXPECT_EQ(run(*admin_, spec::make_get_features(0, spec::feature::volatile_write_cache)).cqe.cdw0,
            0u);
}

}  // namespace
}  // namespace nvmf::target::testing
