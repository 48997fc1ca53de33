// The unit picker: slices partition a namespace among workers; with busy tracking a unit in
// flight is never handed out twice, and picks never leave the worker's slice.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "unit_picker.h"

namespace nvmf::perf {
namespace {

TEST(PerfUnitPicker, SlicesPartitionTheNamespace) {
  for (uint64_t total : {1ull, 7ull, 64ull, 1000ull, 131072ull, (1ull << 40) + 3}) {
    for (uint32_t workers = 1; workers <= 9; ++workers) {
      if (total < workers) continue;
      uint64_t next = 0;
      for (uint32_t w = 0; w < workers; ++w) {
        const UnitSlice slice = worker_slice(total, w, workers);
        EXPECT_EQ(slice.first, next) << total << "/" << workers << " worker " << w;
        EXPECT_GE(slice.count, total / workers);
        EXPECT_LE(slice.count, total / workers + 1);
        next = slice.first + slice.count;
      }
      EXPECT_EQ(next, total) << total << "/" << workers;
    }
  }
}

TEST(PerfUnitPicker, RandomPicksAreDistinctUntilReleased) {
  const UnitSlice slice{1000, 70};  // not a multiple of 64: the padding bits must stay unused
  UnitPicker picker(slice, true, 5);
  std::set<uint64_t> taken;
  for (int i = 0; i < 70; ++i) {
    const uint64_t unit = picker.pick_random();
    ASSERT_NE(unit, UnitPicker::kNoUnit);
    ASSERT_GE(unit, slice.first);
    ASSERT_LT(unit, slice.first + slice.count);
    ASSERT_TRUE(taken.insert(unit).second) << "unit " << unit << " handed out twice";
    EXPECT_TRUE(picker.busy(unit));
  }
  EXPECT_EQ(picker.busy_count(), 70u);
  EXPECT_EQ(picker.pick_random(), UnitPicker::kNoUnit) << "every unit is busy";
  EXPECT_EQ(picker.pick_sequential(), UnitPicker::kNoUnit);
  picker.release(1042);
  EXPECT_FALSE(picker.busy(1042));
  EXPECT_EQ(picker.pick_random(), 1042u) << "the only free unit";
}

TEST(PerfUnitPicker, NeverReturnsABusyUnitUnderLoad) {
  // A worker with -q 32: completions release in random order, new picks follow at once.
  for (uint64_t count : {32ull, 33ull, 100ull, 4096ull, 100003ull}) {
    const UnitSlice slice{count * 3, count};
    for (bool sequential : {false, true}) {
      UnitPicker picker(slice, true, count);
      std::mt19937_64 rng(count);
      std::vector<uint64_t> in_flight;
      for (int i = 0; i < 32; ++i) in_flight.push_back(picker.pick_random());
      for (int i = 0; i < 20000; ++i) {
        const size_t done = rng() % in_flight.size();
        picker.release(in_flight[done]);
        const uint64_t unit = sequential ? picker.pick_sequential() : picker.pick_random();
        ASSERT_NE(unit, UnitPicker::kNoUnit);
        ASSERT_GE(unit, slice.first);
        ASSERT_LT(unit, slice.first + slice.count);
        for (size_t j = 0; j < in_flight.size(); ++j) {
          ASSERT_TRUE(j == done || in_flight[j] != unit) << "busy unit " << unit << " picked";
        }
        in_flight[done] = unit;
      }
      EXPECT_EQ(picker.busy_count(), 32u);
    }
  }
}

TEST(PerfUnitPicker, RandomPicksCoverTheSlice) {
  const UnitSlice slice{0, 256};
  UnitPicker picker(slice, true, 11);
  std::vector<int> hits(256, 0);
  for (int i = 0; i < 256 * 200; ++i) {
    const uint64_t unit = picker.pick_random();
    ++hits[unit];
    picker.release(unit);
  }
  for (int h : hits) {
    EXPECT_GT(h, 100);  // expected 200 each
    EXPECT_LT(h, 300);
  }
}

TEST(PerfUnitPicker, SequentialWalksAndSkipsBusyUnits) {
  UnitPicker picker(UnitSlice{10, 5}, true, 1);
  EXPECT_EQ(picker.pick_sequential(), 10u);
  EXPECT_EQ(picker.pick_sequential(), 11u);
  EXPECT_EQ(picker.pick_sequential(), 12u);
  picker.release(10);
  picker.release(12);
  EXPECT_EQ(picker.pick_sequential(), 13u);
  EXPECT_EQ(picker.pick_sequential(), 14u);
  EXPECT_EQ(picker.pick_sequential(), 10u) << "wraps to the start of the slice";
  EXPECT_EQ(picker.pick_sequential(), 12u) << "11 is still busy";
}

TEST(PerfUnitPicker, WithoutTrackingUnitsRepeatButStayInTheSlice) {
  UnitPicker sequential(UnitSlice{100, 3}, false, 1);
  for (uint64_t expected : {100u, 101u, 102u, 100u, 101u}) {
    EXPECT_EQ(sequential.pick_sequential(), expected);
  }
  UnitPicker random(UnitSlice{100, 3}, false, 1);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t unit = random.pick_random();
    ASSERT_GE(unit, 100u);
    ASSERT_LT(unit, 103u);
  }
  EXPECT_EQ(random.busy_count(), 0u);
}

TEST(PerfUnitPicker, XorshiftBelowStaysBelowAndSeedsDiffer) {
  Xorshift64 a(1);
  Xorshift64 b(2);
  int same = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = a.below(100);
    ASSERT_LT(x, 100u);
    same += x == b.below(100);
  }
  EXPECT_LT(same, 100);
  Xorshift64 zero(0);
  EXPECT_NE(zero.next(), 0u) << "seed 0 must not stick at zero";
}

}  // namespace
}  // namespace nvmf::perf
