// The NVMe PCIe driver against the register-level controller model: bring-up, queues, PRPs,
// splitting, bounce buffers, doorbells per poll, and every error path (timeout -> Abort ->
// reset, fatal status, removal, shutdown), each request completing exactly once.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "nvme_pcie/controller.h"
#include "nvme_pcie/model/model_controller.h"
#include "nvme_pcie/prp.h"
#include "spec/pcie.h"

namespace nvmf::nvme_pcie {
namespace {

using model::ModelController;
using model::ModelOpts;

constexpr uint32_t kPage = 4096;

// ---- PRP construction (pure) ----

struct ListPages {
  explicit ListPages(uint32_t count) : storage(count * 512), pages(count) {
    for (uint32_t i = 0; i < count; ++i) {
      pages[i].entries = &storage[i * 512];
      pages[i].iova = 0x900000 + uint64_t{i} * kPage;
    }
  }
  std::vector<uint64_t> storage;
  std::vector<PrpListPage> pages;
};

TEST(PrpTest, OnePageUsesPrp1Only) {
  PrpSegment segment{0x10200, 512};
  PrpPointers prps;
  ASSERT_TRUE(build_prps(&segment, 1, nullptr, 0, &prps));
  EXPECT_EQ(prps.prp1, 0x10200u);
  EXPECT_EQ(prps.prp2, 0u);
}

TEST(PrpTest, PageCrossingUsesPrp2AsSecondPage) {
  PrpSegment segment{0x10800, 4096};  // half of one page, half of the next
  PrpPointers prps;
  ASSERT_TRUE(build_prps(&segment, 1, nullptr, 0, &prps));
  EXPECT_EQ(prps.prp1, 0x10800u);
  EXPECT_EQ(prps.prp2, 0x11000u);
}

TEST(PrpTest, ThreePagesGoToAList) {
  ListPages lists(1);
  PrpSegment segment{0x20000, 3 * kPage};
  PrpPointers prps;
  ASSERT_TRUE(build_prps(&segment, 1, lists.pages.data(), 1, &prps));
  EXPECT_EQ(prps.prp1, 0x20000u);
  EXPECT_EQ(prps.prp2, lists.pages[0].iova);
  EXPECT_EQ(lists.storage[0], 0x21000u);
  EXPECT_EQ(lists.storage[1], 0x22000u);
  EXPECT_EQ(prps.list_pages_used, 1u);
}

TEST(PrpTest, SegmentsJoinAtPageBoundaries) {
  ListPages lists(1);
  PrpSegment segments[] = {{0x30800, 0x800}, {0x50000, 2 * kPage}, {0x70000, 100}};
  PrpPointers prps;
  ASSERT_TRUE(build_prps(segments, 3, lists.pages.data(), 1, &prps));
  EXPECT_EQ(prps.prp1, 0x30800u);
  EXPECT_EQ(lists.storage[0], 0x50000u);
  EXPECT_EQ(lists.storage[1], 0x51000u);
  EXPECT_EQ(lists.storage[2], 0x70000u);
}

TEST(PrpTest, LongListsChainThroughTheLastEntry) {
  // 1 + 511 + 511 + 2 entries: PRP1, a full page (511 + chain), another, and 2 on the last.
  const uint32_t pages = 1 + 511 + 511 + 2;
  ASSERT_EQ(prp_list_pages_for(pages), 3u);
  ListPages lists(3);
  PrpSegment segment{0x1000000, pages * kPage};
  PrpPointers prps;
  ASSERT_TRUE(build_prps(&segment, 1, lists.pages.data(), 3, &prps));
  EXPECT_EQ(prps.list_pages_used, 3u);
  EXPECT_EQ(lists.storage[511], lists.pages[1].iova);
  EXPECT_EQ(lists.storage[512 + 511], lists.pages[2].iova);
  EXPECT_EQ(lists.storage[0], 0x1001000u);
  EXPECT_EQ(lists.storage[512], 0x1000000u + 512u * kPage);
  EXPECT_EQ(lists.storage[1024 + 1], 0x1000000u + (pages - 1) * uint64_t{kPage});
  // One page fewer than needed is refused, not overrun.
  EXPECT_EQ(build_prps(&segment, 1, lists.pages.data(), 2, &prps).error().code, Errc::out_of_range);
}

TEST(PrpTest, ExactlyFullListPageNeedsNoChain) {
  ASSERT_EQ(prp_list_pages_for(1 + 512), 1u);
  ASSERT_EQ(prp_list_pages_for(1 + 513), 2u);
}

TEST(PrpTest, AlignmentsPrpsCannotExpressAreRefused) {
  PrpPointers prps;
  ListPages lists(1);
  PrpSegment odd{0x10002, 512};
  EXPECT_EQ(build_prps(&odd, 1, nullptr, 0, &prps).error().code, Errc::invalid_argument);
  PrpSegment gap_end[] = {{0x10000, 512}, {0x20000, 512}};  // first ends mid-page
  EXPECT_EQ(build_prps(gap_end, 2, lists.pages.data(), 1, &prps).error().code, Errc::invalid_argument);
  PrpSegment gap_start[] = {{0x10000, kPage}, {0x20200, 512}};  // second starts mid-page
  EXPECT_EQ(build_prps(gap_start, 2, lists.pages.data(), 1, &prps).error().code, Errc::invalid_argument);
}

// ---- the driver on the model ----

struct Completion {
  int calls = 0;
  spec::Status status{};
};

void record(void* ctx, const spec::Status& status) {
  auto* completion = static_cast<Completion*>(ctx);
  ++completion->calls;
  completion->status = status;
}

class DriverTest : public ::testing::Test {
 protected:
  void start(ModelOpts model_opts = {}, ControllerOpts opts = {}) {
    auto created = ModelController::create(model_opts);
    ASSERT_TRUE(created);
    model_ = created->get();
    opts.health_check_interval_ms = 5;
    auto controller = Controller::create(std::move(*created), opts);
    ASSERT_TRUE(controller) << controller.error().detail;
    controller_ = std::move(*controller);
    auto queue = controller_->create_io_queue();
    ASSERT_TRUE(queue) << queue.error().detail;
    queue_ = std::move(*queue);
  }
  void TearDown() override {
    buffers_.clear();
    queue_.reset();
    controller_.reset();
  }

  uint8_t* dma_buffer(size_t bytes) {
    auto region = controller_->device().dma_memory().allocate(bytes, kPage);
    EXPECT_TRUE(region);
    buffers_.push_back(std::move(*region));
    return static_cast<uint8_t*>(buffers_.back().addr());
  }

  // Polls until `completion` was called or `timeout_ms` passed.
  bool wait(const Completion& completion, int timeout_ms = 5000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (completion.calls == 0 && std::chrono::steady_clock::now() < deadline) {
      queue_->poll();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return completion.calls != 0;
  }

  Result<void> io(uint8_t opcode, uint64_t lba, uint64_t blocks, const iovec* iov, unsigned iovcnt,
                  Completion* completion) {
    IoCommand command;
    command.opcode = opcode;
    command.nsid = 1;
    command.lba = lba;
    command.block_count = blocks;
    command.iov = iov;
    command.iovcnt = iovcnt;
    return queue_->submit(command, record, completion);
  }

  // Writes `bytes` of a pattern at `lba`, reads them back into fresh memory, and checks the
  // namespace and the read data.
  void write_read_check(uint8_t* write_buffer, uint8_t* read_buffer, uint64_t lba, size_t bytes) {
    for (size_t i = 0; i < bytes; ++i) write_buffer[i] = static_cast<uint8_t>(i * 7 + lba);
    iovec out{write_buffer, bytes};
    Completion written;
    ASSERT_TRUE(io(spec::nvm_opcode::write, lba, bytes / 512, &out, 1, &written));
    ASSERT_TRUE(wait(written));
    ASSERT_TRUE(written.status.is_success()) << spec::status_name(written.status);
    EXPECT_EQ(std::memcmp(model_->namespace_data(1).data() + lba * 512, write_buffer, bytes), 0);
    iovec in{read_buffer, bytes};
    Completion read;
    ASSERT_TRUE(io(spec::nvm_opcode::read, lba, bytes / 512, &in, 1, &read));
    ASSERT_TRUE(wait(read));
    ASSERT_TRUE(read.status.is_success());
    EXPECT_EQ(std::memcmp(read_buffer, write_buffer, bytes), 0);
    EXPECT_EQ(written.calls, 1);
    EXPECT_EQ(read.calls, 1);
  }

  ModelController* model_ = nullptr;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<IoQueue> queue_;
  std::vector<env::DmaRegion> buffers_;
};

TEST_F(DriverTest, BringUpReadsIdentifyAndGrantsQueues) {
  ModelOpts model_opts;
  model_opts.ready_delay_reads = 5;  // RDY lags CC.EN: the driver must wait for it
  model::ModelNamespace second;
  second.nsid = 2;
  second.block_size_bytes = 4096;
  second.block_count = 1000;
  second.nguid = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  model_opts.namespaces.push_back(second);
  ControllerOpts opts;
  opts.io_queues_requested = 4;
  start(model_opts, opts);
  EXPECT_EQ(controller_->state(), ControllerState::live);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(controller_->identify().mn), 21),
            "nvmf model controller");
  ASSERT_EQ(controller_->namespaces().size(), 2u);
  EXPECT_EQ(controller_->namespaces()[0].block_size_bytes, 512u);
  EXPECT_EQ(controller_->namespaces()[0].block_count, (uint64_t{64} << 20) / 512);
  const NamespaceInfo* ns2 = controller_->find_namespace(2);
  ASSERT_NE(ns2, nullptr);
  EXPECT_EQ(ns2->block_size_bytes, 4096u);
  EXPECT_EQ(ns2->nguid[15], 16);
  EXPECT_EQ(controller_->io_queues_granted(), 4u);
  EXPECT_EQ(controller_->max_transfer_bytes(), 128u * 1024);  // MDTS 5 with 4 KiB pages
  EXPECT_EQ(model_->stats().admin_commands[spec::admin_opcode::create_io_sq], 1u);
}

TEST_F(DriverTest, QueueCountIsTheGrantedLimit) {
  ControllerOpts opts;
  opts.io_queues_requested = 2;
  start({}, opts);
  auto second = controller_->create_io_queue();
  ASSERT_TRUE(second);
  auto third = controller_->create_io_queue();
  EXPECT_EQ(third.error().code, Errc::busy);
  second->reset();  // frees qid 2 again
  EXPECT_TRUE(controller_->create_io_queue());
}

TEST_F(DriverTest, DoorbellStrideFromCap) {
  ModelOpts model_opts;
  model_opts.dstrd = 2;  // 16-byte stride
  start(model_opts);
  uint8_t* buffer = dma_buffer(kPage);
  write_read_check(buffer, dma_buffer(kPage), 8, kPage);
  EXPECT_EQ(model_->stats().invalid_doorbell_writes, 0u);
}

TEST_F(DriverTest, ReadsAndWritesOfEveryPrpShape) {
  start();
  uint8_t* write_buffer = dma_buffer(256 * 1024);
  uint8_t* read_buffer = dma_buffer(256 * 1024);
  write_read_check(write_buffer, read_buffer, 0, 512);            // PRP1 only
  write_read_check(write_buffer + 3584, read_buffer + 3584, 1, 1024);  // page-crossing: PRP2
  write_read_check(write_buffer, read_buffer, 100, 64 * 1024);    // PRP list
  EXPECT_EQ(queue_->stats().bounced.load(), 0u);
  EXPECT_EQ(queue_->stats().bytes_copied.load(), 0u);
}

TEST_F(DriverTest, LargeRequestsSplitAtTheTransferLimit) {
  start();
  uint8_t* write_buffer = dma_buffer(1 << 20);
  uint8_t* read_buffer = dma_buffer(1 << 20);
  write_read_check(write_buffer, read_buffer, 4096, 1 << 20);
  // MDTS 128 KiB: 1 MiB is 8 commands each way.
  EXPECT_EQ(model_->stats().io_commands[spec::nvm_opcode::write], 8u);
  EXPECT_EQ(model_->stats().io_commands[spec::nvm_opcode::read], 8u);
  EXPECT_EQ(queue_->stats().commands_split.load(), 2u);
}

TEST_F(DriverTest, SeveralIovecsGoDirectWhenPrpsCanExpressThem) {
  start();
  uint8_t* a = dma_buffer(kPage);
  uint8_t* b = dma_buffer(2 * kPage);
  uint8_t* c = dma_buffer(kPage);
  std::memset(a + 2048, 0xA1, 2048);
  std::memset(b, 0xB2, 2 * kPage);
  std::memset(c, 0xC3, 512);
  iovec iov[] = {{a + 2048, 2048}, {b, 2 * kPage}, {c, 512}};
  Completion done;
  const uint64_t bytes = 2048 + 2 * kPage + 512;
  ASSERT_TRUE(io(spec::nvm_opcode::write, 10, bytes / 512, iov, 3, &done));
  ASSERT_TRUE(wait(done));
  ASSERT_TRUE(done.status.is_success());
  const uint8_t* stored = model_->namespace_data(1).data() + 10 * 512;
  EXPECT_EQ(stored[0], 0xA1);
  EXPECT_EQ(stored[2048], 0xB2);
  EXPECT_EQ(stored[bytes - 1], 0xC3);
  EXPECT_EQ(queue_->stats().bounced.load(), 0u);
}

// Segments PRPs cannot express (the first ends mid-page) go as an SGL when the controller
// supports SGLs, and bounce when it does not; the data is right either way.
TEST_F(DriverTest, RaggedIovecsGoAsAnSglWhenTheControllerHasSgls) {
  ModelOpts model_opts;
  model_opts.sgl_supported = true;
  start(model_opts);
  uint8_t* a = dma_buffer(kPage);
  uint8_t* b = dma_buffer(kPage);
  std::memset(a, 0x11, 1536);
  std::memset(b + 512, 0x22, 2560);
  iovec iov[] = {{a, 1536}, {b + 512, 2560}};  // 1536 + 2560 = 4096, boundary mid-page
  Completion done;
  ASSERT_TRUE(io(spec::nvm_opcode::write, 64, 8, iov, 2, &done));
  ASSERT_TRUE(wait(done));
  ASSERT_TRUE(done.status.is_success()) << spec::status_name(done.status);
  const uint8_t* stored = model_->namespace_data(1).data() + 64 * 512;
  EXPECT_EQ(stored[1535], 0x11);
  EXPECT_EQ(stored[1536], 0x22);
  EXPECT_EQ(stored[4095], 0x22);
  EXPECT_EQ(queue_->stats().bounced.load(), 0u);  // an SGL, not a copy
  // Read it back the same way.
  std::memset(a, 0, kPage);
  std::memset(b, 0, kPage);
  Completion read;
  ASSERT_TRUE(io(spec::nvm_opcode::read, 64, 8, iov, 2, &read));
  ASSERT_TRUE(wait(read));
  EXPECT_EQ(a[0], 0x11);
  EXPECT_EQ(b[512 + 2559], 0x22);
  EXPECT_EQ(queue_->stats().bounced.load(), 0u);
}

TEST_F(DriverTest, RaggedIovecsBounceWithoutSgls) {
  start();  // the model's default: no SGL support
  uint8_t* a = dma_buffer(kPage);
  uint8_t* b = dma_buffer(kPage);
  std::memset(a, 0x33, 1536);
  std::memset(b + 512, 0x44, 2560);
  iovec iov[] = {{a, 1536}, {b + 512, 2560}};
  Completion done;
  ASSERT_TRUE(io(spec::nvm_opcode::write, 72, 8, iov, 2, &done));
  ASSERT_TRUE(wait(done));
  ASSERT_TRUE(done.status.is_success());
  const uint8_t* stored = model_->namespace_data(1).data() + 72 * 512;
  EXPECT_EQ(stored[1535], 0x33);
  EXPECT_EQ(stored[1536], 0x44);
  EXPECT_EQ(queue_->stats().bounced.load(), 1u);
}

TEST_F(DriverTest, MemoryOutsideDmaRegionsBounces) {
  start();
  std::vector<uint8_t> heap_out(8192), heap_in(8192);
  write_read_check(heap_out.data(), heap_in.data(), 50, 8192);
  EXPECT_EQ(queue_->stats().bounced.load(), 2u);
  EXPECT_EQ(queue_->stats().bytes_copied.load(), 2u * 8192);
  EXPECT_EQ(model_->stats().dma_faults, 0u);
}

TEST_F(DriverTest, OneDoorbellPerPollForManySubmits) {
  start();
  uint8_t* buffer = dma_buffer(16 * kPage);
  const uint64_t doorbells_before = model_->stats().sq_tail_doorbell_writes;
  Completion done[16];
  for (int i = 0; i < 16; ++i) {
    iovec iov{buffer + i * kPage, kPage};
    ASSERT_TRUE(io(spec::nvm_opcode::write, uint64_t(i) * 8, 8, &iov, 1, &done[i]));
  }
  EXPECT_EQ(model_->stats().sq_tail_doorbell_writes, doorbells_before);  // nothing rung yet
  queue_->poll();
  EXPECT_EQ(model_->stats().sq_tail_doorbell_writes, doorbells_before + 1);
  while (queue_->outstanding() > 0) queue_->poll();
  for (const Completion& completion : done) EXPECT_EQ(completion.calls, 1);
}

TEST_F(DriverTest, FlushWriteZeroesAndDeallocate) {
  start();
  uint8_t* buffer = dma_buffer(64 * 1024);
  std::memset(buffer, 0x5A, 64 * 1024);
  iovec iov{buffer, 64 * 1024};
  Completion written, zeroed, deallocated, flushed;
  ASSERT_TRUE(io(spec::nvm_opcode::write, 0, 128, &iov, 1, &written));
  ASSERT_TRUE(wait(written));
  ASSERT_TRUE(io(spec::nvm_opcode::write_zeroes, 0, 64, nullptr, 0, &zeroed));
  ASSERT_TRUE(wait(zeroed));
  ASSERT_TRUE(io(spec::nvm_opcode::dataset_management, 64, 32, nullptr, 0, &deallocated));
  ASSERT_TRUE(wait(deallocated));
  ASSERT_TRUE(io(spec::nvm_opcode::flush, 0, 0, nullptr, 0, &flushed));
  ASSERT_TRUE(wait(flushed));
  for (const Completion* c : {&written, &zeroed, &deallocated, &flushed}) {
    EXPECT_TRUE(c->status.is_success()) << spec::status_name(c->status);
  }
  const uint8_t* stored = model_->namespace_data(1).data();
  EXPECT_EQ(stored[0], 0);
  EXPECT_EQ(stored[64 * 512 - 1], 0);
  EXPECT_EQ(stored[64 * 512], 0);           // deallocated
  EXPECT_EQ(stored[96 * 512 - 1], 0);
  EXPECT_EQ(stored[96 * 512], 0x5A);        // untouched
  EXPECT_EQ(model_->stats().io_commands[spec::nvm_opcode::flush], 1u);
}

TEST_F(DriverTest, WriteZeroesSplitsAtNlb) {
  start();
  Completion zeroed;
  ASSERT_TRUE(io(spec::nvm_opcode::write_zeroes, 0, 100000, nullptr, 0, &zeroed));
  ASSERT_TRUE(wait(zeroed));
  EXPECT_TRUE(zeroed.status.is_success());
  EXPECT_EQ(model_->stats().io_commands[spec::nvm_opcode::write_zeroes], 2u);
}

TEST_F(DriverTest, BadRequestsAreRefusedAtSubmit) {
  start();
  uint8_t* buffer = dma_buffer(kPage);
  iovec iov{buffer, kPage};
  Completion never;
  EXPECT_EQ(io(spec::nvm_opcode::read, (uint64_t{64} << 20) / 512 - 4, 8, &iov, 1, &never).error().code,
            Errc::out_of_range);
  iovec short_iov{buffer, 1024};
  EXPECT_EQ(io(spec::nvm_opcode::read, 0, 8, &short_iov, 1, &never).error().code,
            Errc::invalid_argument);
  IoCommand command;
  command.opcode = spec::nvm_opcode::read;
  command.nsid = 9;
  command.block_count = 8;
  command.iov = &iov;
  command.iovcnt = 1;
  EXPECT_EQ(queue_->submit(command, record, &never).error().code, Errc::not_found);
  queue_->poll();
  EXPECT_EQ(never.calls, 0);
}

TEST_F(DriverTest, DeviceErrorsReachTheCallback) {
  start();
  uint8_t* buffer = dma_buffer(kPage);
  iovec iov{buffer, kPage};
  const spec::Status media = spec::make_status(spec::sct::media_data_integrity, 0x81);
  model_->fail_next(spec::nvm_opcode::read, media, 1);
  Completion failed;
  ASSERT_TRUE(io(spec::nvm_opcode::read, 0, 8, &iov, 1, &failed));
  ASSERT_TRUE(wait(failed));
  EXPECT_EQ(failed.status, media);
  EXPECT_EQ(queue_->stats().failed.load(), 1u);
}

TEST_F(DriverTest, FullQueueAnswersBusy) {
  ControllerOpts opts;
  opts.io_queue_entries = 8;  // 7 commands
  start({}, opts);
  model_->stall(spec::nvm_opcode::read, false, 100);
  uint8_t* buffer = dma_buffer(kPage);
  iovec iov{buffer, 512};
  Completion done[8];
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(io(spec::nvm_opcode::read, 0, 1, &iov, 1, &done[i]));
  EXPECT_EQ(io(spec::nvm_opcode::read, 0, 1, &iov, 1, &done[7]).error().code, Errc::busy);
  queue_->poll();
  model_->release_stalled();
  while (queue_->outstanding() > 0) queue_->poll();
  for (int i = 0; i < 7; ++i) EXPECT_EQ(done[i].calls, 1);
}

TEST_F(DriverTest, TimedOutCommandIsAborted) {
  ControllerOpts opts;
  opts.io_timeout_ms = 30;
  start({}, opts);
  model_->stall(spec::nvm_opcode::read, false, 1);
  uint8_t* buffer = dma_buffer(kPage);
  iovec iov{buffer, kPage};
  Completion done;
  ASSERT_TRUE(io(spec::nvm_opcode::read, 0, 8, &iov, 1, &done));
  ASSERT_TRUE(wait(done));
  EXPECT_EQ(done.status, spec::generic_status(spec::sc_generic::abort_requested));
  EXPECT_EQ(controller_->stats().aborts_sent, 1u);
  EXPECT_EQ(controller_->stats().resets, 0u);
  EXPECT_EQ(done.calls, 1);
}

TEST_F(DriverTest, AbortThatDoesNotHelpResetsAndRetriesOnce) {
  ControllerOpts opts;
  opts.io_timeout_ms = 30;
  opts.admin_timeout_ms = 50;
  start({}, opts);
  model_->stall(spec::nvm_opcode::write, false, 1);
  model_->stall(spec::admin_opcode::abort, true, 1);  // the Abort itself never answers
  uint8_t* buffer = dma_buffer(kPage);
  std::memset(buffer, 0x77, kPage);
  iovec iov{buffer, kPage};
  Completion done;
  ASSERT_TRUE(io(spec::nvm_opcode::write, 16, 8, &iov, 1, &done));
  ASSERT_TRUE(wait(done));
  EXPECT_TRUE(done.status.is_success()) << spec::status_name(done.status);
  EXPECT_EQ(done.calls, 1);
  EXPECT_EQ(controller_->stats().resets, 1u);
  EXPECT_EQ(queue_->stats().retried.load(), 1u);
  EXPECT_EQ(model_->namespace_data(1)[16 * 512], 0x77);
  // The queue works after the reset.
  write_read_check(buffer, dma_buffer(kPage), 24, kPage);
}

TEST_F(DriverTest, CommandRetriedOnceThenFailsWithAStatus) {
  ControllerOpts opts;
  start({}, opts);
  model_->stall(spec::nvm_opcode::read, false, 2);  // held before and after the first reset
  uint8_t* buffer = dma_buffer(kPage);
  iovec iov{buffer, kPage};
  Completion done;
  ASSERT_TRUE(io(spec::nvm_opcode::read, 0, 8, &iov, 1, &done));
  queue_->poll();
  // A reset from another thread while this one keeps polling, as a reactor would.
  auto reset_while_polling = [&] {
    std::atomic<bool> finished{false};
    std::thread resetter([&] {
      EXPECT_TRUE(controller_->reset());
      finished = true;
    });
    while (!finished) queue_->poll();
    resetter.join();
    queue_->poll();  // resubmits (or fails) what was outstanding
  };
  reset_while_polling();
  EXPECT_EQ(done.calls, 0);  // retried once, held again
  reset_while_polling();
  EXPECT_EQ(done.calls, 1);
  EXPECT_FALSE(done.status.is_success());
  EXPECT_EQ(queue_->stats().failed_after_reset.load(), 1u);
}

TEST_F(DriverTest, FatalStatusResetsAndOutstandingIoCompletes) {
  start();
  model_->stall(spec::nvm_opcode::write, false, 1);
  uint8_t* buffer = dma_buffer(kPage);
  std::memset(buffer, 0x42, kPage);
  iovec iov{buffer, kPage};
  Completion done;
  ASSERT_TRUE(io(spec::nvm_opcode::write, 40, 8, &iov, 1, &done));
  queue_->poll();
  model_->inject_fatal();
  ASSERT_TRUE(wait(done));
  EXPECT_TRUE(done.status.is_success());
  EXPECT_EQ(done.calls, 1);
  EXPECT_EQ(controller_->stats().resets, 1u);
  EXPECT_EQ(model_->namespace_data(1)[40 * 512], 0x42);
}

TEST_F(DriverTest, SurpriseRemovalFailsOutstandingAndNewIo) {
  start();
  bool removed_called = false;
  controller_->set_removed_callback([](void* ctx, Controller&) { *static_cast<bool*>(ctx) = true; },
                                    &removed_called);
  model_->stall(spec::nvm_opcode::read, false, 1);
  uint8_t* buffer = dma_buffer(kPage);
  iovec iov{buffer, kPage};
  Completion done;
  ASSERT_TRUE(io(spec::nvm_opcode::read, 0, 8, &iov, 1, &done));
  queue_->poll();
  model_->remove();
  ASSERT_TRUE(wait(done));
  EXPECT_FALSE(done.status.is_success());
  EXPECT_EQ(done.calls, 1);
  EXPECT_EQ(controller_->state(), ControllerState::removed);
  EXPECT_TRUE(removed_called);
  Completion never;
  EXPECT_EQ(io(spec::nvm_opcode::read, 0, 8, &iov, 1, &never).error().code, Errc::disconnected);
}

TEST_F(DriverTest, ShutdownWaitsForShstAndStopsIo) {
  ModelOpts model_opts;
  model_opts.shutdown_delay_reads = 3;
  start(model_opts);
  ASSERT_TRUE(controller_->shutdown());
  EXPECT_EQ(controller_->state(), ControllerState::shut_down);
  EXPECT_EQ(spec::csts_shst(model_->read32(spec::property_offset::csts)),
            spec::shutdown_status::complete);
  uint8_t* buffer = dma_buffer(kPage);
  iovec iov{buffer, kPage};
  Completion never;
  EXPECT_EQ(io(spec::nvm_opcode::read, 0, 8, &iov, 1, &never).error().code, Errc::disconnected);
}

TEST_F(DriverTest, DestroyingAQueueCompletesItsRequestsOnce) {
  start();
  model_->stall(spec::nvm_opcode::read, false, 3);
  uint8_t* buffer = dma_buffer(kPage);
  iovec iov{buffer, kPage};
  Completion done[3];
  for (Completion& completion : done) ASSERT_TRUE(io(spec::nvm_opcode::read, 0, 8, &iov, 1, &completion));
  queue_->poll();
  queue_.reset();
  for (const Completion& completion : done) {
    EXPECT_EQ(completion.calls, 1);
    EXPECT_FALSE(completion.status.is_success());
  }
}

TEST_F(DriverTest, NamespaceChangedNoticeReachesTheCallback) {
  start();
  std::atomic<int> notices{0};
  controller_->set_namespace_changed_callback(
      [](void* ctx, Controller&) { static_cast<std::atomic<int>*>(ctx)->fetch_add(1); }, &notices);
  model_->raise_namespace_changed(1);
  for (int i = 0; i < 2000 && notices.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(notices.load(), 1);
  EXPECT_GE(model_->stats().admin_commands[spec::admin_opcode::get_log_page], 1u);
}

}  // namespace
}  // namespace nvmf::nvme_pcie
