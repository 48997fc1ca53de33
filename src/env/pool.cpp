#include "env/pool.h"

#include <cerrno>

#include "common/util.h"

namespace nvmf::env {

Result<IndexFreeList> IndexFreeList::create(size_t capacity) noexcept {
  if (capacity == 0 || capacity > kCapacityMax) {
    return Unexpected(Errc::invalid_argument, "pool capacity must be in [1, 2^32 - 2]");
  }
  IndexFreeList list;
  list.stack_.reset(new (std::nothrow) uint32_t[capacity]);  // setup-path
  list.in_use_.reset(new (std::nothrow) bool[capacity]());   // setup-path
  if (!list.stack_ || !list.in_use_) {
    return Unexpected(Errc::no_memory, "pool free list", ENOMEM);
  }
  list.capacity_ = static_cast<uint32_t>(capacity);
  // Pushed in reverse so that the first get() returns slot 0, then 1, ...
  for (size_t i = 0; i < capacity; ++i) {
    list.stack_[i] = static_cast<uint32_t>(capacity - 1 - i);
  }
  list.top_ = static_cast<uint32_t>(capacity);
  return list;
}

Result<BufferPool> BufferPool::create(MemoryBackend& backend, const BufferPoolOpts& opts) noexcept {
  if (opts.count == 0 || opts.buffer_size_bytes == 0) {
    return Unexpected(Errc::invalid_argument,
                      "BufferPool: count and buffer_size_bytes must be > 0");
  }
  if (!is_power_of_two(opts.alignment_bytes)) {
    return Unexpected(Errc::invalid_argument, "BufferPool: alignment_bytes is not a power of two");
  }
  if (opts.buffer_size_bytes > SIZE_MAX - opts.alignment_bytes) {
    return Unexpected(Errc::invalid_argument, "BufferPool: buffer_size_bytes too large");
  }
  const auto stride = static_cast<size_t>(align_up(opts.buffer_size_bytes, opts.alignment_bytes));
  if (opts.count > SIZE_MAX / stride) {
    return Unexpected(Errc::invalid_argument, "BufferPool: count * buffer size overflows");
  }
  if (opts.count > IndexFreeList::kCapacityMax) {
    return Unexpected(Errc::invalid_argument, "BufferPool: count must be below 2^32 - 1");
  }
  // The region first: it is the allocation most likely to fail, and failing it is cheap.
  auto region = backend.allocate(opts.count * stride, opts.alignment_bytes);
  if (!region) return Unexpected(region.error());
  auto free_list = IndexFreeList::create(opts.count);
  if (!free_list) return Unexpected(free_list.error());

  BufferPool pool;
  pool.region_ = std::move(*region);
  pool.free_ = std::move(*free_list);
  pool.buffer_size_bytes_ = opts.buffer_size_bytes;
  pool.stride_bytes_ = stride;
  return pool;
}

}  // namespace nvmf::env
