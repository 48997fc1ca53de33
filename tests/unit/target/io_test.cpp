// I/O commands on a queue of reactor 1 while the admin queue is on reactor 0: data, checks,
// bdev busy retries, Abort of a waiting command.
#include "fake_transport.h"

namespace nvmf::target::testing {
namespace {

class IoTest : public TargetTest {
 protected:
  void SetUp() override {
    TargetTest::SetUp();
    admin_ = &bring_up(&cntlid_);
    io_ = &connect_io(cntlid_, 1);
  }
  Completion write(uint32_t nsid, uint64_t lba, const std::vector<uint8_t>& data,
                   unsigned segments = 1) {
    const auto blocks = static_cast<uint32_t>(data.size() / kMallocBlockSize);
    return run(*io_, io_sqe(spec::nvm_opcode::write, nsid, lba, blocks), data, 0, segments);
  }
  Completion read(uint32_t nsid, uint64_t lba, uint32_t blocks, unsigned segments = 1) {
    return run(*io_, io_sqe(spec::nvm_opcode::read, nsid, lba, blocks), {},
               blocks * kMallocBlockSize, segments);
  }
  Completion dsm(const std::vector<spec::DsmRange>& ranges, bool deallocate = true) {
    spec::Sqe sqe = spec::make_sqe(spec::nvm_opcode::dataset_management, 0, 1);
    sqe.cdw10 = static_cast<uint32_t>(ranges.size() - 1);
    sqe.cdw11 = deallocate ? 1u << 2 : 0u;
    std::vector<uint8_t> data(ranges.size() * sizeof(spec::DsmRange));
    std::memcpy(data.data(), ranges.data(), data.size());
    return run(*io_, sqe, data);
  }
  static void expect_status(const Completion& done, uint8_t sct, uint8_t sc) {
    EXPECT_EQ(done.status().sct, sct);
    EXPECT_EQ(done.status().sc, sc);
  }
  FakeQueue* admin_ = nullptr;
  FakeQueue* io_ = nullptr;
  uint16_t cntlid_ = 0;
};

TEST_F(IoTest, WriteThenReadIsByteExactAcrossSegments) {
  const std::vector<uint8_t> data = pattern(64 * 1024, 9);
  const Completion written = write(1, 100, data, 5);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(written.cqe.sqid, 1);
  const Completion done = read(1, 100, 128, 7);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done.data, data);
  // Neighbours untouched.
  const Completion before = read(1, 99, 1);
  EXPECT_TRUE(
      std::all_of(before.data.begin(), before.data.end(), [](uint8_t b) { return b == 0; }));
}

TEST_F(IoTest, IoCompletesOnItsOwnReactor) {
  const uint16_t cid = io_->submit(io_sqe(spec::nvm_opcode::write, 1, 0, 1), pattern(512, 1));
  EXPECT_FALSE(io_->completed(cid));  // the bdev completes at a later poll, never inside submit
  EXPECT_EQ(io_->qpair()->in_bdev(), 1u);
  harness_.reactor(0).poll_once();  // the admin reactor does not own the channel
  EXPECT_FALSE(io_->completed(cid));
  harness_.reactor(1).poll_once();
  EXPECT_TRUE(io_->completed(cid));
  EXPECT_EQ(io_->qpair()->in_bdev(), 0u);
}

TEST_F(IoTest, FlushWriteZeroesAndDeallocate) {
  ASSERT_TRUE(write(1, 0, pattern(16 * 512, 5)).ok());
  EXPECT_TRUE(run(*io_, spec::make_sqe(spec::nvm_opcode::flush, 0, 1)).ok());
  // Write Zeroes blocks 2..3.
  ASSERT_TRUE(run(*io_, io_sqe(spec::nvm_opcode::write_zeroes, 1, 2, 2)).ok());
  // Deallocate blocks 6..7 and 10 (three ranges, one empty).
  std::vector<spec::DsmRange> ranges(3);
  ranges[0] = {0, 2, 6};
  ranges[1] = {0, 0, 12};  // empty: skipped
  ranges[2] = {0, 1, 10};
  ASSERT_TRUE(dsm(ranges).ok());
  const std::vector<uint8_t> expected_source = pattern(16 * 512, 5);
  const Completion done = read(1, 0, 16);
  ASSERT_TRUE(done.ok());
  for (uint32_t block = 0; block < 16; ++block) {
    const bool zero = block == 2 || block == 3 || block == 6 || block == 7 || block == 10;
    const auto begin = done.data.begin() + block * 512;
    if (zero) {
      EXPECT_TRUE(std::all_of(begin, begin + 512, [](uint8_t b) { return b == 0; })) << block;
    } else {
      EXPECT_TRUE(std::equal(begin, begin + 512, expected_source.begin() + block * 512)) << block;
    }
  }
}

TEST_F(IoTest, DatasetManagementWithoutDeallocateChangesNothing) {
  ASSERT_TRUE(write(1, 0, pattern(512, 4)).ok());
  ASSERT_TRUE(dsm({spec::DsmRange{0, 1, 0}}, false).ok());
  EXPECT_EQ(read(1, 0, 1).data, pattern(512, 4));
}

TEST_F(IoTest, DatasetManagementRangeOutOfRangeChangesNothing) {
  ASSERT_TRUE(write(1, 0, pattern(512, 4)).ok());
  // The first range is fine, the second runs past the end: neither may be applied.
  const Completion done = dsm({spec::DsmRange{0, 1, 0}, spec::DsmRange{0, 2, kMallocBlocks - 1}});
  expect_status(done, spec::sct::generic, spec::sc_generic::lba_out_of_range);
  EXPECT_EQ(read(1, 0, 1).data, pattern(512, 4));
}

TEST_F(IoTest, DatasetManagementWithTheMaximumOf256Ranges) {
  const std::vector<uint8_t> source = pattern(512 * 512, 6);
  // Two writes of 128 KiB each.
  ASSERT_TRUE(write(1, 0, std::vector<uint8_t>(source.begin(), source.begin() + 256 * 512)).ok());
  ASSERT_TRUE(write(1, 256, std::vector<uint8_t>(source.begin() + 256 * 512, source.end())).ok());
  std::vector<spec::DsmRange> ranges(256);
  for (uint32_t i = 0; i < 256; ++i) ranges[i] = {0, 1, uint64_t{i} * 2};  // every even block
  ASSERT_TRUE(dsm(ranges).ok());
  const Completion done = read(1, 0, 256);
  const Completion rest = read(1, 256, 256);
  for (uint32_t block = 0; block < 512; ++block) {
    const auto begin = (block < 256 ? done.data.begin() : rest.data.begin()) + (block % 256) * 512;
    if (block % 2 == 0) {
      ASSERT_TRUE(std::all_of(begin, begin + 512, [](uint8_t b) { return b == 0; })) << block;
    } else {
      ASSERT_TRUE(std::equal(begin, begin + 512, source.begin() + block * 512)) << block;
    }
  }
}

TEST_F(IoTest, DatasetManagementRangeListLongerThanData) {
  spec::Sqe sqe = spec::make_sqe(spec::nvm_opcode::dataset_management, 0, 1);
  sqe.cdw10 = 3;  // 4 ranges = 64 bytes
  sqe.cdw11 = 1u << 2;
  expect_status(run(*io_, sqe, std::vector<uint8_t>(32, 0)), spec::sct::generic,
                spec::sc_generic::data_sgl_length_invalid);
}

TEST_F(IoTest, BadNsidsAreInvalidNamespace) {
  for (const uint32_t nsid : {0u, 3u, 9u, 0xFFFFFFFFu}) {
    const Completion done = read(nsid, 0, 1);
    expect_status(done, spec::sct::generic, spec::sc_generic::invalid_namespace_or_format);
    EXPECT_TRUE(done.status().dnr) << nsid;
  }
  // Flush with the broadcast NSID is not supported either (VWC says so).
  expect_status(run(*io_, spec::make_sqe(spec::nvm_opcode::flush, 0, 0xFFFFFFFF)),
                spec::sct::generic, spec::sc_generic::invalid_namespace_or_format);
}

TEST_F(IoTest, LbaRangeBeyondNamespaceIsOutOfRange) {
  expect_status(read(1, kMallocBlocks - 1, 2), spec::sct::generic,
                spec::sc_generic::lba_out_of_range);
  expect_status(read(1, kMallocBlocks, 1), spec::sct::generic, spec::sc_generic::lba_out_of_range);
  EXPECT_TRUE(read(1, kMallocBlocks - 2, 2).ok());
  expect_status(run(*io_, io_sqe(spec::nvm_opcode::write_zeroes, 1, kMallocBlocks - 1, 4)),
                spec::sct::generic, spec::sc_generic::lba_out_of_range);
}

TEST_F(IoTest, LbaRangeThatWrapsU64IsOutOfRange) {
  // SLBA + NLB wraps to 8: a naive "slba + nlb <= count" check would accept it.
  const uint64_t slba = UINT64_MAX - 7;
  expect_status(read(1, slba, 16), spec::sct::generic, spec::sc_generic::lba_out_of_range);
  expect_status(run(*io_, io_sqe(spec::nvm_opcode::write_zeroes, 1, slba, 16)), spec::sct::generic,
                spec::sc_generic::lba_out_of_range);
  expect_status(dsm({spec::DsmRange{0, 16, slba}}), spec::sct::generic,
                spec::sc_generic::lba_out_of_range);
}

TEST_F(IoTest, TransferAboveMdtsIsInvalidField) {
  // 2049 blocks of 512 bytes = 1049088 > max_io_size 1048576 (the default, MDTS 8).
  ASSERT_EQ(opts_.max_io_size, 1048576u);
  const Completion done =
      run(*io_, io_sqe(spec::nvm_opcode::read, 1, 0, 2049), {}, 2049 * kMallocBlockSize);
  expect_status(done, spec::sct::generic, spec::sc_generic::invalid_field);
  EXPECT_TRUE(read(1, 0, 2048).ok());  // exactly MDTS
}

// What the Linux host's passthrough sends once MDTS allows it: 1025 blocks of 512 bytes
// (524800 bytes, `nvme write --block-count 1024`), and a whole MDTS of 1 MiB, each written and
// read back, in one segment and scattered over 16.
TEST_F(IoTest, TransfersOf1025BlocksAndOf1MiBAreByteExact) {
  for (const uint32_t blocks : {1025u, 2048u}) {
    for (const unsigned segments : {1u, 16u}) {
      const uint64_t lba = blocks == 1025 ? 3000 : 5000;
      const std::vector<uint8_t> data =
          pattern(size_t{blocks} * kMallocBlockSize, static_cast<uint8_t>(blocks + segments));
      const Completion written = write(1, lba, data, segments);
      ASSERT_TRUE(written.ok()) << blocks << " blocks in " << segments << " segments";
      const Completion done = read(1, lba, blocks, segments);
      ASSERT_TRUE(done.ok()) << blocks << " blocks in " << segments << " segments";
      EXPECT_EQ(done.data, data) << blocks << " blocks in " << segments << " segments";
    }
  }
  // The blocks around the 1025 stay as they were (zero).
  for (const uint64_t lba : {2999u, 4025u}) {
    const Completion around = read(1, lba, 1);
    ASSERT_TRUE(around.ok());
    EXPECT_TRUE(
        std::all_of(around.data.begin(), around.data.end(), [](uint8_t b) { return b == 0; }))
        << "LBA " << lba;
  }
}

TEST_F(IoTest, LengthMismatchIsDataSglLengthInvalid) {
  expect_status(run(*io_, io_sqe(spec::nvm_opcode::write, 1, 0, 8), pattern(2048, 1)),
                spec::sct::generic, spec::sc_generic::data_sgl_length_invalid);
  expect_status(run(*io_, io_sqe(spec::nvm_opcode::read, 1, 0, 1), {}, 1024), spec::sct::generic,
                spec::sc_generic::data_sgl_length_invalid);
}

TEST_F(IoTest, UnknownIoOpcodesAreInvalidOpcode) {
  for (const uint8_t opcode : {spec::nvm_opcode::compare, spec::nvm_opcode::write_uncorrectable,
                               spec::nvm_opcode::reservation_register, uint8_t{0x99}}) {
    const Completion done = run(*io_, spec::make_sqe(opcode, 0, 1));
    expect_status(done, spec::sct::generic, spec::sc_generic::invalid_opcode);
  }
  // Admin opcodes mean nothing on an I/O queue.
  expect_status(run(*io_, spec::make_identify(0, spec::cns::controller), {}, 4096),
                spec::sct::generic, spec::sc_generic::invalid_opcode);
}

TEST_F(IoTest, FusedCommandsAreRejected) {
  spec::Sqe sqe = io_sqe(spec::nvm_opcode::read, 1, 0, 1);
  sqe.set_fuse(spec::fuse::first);
  expect_status(run(*io_, sqe, {}, 512), spec::sct::generic, spec::sc_generic::invalid_field);
}

TEST_F(IoTest, NullNamespaceAcceptsIo) {
  const Completion done =
      run(*io_, io_sqe(spec::nvm_opcode::write, 2, kNullBlocks - 1, 1), pattern(4096, 1));
  EXPECT_TRUE(done.ok());
  expect_status(run(*io_, io_sqe(spec::nvm_opcode::read, 2, 0, 257), {}, 257 * 4096),
                spec::sct::generic,
                spec::sc_generic::invalid_field);  // 1 MiB + 4 KiB > MDTS
}

class BusyIoTest : public TargetTest {
 protected:
  void SetUp() override {
    TargetTest::SetUp();
    // A slow null bdev that holds two I/Os per channel.
    bdev::NullBdevOpts opts;
    opts.name = "Slow";
    opts.block_size_bytes = 512;
    opts.queue_depth_max = 2;
    opts.completion_delay_ns = 1000 * 1000;  // 1 ms of fake time
    opts.clock = &harness_.clock();
    auto made = bdev::create_null_bdev(opts);
    ASSERT_TRUE(made.has_value());
    slow_ = std::move(*made);
    NamespaceOpts ns;
    ns.nsid = 3;
    ns.bdev = slow_.get();
    ASSERT_TRUE(target_->add_namespace(kSubsystemNqn, ns).has_value());
    admin_ = &bring_up(&cntlid_);
    io_ = &connect_io(cntlid_, 1);
  }
  void TearDown() override {
    harness_.clock().advance_ms(10);
    TargetTest::TearDown();
    slow_.reset();
  }
  std::unique_ptr<bdev::Bdev> slow_;
  FakeQueue* admin_ = nullptr;
  FakeQueue* io_ = nullptr;
  uint16_t cntlid_ = 0;
};

TEST_F(BusyIoTest, BusyBdevQueuesAndRetriesInOrder) {
  const size_t base = io_->completion_count();  // the Connect
  std::vector<uint16_t> cids;
  for (int i = 0; i < 6; ++i)
    cids.push_back(io_->submit(io_sqe(spec::nvm_opcode::read, 3, i, 1), {}, 512));
  for (int round = 0; round < 5; ++round) harness_.poll_round();
  EXPECT_EQ(io_->completion_count(), base);
  EXPECT_EQ(io_->qpair()->in_bdev(), 2u);
  EXPECT_EQ(io_->request(cids[2])->state, RequestState::need_bdev);  // parked, not failed
  EXPECT_EQ(io_->request(cids[0])->state, RequestState::bdev_submitted);
  harness_.clock().advance_ms(1);
  ASSERT_TRUE(harness_.poll_until([&] { return io_->completion_count() == base + 2; }));
  harness_.clock().advance_ms(1);
  ASSERT_TRUE(harness_.poll_until([&] { return io_->completion_count() == base + 4; }));
  harness_.clock().advance_ms(1);
  ASSERT_TRUE(harness_.poll_until([&] { return io_->completion_count() == base + 6; }));
  // Every one succeeded, in submission order.
  for (size_t i = 0; i < cids.size(); ++i) {
    EXPECT_EQ(io_->completions()[base + i].first, cids[i]);
    EXPECT_TRUE(io_->completions()[base + i].second.ok());
  }
}

TEST_F(BusyIoTest, AbortRemovesAWaitingCommandButNotOneInsideTheBdev) {
  const size_t base = io_->completion_count();
  std::vector<uint16_t> cids;
  for (int i = 0; i < 4; ++i)
    cids.push_back(io_->submit(io_sqe(spec::nvm_opcode::read, 3, i, 1), {}, 512));
  harness_.poll_round();
  spec::Sqe abort_waiting = spec::make_sqe(spec::admin_opcode::abort, 0);
  abort_waiting.cdw10 = 1u | (uint32_t{cids[3]} << 16);  // SQID 1, a command waiting for the bdev
  Completion done = run(*admin_, abort_waiting);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done.cqe.cdw0 & 1u, 0u);  // aborted
  ASSERT_TRUE(io_->completed(cids[3]));
  EXPECT_EQ(io_->completion(cids[3]).status().sc, spec::sc_generic::abort_requested);
  spec::Sqe abort_running = spec::make_sqe(spec::admin_opcode::abort, 0);
  abort_running.cdw10 = 1u | (uint32_t{cids[0]} << 16);  // inside the bdev: runs to completion
  done = run(*admin_, abort_running);
  EXPECT_EQ(done.cqe.cdw0 & 1u, 1u);
  spec::Sqe abort_unknown_queue = spec::make_sqe(spec::admin_opcode::abort, 0);
  abort_unknown_queue.cdw10 = 7u | (1u << 16);
  done = run(*admin_, abort_unknown_queue);
  EXPECT_TRUE(done.ok());
  EXPECT_EQ(done.cqe.cdw0 & 1u, 1u);
  // The two inside complete after 1 ms; the waiting one is submitted then and takes 1 ms more.
  for (int ms = 0; ms < 3; ++ms) {
    harness_.clock().advance_ms(1);
    for (int round = 0; round < 3; ++round) harness_.poll_round();
  }
  EXPECT_EQ(io_->completion_count(), base + 4);
  EXPECT_TRUE(io_->completion(cids[0]).ok());
  EXPECT_TRUE(io_->completion(cids[2]).ok());
}

TEST_F(BusyIoTest, RemovingANamespaceWithIoInsideDrainsItsChannel) {
  const uint16_t first = io_->submit(io_sqe(spec::nvm_opcode::read, 3, 0, 1), {}, 512);
  const uint16_t second = io_->submit(io_sqe(spec::nvm_opcode::read, 3, 1, 1), {}, 512);
  EXPECT_EQ(slow_->channel_count(), 1u);  // opened on reactor 1 at I/O Connect
  ASSERT_TRUE(target_->remove_namespace(kSubsystemNqn, 3).has_value());
  for (int round = 0; round < 5; ++round) harness_.poll_round();
  // New commands see the namespace gone; the two inside keep their channel alive.
  EXPECT_EQ(run(*io_, io_sqe(spec::nvm_opcode::read, 3, 0, 1), {}, 512).status().sc,
            spec::sc_generic::invalid_namespace_or_format);
  EXPECT_EQ(slow_->channel_count(), 1u);
  harness_.clock().advance_ms(1);
  ASSERT_TRUE(harness_.poll_until([&] { return io_->completed(first) && io_->completed(second); }));
  EXPECT_TRUE(io_->completion(first).ok());
  EXPECT_TRUE(io_->completion(second).ok());
  harness_.poll_round();
  EXPECT_EQ(slow_->channel_count(), 0u);  // drained and closed: the bdev may go now
}

TEST_F(BusyIoTest, DestroyWaitsForRequestsInsideTheBdev) {
  const uint16_t inside = io_->submit(io_sqe(spec::nvm_opcode::read, 3, 0, 1), {}, 512);
  io_->submit(io_sqe(spec::nvm_opcode::read, 3, 1, 1), {}, 512);
  const uint16_t waiting = io_->submit(io_sqe(spec::nvm_opcode::read, 3, 2, 1), {}, 512);
  EXPECT_FALSE(io_->destroy());  // two inside the bdev
  // The waiting one was completed at once, aborted.
  ASSERT_TRUE(io_->completed(waiting));
  EXPECT_EQ(io_->completion(waiting).status().sc, spec::sc_generic::aborted_sq_deletion);
  EXPECT_FALSE(io_->completed(inside));
  // New commands on a dying queue are refused.
  const uint16_t late = io_->submit(io_sqe(spec::nvm_opcode::read, 3, 0, 1), {}, 512);
  EXPECT_EQ(io_->completion(late).status().sc, spec::sc_generic::aborted_sq_deletion);
  harness_.clock().advance_ms(1);
  ASSERT_TRUE(harness_.poll_until([&] { return io_->completed(inside); }));
  EXPECT_TRUE(io_->completion(inside).ok());
  harness_.poll_until_idle();
  EXPECT_TRUE(io_->destroy());
}

}  // namespace
}  // namespace nvmf::target::testing
