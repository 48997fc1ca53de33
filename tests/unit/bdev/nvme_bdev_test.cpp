// The nvme bdev over the userspace PCIe driver, on the register-level controller model: the
// geometry comes from Identify, every IoType reaches the namespace, data moves by DMA straight
// from DMA memory and bounces otherwise, namespaces share one controller, and every error path
// (options, opener, device status, hot removal, a channel destroyed mid-I/O) completes each
// I/O exactly once with the documented status.
#include "bdev/nvme_bdev.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "bdev/null_bdev.h"
#include "bdev_test_util.h"
#include "env/posix_memory.h"
#include "nvme_pcie/model/model_controller.h"
#include "spec/admin.h"
#include "spec/pcie.h"

namespace nvmf::bdev {
namespace {

using nvme_pcie::ControllerOpts;
using nvme_pcie::model::ModelController;
using nvme_pcie::model::ModelNamespace;
using nvme_pcie::model::ModelOpts;
using testing::AlignedBuffer;
using testing::Completions;
using testing::LogCapture;
using testing::make_io;
using testing::run_io;

constexpr uint32_t kPage = 4096;
constexpr const char* kPci = "model0";

ModelNamespace make_namespace(uint32_t nsid, uint32_t block_size_bytes, uint64_t block_count) {
  ModelNamespace ns;
  ns.nsid = nsid;
  ns.block_size_bytes = block_size_bytes;
  ns.block_count = block_count;
  return ns;
}

void fill_pattern(uint8_t* data, size_t bytes, uint8_t seed) {
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i * 13 + seed);
}

bool all_zero(const uint8_t* data, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) {
    if (data[i] != 0) return false;
  }
  return true;
}

// The model with one addition: namespaces can report a UUID in their Identify descriptor list
// (the model itself reports EUI64 and NGUID only). It watches the admin SQ tail doorbell: the
// model executes a command before write32() returns, so right after forwarding the doorbell
// the Identify data buffer holds the model's list and the driver has not looked at it yet.
class UuidReportingDevice final : public nvme_pcie::PciDevice {
 public:
  UuidReportingDevice(std::unique_ptr<ModelController> model, std::map<uint32_t, Uuid> uuids)
      : model_(std::move(model)), uuids_(std::move(uuids)) {}

  uint32_t read32(uint32_t offset) noexcept override { return model_->read32(offset); }
  uint64_t read64(uint32_t offset) noexcept override { return model_->read64(offset); }
  void write32(uint32_t offset, uint32_t value) noexcept override {
    if (offset == spec::pcie::reg::aqa) admin_entries_ = spec::pcie::aqa_sq_entries(value);
    if (offset == spec::property_offset::cc && (value & 1u) == 0) admin_tail_ = 0;  // CC.EN = 0
    if (offset != spec::pcie::sq_tail_doorbell(0, 4) || admin_sq_ == 0 || admin_entries_ == 0) {
      model_->write32(offset, value);
      return;
    }
    std::vector<spec::Sqe> identifies;
    for (uint32_t slot = admin_tail_; slot != value; slot = (slot + 1) % admin_entries_) {
      const auto* sqe = reinterpret_cast<const spec::Sqe*>(admin_sq_) + slot;
      if (sqe->opcode == spec::admin_opcode::identify &&
          (sqe->cdw10 & 0xFF) == spec::cns::namespace_id_descriptor_list) {
        identifies.push_back(*sqe);
      }
    }
    admin_tail_ = value;
    model_->write32(offset, value);
    for (const spec::Sqe& sqe : identifies) {
      auto found = uuids_.find(sqe.nsid);
      if (found == uuids_.end()) continue;
      auto* data = reinterpret_cast<uint8_t*>(spec::pcie::sqe_prp1(sqe));
      spec::NamespaceIdentifiers ids;
      if (!spec::decode_ns_id_descriptor_list(data, spec::identify_data_size, &ids)) continue;
      ids.has_uuid = true;
      std::memcpy(ids.uuid, found->second.data(), sizeof(ids.uuid));
      spec::encode_ns_id_descriptor_list(ids, data, spec::identify_data_size);
    }
  }
  void write64(uint32_t offset, uint64_t value) noexcept override {
    if (offset == spec::pcie::reg::asq) admin_sq_ = value;  // IOVA == address in the model
    model_->write64(offset, value);
  }
  const std::string& address() const noexcept override { return model_->address(); }
  env::MemoryBackend& dma_memory() noexcept override { return model_->dma_memory(); }
  uint64_t dma_address(const void* p, size_t length) const noexcept override {
    return model_->dma_address(p, length);
  }

 private:
  std::unique_ptr<ModelController> model_;
  std::map<uint32_t, Uuid> uuids_;
  uint64_t admin_sq_ = 0;
  uint32_t admin_entries_ = 0;
  uint32_t admin_tail_ = 0;
};

class NvmeBdevTest : public ::testing::Test {
 protected:
  // A pool whose opener makes one model per PCI address from `model_opts` (named after the
  // address), wrapped to report `uuids` when given.
  void make_pool(ModelOpts model_opts = {}, ControllerOpts controller_opts = {},
                 std::map<uint32_t, Uuid> uuids = {}) {
    controller_opts.health_check_interval_ms = 5;  // removal is noticed within milliseconds
    pool_ = std::make_unique<NvmeControllerPool>(
        [this, model_opts, uuids](const std::string& pci) -> NvmeControllerPool::DeviceResult {
          ++opens_;
          ModelOpts opts = model_opts;
          opts.name = pci;
          auto model = ModelController::create(opts);
          if (!model) return Unexpected(model.error());
          models_[pci] = model->get();
          if (uuids.empty()) return std::unique_ptr<nvme_pcie::PciDevice>(std::move(*model));
          return std::unique_ptr<nvme_pcie::PciDevice>(
              std::make_unique<UuidReportingDevice>(std::move(*model), uuids));
        },
        controller_opts);
  }

  // A bdev on namespace `nsid` of kPci (kept by the fixture); asserts it was created.
  Bdev* add_bdev(uint32_t nsid, const Clock* clock = &TscClock::instance(),
                 uint32_t queue_depth_max = 128) {
    NvmeBdevOpts opts;
    opts.name = "Nvme0n" + std::to_string(nsid) + "_" + std::to_string(bdevs_.size());
    opts.pci = kPci;
    opts.nsid = nsid;
    opts.queue_depth_max = queue_depth_max;
    opts.clock = clock;
    auto created = create_nvme_bdev(opts, *pool_);
    EXPECT_TRUE(created) << (created ? "" : created.error().detail);
    if (!created) return nullptr;
    bdevs_.push_back(std::move(*created));
    return bdevs_.back().get();
  }

  IoChannel* add_channel(Bdev& bdev) {
    auto made = bdev.create_channel();
    EXPECT_TRUE(made) << (made ? "" : made.error().detail);
    if (!made) return nullptr;
    channels_.push_back(std::move(*made));
    return channels_.back().get();
  }

  ModelController& model() { return *models_.at(kPci); }

  // Page-aligned memory the device reaches (the model's own DMA memory): the zero-copy path.
  uint8_t* dma_buffer(size_t bytes, uint8_t fill = 0) {
    auto region = model().dma_memory().allocate(bytes, kPage);
    EXPECT_TRUE(region);
    if (!region) return nullptr;
    auto* data = static_cast<uint8_t*>(region->addr());
    std::memset(data, fill, bytes);
    buffers_.push_back(std::move(*region));
    return data;
  }

  void TearDown() override {
    // Channels before bdevs, and every region before the model whose memory it is.
    channels_.clear();
    bdevs_.clear();
    buffers_.clear();
    pool_.reset();
    shared_memory_.reset();
  }

  // Declared in creation order: destroyed in reverse even if TearDown did not run.
  std::unique_ptr<env::PosixMemoryBackend> shared_memory_;  // must outlive the model
  std::map<std::string, ModelController*> models_;          // owned by the controllers
  int opens_ = 0;
  std::unique_ptr<NvmeControllerPool> pool_;
  std::vector<env::DmaRegion> buffers_;
  std::vector<std::unique_ptr<Bdev>> bdevs_;
  std::vector<std::unique_ptr<IoChannel>> channels_;
};

// ---- geometry ----

TEST_F(NvmeBdevTest, GeometryComesFromIdentifyNamespace) {
  ModelOpts model_opts;
  ModelNamespace small = make_namespace(1, 512, 12345);
  small.nguid = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
                 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x01};
  small.eui64 = {0xe1, 0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8};
  model_opts.namespaces = {small, make_namespace(2, 4096, 777)};
  make_pool(model_opts);
  Bdev* bdev512 = add_bdev(1);
  Bdev* bdev4k = add_bdev(2);
  ASSERT_TRUE(bdev512 && bdev4k);

  EXPECT_STREQ(bdev512->backend_name(), "nvme");
  EXPECT_EQ(bdev512->block_size_bytes(), 512u);
  EXPECT_EQ(bdev512->block_count(), 12345u);
  EXPECT_EQ(bdev512->size_bytes(), 12345u * 512u);
  EXPECT_EQ(bdev512->nguid(), small.nguid);
  EXPECT_EQ(bdev512->eui64(), small.eui64);
  EXPECT_EQ(bdev512->supported_io_types(), kAllIoTypes);
  EXPECT_EQ(bdev512->buffer_alignment_bytes(), 4u);  // PRP entries are dword-aligned

  EXPECT_EQ(bdev4k->block_size_bytes(), 4096u);
  EXPECT_EQ(bdev4k->block_count(), 777u);
  EXPECT_EQ(bdev4k->nguid(), (std::array<uint8_t, 16>{}));  // the device reports none
  EXPECT_EQ(bdev4k->eui64(), (std::array<uint8_t, 8>{}));

  // The model reports no UUID: each bdev gets a generated one of its own.
  EXPECT_FALSE(uuid_is_null(bdev512->uuid()));
  EXPECT_FALSE(uuid_is_null(bdev4k->uuid()));
  EXPECT_NE(bdev512->uuid(), bdev4k->uuid());
}

TEST_F(NvmeBdevTest, UuidComesFromTheDescriptorListWhenReported) {
  ModelOpts model_opts;
  model_opts.namespaces = {make_namespace(1, 512, 2048), make_namespace(2, 512, 2048)};
  const Uuid reported = {0x5e, 0x1f, 0x00, 0x42, 0x9a, 0x3b, 0x4c, 0x8d,
                         0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6, 0x07, 0x18};
  make_pool(model_opts, {}, {{1, reported}});  // namespace 2 reports none
  Bdev* with_uuid = add_bdev(1);
  Bdev* without = add_bdev(2);
  ASSERT_TRUE(with_uuid && without);
  EXPECT_EQ(with_uuid->uuid(), reported);
  EXPECT_FALSE(uuid_is_null(without->uuid()));
  EXPECT_NE(without->uuid(), reported);
}

TEST_F(NvmeBdevTest, FourKibNamespaceMovesWholeBlocks) {
  ModelOpts model_opts;
  model_opts.namespaces = {make_namespace(1, 4096, 256)};
  make_pool(model_opts);
  Bdev* bdev = add_bdev(1);
  ASSERT_TRUE(bdev);
  IoChannel* channel = add_channel(*bdev);
  ASSERT_TRUE(channel);
  uint8_t* source = dma_buffer(3 * 4096);
  uint8_t* sink = dma_buffer(3 * 4096, 0xee);
  fill_pattern(source, 3 * 4096, 9);
  iovec out{source, 3 * 4096};
  BdevIo write = make_io(IoType::write, 200, 3, &out, 1, nullptr);
  ASSERT_EQ(run_io(*channel, write), IoStatus::success);
  EXPECT_EQ(std::memcmp(model().namespace_data(1).data() + 200 * 4096, source, 3 * 4096), 0);
  iovec in{sink, 3 * 4096};
  BdevIo read = make_io(IoType::read, 200, 3, &in, 1, nullptr);
  ASSERT_EQ(run_io(*channel, read), IoStatus::success);
  EXPECT_EQ(std::memcmp(sink, source, 3 * 4096), 0);
  // Half a block is not an I/O of this bdev.
  iovec half{sink, 2048};
  BdevIo partial = make_io(IoType::read, 0, 1, &half, 1, nullptr);
  EXPECT_EQ(channel->submit(partial).error().code, Errc::invalid_argument);
  BdevIo beyond = make_io(IoType::read, 256, 1, &in, 1, nullptr);
  in.iov_len = 4096;
  EXPECT_EQ(channel->submit(beyond).error().code, Errc::out_of_range);
}

TEST_F(NvmeBdevTest, QueueDepthIsCappedByTheControllersQueue) {
  ControllerOpts controller_opts;
  controller_opts.io_queue_entries = 8;  // 7 commands
  make_pool({}, controller_opts);
  Bdev* capped = add_bdev(1, &TscClock::instance(), 128);
  Bdev* asked = add_bdev(1, &TscClock::instance(), 4);
  ASSERT_TRUE(capped && asked);
  EXPECT_EQ(capped->queue_depth_max(), 7u);
  EXPECT_EQ(asked->queue_depth_max(), 4u);

  // The capped depth is real: 7 writes are accepted, the 8th is busy, and all 7 complete.
  IoChannel* channel = add_channel(*capped);
  ASSERT_TRUE(channel);
  EXPECT_EQ(channel->queue_depth_max(), 7u);
  uint8_t* data = dma_buffer(8 * 512, 0x5a);
  Completions completions;
  std::vector<BdevIo> ios(8);
  std::vector<iovec> iovs(8);
  for (unsigned i = 0; i < 8; ++i) {
    iovs[i] = {data + i * 512, 512};
    ios[i] = make_io(IoType::write, i, 1, &iovs[i], 1, &completions);
  }
  for (unsigned i = 0; i < 7; ++i) ASSERT_TRUE(channel->submit(ios[i])) << i;
  EXPECT_EQ(channel->submit(ios[7]).error().code, Errc::busy);
  ASSERT_TRUE(testing::poll_until(*channel, [&] { return completions.calls == 7; }));
  for (IoStatus status : completions.statuses) EXPECT_EQ(status, IoStatus::success);
}

TEST_F(NvmeBdevTest, QueueDepthIsCappedByCapMqes) {
  ModelOpts model_opts;
  model_opts.mqes = 15;  // 16 entries per queue at most: 15 commands
  make_pool(model_opts);
  Bdev* bdev = add_bdev(1);
  ASSERT_TRUE(bdev);
  EXPECT_EQ(bdev->queue_depth_max(), 15u);
}

// ---- I/O ----

TEST_F(NvmeBdevTest, EveryIoTypeReachesTheNamespaceWithoutCopies) {
  make_pool();
  Bdev* bdev = add_bdev(1);
  ASSERT_TRUE(bdev);
  IoChannel* channel = add_channel(*bdev);
  ASSERT_TRUE(channel);
  const std::span<uint8_t> ns = model().namespace_data(1);
  constexpr uint64_t kLba = 100;
  constexpr uint64_t kBlocks = 16;
  constexpr size_t kBytes = kBlocks * 512;

  // Write from three segments PRPs can express: the first ends on a page boundary, the
  // middle one is a whole page, the last starts on one.
  uint8_t* source = dma_buffer(3 * kPage);
  fill_pattern(source, 3 * kPage, 1);
  iovec out[3] = {{source + 512, kPage - 512}, {source + kPage, kPage}, {source + 2 * kPage, 512}};
  BdevIo write = make_io(IoType::write, kLba, kBlocks, out, 3, nullptr);
  ASSERT_EQ(run_io(*channel, write), IoStatus::success);
  EXPECT_EQ(std::memcmp(ns.data() + kLba * 512, source + 512, kBytes), 0);
  EXPECT_TRUE(all_zero(ns.data() + (kLba - 1) * 512, 512));  // neighbours untouched
  EXPECT_TRUE(all_zero(ns.data() + (kLba + kBlocks) * 512, 512));

  uint8_t* sink = dma_buffer(kBytes, 0xee);
  iovec in{sink, kBytes};
  BdevIo read = make_io(IoType::read, kLba, kBlocks, &in, 1, nullptr);
  ASSERT_EQ(run_io(*channel, read), IoStatus::success);
  EXPECT_EQ(std::memcmp(sink, source + 512, kBytes), 0);

  BdevIo flush = make_io(IoType::flush, 0, 0, nullptr, 0, nullptr);
  ASSERT_EQ(run_io(*channel, flush), IoStatus::success);
  EXPECT_EQ(model().stats().io_commands[spec::nvm_opcode::flush], 1u);

  BdevIo zeroes = make_io(IoType::write_zeroes, kLba + 2, 3, nullptr, 0, nullptr);
  ASSERT_EQ(run_io(*channel, zeroes), IoStatus::success);
  BdevIo unmap = make_io(IoType::unmap, kLba + 10, 4, nullptr, 0, nullptr);
  ASSERT_EQ(run_io(*channel, unmap), IoStatus::success);
  EXPECT_EQ(model().stats().io_commands[spec::nvm_opcode::write_zeroes], 1u);
  EXPECT_EQ(model().stats().io_commands[spec::nvm_opcode::dataset_management], 1u);

  // Both ranges read back as zeroes, the rest as written.
  std::memset(sink, 0xee, kBytes);
  ASSERT_EQ(run_io(*channel, read), IoStatus::success);
  for (uint64_t block = 0; block < kBlocks; ++block) {
    const bool zeroed = (block >= 2 && block < 5) || (block >= 10 && block < 14);
    if (zeroed) {
      EXPECT_TRUE(all_zero(sink + block * 512, 512)) << "block " << block;
      EXPECT_TRUE(all_zero(ns.data() + (kLba + block) * 512, 512)) << "block " << block;
    } else {
      EXPECT_EQ(std::memcmp(sink + block * 512, source + 512 + block * 512, 512), 0)
          << "block " << block;
    }
  }

  EXPECT_EQ(nvme_bdev_bytes_copied(*bdev), 0u);  // every byte went by DMA
  const IoStats stats = bdev->stats();
  EXPECT_EQ(stats.ops_of(IoType::read), 2u);
  EXPECT_EQ(stats.ops_of(IoType::write), 1u);
  EXPECT_EQ(stats.ops_of(IoType::flush), 1u);
  EXPECT_EQ(stats.ops_of(IoType::write_zeroes), 1u);
  EXPECT_EQ(stats.ops_of(IoType::unmap), 1u);
  EXPECT_EQ(stats.bytes_of(IoType::read), 2 * kBytes);
  EXPECT_EQ(stats.bytes_of(IoType::write_zeroes), 3u * 512u);
  EXPECT_EQ(stats.bytes_of(IoType::unmap), 4u * 512u);
  EXPECT_EQ(stats.errors, 0u);
}

TEST_F(NvmeBdevTest, TransfersAboveMdtsAreSplit) {
  make_pool();  // MDTS 5: 128 KiB per command
  Bdev* bdev = add_bdev(1);
  ASSERT_TRUE(bdev);
  IoChannel* channel = add_channel(*bdev);
  ASSERT_TRUE(channel);
  constexpr size_t kBytes = 256 * 1024 + 4096;  // two full commands and a bit
  uint8_t* source = dma_buffer(kBytes);
  uint8_t* sink = dma_buffer(kBytes, 0xee);
  fill_pattern(source, kBytes, 3);
  iovec out{source, kBytes};
  BdevIo write = make_io(IoType::write, 8, kBytes / 512, &out, 1, nullptr);
  ASSERT_EQ(run_io(*channel, write), IoStatus::success);
  EXPECT_EQ(model().stats().io_commands[spec::nvm_opcode::write], 3u);
  iovec in{sink, kBytes};
  BdevIo read = make_io(IoType::read, 8, kBytes / 512, &in, 1, nullptr);
  ASSERT_EQ(run_io(*channel, read), IoStatus::success);
  EXPECT_EQ(model().stats().io_commands[spec::nvm_opcode::read], 3u);
  EXPECT_EQ(std::memcmp(sink, source, kBytes), 0);
  EXPECT_EQ(std::memcmp(model().namespace_data(1).data() + 8 * 512, source, kBytes), 0);
  EXPECT_EQ(nvme_bdev_bytes_copied(*bdev), 0u);
  EXPECT_EQ(bdev->stats().ops_of(IoType::write), 1u);  // one bdev I/O however many commands
}

TEST_F(NvmeBdevTest, HeapBuffersBounceAndStillCarryTheData) {
  make_pool();
  Bdev* bdev = add_bdev(1);
  ASSERT_TRUE(bdev);
  IoChannel* channel = add_channel(*bdev);
  ASSERT_TRUE(channel);
  constexpr size_t kBytes = 8192;
  AlignedBuffer source(kBytes);  // heap memory: the device cannot reach it
  fill_pattern(source.data(), kBytes, 5);
  iovec out = source.iov();
  BdevIo write = make_io(IoType::write, 40, kBytes / 512, &out, 1, nullptr);
  ASSERT_EQ(run_io(*channel, write), IoStatus::success);
  EXPECT_EQ(std::memcmp(model().namespace_data(1).data() + 40 * 512, source.data(), kBytes), 0);
  EXPECT_EQ(nvme_bdev_bytes_copied(*bdev), kBytes);

  AlignedBuffer sink(kBytes, 0xee);
  iovec in[2] = {sink.iov(0, 1000), sink.iov(1000, kBytes - 1000)};
  BdevIo read = make_io(IoType::read, 40, kBytes / 512, in, 2, nullptr);
  ASSERT_EQ(run_io(*channel, read), IoStatus::success);
  EXPECT_EQ(std::memcmp(sink.data(), source.data(), kBytes), 0);
  EXPECT_EQ(nvme_bdev_bytes_copied(*bdev), 2 * kBytes);
}

TEST_F(NvmeBdevTest, DmaMemoryWithBoundariesPrpsCannotExpressBounces) {
  make_pool();
  Bdev* bdev = add_bdev(1);
  ASSERT_TRUE(bdev);
  IoChannel* channel = add_channel(*bdev);
  ASSERT_TRUE(channel);
  uint8_t* source = dma_buffer(2 * kPage);
  fill_pattern(source, 2 * kPage, 7);
  // The first segment ends in the middle of a page: PRPs cannot join it to the second, and
  // the model offers no SGLs (ModelOpts::sgl_supported is false by default).
  iovec out[2] = {{source, 512}, {source + kPage, 512}};
  BdevIo write = make_io(IoType::write, 0, 2, out, 2, nullptr);
  ASSERT_EQ(run_io(*channel, write), IoStatus::success);
  const uint8_t* ns = model().namespace_data(1).data();
  EXPECT_EQ(std::memcmp(ns, source, 512), 0);
  EXPECT_EQ(std::memcmp(ns + 512, source + kPage, 512), 0);
  EXPECT_EQ(nvme_bdev_bytes_copied(*bdev), 1024u);
}

TEST_F(NvmeBdevTest, SharedDmaMemoryIsZeroCopyToo) {
  // As nvmf_perf --sim does: the target's buffers live in another backend the device reaches.
  auto shared = env::PosixMemoryBackend::create(env::PosixMemoryOpts{});
  ASSERT_TRUE(shared);
  shared_memory_ = std::move(*shared);
  ModelOpts model_opts;
  model_opts.shared_dma_memory = shared_memory_.get();
  make_pool(model_opts);
  Bdev* bdev = add_bdev(1);
  ASSERT_TRUE(bdev);
  IoChannel* channel = add_channel(*bdev);
  ASSERT_TRUE(channel);
  auto region = shared_memory_->allocate(2 * kPage, kPage);
  ASSERT_TRUE(region);
  auto* data = static_cast<uint8_t*>(region->addr());
  buffers_.push_back(std::move(*region));
  fill_pattern(data, kPage, 11);
  iovec out{data, kPage};
  BdevIo write = make_io(IoType::write, 16, 8, &out, 1, nullptr);
  ASSERT_EQ(run_io(*channel, write), IoStatus::success);
  iovec in{data + kPage, kPage};
  BdevIo read = make_io(IoType::read, 16, 8, &in, 1, nullptr);
  ASSERT_EQ(run_io(*channel, read), IoStatus::success);
  EXPECT_EQ(std::memcmp(data + kPage, data, kPage), 0);
  EXPECT_EQ(nvme_bdev_bytes_copied(*bdev), 0u);
}

// ---- sharing ----

TEST_F(NvmeBdevTest, NamespacesShareOneControllerAcrossThreads) {
  ModelOpts model_opts;
  model_opts.namespaces = {make_namespace(1, 512, 4096), make_namespace(2, 512, 4096)};
  make_pool(model_opts);
  Bdev* first = add_bdev(1);
  Bdev* second = add_bdev(2);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(opens_, 1);
  EXPECT_EQ(pool_->size(), 1u);

  constexpr unsigned kWrites = 64;  // 4 KiB each, 8 at a time
  constexpr unsigned kDepth = 8;
  // Allocated here: the fixture's buffer list is not for threads.
  uint8_t* memory[2] = {dma_buffer(kWrites * kPage), dma_buffer(kWrites * kPage)};
  std::atomic<int> started{0};
  auto worker = [&](Bdev* bdev, uint8_t* data, uint8_t seed, bool* ok) {
    auto channel = bdev->create_channel();
    if (!channel) return;
    fill_pattern(data, kWrites * kPage, seed);
    // Both channels exist before either thread submits: two queues busy at once.
    started.fetch_add(1);
    while (started.load() < 2) std::this_thread::yield();
    std::vector<BdevIo> ios(kDepth);
    std::vector<iovec> iovs(kDepth);
    unsigned completed = 0;
    for (unsigned i = 0; i < kWrites; i += kDepth) {
      Completions completions;
      for (unsigned j = 0; j < kDepth; ++j) {
        iovs[j] = {data + (i + j) * kPage, kPage};
        ios[j] = make_io(IoType::write, (i + j) * 8, 8, &iovs[j], 1, &completions);
        if (!(*channel)->submit(ios[j])) return;
      }
      if (!testing::poll_until(**channel, [&] { return completions.calls == int{kDepth}; })) return;
      for (IoStatus status : completions.statuses) {
        if (status != IoStatus::success) return;
      }
      completed += kDepth;
    }
    *ok = completed == kWrites;
  };
  bool ok[2] = {false, false};
  std::thread a(worker, first, memory[0], uint8_t{0xa1}, &ok[0]);
  std::thread b(worker, second, memory[1], uint8_t{0xb2}, &ok[1]);
  a.join();
  b.join();
  EXPECT_TRUE(ok[0]);
  EXPECT_TRUE(ok[1]);
  EXPECT_EQ(std::memcmp(model().namespace_data(1).data(), memory[0], kWrites * kPage), 0);
  EXPECT_EQ(std::memcmp(model().namespace_data(2).data(), memory[1], kWrites * kPage), 0);
  EXPECT_EQ(first->stats().ops_of(IoType::write), kWrites);
  EXPECT_EQ(second->stats().ops_of(IoType::write), kWrites);
  EXPECT_EQ(first->channel_count(), 0u);
  EXPECT_EQ(nvme_bdev_bytes_copied(*first) + nvme_bdev_bytes_copied(*second), 0u);
  EXPECT_EQ(opens_, 1);
  EXPECT_EQ(pool_->size(), 1u);
}

TEST_F(NvmeBdevTest, EachPciAddressIsItsOwnController) {
  make_pool();
  NvmeBdevOpts opts;
  opts.name = "other";
  opts.pci = "model1";
  auto other = create_nvme_bdev(opts, *pool_);
  ASSERT_TRUE(other);
  bdevs_.push_back(std::move(*other));
  ASSERT_TRUE(add_bdev(1));
  EXPECT_EQ(opens_, 2);
  EXPECT_EQ(pool_->size(), 2u);
}

// ---- errors ----

TEST_F(NvmeBdevTest, BadOptionsAreRefused) {
  ModelOpts model_opts;
  ModelNamespace detached = make_namespace(2, 512, 1024);
  detached.active = false;
  model_opts.namespaces = {make_namespace(1, 512, 1024), detached};
  make_pool(model_opts);
  LogCapture log;
  auto attempt = [&](NvmeBdevOpts opts) { return create_nvme_bdev(opts, *pool_); };

  auto no_pci = attempt({.name = "a", .pci = ""});
  ASSERT_FALSE(no_pci);
  EXPECT_EQ(no_pci.error().code, Errc::invalid_argument);
  EXPECT_STREQ(no_pci.error().detail, "pci");
  EXPECT_EQ(opens_, 0);  // refused before anything was opened

  auto nsid_zero = attempt({.name = "a", .pci = kPci, .nsid = 0});
  ASSERT_FALSE(nsid_zero);
  EXPECT_EQ(nsid_zero.error().code, Errc::invalid_argument);
  EXPECT_STREQ(nsid_zero.error().detail, "nsid");
  auto nsid_all = attempt({.name = "a", .pci = kPci, .nsid = spec::nsid_all});
  ASSERT_FALSE(nsid_all);
  EXPECT_EQ(nsid_all.error().code, Errc::invalid_argument);

  auto no_name = attempt({.name = "", .pci = kPci});
  ASSERT_FALSE(no_name);
  EXPECT_EQ(no_name.error().code, Errc::invalid_argument);
  EXPECT_STREQ(no_name.error().detail, "name");
  auto no_depth = attempt({.name = "a", .pci = kPci, .queue_depth_max = 0});
  ASSERT_FALSE(no_depth);
  EXPECT_STREQ(no_depth.error().detail, "queue_depth_max");
  EXPECT_EQ(opens_, 0);

  auto missing = attempt({.name = "a", .pci = kPci, .nsid = 9});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, Errc::not_found);
  EXPECT_TRUE(log.contains("no active namespace 9"));
  auto inactive = attempt({.name = "a", .pci = kPci, .nsid = 2});  // configured, not attached
  ASSERT_FALSE(inactive);
  EXPECT_EQ(inactive.error().code, Errc::not_found);
  // The controller stays attached for the namespaces that do exist.
  EXPECT_EQ(opens_, 1);
  EXPECT_EQ(pool_->size(), 1u);
  EXPECT_TRUE(add_bdev(1));
  EXPECT_EQ(opens_, 1);
}

TEST(NvmeBdevPoolTest, OpenerFailurePropagates) {
  LogCapture log;
  int opens = 0;
  NvmeControllerPool pool(
      [&opens](const std::string&) -> NvmeControllerPool::DeviceResult {
        ++opens;
        return Unexpected(Errc::not_found, "no such PCI function");
      },
      ControllerOpts{});
  auto created = create_nvme_bdev({.name = "n", .pci = "0000:00:04.0"}, pool);
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code, Errc::not_found);
  EXPECT_STREQ(created.error().detail, "no such PCI function");
  EXPECT_TRUE(log.contains("cannot attach 0000:00:04.0"));
  EXPECT_EQ(pool.size(), 0u);
  // A failure is not remembered: the next attempt opens again.
  EXPECT_FALSE(create_nvme_bdev({.name = "n", .pci = "0000:00:04.0"}, pool));
  EXPECT_EQ(opens, 2);
}

TEST(NvmeBdevPoolTest, NoOpenerIsNotSupported) {
  LogCapture log;
  NvmeControllerPool pool(nullptr, ControllerOpts{});
  auto created = create_nvme_bdev({.name = "n", .pci = "0000:00:04.0"}, pool);
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code, Errc::not_supported);
}

TEST(NvmeBdevPoolTest, ControllerBringUpFailurePropagates) {
  LogCapture log;
  NvmeControllerPool pool(
      [](const std::string&) -> NvmeControllerPool::DeviceResult {
        ModelOpts opts;
        opts.mpsmin = 1;  // 8 KiB pages at the least: the driver only does 4 KiB
        opts.mpsmax = 1;
        auto model = ModelController::create(opts);
        if (!model) return Unexpected(model.error());
        return std::unique_ptr<nvme_pcie::PciDevice>(std::move(*model));
      },
      ControllerOpts{});
  auto created = create_nvme_bdev({.name = "n", .pci = "m"}, pool);
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code, Errc::not_supported);
  EXPECT_EQ(pool.size(), 0u);
}

TEST_F(NvmeBdevTest, DeviceErrorsCompleteAsIoError) {
  make_pool();
  Bdev* bdev = add_bdev(1);
  ASSERT_TRUE(bdev);
  IoChannel* channel = add_channel(*bdev);
  ASSERT_TRUE(channel);
  uint8_t* data = dma_buffer(kPage, 0x77);
  iovec iov{data, kPage};

  // Unrecovered Read Error, then Write Fault: each fails its one I/O.
  model().fail_next(spec::nvm_opcode::read, spec::make_status(spec::sct::media_data_integrity, 0x81), 1);
  BdevIo read = make_io(IoType::read, 0, 8, &iov, 1, nullptr);
  EXPECT_EQ(run_io(*channel, read), IoStatus::io_error);
  EXPECT_EQ(read.os_errno, EIO);
  model().fail_next(spec::nvm_opcode::write, spec::make_status(spec::sct::media_data_integrity, 0x80), 1);
  BdevIo write = make_io(IoType::write, 0, 8, &iov, 1, nullptr);
  EXPECT_EQ(run_io(*channel, write), IoStatus::io_error);
  EXPECT_EQ(write.os_errno, EIO);
  EXPECT_TRUE(all_zero(model().namespace_data(1).data(), kPage));  // the write never executed

  // The next ones succeed.
  EXPECT_EQ(run_io(*channel, write), IoStatus::success);
  EXPECT_EQ(run_io(*channel, read), IoStatus::success);
  EXPECT_EQ(read.os_errno, 0);
  const IoStats stats = bdev->stats();
  EXPECT_EQ(stats.errors, 2u);
  EXPECT_EQ(stats.ops_of(IoType::read), 1u);
  EXPECT_EQ(stats.ops_of(IoType::write), 1u);
  EXPECT_EQ(stats.completions(), 4u);
}

struct RemovedCalls {
  std::atomic<int> calls{0};
  std::atomic<Bdev*> bdev{nullptr};
};

void record_removed(void* ctx, Bdev& bdev) {
  auto* removed = static_cast<RemovedCalls*>(ctx);
  removed->bdev.store(&bdev);
  removed->calls.fetch_add(1);
}

TEST_F(NvmeBdevTest, RemovalFailsIoAndTellsEveryBdevOnce) {
  LogCapture log;
  ModelOpts model_opts;
  model_opts.namespaces = {make_namespace(1, 512, 1024), make_namespace(2, 512, 1024)};
  make_pool(model_opts);
  Bdev* first = add_bdev(1);
  Bdev* second = add_bdev(2);
  ASSERT_TRUE(first && second);
  RemovedCalls removed[2];
  first->set_removed_callback(record_removed, &removed[0]);
  second->set_removed_callback(record_removed, &removed[1]);
  IoChannel* channel = add_channel(*first);
  ASSERT_TRUE(channel);
  uint8_t* data = dma_buffer(kPage);
  iovec iov{data, kPage};

  // A read the device holds when it goes away.
  model().stall(spec::nvm_opcode::read, false, 1);
  Completions held;
  BdevIo read = make_io(IoType::read, 0, 8, &iov, 1, &held);
  ASSERT_TRUE(channel->submit(read));
  channel->poll();  // rings the doorbell
  ASSERT_EQ(model().stalled_count(), 1u);
  EXPECT_FALSE(first->removed());

  model().remove();
  ASSERT_TRUE(testing::poll_until(*channel, [&] {
    return held.calls == 1 && removed[0].calls.load() == 1 && removed[1].calls.load() == 1;
  }));
  EXPECT_EQ(read.status, IoStatus::io_error);
  EXPECT_EQ(read.os_errno, ENODEV);
  EXPECT_TRUE(first->removed());
  EXPECT_TRUE(second->removed());
  EXPECT_EQ(removed[0].bdev.load(), first);
  EXPECT_EQ(removed[1].bdev.load(), second);

  // A new I/O is accepted and fails at the next poll, never inside submit().
  Completions refused;
  BdevIo write = make_io(IoType::write, 0, 8, &iov, 1, &refused);
  ASSERT_TRUE(channel->submit(write));
  EXPECT_EQ(refused.calls, 0);
  EXPECT_EQ(channel->outstanding(), 1u);
  EXPECT_EQ(channel->poll(), 1u);
  ASSERT_EQ(refused.calls, 1);
  EXPECT_EQ(write.status, IoStatus::io_error);
  EXPECT_EQ(write.os_errno, ENODEV);
  EXPECT_EQ(channel->outstanding(), 0u);
  BdevIo flush = make_io(IoType::flush, 0, 0, nullptr, 0, &refused);
  ASSERT_TRUE(channel->submit(flush));
  EXPECT_EQ(channel->poll(), 1u);
  EXPECT_EQ(flush.status, IoStatus::io_error);

  // No new channel on a gone controller.
  auto late = second->create_channel();
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, Errc::bad_state);

  // Many health checks later, still exactly one notice each.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(removed[0].calls.load(), 1);
  EXPECT_EQ(removed[1].calls.load(), 1);
  EXPECT_EQ(first->stats().errors, 3u);
}

TEST_F(NvmeBdevTest, IoRefusedByARemovedControllerCompletesWhenTheChannelGoes) {
  LogCapture log;
  make_pool();
  Bdev* bdev = add_bdev(1);
  ASSERT_TRUE(bdev);
  RemovedCalls removed;
  bdev->set_removed_callback(record_removed, &removed);
  auto channel = bdev->create_channel();
  ASSERT_TRUE(channel);
  model().remove();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (removed.calls.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(removed.calls.load(), 1);
  uint8_t* data = dma_buffer(kPage);
  iovec iov{data, kPage};
  Completions completions;
  BdevIo read = make_io(IoType::read, 0, 8, &iov, 1, &completions);
  ASSERT_TRUE((*channel)->submit(read));
  channel->reset();  // before any poll: completed from the destructor, once
  EXPECT_EQ(completions.calls, 1);
  EXPECT_NE(read.status, IoStatus::pending);
  EXPECT_NE(read.status, IoStatus::success);
  EXPECT_EQ(bdev->stats().errors, 1u);
}

// ---- a channel destroyed with I/O outstanding ----

struct AbortRecord {
  int calls = 0;
  IoStatus status = IoStatus::pending;
  int os_errno = -1;
};

void record_abort(BdevIo& io, void* ctx) {
  auto* record = static_cast<AbortRecord*>(ctx);
  ++record->calls;
  record->status = io.status;
  record->os_errno = io.os_errno;
}

TEST_F(NvmeBdevTest, DestroyedChannelAbortsEachOutstandingIoOnce) {
  make_pool();
  Bdev* bdev = add_bdev(1);
  ASSERT_TRUE(bdev);
  auto channel = bdev->create_channel();
  ASSERT_TRUE(channel);
  uint8_t* data = dma_buffer(3 * kPage, 0xee);
  fill_pattern(data + 2 * kPage, kPage, 4);
  model().stall(spec::nvm_opcode::read, false, 2);
  model().stall(spec::nvm_opcode::write, false, 1);
  iovec iovs[3] = {{data, kPage}, {data + kPage, kPage}, {data + 2 * kPage, kPage}};
  BdevIo ios[3];
  AbortRecord records[3];
  for (int i = 0; i < 3; ++i) {
    ios[i] = make_io(i < 2 ? IoType::read : IoType::write, uint64_t(i) * 8, 8, &iovs[i], 1, nullptr);
    ios[i].done = record_abort;
    ios[i].done_ctx = &records[i];
    ASSERT_TRUE((*channel)->submit(ios[i]));
  }
  (*channel)->poll();
  ASSERT_EQ(model().stalled_count(), 3u);
  EXPECT_EQ((*channel)->outstanding(), 3u);

  channel->reset();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(records[i].calls, 1) << i;
    EXPECT_EQ(records[i].status, IoStatus::aborted) << i;
    EXPECT_EQ(records[i].os_errno, 0) << i;  // as every backend: errno is for io_error
  }
  EXPECT_EQ(bdev->channel_count(), 0u);
  EXPECT_EQ(bdev->stats().errors, 3u);
  // The held commands went with their queue; the write never reached the namespace.
  EXPECT_EQ(model().stalled_count(), 0u);
  EXPECT_EQ(model().release_stalled(), 0u);
  EXPECT_TRUE(all_zero(model().namespace_data(1).data(), 3 * 8 * 512));

  // The controller is fine: a new channel works (same queue ID again).
  IoChannel* next = add_channel(*bdev);
  ASSERT_TRUE(next);
  BdevIo write = make_io(IoType::write, 16, 8, &iovs[2], 1, nullptr);
  EXPECT_EQ(run_io(*next, write), IoStatus::success);
  EXPECT_EQ(std::memcmp(model().namespace_data(1).data() + 16 * 512, data + 2 * kPage, kPage), 0);
}

// bdev.h: destroying a channel "waits until the backend has released their buffers, then
// completes each with IoStatus::aborted". The device holds a buffer until its SQ is deleted
// (Delete I/O SQ completes only after the controller is done with the SQ's commands), so the
// callback must run after that. IoQueue::~IoQueue fails the requests first and deletes the
// queue afterwards: a real device may still DMA into a read buffer the caller has reused.
// Disabled until the driver deletes the device queue before failing its requests.
struct DeleteSeen {
  ModelController* model = nullptr;
  uint64_t delete_sq_before_callback = ~uint64_t{0};
};
void record_delete_count(BdevIo&, void* ctx) {
  auto* seen = static_cast<DeleteSeen*>(ctx);
  seen->delete_sq_before_callback =
      seen->model->stats().admin_commands[spec::admin_opcode::delete_io_sq];
}

TEST_F(NvmeBdevTest, AbortedOnlyAfterTheDeviceLetGoOfTheBuffer) {
  make_pool();
  Bdev* bdev = add_bdev(1);
  ASSERT_TRUE(bdev);
  auto channel = bdev->create_channel();
  ASSERT_TRUE(channel);
  uint8_t* data = dma_buffer(kPage);
  iovec iov{data, kPage};
  model().stall(spec::nvm_opcode::read, false, 1);
  DeleteSeen seen{&model()};
  BdevIo read = make_io(IoType::read, 0, 8, &iov, 1, nullptr);
  read.done = record_delete_count;
  read.done_ctx = &seen;
  ASSERT_TRUE((*channel)->submit(read));
  (*channel)->poll();
  ASSERT_EQ(model().stalled_count(), 1u);
  const uint64_t deletes = model().stats().admin_commands[spec::admin_opcode::delete_io_sq];
  channel->reset();
  EXPECT_EQ(seen.delete_sq_before_callback, deletes + 1);
}

// ---- statistics ----

TEST_F(NvmeBdevTest, StatisticsCountCompletionsErrorsAndLatency) {
  make_pool();
  FakeClock clock(1000);
  Bdev* bdev = add_bdev(1, &clock);
  ASSERT_TRUE(bdev);
  auto channel = bdev->create_channel();
  ASSERT_TRUE(channel);
  uint8_t* data = dma_buffer(kPage);
  iovec iov{data, kPage};
  // Submit, let `latency_ns` pass, poll until the one I/O completed.
  auto timed = [&](BdevIo& io, uint64_t latency_ns) {
    Completions completions;
    io.done = testing::record_completion;
    io.done_ctx = &completions;
    if (!(*channel)->submit(io)) return IoStatus::pending;
    clock.advance_ns(latency_ns);
    if (!testing::poll_until(**channel, [&] { return completions.calls == 1; })) {
      return IoStatus::pending;
    }
    return io.status;
  };
  BdevIo write = make_io(IoType::write, 0, 8, &iov, 1, nullptr);
  BdevIo read = make_io(IoType::read, 0, 8, &iov, 1, nullptr);
  BdevIo zeroes = make_io(IoType::write_zeroes, 8, 4, nullptr, 0, nullptr);
  BdevIo unmap = make_io(IoType::unmap, 16, 2, nullptr, 0, nullptr);
  BdevIo flush = make_io(IoType::flush, 0, 0, nullptr, 0, nullptr);
  ASSERT_EQ(timed(write, 5000), IoStatus::success);
  ASSERT_EQ(timed(read, 3000), IoStatus::success);
  ASSERT_EQ(timed(read, 1000), IoStatus::success);
  ASSERT_EQ(timed(zeroes, 100), IoStatus::success);
  ASSERT_EQ(timed(unmap, 100), IoStatus::success);
  ASSERT_EQ(timed(flush, 100), IoStatus::success);
  model().fail_next(spec::nvm_opcode::read, spec::make_status(spec::sct::media_data_integrity, 0x81), 1);
  ASSERT_EQ(timed(read, 7000), IoStatus::io_error);

  IoStats stats = bdev->stats();
  EXPECT_EQ(stats.ops_of(IoType::write), 1u);
  EXPECT_EQ(stats.ops_of(IoType::read), 2u);
  EXPECT_EQ(stats.ops_of(IoType::write_zeroes), 1u);
  EXPECT_EQ(stats.ops_of(IoType::unmap), 1u);
  EXPECT_EQ(stats.ops_of(IoType::flush), 1u);
  EXPECT_EQ(stats.bytes_of(IoType::write), kPage);
  EXPECT_EQ(stats.bytes_of(IoType::read), 2 * kPage);  // the failed read counts no bytes
  EXPECT_EQ(stats.bytes_of(IoType::write_zeroes), 4u * 512u);
  EXPECT_EQ(stats.bytes_of(IoType::unmap), 2u * 512u);
  EXPECT_EQ(stats.bytes_of(IoType::flush), 0u);
  EXPECT_EQ(stats.errors, 1u);
  EXPECT_EQ(stats.completions(), 7u);
  EXPECT_EQ(stats.latency_ns_total, 5000u + 3000u + 1000u + 3 * 100u + 7000u);
  EXPECT_EQ(stats.latency_ns_max, 7000u);

  // A destroyed channel's counts stay with the bdev.
  channel->reset();
  stats = bdev->stats();
  EXPECT_EQ(stats.completions(), 7u);
  EXPECT_EQ(stats.errors, 1u);
  EXPECT_EQ(stats.latency_ns_max, 7000u);
}

TEST(NvmeBdevCopiesTest, OtherBackendsCopyNothing) {
  auto null_bdev = create_null_bdev({.name = "null0", .block_count = 16});
  ASSERT_TRUE(null_bdev);
  EXPECT_EQ(nvme_bdev_bytes_copied(**null_bdev), 0u);
}

TEST(NvmeBdevOptsTest, JsonNamesEveryField) {
  NvmeBdevOpts opts;
  opts.name = "Nvme0n1";
  opts.pci = "0000:00:04.0";
  opts.nsid = 3;
  opts.queue_depth_max = 64;
  EXPECT_EQ(opts_to_json(opts),
            R"({"type":"nvme","name":"Nvme0n1","pci":"0000:00:04.0","nsid":3,"queue_depth":64})");
}

}  // namespace
}  // namespace nvmf::bdev
