// Asynchronous Event Requests: completion on namespace changes, limit, masking, Abort, teardown.
#include "fake_transport.h"

namespace nvmf::target::testing {
namespace {

class EventsTest : public TargetTest {
 protected:
  void SetUp() override {
    TargetTest::SetUp();
    admin_ = &bring_up(&cntlid_);
  }
  uint16_t send_aer() {
    return admin_->submit(spec::make_sqe(spec::admin_opcode::async_event_request, 0));
  }
  Result<uint32_t> add_namespace(uint32_t nsid) {
    NamespaceOpts ns;
    ns.nsid = nsid;
    ns.bdev = malloc_.get();
    return target_->add_namespace(kSubsystemNqn, ns);
  }
  static void expect_namespace_notice(const Completion& done) {
    ASSERT_TRUE(done.ok());
    EXPECT_EQ(spec::async_event_type_of(done.cqe.cdw0), spec::async_event_type::notice);
    EXPECT_EQ(spec::async_event_info_of(done.cqe.cdw0),
              spec::async_event_notice::namespace_attribute_changed);
    EXPECT_EQ(spec::async_event_log_page_of(done.cqe.cdw0), spec::log_page::changed_namespace_list);
  }
  FakeQueue* admin_ = nullptr;
  uint16_t cntlid_ = 0;
};

TEST_F(EventsTest, AerIsHeldUntilANamespaceIsAdded) {
  const uint16_t aer = send_aer();
  harness_.poll_until_idle();
  EXPECT_FALSE(admin_->completed(aer));
  EXPECT_EQ(admin_->request(aer)->state, RequestState::held_event);
  ASSERT_TRUE(add_namespace(3).has_value());
  expect_namespace_notice(wait(*admin_, aer));
  const Completion list = run(
      *admin_, spec::make_get_log_page(0, spec::log_page::changed_namespace_list, 4096), {}, 4096);
  EXPECT_EQ(as<spec::ChangedNamespaceList>(list.data).nsid[0], 3u);
}

TEST_F(EventsTest, NamespaceRemovalNotifiesAndStopsIo) {
  FakeQueue& io = connect_io(cntlid_, 1);
  ASSERT_TRUE(run(io, io_sqe(spec::nvm_opcode::read, 2, 0, 1), {}, 4096).ok());
  const uint16_t aer = send_aer();
  ASSERT_TRUE(target_->remove_namespace(kSubsystemNqn, 2).has_value());
  expect_namespace_notice(wait(*admin_, aer));
  const Completion read = run(io, io_sqe(spec::nvm_opcode::read, 2, 0, 1), {}, 4096);
  EXPECT_EQ(read.status().sc, spec::sc_generic::invalid_namespace_or_format);
  // Identify now reads the NSID as inactive.
  const Completion identify =
      run(*admin_, spec::make_identify(0, spec::cns::active_namespace_list), {}, 4096);
  EXPECT_EQ(as<spec::ActiveNamespaceList>(identify.data).nsid[1], 0u);
}

TEST_F(EventsTest, NamespaceAddedAtRunTimeServesIoOnOtherReactor) {
  FakeQueue& io = connect_io(cntlid_, 1);
  ASSERT_TRUE(add_namespace(5).has_value());
  // No poll in between: the I/O path notices the new generation itself.
  const std::vector<uint8_t> data = pattern(1024, 8);
  ASSERT_TRUE(run(io, io_sqe(spec::nvm_opcode::write, 5, 10, 2), data).ok());
  EXPECT_EQ(run(io, io_sqe(spec::nvm_opcode::read, 1, 10, 2), {}, 1024).data, data);  // same bdev
}

TEST_F(EventsTest, AerLimitExceeded) {
  const size_t before = admin_->completion_count();
  for (unsigned i = 0; i < kAsyncEventRequestsMax; ++i) send_aer();
  harness_.poll_until_idle();
  EXPECT_EQ(admin_->completion_count(), before);  // all four held
  const Completion done = run(*admin_, spec::make_sqe(spec::admin_opcode::async_event_request, 0));
  EXPECT_EQ(done.status().sct, spec::sct::command_specific);
  EXPECT_EQ(done.status().sc, spec::sc_command::async_event_request_limit_exceeded);
  EXPECT_EQ(admin_->completion_count(), before + 1);  // only the refused one completed
}

TEST_F(EventsTest, EventWithoutAerWaitsForTheNextAer) {
  ASSERT_TRUE(add_namespace(3).has_value());
  harness_.poll_until_idle();
  const uint16_t aer = send_aer();
  // Delivered at once, inside execute().
  ASSERT_TRUE(admin_->completed(aer));
  expect_namespace_notice(admin_->completion(aer));
}

TEST_F(EventsTest, NoticeIsMaskedUntilTheLogIsRead) {
  const uint16_t first = send_aer();
  ASSERT_TRUE(add_namespace(3).has_value());
  expect_namespace_notice(wait(*admin_, first));
  const uint16_t second = send_aer();
  ASSERT_TRUE(add_namespace(4).has_value());
  harness_.poll_until_idle();
  EXPECT_FALSE(admin_->completed(second));  // masked: the host has not read the log yet
  const Completion list = run(
      *admin_, spec::make_get_log_page(0, spec::log_page::changed_namespace_list, 4096), {}, 4096);
  EXPECT_EQ(as<spec::ChangedNamespaceList>(list.data).nsid[0], 3u);
  EXPECT_EQ(as<spec::ChangedNamespaceList>(list.data).nsid[1], 4u);
  // Reading unmasked it; but the change it reported was already read, so a new change is
  // needed for the next notice.
  ASSERT_TRUE(add_namespace(6).has_value());
  expect_namespace_notice(wait(*admin_, second));
}

TEST_F(EventsTest, DisabledNoticesAreNotDelivered) {
  ASSERT_TRUE(
      run(*admin_, spec::make_set_features(0, spec::feature::async_event_configuration, 0)).ok());
  const uint16_t aer = send_aer();
  ASSERT_TRUE(add_namespace(3).has_value());
  harness_.poll_until_idle();
  EXPECT_FALSE(admin_->completed(aer));
}

TEST_F(EventsTest, AbortOfAHeldAer) {
  const uint16_t aer = send_aer();
  spec::Sqe abort = spec::make_sqe(spec::admin_opcode::abort, 0);
  abort.cdw10 = 0u | (uint32_t{aer} << 16);  // SQID 0
  const Completion done = run(*admin_, abort);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done.cqe.cdw0 & 1u, 0u);  // aborted
  ASSERT_TRUE(admin_->completed(aer));
  EXPECT_EQ(admin_->completion(aer).status().sct, spec::sct::generic);
  EXPECT_EQ(admin_->completion(aer).status().sc, spec::sc_generic::abort_requested);
  // Nothing left to abort with that CID.
  const Completion again = run(*admin_, abort);
  EXPECT_TRUE(again.ok());
  EXPECT_EQ(again.cqe.cdw0 & 1u, 1u);
}

TEST_F(EventsTest, DestroyingTheAdminQueueCompletesHeldAers) {
  const uint16_t first = send_aer();
  const uint16_t second = send_aer();
  ASSERT_TRUE(admin_->destroy());
  ASSERT_TRUE(admin_->completed(first));
  ASSERT_TRUE(admin_->completed(second));
  EXPECT_EQ(admin_->completion(first).status().sc, spec::sc_generic::aborted_sq_deletion);
  EXPECT_EQ(admin_->completion(second).status().sc, spec::sc_generic::aborted_sq_deletion);
  EXPECT_EQ(target_->controller_count(kSubsystemNqn), 0u);
}

}  // namespace
}  // namespace nvmf::target::testing
