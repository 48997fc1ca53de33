#include "common/util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

namespace nvmf {
namespace {

TEST(Util, PowersOfTwoAndAlignment) {
  EXPECT_FALSE(is_power_of_two(0));
  EXPECT_TRUE(is_power_of_two(1));
  EXPECT_TRUE(is_power_of_two(4096));
  EXPECT_FALSE(is_power_of_two(4097));
  EXPECT_EQ(align_up(4097, 4096), 8192u);
  EXPECT_EQ(align_up(4096, 4096), 4096u);
  EXPECT_EQ(align_down(8191, 4096), 4096u);
  EXPECT_EQ(round_up_power_of_two(0), 1u);
  EXPECT_EQ(round_up_power_of_two(129), 256u);
  EXPECT_EQ(round_up_power_of_two(128), 128u);
}

TEST(Util, RangeWithinRejectsWrapAround) {
  EXPECT_TRUE(range_within(0, 4096, 4096));
  EXPECT_TRUE(range_within(4096, 0, 4096));
  EXPECT_FALSE(range_within(1, 4096, 4096));
  EXPECT_FALSE(range_within(4097, 0, 4096));
  // offset + length wraps to a small number; a naive (offset + length <= limit) passes it.
  EXPECT_FALSE(range_within(UINT64_MAX - 10, 20, 4096));
  EXPECT_FALSE(range_within(10, UINT64_MAX, 4096));
}

TEST(Util, ThreadOwnerKnowsItsThread) {
  ThreadOwner owner;
  EXPECT_TRUE(owner.is_current());
  bool other_thread_is_owner = true;
  std::thread t([&] { other_thread_is_owner = owner.is_current(); });
  t.join();
  EXPECT_FALSE(other_thread_is_owner);
  std::thread t2([&] { owner.reset_to_current(); });
  t2.join();
  EXPECT_FALSE(owner.is_current());
}

}  // namespace
}  // namespace nvmf
