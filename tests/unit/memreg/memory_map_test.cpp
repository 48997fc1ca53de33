// MemoryMap on the sim provider: allocation and first-fit reuse inside chunks, translation to
// the keys of the right protection domain, ranges that leave a chunk, attach/detach of PDs
// before and after allocation, registration failures rolled back, an RDMA WRITE and READ with
// translated keys, and translation racing with allocation on another thread.
#include "memreg/memory_map.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "log_capture.h"
#include "verbs/sim/sim.h"

namespace nvmf::memreg {
namespace {

using verbs::sim::SimOpts;
using verbs::sim::SimProvider;

constexpr size_t kChunkBytes = 1u << 20;  // small chunks keep the tests quick

MemoryMapOpts small_chunks(size_t chunk_bytes = kChunkBytes) {
  MemoryMapOpts opts;
  opts.chunk_bytes = chunk_bytes;
  // Normal pages whatever the machine reserved, so chunk sizes are what the test asked for.
  opts.memory.hugepages = env::HugepageMode::off;
  return opts;
}

std::unique_ptr<MemoryMap> make_map(const MemoryMapOpts& opts = small_chunks()) {
  auto map = MemoryMap::create(opts);
  EXPECT_TRUE(map);
  return map ? std::move(*map) : nullptr;
}

// A sim device and as many PDs as a test asks for. Declare it before the map, so the map
// (which deregisters its MRs) is destroyed first.
class SimDevice {
 public:
  SimDevice() {
    auto provider = SimProvider::create(SimOpts{});
    EXPECT_TRUE(provider);
    if (provider) provider_ = std::move(*provider);
  }
  verbs::ProtectionDomain& new_pd() {
    auto pd = provider_->device().allocate_pd();
    EXPECT_TRUE(pd);
    pds_.push_back(std::move(*pd));
    return *pds_.back();
  }
  SimProvider& provider() { return *provider_; }

 private:
  std::unique_ptr<SimProvider> provider_;
  std::vector<std::unique_ptr<verbs::ProtectionDomain>> pds_;
};

bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kAllocationAlignmentBytes == 0;
}

// The address one past the end of the MR (chunk) holding p in `domain`.
uintptr_t chunk_end(const MemoryMap& map, uint32_t domain, const void* p) {
  const verbs::MemoryRegion* mr = map.region_of(domain, p);
  EXPECT_NE(mr, nullptr);
  return mr == nullptr ? 0 : reinterpret_cast<uintptr_t>(mr->addr()) + mr->length();
}

// ---------------------------------------------------------------------------------------
// A PD that counts its live MRs and can be told to refuse registrations.

class CountingMr final : public verbs::MemoryRegion {
 public:
  CountingMr(void* addr, size_t length, uint32_t access, uint32_t key, int* live)
      : addr_(addr), length_(length), access_(access), key_(key), live_(live) {
    ++*live_;
  }
  ~CountingMr() override { --*live_; }
  void* addr() const noexcept override { return addr_; }
  size_t length() const noexcept override { return length_; }
  uint32_t lkey() const noexcept override { return key_; }
  uint32_t rkey() const noexcept override { return key_ | 0x80000000u; }
  uint32_t access() const noexcept override { return access_; }

 private:
  void* addr_;
  size_t length_;
  uint32_t access_;
  uint32_t key_;
  int* live_;
};

class CountingPd final : public verbs::ProtectionDomain {
 public:
  int live_mrs = 0;
  int registrations_left = 1 << 30;  // then register_memory fails with no_memory

  Result<std::unique_ptr<verbs::MemoryRegion>> register_memory(void* addr, size_t length,
                                                               uint32_t access) noexcept override {
    if (registrations_left == 0) return Unexpected(Errc::no_memory, "test: registration refused");
    --registrations_left;
    return std::unique_ptr<verbs::MemoryRegion>(
        std::make_unique<CountingMr>(addr, length, access, ++next_key_, &live_mrs));
  }
  Result<std::unique_ptr<verbs::MemoryWindow>> allocate_window() noexcept override {
    return Errc::not_supported;
  }
  Result<std::unique_ptr<verbs::CompletionQueue>> create_cq(
      const verbs::CqOpts&) noexcept override {
    return Errc::not_supported;
  }
  Result<std::unique_ptr<verbs::SharedReceiveQueue>> create_srq(
      const verbs::SrqOpts&) noexcept override {
    return Errc::not_supported;
  }

 private:
  uint32_t next_key_ = 0x100;
};

// ---------------------------------------------------------------------------------------
// Creation

TEST(MemoryMap, CreateRefusesBadOptions) {
  test::LogCapture log;
  MemoryMapOpts opts = small_chunks(0);
  auto zero = MemoryMap::create(opts);
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().code, Errc::invalid_argument);
  EXPECT_TRUE(log.contains("chunk_bytes"));

  opts = small_chunks();
  opts.access |= 1u << 7;  // not an access bit of verbs.h
  auto access = MemoryMap::create(opts);
  ASSERT_FALSE(access);
  EXPECT_EQ(access.error().code, Errc::invalid_argument);
}

TEST(MemoryMap, OptsDumpAsJson) {
  const std::string json = small_chunks().to_json();
  EXPECT_NE(json.find("\"chunk_bytes\":1048576"), std::string::npos) << json;
  EXPECT_NE(json.find("\"access\":23"), std::string::npos) << json;
  EXPECT_NE(json.find("\"hugepages\":\"off\""), std::string::npos) << json;
}

// ---------------------------------------------------------------------------------------
// Allocation and translation

TEST(MemoryMap, AllocateAndTranslateGiveTheChunkMrKeys) {
  SimDevice sim;
  verbs::ProtectionDomain& pd = sim.new_pd();
  auto map = make_map();
  ASSERT_NE(map, nullptr);
  auto domain = map->attach(pd);
  ASSERT_TRUE(domain);
  EXPECT_LT(*domain, kMaxDomains);

  void* buffer = map->allocate(10000);
  ASSERT_NE(buffer, nullptr);
  EXPECT_TRUE(aligned(buffer));
  memset(buffer, 0xA5, 10000);  // mapped and writable

  const verbs::MemoryRegion* mr = map->region_of(*domain, buffer);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(mr->access(), map->opts().access);
  EXPECT_LE(reinterpret_cast<uintptr_t>(mr->addr()), reinterpret_cast<uintptr_t>(buffer));
  EXPECT_EQ(mr->length(), kChunkBytes);

  Keys keys;
  ASSERT_TRUE(map->translate(*domain, buffer, 10000, &keys));
  EXPECT_EQ(keys.lkey, mr->lkey());
  EXPECT_EQ(keys.rkey, mr->rkey());
  EXPECT_NE(keys.rkey, 0u);  // the default access includes remote read/write
  // Any sub-range of the buffer, and the rounded-up tail, translate the same.
  Keys inner;
  ASSERT_TRUE(map->translate(*domain, static_cast<char*>(buffer) + 4096, 12288 - 4096, &inner));
  EXPECT_EQ(inner.lkey, keys.lkey);
  EXPECT_TRUE(map->translate(*domain, buffer, 0, &inner));
  EXPECT_EQ(map->chunk_count(), 1u);
}

TEST(MemoryMap, EachDomainGetsItsOwnKeys) {
  SimDevice sim;
  verbs::ProtectionDomain& pd_a = sim.new_pd();
  verbs::ProtectionDomain& pd_b = sim.new_pd();
  auto map = make_map();
  ASSERT_NE(map, nullptr);
  auto a = map->attach(pd_a);
  auto b = map->attach(pd_b);
  ASSERT_TRUE(a && b);
  EXPECT_NE(*a, *b);

  void* buffer = map->allocate(4096);
  ASSERT_NE(buffer, nullptr);
  Keys keys_a, keys_b;
  ASSERT_TRUE(map->translate(*a, buffer, 4096, &keys_a));
  ASSERT_TRUE(map->translate(*b, buffer, 4096, &keys_b));
  const verbs::MemoryRegion* mr_a = map->region_of(*a, buffer);
  const verbs::MemoryRegion* mr_b = map->region_of(*b, buffer);
  ASSERT_TRUE(mr_a != nullptr && mr_b != nullptr);
  EXPECT_NE(mr_a, mr_b);
  EXPECT_EQ(mr_a->addr(), mr_b->addr());
  EXPECT_EQ(keys_a.lkey, mr_a->lkey());
  EXPECT_EQ(keys_a.rkey, mr_a->rkey());
  EXPECT_EQ(keys_b.lkey, mr_b->lkey());
  EXPECT_EQ(keys_b.rkey, mr_b->rkey());
  EXPECT_NE(keys_a.lkey, keys_b.lkey);
}

// A map attached to one PD, with two whole-chunk buffers: two chunks, which mmap may well
// have placed side by side.
class MemoryMapTwoChunks : public ::testing::Test {
 protected:
  void SetUp() override {
    map_ = make_map();
    ASSERT_NE(map_, nullptr);
    auto attached = map_->attach(sim_.new_pd());
    ASSERT_TRUE(attached);
    domain_ = *attached;
    first_ = static_cast<char*>(map_->allocate(kChunkBytes));
    second_ = static_cast<char*>(map_->allocate(kChunkBytes));
    ASSERT_TRUE(first_ != nullptr && second_ != nullptr);
    ASSERT_EQ(map_->chunk_count(), 2u);
  }

  SimDevice sim_;  // before the map, which deregisters its MRs
  std::unique_ptr<MemoryMap> map_;
  uint32_t domain_ = 0;
  char* first_ = nullptr;
  char* second_ = nullptr;
};

TEST_F(MemoryMapTwoChunks, RangesLeavingAChunkAreRefused) {
  Keys keys;
  EXPECT_TRUE(map_->translate(domain_, first_, kChunkBytes, &keys));
  EXPECT_FALSE(map_->translate(domain_, first_, kChunkBytes + 1, &keys));
  EXPECT_TRUE(map_->translate(domain_, first_ + kChunkBytes - 1, 1, &keys));
  EXPECT_FALSE(map_->translate(domain_, first_ + kChunkBytes - 1, 2, &keys));
  EXPECT_FALSE(map_->translate(domain_, first_ - 1, 2, &keys));
  EXPECT_FALSE(map_->translate(domain_, first_, SIZE_MAX, &keys));  // no wrap-around
  // Across the boundary of the two chunks, adjacent or not: two MRs, so no single key.
  char* lower = first_ < second_ ? first_ : second_;
  EXPECT_FALSE(map_->translate(domain_, lower + kChunkBytes - 4096, 8192, &keys));
  EXPECT_EQ(chunk_end(*map_, domain_, lower), reinterpret_cast<uintptr_t>(lower + kChunkBytes));
}

// A queue pair's KeyCache (the translate() of every data buffer it sends) answers as the map
// does: the chunk it holds from the cache, another chunk, a range leaving a chunk or memory
// not from the map by a real translation, which refills it only when it succeeds.
TEST_F(MemoryMapTwoChunks, TranslateThroughAKeyCacheAnswersAsTheMapDoes) {
  Keys first_keys, second_keys;
  ASSERT_TRUE(map_->translate(domain_, first_, kChunkBytes, &first_keys));
  ASSERT_TRUE(map_->translate(domain_, second_, kChunkBytes, &second_keys));
  ASSERT_NE(first_keys.lkey, second_keys.lkey);

  KeyCache cache;
  Keys keys;
  ASSERT_TRUE(map_->translate(domain_, first_ + 4096, 4096, &keys, &cache));
  EXPECT_EQ(keys.lkey, first_keys.lkey);
  EXPECT_EQ(keys.rkey, first_keys.rkey);
  EXPECT_TRUE(cache.holds(first_, kChunkBytes));
  // Ranges that leave the cached chunk are not answered from it.
  EXPECT_FALSE(map_->translate(domain_, first_ + kChunkBytes - 1, 2, &keys, &cache));
  EXPECT_FALSE(map_->translate(domain_, first_ - 1, 2, &keys, &cache));
  EXPECT_FALSE(map_->translate(domain_, first_, SIZE_MAX, &keys, &cache));
  EXPECT_TRUE(cache.holds(first_, kChunkBytes)) << "a failed translation keeps the cache";
  // Another chunk: its own keys, and the cache follows it.
  ASSERT_TRUE(map_->translate(domain_, second_, 8192, &keys, &cache));
  EXPECT_EQ(keys.lkey, second_keys.lkey);
  EXPECT_EQ(keys.rkey, second_keys.rkey);
  EXPECT_FALSE(cache.holds(first_, 1));
  ASSERT_TRUE(map_->translate(domain_, first_, 4096, &keys, &cache));
  EXPECT_EQ(keys.lkey, first_keys.lkey);
  int on_stack = 0;
  EXPECT_FALSE(map_->translate(domain_, &on_stack, sizeof(on_stack), &keys, &cache));
  EXPECT_FALSE(map_->translate(domain_ + 1, second_, 4096, &keys, &cache));
}

TEST(MemoryMap, PointersNotFromTheMapDoNotTranslate) {
  SimDevice sim;
  verbs::ProtectionDomain& pd = sim.new_pd();
  auto map = make_map();
  ASSERT_NE(map, nullptr);
  auto domain = map->attach(pd);
  ASSERT_TRUE(domain);
  void* buffer = map->allocate(4096);
  ASSERT_NE(buffer, nullptr);

  Keys keys;
  int on_stack = 0;
  std::vector<char> on_heap(4096);
  EXPECT_FALSE(map->translate(*domain, &on_stack, sizeof(on_stack), &keys));
  EXPECT_FALSE(map->translate(*domain, on_heap.data(), on_heap.size(), &keys));
  EXPECT_FALSE(map->translate(*domain, nullptr, 1, &keys));
  EXPECT_EQ(map->region_of(*domain, &on_stack), nullptr);
  // Unknown domains: out of range, or an index no PD holds.
  EXPECT_FALSE(map->translate(kMaxDomains, buffer, 4096, &keys));
  EXPECT_FALSE(map->translate(UINT32_MAX, buffer, 4096, &keys));
  EXPECT_FALSE(map->translate(*domain + 1, buffer, 4096, &keys));
  EXPECT_EQ(map->region_of(kMaxDomains, buffer), nullptr);
  EXPECT_EQ(map->region_of(*domain + 1, buffer), nullptr);
}

TEST(MemoryMap, AllocationBiggerThanAChunkGetsItsOwnChunk) {
  SimDevice sim;
  verbs::ProtectionDomain& pd = sim.new_pd();
  auto map = make_map();
  ASSERT_NE(map, nullptr);
  auto domain = map->attach(pd);
  ASSERT_TRUE(domain);
  void* small = map->allocate(4096);
  ASSERT_NE(small, nullptr);
  const size_t big_bytes = 3 * kChunkBytes + 100;
  char* big = static_cast<char*>(map->allocate(big_bytes));
  ASSERT_NE(big, nullptr);
  EXPECT_TRUE(aligned(big));
  EXPECT_EQ(map->chunk_count(), 2u);
  const verbs::MemoryRegion* mr = map->region_of(*domain, big);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(mr->addr(), big);
  EXPECT_EQ(mr->length(), 3 * kChunkBytes + 4096);  // rounded up to 4096
  big[big_bytes - 1] = 1;
  Keys keys;
  EXPECT_TRUE(map->translate(*domain, big, big_bytes, &keys));
  EXPECT_EQ(keys.lkey, mr->lkey());
  // The small buffer's chunk still has room: no third chunk.
  EXPECT_NE(map->allocate(4096), nullptr);
  EXPECT_EQ(map->chunk_count(), 2u);
}

TEST(MemoryMap, FreedSpaceIsReusedFirstFitAndCoalesced) {
  auto map = make_map();  // no PD needed for the allocator itself
  ASSERT_NE(map, nullptr);
  char* a = static_cast<char*>(map->allocate(8192));
  char* b = static_cast<char*>(map->allocate(8192));
  char* c = static_cast<char*>(map->allocate(8192));
  ASSERT_TRUE(a != nullptr && b != nullptr && c != nullptr);
  EXPECT_EQ(b, a + 8192);  // carved in order out of one chunk
  EXPECT_EQ(c, b + 8192);

  map->free(b);
  EXPECT_EQ(map->allocate(100), b);  // first fit: b's hole, rounded to 4096
  EXPECT_EQ(map->allocate(4096), b + 4096);
  map->free(b);
  map->free(b + 4096);
  map->free(a);
  // a and b coalesced into one 16 KiB hole in front of c.
  EXPECT_EQ(map->allocate(16384), a);
  map->free(a);
  map->free(c);
  // Everything free again: the whole chunk is one range.
  EXPECT_EQ(map->allocate(kChunkBytes), a);
  EXPECT_EQ(map->chunk_count(), 1u);
  EXPECT_NE(map->allocate(4096), nullptr);  // the chunk is full now: a second one
  EXPECT_EQ(map->chunk_count(), 2u);
}

TEST(MemoryMap, FreeOfAForeignPointerIsLoggedAndIgnored) {
  auto map = make_map();
  ASSERT_NE(map, nullptr);
  char* buffer = static_cast<char*>(map->allocate(8192));
  ASSERT_NE(buffer, nullptr);
  test::LogCapture log;
  map->free(nullptr);
  EXPECT_TRUE(log.lines().empty());
  int on_stack = 0;
  map->free(&on_stack);
  EXPECT_TRUE(log.contains("not a buffer from allocate()"));
  log.clear();
  map->free(buffer + 4096);  // inside a buffer, not its start
  EXPECT_TRUE(log.contains("not a buffer from allocate()"));
  map->free(buffer);
  log.clear();
  map->free(buffer);  // twice
  EXPECT_TRUE(log.contains("freed already"));
  // The double free did not corrupt the free list: the space comes back once.
  EXPECT_EQ(map->allocate(8192), buffer);
  EXPECT_NE(map->allocate(8192), buffer);
}

TEST(MemoryMap, AllocateZeroBytesIsRefused) {
  auto map = make_map();
  ASSERT_NE(map, nullptr);
  test::LogCapture log;
  EXPECT_EQ(map->allocate(0), nullptr);
  EXPECT_TRUE(log.contains("allocate(0)"));
  EXPECT_EQ(map->allocate(SIZE_MAX), nullptr);
}

TEST(MemoryMap, FullChunkTableNamesTheKnob) {
  SimDevice sim;
  verbs::ProtectionDomain& pd = sim.new_pd();
  auto map = make_map(small_chunks(4096));
  ASSERT_NE(map, nullptr);
  ASSERT_TRUE(map->attach(pd));
  for (uint32_t i = 0; i < kMaxChunks; ++i) ASSERT_NE(map->allocate(4096), nullptr) << i;
  EXPECT_EQ(map->chunk_count(), kMaxChunks);
  test::LogCapture log;
  EXPECT_EQ(map->allocate(4096), nullptr);
  EXPECT_TRUE(log.contains("chunk_bytes"));
}

// ---------------------------------------------------------------------------------------
// Attach and detach

TEST(MemoryMap, AttachAfterAllocateRegistersExistingChunks) {
  SimDevice sim;
  verbs::ProtectionDomain& pd = sim.new_pd();
  auto map = make_map();
  ASSERT_NE(map, nullptr);
  std::vector<void*> buffers;
  for (int i = 0; i < 3; ++i) buffers.push_back(map->allocate(kChunkBytes));
  for (void* buffer : buffers) ASSERT_NE(buffer, nullptr);
  EXPECT_EQ(map->chunk_count(), 3u);

  auto domain = map->attach(pd);
  ASSERT_TRUE(domain);
  Keys keys;
  for (void* buffer : buffers) {
    ASSERT_TRUE(map->translate(*domain, buffer, kChunkBytes, &keys));
    EXPECT_EQ(keys.lkey, map->region_of(*domain, buffer)->lkey());
  }
  // And a chunk made after attach() is registered too.
  void* later = map->allocate(kChunkBytes);
  ASSERT_NE(later, nullptr);
  EXPECT_EQ(map->chunk_count(), 4u);
  EXPECT_TRUE(map->translate(*domain, later, kChunkBytes, &keys));
}

TEST(MemoryMap, AttachTwiceCountsAReferenceAndDetachDeregisters) {
  SimDevice sim;
  verbs::ProtectionDomain& pd = sim.new_pd();
  auto map = make_map();
  ASSERT_NE(map, nullptr);
  auto first = map->attach(pd);
  auto second = map->attach(pd);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(*first, *second);
  void* buffer = map->allocate(4096);
  ASSERT_NE(buffer, nullptr);
  Keys keys;
  ASSERT_TRUE(map->translate(*first, buffer, 4096, &keys));
  const uint32_t old_lkey = keys.lkey;
  EXPECT_EQ(sim.provider().key_state(old_lkey), verbs::sim::KeyState::valid);

  map->detach(*first);  // one reference left
  EXPECT_TRUE(map->translate(*first, buffer, 4096, &keys));
  map->detach(*first);  // gone: MRs deregistered
  EXPECT_FALSE(map->translate(*first, buffer, 4096, &keys));
  EXPECT_EQ(map->region_of(*first, buffer), nullptr);
  EXPECT_NE(sim.provider().key_state(old_lkey), verbs::sim::KeyState::valid);

  // The index is free for the next PD, which gets the existing chunk registered.
  verbs::ProtectionDomain& other = sim.new_pd();
  auto reused = map->attach(other);
  ASSERT_TRUE(reused);
  EXPECT_EQ(*reused, *first);
  ASSERT_TRUE(map->translate(*reused, buffer, 4096, &keys));
  EXPECT_EQ(keys.lkey, map->region_of(*reused, buffer)->lkey());

  test::LogCapture log;
  map->detach(kMaxDomains);
  EXPECT_TRUE(log.contains("no such domain"));
  log.clear();
  map->detach(*reused + 1);
  EXPECT_TRUE(log.contains("no such domain"));
}

TEST(MemoryMap, AtMostMaxDomainsPds) {
  SimDevice sim;
  auto map = make_map();
  ASSERT_NE(map, nullptr);
  for (uint32_t i = 0; i < kMaxDomains; ++i) {
    auto domain = map->attach(sim.new_pd());
    ASSERT_TRUE(domain);
    EXPECT_EQ(*domain, i);
  }
  test::LogCapture log;
  auto refused = map->attach(sim.new_pd());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::no_memory);
  EXPECT_TRUE(log.contains("kMaxDomains"));
}

TEST(MemoryMap, FailedAttachLeavesNothingRegistered) {
  CountingPd pd;
  auto map = make_map();
  ASSERT_NE(map, nullptr);
  for (int i = 0; i < 3; ++i) ASSERT_NE(map->allocate(kChunkBytes), nullptr);
  pd.registrations_left = 2;  // the third chunk's registration fails
  test::LogCapture log;
  auto domain = map->attach(pd);
  ASSERT_FALSE(domain);
  EXPECT_EQ(domain.error().code, Errc::no_memory);
  EXPECT_EQ(pd.live_mrs, 0);
  EXPECT_TRUE(log.contains("registration refused"));

  // The index was not taken: a working attach gets it and registers all three chunks.
  pd.registrations_left = 1 << 30;
  auto retry = map->attach(pd);
  ASSERT_TRUE(retry);
  EXPECT_EQ(*retry, 0u);
  EXPECT_EQ(pd.live_mrs, 3);
  map->detach(*retry);
  EXPECT_EQ(pd.live_mrs, 0);
}

TEST(MemoryMap, FailedRegistrationOfANewChunkFailsTheAllocation) {
  SimDevice sim;
  verbs::ProtectionDomain& good = sim.new_pd();
  CountingPd counting;
  auto map = make_map();
  ASSERT_NE(map, nullptr);
  auto good_domain = map->attach(good);
  auto counting_domain = map->attach(counting);
  ASSERT_TRUE(good_domain && counting_domain);
  void* buffer = map->allocate(kChunkBytes);
  ASSERT_NE(buffer, nullptr);
  EXPECT_EQ(counting.live_mrs, 1);

  counting.registrations_left = 0;
  test::LogCapture log;
  EXPECT_EQ(map->allocate(4096), nullptr);
  EXPECT_TRUE(log.contains("registration refused"));
  EXPECT_EQ(map->chunk_count(), 1u);  // nothing published
  EXPECT_EQ(counting.live_mrs, 1);

  counting.registrations_left = 1;
  void* next = map->allocate(4096);
  ASSERT_NE(next, nullptr);
  Keys keys;
  EXPECT_TRUE(map->translate(*good_domain, next, 4096, &keys));
  EXPECT_TRUE(map->translate(*counting_domain, next, 4096, &keys));
  EXPECT_EQ(keys.lkey, map->region_of(*counting_domain, next)->lkey());
}

TEST(MemoryMap, DestructionDeregistersEverything) {
  CountingPd pd;
  {
    auto map = make_map();
    ASSERT_NE(map, nullptr);
    ASSERT_TRUE(map->attach(pd));
    ASSERT_NE(map->allocate(kChunkBytes), nullptr);
    ASSERT_NE(map->allocate(2 * kChunkBytes), nullptr);
    EXPECT_EQ(pd.live_mrs, 2);
  }
  EXPECT_EQ(pd.live_mrs, 0);
}

// ---------------------------------------------------------------------------------------
// RDMA through the sim with translated keys

// Both ends of one connection on the sim, each with its own PD and CQ.
struct Endpoint {
  std::unique_ptr<verbs::CmChannel> channel;
  std::unique_ptr<verbs::ProtectionDomain> pd;
  std::unique_ptr<verbs::CompletionQueue> cq;
  std::unique_ptr<verbs::CmId> id;  // owns the QP: destroyed first
};

bool wait_event(verbs::CmChannel& channel, verbs::CmEventType type) {
  verbs::CmEvent event;
  for (int i = 0; i < 100; ++i) {
    if (channel.poll_event(&event)) return event.type == type;
  }
  return false;
}

void make_qp(Endpoint& end) {
  auto pd = end.id->device()->allocate_pd();
  ASSERT_TRUE(pd);
  end.pd = std::move(*pd);
  auto cq = end.pd->create_cq({.depth = 64});
  ASSERT_TRUE(cq);
  end.cq = std::move(*cq);
  verbs::QpOpts opts;
  opts.send_cq = end.cq.get();
  opts.recv_cq = end.cq.get();
  opts.max_send_wr = 16;
  opts.max_recv_wr = 16;
  ASSERT_TRUE(end.id->create_qp(*end.pd, opts));
}

verbs::WorkCompletion run_one(Endpoint& end, const verbs::SendWr& wr) {
  verbs::WorkCompletion wc;
  wc.status = verbs::WcStatus::general_error;
  EXPECT_TRUE(end.id->qp()->post_send(wr));
  EXPECT_TRUE(end.id->qp()->flush());
  for (int i = 0; i < 100; ++i) {
    if (end.cq->poll(std::span(&wc, 1)) == 1) break;
  }
  return wc;
}

TEST(MemoryMap, RdmaWithTranslatedKeysWorksThroughTheSim) {
  SimDevice sim;
  Endpoint host, target;
  std::unique_ptr<verbs::CmId> listener;
  auto host_channel = sim.provider().create_cm_channel();
  auto target_channel = sim.provider().create_cm_channel();
  ASSERT_TRUE(host_channel && target_channel);
  host.channel = std::move(*host_channel);
  target.channel = std::move(*target_channel);
  auto listen_id = target.channel->create_id();
  auto host_id = host.channel->create_id();
  ASSERT_TRUE(listen_id && host_id);
  listener = std::move(*listen_id);
  host.id = std::move(*host_id);
  ASSERT_TRUE(listener->listen("10.0.0.1", 4420, 4));
  ASSERT_TRUE(host.id->resolve("10.0.0.1", 4420, 1000));
  ASSERT_TRUE(wait_event(*host.channel, verbs::CmEventType::route_resolved));
  ASSERT_NO_FATAL_FAILURE(make_qp(host));
  ASSERT_TRUE(host.id->connect({}));
  verbs::CmEvent request;
  bool got_request = false;
  for (int i = 0; i < 100 && !got_request; ++i) got_request = target.channel->poll_event(&request);
  ASSERT_TRUE(got_request);
  ASSERT_EQ(request.type, verbs::CmEventType::connect_request);
  target.id = target.channel->adopt(request.id);
  ASSERT_NE(target.id, nullptr);
  ASSERT_NO_FATAL_FAILURE(make_qp(target));
  ASSERT_TRUE(target.id->accept({}));
  ASSERT_TRUE(wait_event(*host.channel, verbs::CmEventType::established));
  ASSERT_TRUE(wait_event(*target.channel, verbs::CmEventType::established));

  // One map serving both PDs (declared after them: deregisters first).
  auto map = make_map();
  ASSERT_NE(map, nullptr);
  auto host_domain = map->attach(*host.pd);
  auto target_domain = map->attach(*target.pd);
  ASSERT_TRUE(host_domain && target_domain);
  constexpr uint32_t kLength = 3 * 4096;
  char* source = static_cast<char*>(map->allocate(kLength));
  char* sink = static_cast<char*>(map->allocate(kLength));
  ASSERT_TRUE(source != nullptr && sink != nullptr);
  for (uint32_t i = 0; i < kLength; ++i) source[i] = static_cast<char>(i * 7);

  // The host WRITEs from its buffer (host lkey) into the target's (target rkey) ...
  Keys local, remote;
  ASSERT_TRUE(map->translate(*host_domain, source, kLength, &local));
  ASSERT_TRUE(map->translate(*target_domain, sink, kLength, &remote));
  verbs::Sge sge{reinterpret_cast<uint64_t>(source), kLength, local.lkey};
  verbs::SendWr write;
  write.wr_id = 1;
  write.opcode = verbs::WrOpcode::rdma_write;
  write.flags = verbs::kWrSignaled;
  write.sg_list = &sge;
  write.num_sge = 1;
  write.remote_addr = reinterpret_cast<uint64_t>(sink);
  write.rkey = remote.rkey;
  verbs::WorkCompletion wc = run_one(host, write);
  EXPECT_EQ(wc.status, verbs::WcStatus::success) << verbs::wc_status_name(wc.status);
  EXPECT_EQ(memcmp(source, sink, kLength), 0);

  // ... and the target READs it back into the first buffer (target lkey, host rkey).
  memset(source, 0, kLength);
  Keys target_local, host_remote;
  ASSERT_TRUE(map->translate(*target_domain, source, kLength, &target_local));
  ASSERT_TRUE(map->translate(*host_domain, sink, kLength, &host_remote));
  verbs::Sge read_sge{reinterpret_cast<uint64_t>(source), kLength, target_local.lkey};
  verbs::SendWr read = write;
  read.wr_id = 2;
  read.opcode = verbs::WrOpcode::rdma_read;
  read.sg_list = &read_sge;
  read.rkey = host_remote.rkey;
  wc = run_one(target, read);
  EXPECT_EQ(wc.status, verbs::WcStatus::success) << verbs::wc_status_name(wc.status);
  EXPECT_EQ(memcmp(source, sink, kLength), 0);
  map.reset();  // before the PDs
}

// ---------------------------------------------------------------------------------------
// Threads

TEST(MemoryMap, TranslateRacesWithAllocationOnAnotherThread) {
  SimDevice sim;
  verbs::ProtectionDomain& pd = sim.new_pd();
  // One chunk per allocation, so the allocating thread keeps publishing chunks.
  constexpr size_t kSmallChunk = 64 * 1024;
  constexpr int kAllocations = 128;
  auto map = make_map(small_chunks(kSmallChunk));
  ASSERT_NE(map, nullptr);
  auto domain = map->attach(pd);
  ASSERT_TRUE(domain);

  std::vector<std::atomic<void*>> published(kAllocations);
  std::atomic<bool> done{false};
  std::thread allocator([&] {
    for (int i = 0; i < kAllocations; ++i) {
      published[i].store(map->allocate(kSmallChunk), std::memory_order_release);
    }
    done.store(true, std::memory_order_release);
  });

  int foreign = 0;
  size_t translated = 0, failures = 0;
  while (!done.load(std::memory_order_acquire)) {
    for (auto& slot : published) {
      void* buffer = slot.load(std::memory_order_acquire);
      if (buffer == nullptr) continue;
      Keys keys;
      if (map->translate(*domain, buffer, kSmallChunk, &keys) && keys.lkey != 0) {
        ++translated;
      } else {
        ++failures;
      }
      if (map->translate(*domain, &foreign, sizeof(foreign), &keys)) ++failures;
    }
  }
  allocator.join();
  EXPECT_EQ(failures, 0u);
  for (auto& slot : published) {
    void* buffer = slot.load();
    ASSERT_NE(buffer, nullptr);
    Keys keys;
    EXPECT_TRUE(map->translate(*domain, buffer, kSmallChunk, &keys));
  }
  EXPECT_EQ(map->chunk_count(), static_cast<uint32_t>(kAllocations));
  (void)translated;  // how far the reader got depends on scheduling: no assertion on it
}

}  // namespace
}  // namespace nvmf::memreg
