// The latency histogram against exact answers: bucket geometry, and percentiles against a
// sorted vector of the same values (nearest rank), within the histogram's 1/64 precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "histogram.h"

namespace nvmf::perf {
namespace {

using H = LatencyHistogram;

// The nearest-rank percentile of a sorted vector: the ceil(p/100 * n)-th smallest.
uint64_t reference_percentile(const std::vector<uint64_t>& sorted, double percentile) {
  const auto rank = static_cast<size_t>(std::ceil(percentile / 100.0 * sorted.size()));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

void expect_close(uint64_t actual, uint64_t expected, double what) {
  // 1/64 of the value (the bucket width), + 1 for the integer buckets.
  const double tolerance = static_cast<double>(expected) / 64.0 + 1.0;
  EXPECT_LE(std::abs(static_cast<double>(actual) - static_cast<double>(expected)), tolerance)
      << "p" << what << ": histogram " << actual << " vs exact " << expected;
}

TEST(PerfHistogram, BucketsTileTheRangeWithinOneSixtyFourth) {
  EXPECT_EQ(H::bucket_index(0), 0u);
  EXPECT_EQ(H::bucket_index(127), 127u);
  EXPECT_EQ(H::bucket_index(128), 128u);
  EXPECT_EQ(H::bucket_index(UINT64_MAX), H::kBucketCount - 1);
  // Consecutive buckets are adjacent: lower(i) + width(i) == lower(i + 1).
  for (unsigned i = 0; i + 1 < H::kBucketCount; ++i) {
    ASSERT_EQ(H::bucket_lower(i) + H::bucket_width(i), H::bucket_lower(i + 1)) << i;
    ASSERT_EQ(H::bucket_index(H::bucket_lower(i)), i);
    ASSERT_EQ(H::bucket_index(H::bucket_lower(i) + H::bucket_width(i) - 1), i);
    if (H::bucket_lower(i) >= 128) {
      ASSERT_LE(H::bucket_width(i) * 64, H::bucket_lower(i)) << "precision at bucket " << i;
    }
  }
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t value = rng() >> (rng() % 64);
    const unsigned index = H::bucket_index(value);
    ASSERT_LT(index, H::kBucketCount);
    ASSERT_GE(value, H::bucket_lower(index));
    ASSERT_LE(value - H::bucket_lower(index), H::bucket_width(index) - 1);
  }
}

TEST(PerfHistogram, EmptyIsAllZero) {
  H histogram;
  EXPECT_EQ(histogram.count(), 0u);
  EXPECT_EQ(histogram.min(), 0u);
  EXPECT_EQ(histogram.max(), 0u);
  EXPECT_EQ(histogram.mean(), 0.0);
  EXPECT_EQ(histogram.value_at_percentile(99.0), 0u);
}

TEST(PerfHistogram, SmallValuesAreExact) {
  H histogram;
  for (uint64_t v = 1; v <= 100; ++v) histogram.record(v);
  EXPECT_EQ(histogram.value_at_percentile(50), 50u);
  EXPECT_EQ(histogram.value_at_percentile(99), 99u);
  EXPECT_EQ(histogram.value_at_percentile(100), 100u);
  EXPECT_EQ(histogram.min(), 1u);
  EXPECT_EQ(histogram.max(), 100u);
  EXPECT_DOUBLE_EQ(histogram.mean(), 50.5);
}

TEST(PerfHistogram, PercentilesMatchASortedVector) {
  // Latency-like values: log-uniform from 2 us to 20 ms, plus a tail of outliers.
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> exponent(std::log(2000.0), std::log(2e7));
  std::vector<uint64_t> values;
  H histogram;
  for (int i = 0; i < 200000; ++i) {
    uint64_t value = static_cast<uint64_t>(std::exp(exponent(rng)));
    if (i % 5000 == 0) value *= 50;  // outliers
    values.push_back(value);
    histogram.record(value);
  }
  std::sort(values.begin(), values.end());
  EXPECT_EQ(histogram.count(), values.size());
  EXPECT_EQ(histogram.min(), values.front());
  EXPECT_EQ(histogram.max(), values.back());
  double sum = 0;
  for (uint64_t v : values) sum += static_cast<double>(v);
  EXPECT_NEAR(histogram.mean(), sum / values.size(), 1e-6 * sum / values.size());
  for (double p : {0.001, 1.0, 10.0, 50.0, 90.0, 99.0, 99.9, 99.99, 99.999, 100.0}) {
    expect_close(histogram.value_at_percentile(p), reference_percentile(values, p), p);
  }
  EXPECT_EQ(histogram.value_at_percentile(100.0), values.back()) << "clamped to max";
}

TEST(PerfHistogram, FewValuesAndRanks) {
  // With 10 values p99.99 is the largest (rank ceil(9.999) = 10), p50 the 5th.
  std::vector<uint64_t> values = {1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 100000};
  H histogram;
  for (uint64_t v : values) histogram.record(v);
  expect_close(histogram.value_at_percentile(50), 5000, 50);
  expect_close(histogram.value_at_percentile(90), 9000, 90);
  EXPECT_EQ(histogram.value_at_percentile(99.99), 100000u);
  expect_close(histogram.value_at_percentile(10), 1000, 10);
}

TEST(PerfHistogram, MergeEqualsRecordingEverythingInOne) {
  std::mt19937_64 rng(3);
  H a, b, all;
  for (int i = 0; i < 50000; ++i) {
    const uint64_t value = 1000 + rng() % 1000000;
    (i % 3 == 0 ? a : b).record(value);
    all.record(value);
  }
  H merged;
  merged.merge(a);
  merged.merge(b);
  EXPECT_EQ(merged.count(), all.count());
  EXPECT_EQ(merged.min(), all.min());
  EXPECT_EQ(merged.max(), all.max());
  EXPECT_DOUBLE_EQ(merged.mean(), all.mean());
  for (double p : {50.0, 99.0, 99.9, 99.99}) {
    EXPECT_EQ(merged.value_at_percentile(p), all.value_at_percentile(p)) << p;
  }
  H empty;
  merged.merge(empty);
  EXPECT_EQ(merged.min(), all.min()) << "an empty histogram does not lower the minimum";
  merged.reset();
  EXPECT_EQ(merged.count(), 0u);
  EXPECT_EQ(merged.value_at_percentile(50), 0u);
}

}  // namespace
}  // namespace nvmf::perf
