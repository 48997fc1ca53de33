// The posix memory backend and DmaRegion: allocation, alignment, rounding, ownership, and the
// hugepage and out-of-memory errors that must name their knob instead of crashing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "env/memory.h"
#include "env/posix_memory.h"
#include "test_util.h"

namespace nvmf::env {
namespace {

using testing::fake_meminfo;
using testing::LogCapture;
using testing::TempDir;

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

std::unique_ptr<PosixMemoryBackend> make_backend(PosixMemoryOpts opts = {}) {
  auto backend = PosixMemoryBackend::create(opts);
  EXPECT_TRUE(backend.has_value());
  return backend ? std::move(*backend) : nullptr;
}

std::unique_ptr<PosixMemoryBackend> normal_pages_backend() {
  PosixMemoryOpts opts;
  opts.hugepages = HugepageMode::off;
  return make_backend(opts);
}

bool host_has_free_hugepages() { return read_meminfo("/proc/meminfo").hugepages_free > 0; }

TEST(PosixMemory, AllocationIsPageAlignedAndRoundedUpToThePage) {
  auto backend = normal_pages_backend();
  ASSERT_NE(backend, nullptr);
  EXPECT_STREQ(backend->name(), "posix");
  for (size_t size : {size_t{1}, kPage - 1, kPage, kPage + 1, 10 * kPage + 7}) {
    auto region = backend->allocate(size, 0);
    ASSERT_TRUE(region.has_value()) << size;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(region->addr()) % kPage, 0u);
    EXPECT_EQ(region->size_bytes(), (size + kPage - 1) / kPage * kPage) << size;
    EXPECT_EQ(region->page_size_bytes(), kPage);
    EXPECT_FALSE(region->hugepages());
  }
}

TEST(PosixMemory, HonoursAlignmentLargerThanAPage) {
  auto backend = normal_pages_backend();
  ASSERT_NE(backend, nullptr);
  for (size_t alignment :
       {size_t{64}, kPage, size_t{64} << 10, size_t{2} << 20, size_t{16} << 20}) {
    auto region = backend->allocate(3 * kPage, alignment);
    ASSERT_TRUE(region.has_value()) << alignment;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(region->addr()) % alignment, 0u) << alignment;
    EXPECT_EQ(region->size_bytes(), 3 * kPage);
    memset(region->addr(), 0x5a, region->size_bytes());  // the trimmed mapping is all usable
  }
  EXPECT_EQ(backend->regions_in_use(), 0u);
}

TEST(PosixMemory, RejectsZeroSizeAndBadAlignment) {
  auto backend = normal_pages_backend();
  ASSERT_NE(backend, nullptr);
  auto zero = backend->allocate(0, 0);
  ASSERT_FALSE(zero.has_value());
  EXPECT_EQ(zero.error().code, Errc::invalid_argument);
  auto odd = backend->allocate(kPage, 3 * kPage);
  ASSERT_FALSE(odd.has_value());
  EXPECT_EQ(odd.error().code, Errc::invalid_argument);
  EXPECT_NE(std::string(odd.error().detail).find("power of two"), std::string::npos);
}

TEST(PosixMemory, MemoryIsZeroedAndWritable) {
  auto backend = normal_pages_backend();
  ASSERT_NE(backend, nullptr);
  auto region = backend->allocate(64 * kPage, 0);
  ASSERT_TRUE(region.has_value());
  auto* bytes = static_cast<unsigned char*>(region->addr());
  for (size_t i = 0; i < region->size_bytes(); ++i) ASSERT_EQ(bytes[i], 0) << i;
  for (size_t i = 0; i < region->size_bytes(); ++i) bytes[i] = static_cast<unsigned char>(i * 7);
  for (size_t i = 0; i < region->size_bytes(); ++i) {
    ASSERT_EQ(bytes[i], static_cast<unsigned char>(i * 7)) << i;
  }
}

TEST(PosixMemory, IovaIsTheVirtualAddress) {
  auto backend = normal_pages_backend();
  ASSERT_NE(backend, nullptr);
  auto region = backend->allocate(4 * kPage, 0);
  ASSERT_TRUE(region.has_value());
  EXPECT_TRUE(region->iova_contiguous());
  auto* base = static_cast<char*>(region->addr());
  EXPECT_EQ(region->iova(base), reinterpret_cast<uintptr_t>(base));
  EXPECT_EQ(region->iova(base + 1234), reinterpret_cast<uintptr_t>(base) + 1234);
  EXPECT_EQ(region->iova(base + region->size_bytes()),  // one past the end is allowed
            reinterpret_cast<uintptr_t>(base) + region->size_bytes());
  EXPECT_TRUE(region->contains(base + 10, 100));
  EXPECT_FALSE(region->contains(base - 1));
  EXPECT_FALSE(region->contains(base + region->size_bytes() - 10, 11));
}

TEST(PosixMemory, MoveTransfersOwnership) {
  auto backend = normal_pages_backend();
  ASSERT_NE(backend, nullptr);
  auto result = backend->allocate(kPage, 0);
  ASSERT_TRUE(result.has_value());
  DmaRegion first = std::move(*result);
  void* addr = first.addr();
  ASSERT_NE(addr, nullptr);
  EXPECT_EQ(backend->regions_in_use(), 1u);

  DmaRegion second(std::move(first));
  EXPECT_TRUE(first.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(first.addr(), nullptr);
  EXPECT_EQ(first.size_bytes(), 0u);
  EXPECT_EQ(second.addr(), addr);
  EXPECT_EQ(second.backend(), backend.get());
  EXPECT_EQ(backend->regions_in_use(), 1u);

  auto other = backend->allocate(2 * kPage, 0);
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(backend->regions_in_use(), 2u);
  second = std::move(*other);  // frees the first mapping, takes the second
  EXPECT_EQ(backend->regions_in_use(), 1u);
  EXPECT_EQ(second.size_bytes(), 2 * kPage);
  second = std::move(second);  // self-move keeps the region
  EXPECT_EQ(second.size_bytes(), 2 * kPage);
  EXPECT_EQ(backend->regions_in_use(), 1u);
}

TEST(PosixMemory, ResetAndDestructionFreeTheMapping) {
  auto backend = normal_pages_backend();
  ASSERT_NE(backend, nullptr);
  {
    auto a = backend->allocate(3 * kPage, 0);
    auto b = backend->allocate(5 * kPage, 0);
    ASSERT_TRUE(a.has_value() && b.has_value());
    EXPECT_EQ(backend->regions_in_use(), 2u);
    EXPECT_EQ(backend->bytes_in_use(), 8 * kPage);
    a->reset();
    a->reset();  // idempotent
    EXPECT_TRUE(a->empty());
    EXPECT_EQ(backend->regions_in_use(), 1u);
    EXPECT_EQ(backend->bytes_in_use(), 5 * kPage);
  }
  EXPECT_EQ(backend->regions_in_use(), 0u);
  EXPECT_EQ(backend->bytes_in_use(), 0u);
}

TEST(PosixMemory, HugepagesOffUsesNormalPages) {
  TempDir dir;
  PosixMemoryOpts opts;
  opts.hugepages = HugepageMode::off;
  opts.meminfo_path = dir.write("meminfo", fake_meminfo(512, 512));  // even with some free
  auto backend = make_backend(opts);
  ASSERT_NE(backend, nullptr);
  EXPECT_FALSE(backend->hugepages_in_use());
  EXPECT_EQ(backend->page_size_bytes(), kPage);
  auto region = backend->allocate(1 << 20, 0);
  ASSERT_TRUE(region.has_value());
  EXPECT_FALSE(region->hugepages());
}

TEST(PosixMemory, HugepagesAutoWithNoneReservedUsesNormalPagesWithANotice) {
  TempDir dir;
  PosixMemoryOpts opts;
  opts.hugepages = HugepageMode::automatic;
  opts.meminfo_path = dir.write("meminfo", fake_meminfo(0, 0));
  LogCapture log;
  auto backend = make_backend(opts);
  ASSERT_NE(backend, nullptr);
  EXPECT_FALSE(backend->hugepages_in_use());
  EXPECT_TRUE(log.contains("nr_hugepages")) << "the notice names the knob";
  auto region = backend->allocate(1 << 20, 0);
  ASSERT_TRUE(region.has_value());
  EXPECT_EQ(region->page_size_bytes(), kPage);
}

TEST(PosixMemory, HugepagesOnWithNoneReservedIsAnErrorNamingTheKnob) {
  TempDir dir;
  PosixMemoryOpts opts;
  opts.hugepages = HugepageMode::on;
  opts.meminfo_path = dir.write("meminfo", fake_meminfo(0, 0));
  LogCapture log;
  auto backend = PosixMemoryBackend::create(opts);
  ASSERT_FALSE(backend.has_value());
  EXPECT_EQ(backend.error().code, Errc::no_memory);
  EXPECT_NE(std::string(backend.error().detail).find("/proc/sys/vm/nr_hugepages"),
            std::string::npos)
      << backend.error().detail;
  EXPECT_NE(std::string(backend.error().detail).find("hugepages=auto|off"), std::string::npos);
  EXPECT_TRUE(log.contains("HugePages_Free")) << "and the failure is logged";
}

// The same three modes against this host's real /proc/meminfo.
TEST(PosixMemory, HugepageModesOnThisHost) {
  const MeminfoSnapshot meminfo = read_meminfo("/proc/meminfo");
  ASSERT_TRUE(meminfo.readable);
  PosixMemoryOpts opts;
  opts.hugepages = HugepageMode::on;
  auto on = PosixMemoryBackend::create(opts);
  opts.hugepages = HugepageMode::automatic;
  auto automatic = PosixMemoryBackend::create(opts);
  ASSERT_TRUE(automatic.has_value());
  if (meminfo.hugepages_free == 0) {
    ASSERT_FALSE(on.has_value());
    EXPECT_EQ(on.error().code, Errc::no_memory);
    EXPECT_FALSE((*automatic)->hugepages_in_use());
  } else {
    ASSERT_TRUE(on.has_value());
    EXPECT_TRUE((*on)->hugepages_in_use());
    EXPECT_EQ((*on)->page_size_bytes(), meminfo.hugepage_size_bytes);
    EXPECT_TRUE((*automatic)->hugepages_in_use());
  }
}

TEST(PosixMemory, HugepagesOnMmapFailureIsAnErrorNamingTheKnob) {
  if (host_has_free_hugepages()) GTEST_SKIP() << "this host has free hugepages: mmap would work";
  TempDir dir;
  PosixMemoryOpts opts;
  opts.hugepages = HugepageMode::on;
  // meminfo claims hugepages the kernel does not have, so MAP_HUGETLB itself fails.
  opts.meminfo_path = dir.write("meminfo", fake_meminfo(16, 16));
  auto backend = make_backend(opts);
  ASSERT_NE(backend, nullptr);
  EXPECT_TRUE(backend->hugepages_in_use());
  EXPECT_EQ(backend->page_size_bytes(), size_t{2} << 20);
  LogCapture log;
  auto region = backend->allocate(1 << 20, 0);
  ASSERT_FALSE(region.has_value());
  EXPECT_EQ(region.error().code, Errc::no_memory);
  EXPECT_NE(region.error().os_errno, 0);
  EXPECT_STREQ(region.error().detail,
               "mmap MAP_HUGETLB failed: reserve more with /proc/sys/vm/nr_hugepages or set "
               "hugepages=off");
  EXPECT_TRUE(log.contains("MAP_HUGETLB"));
  EXPECT_EQ(backend->regions_in_use(), 0u);
}

TEST(PosixMemory, HugepagesAutoFallsBackWhenMapHugetlbFails) {
  if (host_has_free_hugepages()) GTEST_SKIP() << "this host has free hugepages: mmap would work";
  TempDir dir;
  PosixMemoryOpts opts;
  opts.hugepages = HugepageMode::automatic;
  opts.meminfo_path = dir.write("meminfo", fake_meminfo(16, 16));
  auto backend = make_backend(opts);
  ASSERT_NE(backend, nullptr);
  EXPECT_TRUE(backend->hugepages_in_use());
  LogCapture log;
  auto region = backend->allocate(3 * kPage, 0);
  ASSERT_TRUE(region.has_value());
  EXPECT_FALSE(region->hugepages());
  EXPECT_EQ(region->page_size_bytes(), kPage);
  EXPECT_EQ(region->size_bytes(), 3 * kPage);  // rounded to the page actually used
  EXPECT_TRUE(log.contains("falling back to normal pages"));
}

TEST(PosixMemory, AbsurdSizeIsNoMemoryNotACrash) {
  auto backend = normal_pages_backend();
  ASSERT_NE(backend, nullptr);
  LogCapture log;
  auto region = backend->allocate(size_t{1} << 50, 0);  // 1 PiB
  ASSERT_FALSE(region.has_value());
  EXPECT_EQ(region.error().code, Errc::no_memory);
  EXPECT_NE(std::string(region.error().detail).find("MemAvailable"), std::string::npos)
      << region.error().detail;
  EXPECT_FALSE(log.lines().empty());

  // Without the MemAvailable check the kernel says no (1 PiB exceeds the 128 TiB user space).
  PosixMemoryOpts opts;
  opts.hugepages = HugepageMode::off;
  opts.check_available_memory = false;
  auto unchecked = make_backend(opts);
  ASSERT_NE(unchecked, nullptr);
  auto mapped = unchecked->allocate(size_t{1} << 50, 0);
  ASSERT_FALSE(mapped.has_value());
  EXPECT_EQ(mapped.error().code, Errc::no_memory);
  EXPECT_EQ(mapped.error().os_errno, ENOMEM);
  EXPECT_NE(std::string(mapped.error().detail).find("mmap failed"), std::string::npos);
  EXPECT_EQ(unchecked->regions_in_use(), 0u);
}

TEST(PosixMemory, AbsurdSizeWithHugepagesIsAnErrorToo) {
  TempDir dir;
  PosixMemoryOpts opts;
  opts.hugepages = HugepageMode::automatic;
  opts.meminfo_path = dir.write("meminfo", fake_meminfo(16, 16));
  auto backend = make_backend(opts);
  ASSERT_NE(backend, nullptr);
  LogCapture log;
  auto region = backend->allocate(size_t{1} << 50, 0);
  ASSERT_FALSE(region.has_value());
  EXPECT_EQ(region.error().code, Errc::no_memory);
}

TEST(PosixMemory, SizeOverflowIsRejected) {
  auto backend = normal_pages_backend();
  ASSERT_NE(backend, nullptr);
  for (size_t size : {SIZE_MAX, SIZE_MAX - 100}) {
    auto region = backend->allocate(size, 0);
    ASSERT_FALSE(region.has_value());
    EXPECT_EQ(region.error().code, Errc::invalid_argument);
  }
  LogCapture log;
  auto aligned = backend->allocate(SIZE_MAX - (size_t{8} << 20), size_t{16} << 20);
  ASSERT_FALSE(aligned.has_value());
  EXPECT_NE(aligned.error().code, Errc::ok);
}

TEST(PosixMemory, MissingMeminfoMeansNoHugepages) {
  PosixMemoryOpts opts;
  opts.meminfo_path = "/nonexistent/meminfo";
  opts.hugepages = HugepageMode::automatic;
  LogCapture log;
  auto automatic = PosixMemoryBackend::create(opts);
  ASSERT_TRUE(automatic.has_value());
  EXPECT_FALSE((*automatic)->hugepages_in_use());
  auto region = (*automatic)->allocate(kPage, 0);  // no MemAvailable to check: allowed
  EXPECT_TRUE(region.has_value());
  opts.hugepages = HugepageMode::on;
  auto on = PosixMemoryBackend::create(opts);
  ASSERT_FALSE(on.has_value());
  EXPECT_EQ(on.error().code, Errc::no_memory);
}

TEST(PosixMemory, MeminfoFieldsAreParsed) {
  TempDir dir;
  const MeminfoSnapshot snapshot =
      read_meminfo(dir.write("meminfo", fake_meminfo(64, 60, 1234)).c_str());
  EXPECT_TRUE(snapshot.readable);
  EXPECT_EQ(snapshot.hugepages_total, 64u);
  EXPECT_EQ(snapshot.hugepages_free, 60u);
  EXPECT_EQ(snapshot.hugepage_size_bytes, size_t{2} << 20);
  EXPECT_EQ(snapshot.mem_available_bytes, 1234u * 1024u);
  EXPECT_FALSE(read_meminfo("/nonexistent/meminfo").readable);
}

TEST(PosixMemory, OptsParseAndDumpAsJson) {
  HugepageMode mode = HugepageMode::off;
  EXPECT_TRUE(hugepage_mode_parse("auto", &mode));
  EXPECT_EQ(mode, HugepageMode::automatic);
  EXPECT_TRUE(hugepage_mode_parse("on", &mode));
  EXPECT_EQ(mode, HugepageMode::on);
  EXPECT_TRUE(hugepage_mode_parse("off", &mode));
  EXPECT_EQ(mode, HugepageMode::off);
  EXPECT_FALSE(hugepage_mode_parse("yes", &mode));
  EXPECT_EQ(mode, HugepageMode::off);

  PosixMemoryOpts opts;
  EXPECT_EQ(opts.to_json(),
            "{\"hugepages\":\"auto\",\"populate\":true,\"check_available_memory\":true,"
            "\"meminfo_path\":\"/proc/meminfo\"}");
}

TEST(PosixMemory, WithoutPopulateTheMemoryIsStillUsable) {
  PosixMemoryOpts opts;
  opts.hugepages = HugepageMode::off;
  opts.populate = false;
  auto backend = make_backend(opts);
  ASSERT_NE(backend, nullptr);
  auto region = backend->allocate(16 * kPage, size_t{1} << 20);
  ASSERT_TRUE(region.has_value());
  memset(region->addr(), 0xff, region->size_bytes());
  EXPECT_EQ(static_cast<unsigned char*>(region->addr())[region->size_bytes() - 1], 0xff);
}

}  // namespace
}  // namespace nvmf::env
