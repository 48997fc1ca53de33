// Fixed-capacity pools for the data path: everything a qpair needs is made when the qpair is
// made, and a full pool answers nullptr (the caller answers busy), never an allocation.
//
//   ObjectPool<T>: `capacity` objects of type T in one contiguous array (constructed once, at
//                  create(); get() hands out an existing object, it does not construct one).
//   BufferPool:    N fixed-size, aligned buffers carved out of one DmaRegion, so a transport
//                  registers the whole region once and addresses buffers by offset.
//
// Both keep free slots on a LIFO index stack (the most recently freed object is the one whose
// cache lines are still warm) plus one in-use flag per slot, so put() of a foreign pointer or
// a double put() asserts in debug builds and is ignored (not corrupting the pool) otherwise.
//
// Threads: a pool belongs to one owner thread (the qpair's reactor), like the objects in it;
// nothing here is thread-safe. create() allocates and may run on any thread.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "common/result.h"
#include "env/memory.h"

namespace nvmf::env {

// A LIFO of free slot indices in [0, capacity) with an in-use flag per slot.
class IndexFreeList {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  // Indices are 32 bits (kNone excluded): a qpair never needs four billion of anything.
  static constexpr size_t kCapacityMax = UINT32_MAX - 1;

  IndexFreeList() = default;
  IndexFreeList(IndexFreeList&& other) noexcept { take(other); }
  IndexFreeList& operator=(IndexFreeList&& other) noexcept {
    if (this != &other) take(other);
    return *this;
  }
  // Errors: invalid_argument for 0 or more than kCapacityMax, no_memory.
  static Result<IndexFreeList> create(size_t capacity) noexcept;

  size_t capacity() const noexcept { return capacity_; }
  size_t free_count() const noexcept { return top_; }
  size_t in_use() const noexcept { return capacity_ - top_; }
  bool empty() const noexcept { return top_ == 0; }
  bool is_in_use(uint32_t index) const noexcept { return index < capacity_ && in_use_[index]; }

  // The most recently freed index, or kNone when every slot is in use.
  uint32_t pop() noexcept {
    if (top_ == 0) return kNone;
    const uint32_t index = stack_[--top_];
    in_use_[index] = true;
    return index;
  }
  // False (and nothing changes) for an index out of range or not in use.
  bool push(uint32_t index) noexcept {
    if (index >= capacity_ || !in_use_[index]) return false;
    in_use_[index] = false;
    stack_[top_++] = index;
    return true;
  }

 private:
  // A moved-from list is empty (capacity 0), not a list of dangling slots.
  void take(IndexFreeList& other) noexcept {
    stack_ = std::move(other.stack_);
    in_use_ = std::move(other.in_use_);
    capacity_ = std::exchange(other.capacity_, 0);
    top_ = std::exchange(other.top_, 0);
  }

  std::unique_ptr<uint32_t[]> stack_;
  std::unique_ptr<bool[]> in_use_;
  uint32_t capacity_ = 0;
  uint32_t top_ = 0;  // number of free indices; stack_[top_ - 1] is the next one out
};

template <typename T>
class ObjectPool {
 public:
  ObjectPool() = default;  // empty: capacity 0, get() returns nullptr
  ObjectPool(ObjectPool&&) noexcept = default;
  ObjectPool& operator=(ObjectPool&&) noexcept = default;

  // `capacity` value-initialised objects. Errors: invalid_argument (0 or > kCapacityMax),
  // no_memory.
  static Result<ObjectPool> create(size_t capacity) noexcept {
    return create(capacity, [](T&, size_t) {});
  }
  // Same, then init(object, index) once per object, e.g. to point each request at its qpair
  // or give it its slot number.
  template <typename Init>
  static Result<ObjectPool> create(size_t capacity, Init&& init) noexcept {
    static_assert(std::is_default_constructible_v<T>, "pool objects are made up front");
    auto free_list = IndexFreeList::create(capacity);
    if (!free_list) return Unexpected(free_list.error());
    ObjectPool pool;
    pool.objects_.reset(new (std::nothrow) T[capacity]());  // setup-path
    if (!pool.objects_) return Unexpected(Errc::no_memory, "ObjectPool: objects array", ENOMEM);
    pool.free_ = std::move(*free_list);
    for (size_t i = 0; i < capacity; ++i) init(pool.objects_[i], i);
    return pool;
  }

  // nullptr when every object is in use: the caller answers busy.
  T* get() noexcept {
    const uint32_t index = free_.pop();
    return index == IndexFreeList::kNone ? nullptr : &objects_[index];
  }

  // Returns an object taken with get(). A pointer from elsewhere or a double put asserts in
  // debug builds and is ignored in release builds.
  void put(T* object) noexcept {
    const bool owned = owns(object);
    assert(owned && "put() of an object that is not from this pool");
    if (!owned) return;
    const bool pushed = free_.push(static_cast<uint32_t>(object - objects_.get()));
    assert(pushed && "put() of an object that is already free");
    (void)pushed;
  }

  size_t capacity() const noexcept { return free_.capacity(); }
  size_t in_use() const noexcept { return free_.in_use(); }
  size_t available() const noexcept { return free_.free_count(); }

  // True when `object` points at one of this pool's objects (in use or not).
  bool owns(const T* object) const noexcept {
    const auto offset =
        reinterpret_cast<uintptr_t>(object) - reinterpret_cast<uintptr_t>(objects_.get());
    return objects_ != nullptr && offset % sizeof(T) == 0 && offset / sizeof(T) < capacity();
  }
  // Slot number of an object of this pool (a compact handle, e.g. for a wr_id or a CID).
  size_t index_of(const T* object) const noexcept {
    assert(owns(object));
    return static_cast<size_t>(object - objects_.get());
  }
  T& at(size_t index) noexcept {
    assert(index < capacity());
    return objects_[index];
  }
  const T& at(size_t index) const noexcept {
    assert(index < capacity());
    return objects_[index];
  }

 private:
  std::unique_ptr<T[]> objects_;
  IndexFreeList free_;
};

struct BufferPoolOpts {
  size_t count = 0;              // number of buffers; required
  size_t buffer_size_bytes = 0;  // usable bytes per buffer; required
  // Every buffer starts on this boundary (a power of two). 4 KiB: NVMe PRPs and O_DIRECT
  // want page-aligned data, and no two buffers then share a page or a cache line.
  size_t alignment_bytes = 4096;
};

class BufferPool {
 public:
  BufferPool() = default;  // empty: capacity 0, get() returns nullptr
  BufferPool(BufferPool&&) noexcept = default;
  BufferPool& operator=(BufferPool&&) noexcept = default;

  // One allocation of count * stride bytes from `backend`, which must outlive the pool.
  // Errors: invalid_argument (zero count or size, alignment not a power of two, overflow),
  // and whatever backend.allocate() returns (no_memory with the knob in the detail).
  static Result<BufferPool> create(MemoryBackend& backend, const BufferPoolOpts& opts) noexcept;

  // nullptr when every buffer is in use: the caller answers busy.
  void* get() noexcept {
    const uint32_t index = free_.pop();
    return index == IndexFreeList::kNone ? nullptr : at(index);
  }
  // Returns a buffer taken with get(); a foreign pointer or a double put asserts in debug
  // builds and is ignored in release builds.
  void put(void* buffer) noexcept {
    const bool owned = owns(buffer);
    assert(owned && "put() of a buffer that is not from this pool");
    if (!owned) return;
    const bool pushed = free_.push(static_cast<uint32_t>(index_of(buffer)));
    assert(pushed && "put() of a buffer that is already free");
    (void)pushed;
  }

  size_t capacity() const noexcept { return free_.capacity(); }
  size_t in_use() const noexcept { return free_.in_use(); }
  size_t available() const noexcept { return free_.free_count(); }
  size_t buffer_size_bytes() const noexcept { return buffer_size_bytes_; }
  // Distance between consecutive buffers: buffer_size_bytes rounded up to the alignment.
  size_t stride_bytes() const noexcept { return stride_bytes_; }

  // The one region behind every buffer: register it once with the HCA.
  const DmaRegion& region() const noexcept { return region_; }

  // True when `buffer` is the start of one of this pool's buffers.
  bool owns(const void* buffer) const noexcept {
    const auto offset =
        reinterpret_cast<uintptr_t>(buffer) - reinterpret_cast<uintptr_t>(region_.addr());
    return !region_.empty() && offset % stride_bytes_ == 0 && offset / stride_bytes_ < capacity();
  }
  size_t index_of(const void* buffer) const noexcept {
    assert(owns(buffer));
    return (reinterpret_cast<uintptr_t>(buffer) - reinterpret_cast<uintptr_t>(region_.addr())) /
           stride_bytes_;
  }
  void* at(size_t index) const noexcept {
    assert(index < capacity());
    return static_cast<char*>(region_.addr()) + index * stride_bytes_;
  }
  uint64_t iova(const void* buffer) const noexcept { return region_.iova(buffer); }

 private:
  DmaRegion region_;
  IndexFreeList free_;
  size_t buffer_size_bytes_ = 0;
  size_t stride_bytes_ = 0;
};

}  // namespace nvmf::env
