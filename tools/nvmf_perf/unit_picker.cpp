#include "unit_picker.h"

#include <cassert>
#include <cstddef>

namespace nvmf::perf {

Xorshift64::Xorshift64(uint64_t seed) noexcept {
  // splitmix64 of the seed: xorshift must not start at 0, and nearby seeds (worker 0, 1, ...)
  // should not give nearby sequences.
  uint64_t z = seed + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  state_ = z != 0 ? z : 1;
}

UnitSlice worker_slice(uint64_t total_units, uint32_t worker, uint32_t workers) noexcept {
  assert(workers > 0 && worker < workers);
  const auto share = [&](uint64_t w) {
    // total * w / workers without overflowing 64 bits.
    return static_cast<uint64_t>(static_cast<unsigned __int128>(total_units) * w / workers);
  };
  UnitSlice slice;
  slice.first = share(worker);
  slice.count = share(worker + 1) - slice.first;
  return slice;
}

UnitPicker::UnitPicker(UnitSlice slice, bool track_busy, uint64_t seed)
    : slice_(slice), track_busy_(track_busy), rng_(seed) {
  assert(slice.count > 0);
  if (track_busy_) {
    busy_bits_.assign((slice.count + 63) / 64, 0);
    const unsigned tail = slice.count % 64;
    if (tail != 0) busy_bits_.back() = ~uint64_t{0} << tail;
  }
}

uint64_t UnitPicker::pick_random() noexcept {
  const uint64_t start = rng_.below(slice_.count);
  if (!track_busy_) return slice_.first + start;
  return take_from(start);
}

uint64_t UnitPicker::pick_sequential() noexcept {
  if (!track_busy_) {
    const uint64_t unit = cursor_;
    cursor_ = cursor_ + 1 == slice_.count ? 0 : cursor_ + 1;
    return slice_.first + unit;
  }
  const uint64_t unit = take_from(cursor_);
  if (unit != kNoUnit) {
    const uint64_t relative = unit - slice_.first;
    cursor_ = relative + 1 == slice_.count ? 0 : relative + 1;
  }
  return unit;
}

uint64_t UnitPicker::take_from(uint64_t start) noexcept {
  if (busy_count_ == slice_.count) return kNoUnit;
  const size_t words = busy_bits_.size();
  size_t word = start / 64;
  // First word: only the bits at and above `start`; then whole words, wrapping around, and
  // finally the bits below `start` in the first word again.
  uint64_t free_bits = ~busy_bits_[word] & (~uint64_t{0} << (start % 64));
  for (size_t step = 0; free_bits == 0 && step < words; ++step) {
    word = word + 1 == words ? 0 : word + 1;
    free_bits = ~busy_bits_[word];
  }
  if (free_bits == 0) return kNoUnit;  // unreachable while busy_count_ < count
  const uint64_t relative = word * 64 + static_cast<unsigned>(__builtin_ctzll(free_bits));
  busy_bits_[word] |= uint64_t{1} << (relative % 64);
  ++busy_count_;
  return slice_.first + relative;
}

void UnitPicker::release(uint64_t unit) noexcept {
  if (!track_busy_) return;
  assert(unit >= slice_.first && unit - slice_.first < slice_.count);
  const uint64_t relative = unit - slice_.first;
  const uint64_t bit = uint64_t{1} << (relative % 64);
  assert(busy_bits_[relative / 64] & bit);
  busy_bits_[relative / 64] &= ~bit;
  --busy_count_;
}

bool UnitPicker::busy(uint64_t unit) const noexcept {
  if (!track_busy_ || unit < slice_.first || unit - slice_.first >= slice_.count) return false;
  const uint64_t relative = unit - slice_.first;
  return (busy_bits_[relative / 64] >> (relative % 64)) & 1;
}

}  // namespace nvmf::perf
