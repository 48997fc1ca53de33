// Where the next I/O goes. A namespace is cut into I/O units of -o bytes; each worker owns a
// slice of them (with --verify, so no two workers' I/Os ever overlap) and picks units in it at
// random or in sequence. With busy tracking (--verify) a unit that has an I/O in flight is not
// handed out again until release(): the picker takes the next free unit after the chosen one.
// One owner thread; pick/release allocate nothing.
#pragma once

#include <cstdint>
#include <vector>

namespace nvmf::perf {

// xorshift64* (Vigna): a few instructions per number, plenty for offsets. Seeded per worker.
class Xorshift64 {
 public:
  explicit Xorshift64(uint64_t seed) noexcept;
  uint64_t next() noexcept {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 0x2545F4914F6CDD1Dull;
  }
  // Uniform in [0, bound) without division (Lemire's multiply-shift); bound > 0.
  uint64_t below(uint64_t bound) noexcept {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * bound) >> 64);
  }

 private:
  uint64_t state_;
};

// Units [first, first + count) of worker `worker` among `workers`: an even split, the first
// slices one unit shorter when it does not divide.
struct UnitSlice {
  uint64_t first = 0;
  uint64_t count = 0;
};
UnitSlice worker_slice(uint64_t total_units, uint32_t worker, uint32_t workers) noexcept;

class UnitPicker {
 public:
  static constexpr uint64_t kNoUnit = UINT64_MAX;

  // Setup path (the busy bitmap). count > 0.
  UnitPicker(UnitSlice slice, bool track_busy, uint64_t seed);

  // A unit of the slice (absolute unit number), marked busy when tracking; kNoUnit when every
  // unit is busy.
  uint64_t pick_random() noexcept;
  uint64_t pick_sequential() noexcept;
  // The I/O on `unit` completed: it may be picked again.
  void release(uint64_t unit) noexcept;

  bool busy(uint64_t unit) const noexcept;
  uint64_t busy_count() const noexcept { return busy_count_; }
  const UnitSlice& slice() const noexcept { return slice_; }

 private:
  uint64_t take_from(uint64_t start) noexcept;  // start: relative to slice_.first

  UnitSlice slice_;
  bool track_busy_;
  Xorshift64 rng_;
  uint64_t cursor_ = 0;  // next sequential unit, relative
  uint64_t busy_count_ = 0;
  // One bit per unit; the bits past the slice's end in the last word are set for good, so a
  // scan never has to check the bound.
  std::vector<uint64_t> busy_bits_;
};

}  // namespace nvmf::perf
