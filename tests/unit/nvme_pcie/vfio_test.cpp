// The driver on real PCIe functions bound to vfio-pci (QEMU's NVMe controller in the VM tier's
// pcie_nvme scenario): identify, verified I/O on several queues and threads, a controller reset
// under I/O that loses nothing, and hot removal (QEMU device_del through the VM's QMP request
// protocol) that fails outstanding I/O once and lets the kernel take the device back.
//
// Environment: NVMF_TEST_PCI="ADDR [ADDR]" (skipped without it, e.g. on the build host),
// NVMF_TEST_NVME_SIZE_MB (the namespace size to expect), NVMF_VM_QMP_DIR + NVMF_TEST_REMOVE_ID
// (the QEMU id of the second address's device, for the removal test).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "nvme_pcie/controller.h"
#include "nvme_pcie/vfio_environment.h"

namespace nvmf::nvme_pcie {
namespace {

std::vector<std::string> test_addresses() {
  std::vector<std::string> addresses;
  const char* text = std::getenv("NVMF_TEST_PCI");
  if (text == nullptr) return addresses;
  std::istringstream words(text);
  for (std::string word; words >> word;) addresses.push_back(word);
  return addresses;
}

// EAL starts once per process: one environment for every test.
VfioEnvironment& environment() {
  static VfioEnvironment vfio;
  return vfio;
}

struct Done {
  std::atomic<int> calls{0};
  spec::Status status{};
};
void record(void* ctx, const spec::Status& status) {
  auto* done = static_cast<Done*>(ctx);
  done->status = status;
  done->calls.fetch_add(1);
}

class VfioTest : public ::testing::Test {
 protected:
  void SetUp() override {
    addresses_ = test_addresses();
    if (addresses_.empty()) GTEST_SKIP() << "NVMF_TEST_PCI is not set: no NVMe function bound to vfio-pci";
  }
  std::unique_ptr<Controller> open(const std::string& address, ControllerOpts opts = {}) {
    auto device = environment().open(address);
    EXPECT_TRUE(device) << address << ": " << (device ? "" : device.error().detail);
    if (!device) return nullptr;
    auto controller = Controller::create(std::move(*device), opts);
    EXPECT_TRUE(controller) << address << ": " << (controller ? "" : controller.error().detail);
    return controller ? std::move(*controller) : nullptr;
  }
  std::vector<std::string> addresses_;
};

// Writes, then reads back and compares, `rounds` I/Os of 4..128 KiB at LBAs of its own on
// one queue; returns the number of mismatches. Runs on the calling thread.
int verified_io(Controller& controller, uint64_t first_lba, uint64_t lba_span, int rounds,
                uint32_t seed) {
  auto queue = controller.create_io_queue();
  EXPECT_TRUE(queue);
  if (!queue) return -1;
  const uint32_t block = controller.find_namespace(1)->block_size_bytes;
  auto out = controller.device().dma_memory().allocate(128 * 1024, 4096);
  auto in = controller.device().dma_memory().allocate(128 * 1024, 4096);
  EXPECT_TRUE(out && in);
  std::mt19937 random(seed);
  int mismatches = 0;
  for (int round = 0; round < rounds; ++round) {
    const uint32_t bytes = 4096u << (random() % 6);  // 4 KiB .. 128 KiB
    const uint64_t lba = first_lba + random() % (lba_span - bytes / block);
    auto* data = static_cast<uint8_t*>(out->addr());
    for (uint32_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(random());
    for (uint8_t opcode : {spec::nvm_opcode::write, spec::nvm_opcode::read}) {
      iovec iov{opcode == spec::nvm_opcode::write ? out->addr() : in->addr(), bytes};
      IoCommand command{opcode, 1, lba, bytes / block, &iov, 1, false};
      Done done;
      EXPECT_TRUE((*queue)->submit(command, record, &done));
      while (done.calls.load() == 0) (*queue)->poll();
      EXPECT_TRUE(done.status.is_success()) << spec::status_name(done.status);
    }
    if (std::memcmp(out->addr(), in->addr(), bytes) != 0) ++mismatches;
  }
  EXPECT_EQ((*queue)->stats().bytes_copied.load(), 0u) << "DMA buffers must not bounce";
  return mismatches;
}

TEST_F(VfioTest, IdentifyShowsQemusController) {
  auto controller = open(addresses_[0]);
  ASSERT_NE(controller, nullptr);
  const std::string model(reinterpret_cast<const char*>(controller->identify().mn), 14);
  EXPECT_EQ(model, "QEMU NVMe Ctrl");
  ASSERT_FALSE(controller->namespaces().empty());
  const NamespaceInfo& ns = controller->namespaces()[0];
  if (const char* size_mb = std::getenv("NVMF_TEST_NVME_SIZE_MB")) {
    EXPECT_EQ(ns.block_count * ns.block_size_bytes, std::stoull(size_mb) << 20);
  }
  EXPECT_GE(controller->io_queues_granted(), 4u);
  EXPECT_GE(controller->max_transfer_bytes(), 128u * 1024);
  std::printf("%s: %s, %zu namespaces, ns 1: %llu blocks of %u B, %u I/O queues, max transfer "
              "%u KiB\n",
              addresses_[0].c_str(), model.c_str(), controller->namespaces().size(),
              static_cast<unsigned long long>(ns.block_count), ns.block_size_bytes,
              controller->io_queues_granted(), controller->max_transfer_bytes() / 1024);
}

TEST_F(VfioTest, VerifiedIoOnFourQueuesOfFourThreads) {
  auto controller = open(addresses_[0]);
  ASSERT_NE(controller, nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      mismatches += verified_io(*controller, uint64_t{t} * 65536, 65536, 40, t + 1);
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// QEMU's controller reports SGL support: iovecs whose boundaries PRPs cannot express go to
// the device as an SGL (no bounce), and the data reads back right.
TEST_F(VfioTest, RaggedIovecsTravelAsAnSgl) {
  auto controller = open(addresses_[0]);
  ASSERT_NE(controller, nullptr);
  ASSERT_TRUE(controller->sgl_supported()) << "QEMU's NVMe controller reports SGLS";
  auto queue = controller->create_io_queue();
  ASSERT_TRUE(queue);
  auto region = controller->device().dma_memory().allocate(4 * 4096, 4096);
  ASSERT_TRUE(region);
  auto* base = static_cast<uint8_t*>(region->addr());
  const uint32_t block = controller->find_namespace(1)->block_size_bytes;
  for (int i = 0; i < 4096; ++i) base[512 + i] = static_cast<uint8_t>(i * 13);
  // 1536 + 2560 bytes: the first segment ends mid-page, which PRPs cannot describe.
  iovec out[] = {{base + 512, 1536}, {base + 4096 + 1024, 2560}};
  std::memcpy(base + 4096 + 1024, base + 512 + 1536, 2560);
  IoCommand write{spec::nvm_opcode::write, 1, 4096, 4096 / block, out, 2, false};
  Done written;
  ASSERT_TRUE((*queue)->submit(write, record, &written));
  while (written.calls.load() == 0) (*queue)->poll();
  ASSERT_TRUE(written.status.is_success()) << spec::status_name(written.status);
  iovec in{base + 2 * 4096, 4096};
  IoCommand read{spec::nvm_opcode::read, 1, 4096, 4096 / block, &in, 1, false};
  Done done;
  ASSERT_TRUE((*queue)->submit(read, record, &done));
  while (done.calls.load() == 0) (*queue)->poll();
  ASSERT_TRUE(done.status.is_success());
  EXPECT_EQ(std::memcmp(base + 2 * 4096, base + 512, 4096), 0);
  EXPECT_EQ((*queue)->stats().bounced.load(), 0u);
}

// QD 32 of 4 KiB writes with distinct data to distinct LBAs while the controller is reset
// twice; every write completes once and successfully (retried), and reads back right.
struct WriteLoop {
  struct Slot {
    WriteLoop* loop = nullptr;
    int index = 0;
    int write = -1;  // the write it carries
  };
  std::vector<Slot> slots;
  std::vector<int> free_slots;
  std::vector<int> calls;  // per write
  std::vector<spec::Status> statuses;
  int completed = 0;
  static void done(void* ctx, const spec::Status& status) {
    auto& slot = *static_cast<Slot*>(ctx);
    ++slot.loop->calls[slot.write];
    slot.loop->statuses[slot.write] = status;
    ++slot.loop->completed;
    slot.loop->free_slots.push_back(slot.index);
  }
};

TEST_F(VfioTest, ControllerResetUnderIoLosesNothing) {
  auto controller = open(addresses_[0]);
  ASSERT_NE(controller, nullptr);
  auto queue = controller->create_io_queue();
  ASSERT_TRUE(queue);
  constexpr int kWrites = 20000;
  constexpr int kDepth = 32;
  const uint32_t blocks = 4096 / controller->find_namespace(1)->block_size_bytes;
  auto buffers = controller->device().dma_memory().allocate(size_t{kDepth} * 4096, 4096);
  ASSERT_TRUE(buffers);
  WriteLoop loop;
  loop.slots.resize(kDepth);
  loop.calls.assign(kWrites, 0);
  loop.statuses.resize(kWrites);
  for (int i = 0; i < kDepth; ++i) {
    loop.slots[i] = {&loop, i, -1};
    loop.free_slots.push_back(i);
  }
  // Resets at a quarter and at half of the run, while the queue is full.
  std::atomic<int> progress{0};
  std::thread resetter([&] {
    for (int mark : {kWrites / 4, kWrites / 2}) {
      while (progress.load() < mark) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      EXPECT_TRUE(controller->reset());
    }
  });
  int submitted = 0;
  while (loop.completed < kWrites) {
    while (submitted < kWrites && !loop.free_slots.empty()) {
      WriteLoop::Slot& slot = loop.slots[loop.free_slots.back()];
      auto* data = static_cast<uint8_t*>(buffers->addr()) + slot.index * 4096;
      std::memset(data, submitted & 0xFF, 4096);
      std::memcpy(data, &submitted, sizeof(submitted));
      iovec iov{data, 4096};
      IoCommand command{spec::nvm_opcode::write, 1, uint64_t(submitted) * blocks, blocks, &iov, 1, false};
      slot.write = submitted;
      auto queued = (*queue)->submit(command, WriteLoop::done, &slot);
      if (!queued) {
        ASSERT_EQ(queued.error().code, Errc::busy) << queued.error().detail;
        break;  // a reset is in progress: poll, then go on
      }
      loop.free_slots.pop_back();
      ++submitted;
    }
    (*queue)->poll();
    progress.store(loop.completed);
  }
  resetter.join();
  int failed = 0, twice = 0;
  for (int i = 0; i < kWrites; ++i) {
    failed += loop.statuses[i].is_success() ? 0 : 1;
    twice += loop.calls[i] > 1 ? 1 : 0;
  }
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(twice, 0);
  EXPECT_EQ(controller->stats().resets, 2u);
  EXPECT_GT((*queue)->stats().retried.load(), 0u) << "the resets found no write outstanding";
  std::printf("reset under I/O: %d writes, %llu commands retried after 2 resets, 0 lost\n",
              kWrites, static_cast<unsigned long long>((*queue)->stats().retried.load()));
  // Read back every 7th write: each 4 KiB starts with its own index.
  auto in = controller->device().dma_memory().allocate(4096, 4096);
  ASSERT_TRUE(in);
  int wrong = 0;
  for (int i = 0; i < kWrites; i += 7) {
    iovec iov{in->addr(), 4096};
    IoCommand command{spec::nvm_opcode::read, 1, uint64_t(i) * blocks, blocks, &iov, 1, false};
    Done read;
    for (;;) {  // busy until the queue has polled once after the last reset
      auto queued = (*queue)->submit(command, record, &read);
      if (queued) break;
      ASSERT_EQ(queued.error().code, Errc::busy);
      (*queue)->poll();
    }
    while (read.calls.load() == 0) (*queue)->poll();
    int index = -1;
    std::memcpy(&index, in->addr(), sizeof(index));
    wrong += index == i ? 0 : 1;
  }
  EXPECT_EQ(wrong, 0);
}

// device_del through the VM harness: the kernel asks for the device back, the driver fails
// outstanding I/O once, new I/O fails, and it lets go: the guest's kernel then removes the PCI
// function (vfio-pci's removal waits for the user to close the device, repeating "Relaying
// device request to user" while it does not).
TEST_F(VfioTest, HotRemovalUnderIoFailsIoOnceAndReleasesTheDevice) {
  const char* qmp_dir = std::getenv("NVMF_VM_QMP_DIR");
  const char* remove_id = std::getenv("NVMF_TEST_REMOVE_ID");
  if (addresses_.size() < 2 || qmp_dir == nullptr || remove_id == nullptr) {
    GTEST_SKIP() << "needs a second address, NVMF_VM_QMP_DIR and NVMF_TEST_REMOVE_ID";
  }
  ControllerOpts opts;
  opts.health_check_interval_ms = 20;
  auto controller = open(addresses_[1], opts);
  ASSERT_NE(controller, nullptr);
  bool removed_callback = false;
  controller->set_removed_callback([](void* ctx, Controller&) { *static_cast<bool*>(ctx) = true; },
                                   &removed_callback);
  auto queue = controller->create_io_queue();
  ASSERT_TRUE(queue);
  auto buffer = controller->device().dma_memory().allocate(16 * 4096, 4096);
  ASSERT_TRUE(buffer);
  const std::string request = std::string(qmp_dir) + "/vfio_test.req";
  {
    std::ofstream file(request + ".tmp");
    file << "device_del " << remove_id << "\n";
  }
  ASSERT_EQ(std::rename((request + ".tmp").c_str(), request.c_str()), 0);
  std::vector<Done> done(200000);
  size_t submitted = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (controller->state() != ControllerState::removed && std::chrono::steady_clock::now() < deadline &&
         submitted < done.size()) {
    for (int slot = 0; slot < 16 && submitted < done.size(); ++slot) {
      iovec iov{static_cast<uint8_t*>(buffer->addr()) + slot * 4096, 4096};
      IoCommand command{spec::nvm_opcode::read, 1, uint64_t(slot) * 8, 8, &iov, 1, false};
      if (!(*queue)->submit(command, record, &done[submitted])) break;
      ++submitted;
    }
    (*queue)->poll();
  }
  ASSERT_EQ(controller->state(), ControllerState::removed) << "no removal seen within 90 s";
  while ((*queue)->outstanding() > 0) (*queue)->poll();
  size_t failed = 0, twice = 0, never = 0;
  for (size_t i = 0; i < submitted; ++i) {
    never += done[i].calls.load() == 0;
    twice += done[i].calls.load() > 1;
    failed += done[i].calls.load() == 1 && !done[i].status.is_success();
  }
  EXPECT_EQ(never, 0u);
  EXPECT_EQ(twice, 0u);
  EXPECT_TRUE(removed_callback);
  iovec iov{buffer->addr(), 4096};
  IoCommand command{spec::nvm_opcode::read, 1, 0, 8, &iov, 1, false};
  Done late;
  EXPECT_EQ((*queue)->submit(command, record, &late).error().code, Errc::disconnected);
  std::printf("hot removal: %zu reads submitted, %zu failed with a status, 0 lost, 0 twice\n",
              submitted, failed);
  // The guest lets go of the function once the driver did: its sysfs node goes away.
  const std::string sysfs = "/sys/bus/pci/devices/" + addresses_[1];
  bool gone = false;
  for (int i = 0; i < 600 && !gone; ++i) {
    gone = access(sysfs.c_str(), F_OK) != 0;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(gone) << sysfs << " still there 60 s after the driver saw the removal: the guest "
                    << "kernel is still waiting for the driver to let the device go";
  // QEMU's DEVICE_DELETED comes after that, when the guest's pciehp has powered the slot off:
  // shown, not asserted (in 2 CI runs of many it did not come within qmp.py's 60 s although the
  // guest had removed the function in well under a second; that is between the guest's pciehp
  // and QEMU, after the driver's part).
  const std::string ack = std::string(qmp_dir) + "/vfio_test.ack";
  std::string first_line, answer;
  for (int i = 0; i < 900 && first_line.empty(); ++i) {
    std::ifstream file(ack);
    std::getline(file, first_line);
    if (first_line.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    answer.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }
  std::printf("QEMU's answer to device_del: %s %s\n", first_line.c_str(), answer.c_str());
  queue->reset();
  buffer->reset();
  controller.reset();  // must not hang or touch the gone device
}

}  // namespace
}  // namespace nvmf::nvme_pcie
