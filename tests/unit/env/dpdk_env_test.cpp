// The DPDK backend, on a host without hugepages, VFIO or PCI devices: EAL runs with
// --no-huge --no-pci --no-shconf and a per-process --file-prefix (dpdk_test_opts()).
//
// EAL starts once per process. Under ctest every TEST is its own process, so the fixture's
// SetUpTestSuite starts EAL in each; run directly, it starts once for the whole suite. Tests
// that need a fresh process (init failure, restart) run their body in a re-executed child
// (gtest death tests, "threadsafe" style), whatever else the parent has done.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "env/dpdk_env.h"
#include "env/pool.h"
#include "env/vfio.h"

namespace nvmf::env {
namespace {

bool has_arg(const std::vector<std::string>& args, const std::string& arg) {
  return std::find(args.begin(), args.end(), arg) != args.end();
}

class DpdkEnvTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto created = DpdkMemoryBackend::create(dpdk_test_opts());
    if (created) {
      backend_ = std::move(*created);
    } else {
      char text[256];
      init_error_ = error_describe(created.error(), text, sizeof(text));
    }
  }
  static void TearDownTestSuite() {
    backend_.reset();  // rte_eal_cleanup()
  }
  void SetUp() override {
    if (backend_ == nullptr) GTEST_SKIP() << "DPDK EAL does not start here: " << init_error_;
  }

  static std::unique_ptr<DpdkMemoryBackend> backend_;
  static std::string init_error_;
};

std::unique_ptr<DpdkMemoryBackend> DpdkEnvTest::backend_;
std::string DpdkEnvTest::init_error_;

TEST_F(DpdkEnvTest, StartsWithTheTestFlags) {
  EXPECT_STREQ(backend_->name(), "dpdk");
  EXPECT_FALSE(backend_->hugepages_in_use());
  const auto& args = backend_->eal_args();
  EXPECT_TRUE(has_arg(args, "--no-huge"));
  EXPECT_TRUE(has_arg(args, "--no-pci"));
  EXPECT_TRUE(has_arg(args, "--no-shconf"));
  EXPECT_TRUE(has_arg(args, "--file-prefix=nvmf_test_" + std::to_string(getpid())));
  EXPECT_EQ(backend_->regions_in_use(), 0u);
}

TEST_F(DpdkEnvTest, IovaModeIsDecided) {
  const IovaMode mode = backend_->iova_mode();
  EXPECT_NE(mode, IovaMode::automatic);
  // Without hugepages DPDK has no physical addresses: IOVA is the virtual address.
  EXPECT_EQ(mode, IovaMode::va);
}

TEST_F(DpdkEnvTest, AllocatesZeroedWritableMemoryWithAnIova) {
  auto region = backend_->allocate(100000, 0);
  ASSERT_TRUE(region.has_value()) << region.error().detail;
  EXPECT_EQ(region->backend(), backend_.get());
  EXPECT_EQ(region->size_bytes(), 102400u) << "rounded up to 4 KiB";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(region->addr()) % 4096, 0u);
  EXPECT_GE(region->page_size_bytes(), 4096u);
  EXPECT_FALSE(region->hugepages());
  auto* bytes = static_cast<unsigned char*>(region->addr());
  for (size_t i = 0; i < region->size_bytes(); ++i) ASSERT_EQ(bytes[i], 0) << i;
  memset(bytes, 0xa5, region->size_bytes());
  EXPECT_EQ(bytes[region->size_bytes() - 1], 0xa5);

  EXPECT_TRUE(region->iova_contiguous());
  const uint64_t base = region->iova(bytes);
  EXPECT_NE(base, kBadIova);
  EXPECT_EQ(region->iova(bytes + 5000), base + 5000);
  if (backend_->iova_mode() == IovaMode::va) {
    EXPECT_EQ(base, reinterpret_cast<uintptr_t>(bytes));
  }
  EXPECT_EQ(backend_->regions_in_use(), 1u);
}

TEST_F(DpdkEnvTest, HonoursAlignment) {
  for (size_t alignment : {size_t{0}, size_t{64}, size_t{4096}, size_t{1} << 16, size_t{1} << 21}) {
    auto region = backend_->allocate(8192, alignment);
    ASSERT_TRUE(region.has_value()) << alignment;
    const size_t expected = alignment < 4096 ? 4096 : alignment;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(region->addr()) % expected, 0u) << alignment;
    EXPECT_EQ(region->size_bytes(), 8192u);
  }
  auto zero = backend_->allocate(0, 0);
  ASSERT_FALSE(zero.has_value());
  EXPECT_EQ(zero.error().code, Errc::invalid_argument);
  auto odd = backend_->allocate(4096, 96);
  ASSERT_FALSE(odd.has_value());
  EXPECT_EQ(odd.error().code, Errc::invalid_argument);
}

TEST_F(DpdkEnvTest, FreeingARegionReturnsItsMemory) {
  // 40 MiB twice out of the 64 MiB DPDK has without hugepages: only works if the first is
  // really freed.
  for (int round = 0; round < 3; ++round) {
    auto region = backend_->allocate(size_t{40} << 20, 0);
    ASSERT_TRUE(region.has_value()) << round << ": " << region.error().detail;
  }
  // More allocations than DPDK has memzone slots (RTE_MAX_MEMZONE, 2560): each is freed.
  for (int i = 0; i < 3000; ++i) {
    auto region = backend_->allocate(4096, 0);
    ASSERT_TRUE(region.has_value()) << i << ": " << region.error().detail;
  }
  EXPECT_EQ(backend_->regions_in_use(), 0u);
}

TEST_F(DpdkEnvTest, MoveTransfersOwnership) {
  auto result = backend_->allocate(4096, 0);
  ASSERT_TRUE(result.has_value());
  DmaRegion first = std::move(*result);
  void* addr = first.addr();
  DmaRegion second = std::move(first);
  EXPECT_TRUE(first.empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(second.addr(), addr);
  EXPECT_EQ(backend_->regions_in_use(), 1u);
  second.reset();
  EXPECT_EQ(backend_->regions_in_use(), 0u);
}

TEST_F(DpdkEnvTest, RunningOutOfMemoryIsAnErrorNamingTheKnob) {
  auto region = backend_->allocate(size_t{1} << 30, 0);  // 1 GiB of a 64 MiB pool
  ASSERT_FALSE(region.has_value());
  EXPECT_EQ(region.error().code, Errc::no_memory);
  EXPECT_NE(std::string(region.error().detail).find("memory_mb"), std::string::npos)
      << region.error().detail;
  EXPECT_EQ(backend_->regions_in_use(), 0u);
  auto still_works = backend_->allocate(4096, 0);
  EXPECT_TRUE(still_works.has_value());
}

TEST_F(DpdkEnvTest, SecondCreateIsAlreadyExists) {
  auto second = DpdkMemoryBackend::create(dpdk_test_opts());
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().code, Errc::already_exists);
  EXPECT_NE(std::string(second.error().detail).find("share"), std::string::npos);
  // The first backend is untouched.
  auto region = backend_->allocate(4096, 0);
  EXPECT_TRUE(region.has_value());
}

TEST_F(DpdkEnvTest, VfioIsNotEnabledHereAndSaysSo) {
  if (vfio_available()) GTEST_SKIP() << "this host has VFIO with an IOMMU";
  EXPECT_FALSE(backend_->vfio_enabled());
  auto region = backend_->allocate(4096, 0);
  ASSERT_TRUE(region.has_value());
  auto mapped = backend_->vfio_dma_map(*region);
  ASSERT_FALSE(mapped.has_value());
  EXPECT_EQ(mapped.error().code, Errc::not_supported);
  auto unmapped = backend_->vfio_dma_unmap(*region);
  ASSERT_FALSE(unmapped.has_value());
  EXPECT_EQ(unmapped.error().code, Errc::not_supported);
}

TEST_F(DpdkEnvTest, BufferPoolOnDpdkMemory) {
  auto pool = BufferPool::create(*backend_, {.count = 64, .buffer_size_bytes = 4096});
  ASSERT_TRUE(pool.has_value());
  EXPECT_EQ(backend_->regions_in_use(), 1u);
  void* first = pool->get();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(pool->iova(first), pool->region().iova(pool->region().addr()));
  EXPECT_EQ(pool->iova(pool->at(5)), pool->iova(first) + 5 * 4096);
  pool->put(first);
}

TEST(DpdkOpts, EalArgumentsFollowTheOptions) {
  DpdkOpts opts;
  opts.core_list = "1";
  opts.main_lcore = 1;
  opts.file_prefix = "abc";
  opts.memory_mb = 128;
  opts.iova_mode = IovaMode::va;
  opts.log_level = LogLevel::debug;
  opts.extra_args = {"--vfio-intr=msix"};
  auto args = dpdk_eal_args(opts);
  ASSERT_TRUE(args.has_value());
  const std::vector<std::string> expected = {"-l",
                                             "1",
                                             "--main-lcore=1",
                                             "--in-memory",
                                             "--file-prefix=abc",
                                             "-m",
                                             "128",
                                             "--log-level=8",
                                             "--iova-mode=va",
                                             "--no-telemetry",
                                             "--vfio-intr=msix"};
  EXPECT_EQ(*args, expected);

  auto defaults = dpdk_eal_args(DpdkOpts{});
  ASSERT_TRUE(defaults.has_value());
  EXPECT_EQ((*defaults)[0], "-l");
  EXPECT_TRUE(has_arg(*defaults, "--file-prefix=nvmf_" + std::to_string(getpid())));
  EXPECT_TRUE(has_arg(*defaults, "--log-level=4")) << "quiet by default: errors only";
  EXPECT_TRUE(has_arg(*defaults, "--in-memory"));
  EXPECT_FALSE(has_arg(*defaults, "--no-huge"));
}

TEST(DpdkOpts, InvalidOptionsAreRejectedBeforeEalStarts) {
  DpdkOpts both = dpdk_test_opts();
  both.in_memory = true;  // with no_huge: DPDK 22.11 refuses it
  DpdkOpts cores = dpdk_test_opts();
  cores.core_list = "0;rm";
  DpdkOpts prefix = dpdk_test_opts();
  prefix.file_prefix = "../escape";
  DpdkOpts lcore = dpdk_test_opts();
  lcore.main_lcore = -5;
  for (const DpdkOpts& opts : {both, cores, prefix, lcore}) {
    auto args = dpdk_eal_args(opts);
    ASSERT_FALSE(args.has_value());
    EXPECT_EQ(args.error().code, Errc::invalid_argument);
    auto backend = DpdkMemoryBackend::create(opts);
    ASSERT_FALSE(backend.has_value());
    EXPECT_EQ(backend.error().code, Errc::invalid_argument);
  }
}

TEST(DpdkOpts, DumpAsJson) {
  DpdkOpts opts = dpdk_test_opts();
  opts.file_prefix = "p";
  opts.extra_args = {"--a", "--b"};
  EXPECT_EQ(opts.to_json(),
            "{\"core_list\":\"\",\"main_lcore\":-1,\"no_huge\":true,\"no_pci\":true,"
            "\"in_memory\":false,\"no_shconf\":true,\"file_prefix\":\"p\",\"memory_mb\":0,"
            "\"log_level\":\"error\",\"iova_mode\":\"auto\",\"telemetry\":false,"
            "\"keep_caller_affinity\":true,\"extra_args\":[\"--a\",\"--b\"]}");
}

// Exit codes of the re-executed children below.
constexpr int kChildPassed = 0;
constexpr int kChildFailed = 1;

void expect_init_failure_is_an_error() {
  DpdkOpts opts = dpdk_test_opts();
  opts.no_huge = false;  // hugepages from a hugetlbfs mount that does not exist
  opts.extra_args = {"--huge-dir=/nonexistent/nvmf_hugetlbfs"};
  auto backend = DpdkMemoryBackend::create(opts);
  if (backend.has_value()) std::_Exit(kChildFailed);
  char text[256];
  fprintf(stderr, "create: %s\n", error_describe(backend.error(), text, sizeof(text)));
  if (backend.error().os_errno == 0 || backend.error().detail[0] == '\0') std::_Exit(kChildFailed);
  // A failed rte_eal_init cannot be retried: the next create says so instead of crashing.
  auto retry = DpdkMemoryBackend::create(dpdk_test_opts());
  if (retry.has_value() || retry.error().code != Errc::bad_state) std::_Exit(kChildFailed);
  std::_Exit(kChildPassed);
}

TEST(DpdkInitDeathTest, InitFailureIsAnErrorWithDpdksReasonNotAnAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // The child's stderr carries our log line with rte_errno's text and the error description.
  EXPECT_EXIT(expect_init_failure_is_an_error(), ::testing::ExitedWithCode(kChildPassed),
              "rte_eal_init failed: .*rte_errno");
}

void expect_no_restart_after_stop() {
  {
    auto backend = DpdkMemoryBackend::create(dpdk_test_opts());
    if (!backend.has_value()) {
      fprintf(stderr, "EAL does not start here: %s\n", backend.error().detail);
      std::_Exit(kChildPassed);  // nothing to restart; the fixture tests report the skip
    }
  }  // rte_eal_cleanup()
  auto again = DpdkMemoryBackend::create(dpdk_test_opts());
  if (again.has_value() || again.error().code != Errc::bad_state) std::_Exit(kChildFailed);
  fprintf(stderr, "second start: %s\n", again.error().detail);
  std::_Exit(kChildPassed);
}

TEST(DpdkInitDeathTest, NoRestartAfterStop) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(expect_no_restart_after_stop(), ::testing::ExitedWithCode(kChildPassed), "");
}

}  // namespace
}  // namespace nvmf::env
