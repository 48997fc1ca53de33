// Bounded lock-free multi-producer / single-consumer ring for cross-thread messages.
//
// Why our own and not rte_ring: only src/env may include DPDK headers, and rte_ring's fast
// path lives in inline header code; wrapping it in a .cpp would add a call per message and
// lose type safety. This is the well-known bounded queue with a sequence number per cell
// (Vyukov): producers claim a slot with one CAS on the tail, the consumer needs no atomic
// read-modify-write at all. Capacity is fixed at construction (setup path); push and pop
// never allocate, never block and never take a lock. A full ring answers false (busy).
#pragma once

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>

namespace nvmf::env {

template <typename T>
class MpscRing {
  static_assert(std::is_trivially_copyable_v<T>, "ring elements are copied bytewise");

 public:
  // capacity is rounded up to a power of two (so an index is a mask, not a division), >= 2.
  explicit MpscRing(size_t capacity) : mask_(round_up(capacity) - 1), cells_(new Cell[mask_ + 1]) {
    for (size_t i = 0; i <= mask_; ++i) cells_[i].sequence.store(i, std::memory_order_relaxed);
  }
  MpscRing(const MpscRing&) = delete;
  MpscRing& operator=(const MpscRing&) = delete;

  size_t capacity() const noexcept { return mask_ + 1; }

  // Any thread. False when the ring is full.
  bool try_push(const T& item) noexcept {
    size_t position = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& cell = cells_[position & mask_];
      size_t sequence = cell.sequence.load(std::memory_order_acquire);
      auto difference = static_cast<intptr_t>(sequence) - static_cast<intptr_t>(position);
      if (difference == 0) {
        // The cell is free for this lap; claim it by moving the tail past it.
        if (tail_.compare_exchange_weak(position, position + 1, std::memory_order_relaxed)) {
          cell.value = item;
          cell.sequence.store(position + 1, std::memory_order_release);
          return true;
        }
        // CAS failure reloaded position; retry.
      } else if (difference < 0) {
        return false;  // the consumer has not freed this cell yet: full
      } else {
        position = tail_.load(std::memory_order_relaxed);  // another producer won; catch up
      }
    }
  }

  // Owner (consumer) thread only. False when empty.
  bool try_pop(T* out) noexcept {
    size_t head = head_.load(std::memory_order_relaxed);
    Cell& cell = cells_[head & mask_];
    size_t sequence = cell.sequence.load(std::memory_order_acquire);
    if (static_cast<intptr_t>(sequence) - static_cast<intptr_t>(head + 1) < 0) {
      return false;  // not yet published (empty, or a producer is mid-write)
    }
    *out = cell.value;
    // Free the cell for the producers' next lap around the ring.
    cell.sequence.store(head + mask_ + 1, std::memory_order_release);
    // Only this thread writes head_; atomic so size_approx() may read it from elsewhere.
    head_.store(head + 1, std::memory_order_relaxed);
    return true;
  }

  // Consumer thread: a hint, exact only when no producer is active.
  bool empty() const noexcept {
    size_t head = head_.load(std::memory_order_relaxed);
    const Cell& cell = cells_[head & mask_];
    return static_cast<intptr_t>(cell.sequence.load(std::memory_order_acquire)) -
               static_cast<intptr_t>(head + 1) < 0;
  }

  // Any thread: approximate count, for statistics only.
  size_t size_approx() const noexcept {
    size_t tail = tail_.load(std::memory_order_relaxed);
    size_t head = head_.load(std::memory_order_relaxed);
    return tail >= head ? tail - head : 0;
  }

 private:
  static size_t round_up(size_t value) noexcept {
    size_t result = 2;
    while (result < value) result <<= 1;
    return result;
  }

  // 64 B: keeps the producers' tail and the consumer's head on different cache lines.
  static constexpr size_t kCacheLineBytes = 64;
  struct alignas(kCacheLineBytes) Cell {
    std::atomic<size_t> sequence;
    T value;
  };

  const size_t mask_;
  std::unique_ptr<Cell[]> cells_;
  alignas(kCacheLineBytes) std::atomic<size_t> tail_{0};
  alignas(kCacheLineBytes) std::atomic<size_t> head_{0};
};

}  // namespace nvmf::env
