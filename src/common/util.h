// Small helpers used across layers: alignment arithmetic, power-of-two checks, overflow-safe
// range checks (for SGL lengths and LBA ranges that come off the wire), owner-thread checks.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <thread>

namespace nvmf {

constexpr bool is_power_of_two(uint64_t value) noexcept {
  return value != 0 && (value & (value - 1)) == 0;
}

constexpr uint64_t align_up(uint64_t value, uint64_t alignment) noexcept {
  return (value + alignment - 1) & ~(alignment - 1);
}

constexpr uint64_t align_down(uint64_t value, uint64_t alignment) noexcept {
  return value & ~(alignment - 1);
}

// Smallest power of two >= value (value 0 -> 1).
constexpr uint64_t round_up_power_of_two(uint64_t value) noexcept {
  uint64_t result = 1;
  while (result < value) result <<= 1;
  return result;
}

// True when [offset, offset + length) lies inside [0, limit), with no wrap-around: the check
// every wire-supplied (offset, length) pair must pass before it touches memory.
constexpr bool range_within(uint64_t offset, uint64_t length, uint64_t limit) noexcept {
  return offset <= limit && length <= limit - offset;
}

// Records the thread that owns an object; public methods of reactor-owned objects call
// check() first. GCC has no thread-safety analysis, so this is the guard (debug builds only).
class ThreadOwner {
 public:
  ThreadOwner() noexcept : owner_(std::this_thread::get_id()) {}
  void reset_to_current() noexcept { owner_ = std::this_thread::get_id(); }
  void set(std::thread::id owner) noexcept { owner_ = owner; }
  bool is_current() const noexcept { return owner_ == std::this_thread::get_id(); }
  void check() const noexcept { assert(is_current() && "called from a thread that does not own the object"); }

 private:
  std::thread::id owner_;
};

}  // namespace nvmf
