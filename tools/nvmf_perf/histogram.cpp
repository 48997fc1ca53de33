#include "histogram.h"

#include <algorithm>
#include <cmath>

namespace nvmf::perf {

LatencyHistogram::LatencyHistogram() : counts_(kBucketCount, 0) {}

void LatencyHistogram::merge(const LatencyHistogram& other) noexcept {
  for (unsigned i = 0; i < kBucketCount; ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

void LatencyHistogram::reset() noexcept {
  std::fill(counts_.begin(), counts_.end(), 0);
  count_ = 0;
  sum_ = 0;
  min_ = UINT64_MAX;
  max_ = 0;
}

uint64_t LatencyHistogram::bucket_lower(unsigned index) noexcept {
  if (index < 2 * kSubBucketCount) return index;
  const unsigned shift = index / kSubBucketCount - 1;
  const uint64_t mantissa = kSubBucketCount + index % kSubBucketCount;
  return mantissa << shift;
}

uint64_t LatencyHistogram::bucket_width(unsigned index) noexcept {
  if (index < 2 * kSubBucketCount) return 1;
  return uint64_t{1} << (index / kSubBucketCount - 1);
}

uint64_t LatencyHistogram::value_at_percentile(double percentile) const noexcept {
  if (count_ == 0) return 0;
  const double wanted = std::ceil(percentile / 100.0 * static_cast<double>(count_));
  const uint64_t rank = std::clamp<uint64_t>(static_cast<uint64_t>(wanted), 1, count_);
  // The smallest and the largest value are known exactly, not just their buckets.
  if (rank == 1) return min_;
  if (rank == count_) return max_;
  uint64_t seen = 0;
  for (unsigned i = 0; i < kBucketCount; ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      const uint64_t middle = bucket_lower(i) + (bucket_width(i) - 1) / 2;
      return std::clamp(middle, min_, max_);
    }
  }
  return max_;
}

}  // namespace nvmf::perf
