#include "env/ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace nvmf::env {
namespace {

struct Message {
  uint32_t producer;
  uint32_t sequence;
};

TEST(MpscRing, CapacityRoundsUpToPowerOfTwo) {
  EXPECT_EQ(MpscRing<int>(0).capacity(), 2u);
  EXPECT_EQ(MpscRing<int>(3).capacity(), 4u);
  EXPECT_EQ(MpscRing<int>(64).capacity(), 64u);
  EXPECT_EQ(MpscRing<int>(65).capacity(), 128u);
}

TEST(MpscRing, FifoAndFullAndEmpty) {
  MpscRing<int> ring(4);
  int value = 0;
  EXPECT_TRUE(ring.empty());
  EXPECT_FALSE(ring.try_pop(&value));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ring.try_push(i));
  EXPECT_FALSE(ring.try_push(99)) << "a full ring must refuse, not overwrite";
  EXPECT_EQ(ring.size_approx(), 4u);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(ring.try_pop(&value));
    EXPECT_EQ(value, i);
  }
  EXPECT_TRUE(ring.empty());
  EXPECT_FALSE(ring.try_pop(&value));
}

TEST(MpscRing, WrapsAroundManyLaps) {
  MpscRing<uint64_t> ring(8);
  uint64_t next_in = 0, next_out = 0, value = 0;
  for (int lap = 0; lap < 1000; ++lap) {
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(ring.try_push(next_in++));
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(ring.try_pop(&value));
      ASSERT_EQ(value, next_out++);
    }
  }
}

// Four producers race one consumer; every message arrives exactly once and each producer's
// messages arrive in the order it sent them.
TEST(MpscRing, ConcurrentProducersLoseNothing) {
  constexpr uint32_t kProducers = 4;
  constexpr uint32_t kPerProducer = 50000;
  MpscRing<Message> ring(256);
  std::atomic<bool> go{false};
  std::vector<std::thread> producers;
  for (uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      while (!go.load()) {
      }
      for (uint32_t s = 0; s < kPerProducer; ++s) {
        while (!ring.try_push(Message{p, s})) std::this_thread::yield();
      }
    });
  }
  go.store(true);
  std::vector<uint32_t> next(kProducers, 0);
  uint64_t received = 0;
  Message message{};
  while (received < uint64_t{kProducers} * kPerProducer) {
    if (!ring.try_pop(&message)) continue;
    ASSERT_LT(message.producer, kProducers);
    ASSERT_EQ(message.sequence, next[message.producer]) << "producer " << message.producer;
    ++next[message.producer];
    ++received;
  }
  for (auto& t : producers) t.join();
  EXPECT_FALSE(ring.try_pop(&message));
  for (uint32_t p = 0; p < kProducers; ++p) EXPECT_EQ(next[p], kPerProducer);
}

}  // namespace
}  // namespace nvmf::env
