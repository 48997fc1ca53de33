// ObjectPool and BufferPool: fixed capacity, nullptr when empty, reuse, contiguity, alignment,
// no overlap, and the checks on put().
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "env/pool.h"
#include "env/posix_memory.h"

namespace nvmf::env {
namespace {

struct Request {
  int id = -1;
  uint64_t payload[4] = {};
};

std::unique_ptr<PosixMemoryBackend> posix_backend() {
  PosixMemoryOpts opts;
  opts.hugepages = HugepageMode::off;
  auto backend = PosixMemoryBackend::create(opts);
  EXPECT_TRUE(backend.has_value());
  return backend ? std::move(*backend) : nullptr;
}

TEST(ObjectPool, GetsEveryObjectOnceThenNull) {
  auto pool = ObjectPool<Request>::create(8);
  ASSERT_TRUE(pool.has_value());
  EXPECT_EQ(pool->capacity(), 8u);
  EXPECT_EQ(pool->in_use(), 0u);
  std::set<Request*> seen;
  for (int i = 0; i < 8; ++i) {
    Request* request = pool->get();
    ASSERT_NE(request, nullptr);
    EXPECT_TRUE(seen.insert(request).second) << "handed out twice";
  }
  EXPECT_EQ(pool->in_use(), 8u);
  EXPECT_EQ(pool->available(), 0u);
  EXPECT_EQ(pool->get(), nullptr) << "empty pool answers nullptr (busy), never allocates";
  EXPECT_EQ(pool->get(), nullptr);
}

TEST(ObjectPool, PutMakesTheObjectReusableLastInFirstOut) {
  auto pool = ObjectPool<Request>::create(4);
  ASSERT_TRUE(pool.has_value());
  Request* a = pool->get();
  Request* b = pool->get();
  a->id = 42;
  pool->put(a);
  EXPECT_EQ(pool->in_use(), 1u);
  Request* again = pool->get();
  EXPECT_EQ(again, a) << "the warmest object comes back first";
  EXPECT_EQ(again->id, 42) << "get() hands out the object as it was, it does not construct";
  pool->put(b);
  pool->put(again);
  EXPECT_EQ(pool->in_use(), 0u);
  for (int round = 0; round < 100; ++round) {
    std::vector<Request*> taken;
    while (Request* r = pool->get()) taken.push_back(r);
    ASSERT_EQ(taken.size(), 4u);
    for (Request* r : taken) pool->put(r);
  }
  EXPECT_EQ(pool->available(), 4u);
}

TEST(ObjectPool, ObjectsLiveInOneContiguousArray) {
  auto pool = ObjectPool<Request>::create(16);
  ASSERT_TRUE(pool.has_value());
  Request* first = &pool->at(0);
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(&pool->at(i), first + i);
    EXPECT_EQ(pool->index_of(first + i), i);
    EXPECT_TRUE(pool->owns(first + i));
  }
  Request outside;
  EXPECT_FALSE(pool->owns(&outside));
  EXPECT_FALSE(pool->owns(first + 16));
  EXPECT_FALSE(pool->owns(reinterpret_cast<Request*>(reinterpret_cast<char*>(first) + 1)));
  EXPECT_EQ(pool->get(), first) << "slot 0 comes out first";
}

TEST(ObjectPool, InitRunsOncePerObjectAtCreation) {
  int calls = 0;
  auto pool = ObjectPool<Request>::create(5, [&](Request& request, size_t index) {
    request.id = static_cast<int>(index) * 10;
    ++calls;
  });
  ASSERT_TRUE(pool.has_value());
  EXPECT_EQ(calls, 5);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(pool->at(i).id, static_cast<int>(i) * 10);
  EXPECT_EQ(pool->at(0).payload[3], 0u) << "objects are value-initialised";
}

TEST(ObjectPool, RejectsZeroAndOversizedCapacity) {
  auto zero = ObjectPool<Request>::create(0);
  ASSERT_FALSE(zero.has_value());
  EXPECT_EQ(zero.error().code, Errc::invalid_argument);
  auto huge = ObjectPool<Request>::create(IndexFreeList::kCapacityMax + 1);
  ASSERT_FALSE(huge.has_value());
  EXPECT_EQ(huge.error().code, Errc::invalid_argument);
  ObjectPool<Request> empty;
  EXPECT_EQ(empty.capacity(), 0u);
  EXPECT_EQ(empty.get(), nullptr);
}

TEST(ObjectPool, MoveKeepsTheObjectsAndEmptiesTheSource) {
  auto created = ObjectPool<Request>::create(3);
  ASSERT_TRUE(created.has_value());
  ObjectPool<Request> pool = std::move(*created);
  Request* taken = pool.get();
  ASSERT_NE(taken, nullptr);
  ObjectPool<Request> moved = std::move(pool);
  EXPECT_EQ(moved.capacity(), 3u);
  EXPECT_EQ(moved.in_use(), 1u);
  EXPECT_TRUE(moved.owns(taken));
  moved.put(taken);
  EXPECT_EQ(moved.in_use(), 0u);
  // NOLINTNEXTLINE(bugprone-use-after-move): a moved-from pool is empty, not dangling
  EXPECT_EQ(pool.capacity(), 0u);
  EXPECT_EQ(pool.get(), nullptr);
}

TEST(ObjectPool, ForeignOrDoublePutIsCaught) {
  auto pool = ObjectPool<Request>::create(2);
  ASSERT_TRUE(pool.has_value());
  Request outside;
  // Debug builds assert; release builds ignore the bad put and keep the pool intact.
  EXPECT_DEBUG_DEATH(pool->put(&outside), "not from this pool");
  Request* taken = pool->get();
  pool->put(taken);
  EXPECT_DEBUG_DEATH(pool->put(taken), "already free");
  EXPECT_EQ(pool->in_use(), 0u);
  EXPECT_EQ(pool->available(), 2u);
}

TEST(BufferPool, BuffersAreAlignedAndDoNotOverlap) {
  auto backend = posix_backend();
  ASSERT_NE(backend, nullptr);
  auto pool = BufferPool::create(*backend, {.count = 32, .buffer_size_bytes = 4096});
  ASSERT_TRUE(pool.has_value());
  std::vector<unsigned char*> buffers;
  while (void* buffer = pool->get()) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer) % 4096, 0u);
    buffers.push_back(static_cast<unsigned char*>(buffer));
  }
  ASSERT_EQ(buffers.size(), 32u);
  // Fill each buffer with its own byte, then check no write spilled into another.
  for (size_t i = 0; i < buffers.size(); ++i) memset(buffers[i], static_cast<int>(i + 1), 4096);
  for (size_t i = 0; i < buffers.size(); ++i) {
    for (size_t b = 0; b < 4096; ++b) ASSERT_EQ(buffers[i][b], i + 1) << i << " " << b;
  }
  std::set<unsigned char*> distinct(buffers.begin(), buffers.end());
  EXPECT_EQ(distinct.size(), buffers.size());
}

TEST(BufferPool, ExhaustionReturnsNullAndPutReuses) {
  auto backend = posix_backend();
  ASSERT_NE(backend, nullptr);
  auto pool = BufferPool::create(*backend, {.count = 3, .buffer_size_bytes = 8192});
  ASSERT_TRUE(pool.has_value());
  void* a = pool->get();
  void* b = pool->get();
  void* c = pool->get();
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(pool->get(), nullptr);
  EXPECT_EQ(pool->in_use(), 3u);
  pool->put(b);
  EXPECT_EQ(pool->get(), b);
  pool->put(a);
  pool->put(b);
  pool->put(c);
  EXPECT_EQ(pool->in_use(), 0u);
  EXPECT_EQ(pool->available(), 3u);
}

TEST(BufferPool, StrideIsTheSizeRoundedUpToTheAlignment) {
  auto backend = posix_backend();
  ASSERT_NE(backend, nullptr);
  struct Case {
    size_t size, alignment, stride;
  };
  for (Case c : {Case{3000, 4096, 4096}, Case{8192, 4096, 8192}, Case{512, 512, 512},
                 Case{513, 512, 1024}, Case{100, 64, 128}, Case{4096, 65536, 65536}}) {
    auto pool = BufferPool::create(
        *backend, {.count = 5, .buffer_size_bytes = c.size, .alignment_bytes = c.alignment});
    ASSERT_TRUE(pool.has_value()) << c.size;
    EXPECT_EQ(pool->stride_bytes(), c.stride) << c.size << "/" << c.alignment;
    EXPECT_EQ(pool->buffer_size_bytes(), c.size);
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(pool->at(i)) % c.alignment, 0u);
    }
  }
}

TEST(BufferPool, EveryBufferIsInsideTheOneRegion) {
  auto backend = posix_backend();
  ASSERT_NE(backend, nullptr);
  auto pool = BufferPool::create(*backend, {.count = 10, .buffer_size_bytes = 4096});
  ASSERT_TRUE(pool.has_value());
  EXPECT_EQ(backend->regions_in_use(), 1u) << "one region: registered once with the HCA";
  const DmaRegion& region = pool->region();
  EXPECT_GE(region.size_bytes(), 10u * 4096u);
  for (size_t i = 0; i < 10; ++i) {
    void* buffer = pool->at(i);
    EXPECT_TRUE(region.contains(buffer, 4096));
    EXPECT_EQ(pool->index_of(buffer), i);
    EXPECT_EQ(pool->iova(buffer), region.iova(region.addr()) + i * 4096);
  }
  EXPECT_FALSE(pool->owns(static_cast<char*>(pool->at(1)) + 1));
}

TEST(BufferPool, RejectsBadOptions) {
  auto backend = posix_backend();
  ASSERT_NE(backend, nullptr);
  for (BufferPoolOpts opts :
       {BufferPoolOpts{.count = 0, .buffer_size_bytes = 4096},
        BufferPoolOpts{.count = 4, .buffer_size_bytes = 0},
        BufferPoolOpts{.count = 4, .buffer_size_bytes = 4096, .alignment_bytes = 3000},
        BufferPoolOpts{.count = SIZE_MAX / 2, .buffer_size_bytes = 4096}}) {
    auto pool = BufferPool::create(*backend, opts);
    ASSERT_FALSE(pool.has_value()) << opts.count << " " << opts.buffer_size_bytes;
    EXPECT_EQ(pool.error().code, Errc::invalid_argument);
  }
  EXPECT_EQ(backend->regions_in_use(), 0u);
}

TEST(BufferPool, OutOfMemoryFromTheBackendIsPassedOn) {
  auto backend = posix_backend();
  ASSERT_NE(backend, nullptr);
  // 2^30 buffers of 1 MiB: a PiB, which MemAvailable (and the address space) cannot hold.
  auto pool =
      BufferPool::create(*backend, {.count = size_t{1} << 30, .buffer_size_bytes = 1 << 20});
  ASSERT_FALSE(pool.has_value());
  EXPECT_EQ(pool.error().code, Errc::no_memory);
  EXPECT_EQ(backend->regions_in_use(), 0u);
}

TEST(BufferPool, MoveAndForeignPut) {
  auto backend = posix_backend();
  ASSERT_NE(backend, nullptr);
  auto created = BufferPool::create(*backend, {.count = 2, .buffer_size_bytes = 100});
  ASSERT_TRUE(created.has_value());
  BufferPool pool = std::move(*created);
  void* buffer = pool.get();
  ASSERT_NE(buffer, nullptr);
  char outside[64];
  EXPECT_DEBUG_DEATH(pool.put(outside), "not from this pool");
  EXPECT_DEBUG_DEATH(pool.put(static_cast<char*>(buffer) + 8), "not from this pool");
  pool.put(buffer);
  EXPECT_DEBUG_DEATH(pool.put(buffer), "already free");
  EXPECT_EQ(pool.available(), 2u);
  BufferPool moved = std::move(pool);
  EXPECT_EQ(moved.capacity(), 2u);
  EXPECT_EQ(pool.get(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(backend->regions_in_use(), 1u);
}

}  // namespace
}  // namespace nvmf::env
