// Latency histogram in nanoseconds, log-linear like HdrHistogram: values below 128 ns have a
// bucket each; above, every power of two is split into 64 equal sub-buckets, so any value is
// known to within 1/64 of itself. 3776 buckets cover all of uint64_t; record() is a shift and
// an increment (no allocation). Histograms of several workers merge by adding counts.
// One owner thread; merge() after the owners stopped.
#pragma once

#include <cstdint>
#include <vector>

namespace nvmf::perf {

class LatencyHistogram {
 public:
  static constexpr unsigned kSubBucketBits = 6;  // 64 sub-buckets: 1/64 relative precision
  static constexpr unsigned kSubBucketCount = 1u << kSubBucketBits;
  // Exact buckets for [0, 128), then one row of 64 per power of two from 2^7 to 2^63.
  static constexpr unsigned kBucketCount = (64 - kSubBucketBits + 1) * kSubBucketCount;

  LatencyHistogram();  // setup path: allocates the buckets

  void record(uint64_t value_ns) noexcept {
    ++counts_[bucket_index(value_ns)];
    ++count_;
    sum_ += value_ns;
    if (value_ns < min_) min_ = value_ns;
    if (value_ns > max_) max_ = value_ns;
  }
  void merge(const LatencyHistogram& other) noexcept;
  void reset() noexcept;

  uint64_t count() const noexcept { return count_; }
  uint64_t min() const noexcept { return count_ == 0 ? 0 : min_; }
  uint64_t max() const noexcept { return max_; }
  double mean() const noexcept { return count_ == 0 ? 0.0 : static_cast<double>(sum_) / count_; }
  // The value at or below which `percentile` percent of the values lie (nearest rank: the
  // ceil(p/100 * count)-th smallest), to within 1/128 of itself (the middle of its bucket),
  // never outside [min, max], and exact for the first and last rank. 0 when empty.
  // percentile in (0, 100].
  uint64_t value_at_percentile(double percentile) const noexcept;

  static unsigned bucket_index(uint64_t value) noexcept {
    if (value < 2 * kSubBucketCount) return static_cast<unsigned>(value);
    const unsigned top_bit = 63u - static_cast<unsigned>(__builtin_clzll(value));
    const unsigned shift = top_bit - kSubBucketBits;
    return (shift + 1) * kSubBucketCount +
           static_cast<unsigned>((value >> shift) - kSubBucketCount);
  }
  // Smallest value of a bucket, and its width (values lower .. lower + width - 1).
  static uint64_t bucket_lower(unsigned index) noexcept;
  static uint64_t bucket_width(unsigned index) noexcept;

 private:
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  uint64_t sum_ = 0;  // 2^64 ns = 584 years of summed latency: no overflow in practice
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
};

}  // namespace nvmf::perf
