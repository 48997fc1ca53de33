#include "memreg/memory_map.h"

#include <cassert>
#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <new>
#include <utility>

#include "common/log.h"
#include "common/util.h"

// The memreg layer's log component, shared by every file of src/memreg.
NVMF_LOG_COMPONENT(memreg);

namespace nvmf::memreg {

namespace {

constexpr uint32_t kKnownAccess = verbs::kAccessLocalWrite | verbs::kAccessRemoteWrite |
                                  verbs::kAccessRemoteRead | verbs::kAccessMwBind;

// The chunk translate() found last on this thread: consecutive I/Os mostly use buffers of the
// same chunk. Only a starting point for the scan (checked against the chunk's range before it
// is trusted), so sharing it between maps costs a scan, never a wrong answer.
thread_local uint32_t t_chunk_hint = 0;

}  // namespace

// One mmapped chunk and its registration with each domain.
struct MemoryMap::Chunk {
  // Set before chunk_count_ publishes the entry, then never changed.
  uintptr_t begin = 0;
  size_t size_bytes = 0;

  // The chunk's MR in one domain, read lock-free by translate(). Changed by attach()/detach()
  // of that domain only: keys first, then the MR pointer with a release store, so a reader
  // that sees the pointer (acquire) sees its keys.
  struct Registration {
    std::atomic<const verbs::MemoryRegion*> mr{nullptr};
    std::atomic<uint32_t> lkey{0};
    std::atomic<uint32_t> rkey{0};
  };
  std::array<Registration, kMaxDomains> registrations;

  // Setup-path state, under MemoryMap::mutex_.
  std::array<std::unique_ptr<verbs::MemoryRegion>, kMaxDomains> owned_mrs;
  env::DmaRegion region;
  std::map<size_t, size_t> free_ranges;  // offset -> bytes, no two adjacent (coalesced)

  bool holds(uintptr_t address, size_t length) const noexcept {
    // Unsigned wrap makes an address below begin a huge offset, which fails the check.
    const uintptr_t offset = address - begin;
    return offset < size_bytes && length <= size_bytes - offset;
  }
};

std::string MemoryMapOpts::to_json() const {
  char head[96];
  snprintf(head, sizeof(head),
           "{\"chunk_bytes\":%zu,\"access\":%" PRIu32 ",\"memory\":", chunk_bytes, access);
  std::string json = head;
  json += memory.to_json();
  json += "}";
  return json;
}

Result<std::unique_ptr<MemoryMap>> MemoryMap::create(const MemoryMapOpts& opts) {
  if (opts.chunk_bytes == 0 || opts.chunk_bytes > SIZE_MAX / 2) {
    NVMF_ERRLOG(memreg, "memory map: chunk_bytes %zu out of range", opts.chunk_bytes);
    return Unexpected(Errc::invalid_argument, "memory map: chunk_bytes out of range");
  }
  if ((opts.access & ~kKnownAccess) != 0) {
    NVMF_ERRLOG(memreg, "memory map: unknown access bits 0x%x", opts.access & ~kKnownAccess);
    return Unexpected(Errc::invalid_argument, "memory map: unknown access bits");
  }
  auto backend = env::PosixMemoryBackend::create(opts.memory);
  if (!backend) return Unexpected(backend.error());
  std::unique_ptr<MemoryMap> map(new MemoryMap(opts, std::move(*backend)));  // setup-path
  NVMF_INFOLOG(memreg, "memory map: chunks of %zu bytes, %s pages, access 0x%x", opts.chunk_bytes,
               map->backend_->hugepages_in_use() ? "huge" : "normal", opts.access);
  return map;
}

MemoryMap::MemoryMap(const MemoryMapOpts& opts, std::unique_ptr<env::PosixMemoryBackend> backend)
    : opts_(opts),
      backend_(std::move(backend)),
      chunks_(std::make_unique<Chunk[]>(kMaxChunks)) {}  // setup-path

MemoryMap::~MemoryMap() {
  std::lock_guard lock(mutex_);
  if (!allocations_.empty()) {
    NVMF_DEBUGLOG(memreg, "memory map destroyed with %zu buffers not freed", allocations_.size());
  }
  const uint32_t count = chunk_count_.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < count; ++i) {
    Chunk& chunk = chunks_[i];
    // MRs before the memory under them.
    for (uint32_t domain = 0; domain < kMaxDomains; ++domain) deregister_chunk(chunk, domain);
    chunk.region.reset();
  }
}

void* MemoryMap::allocate(size_t bytes) noexcept {
  if (bytes == 0 || bytes > SIZE_MAX / 2) {
    NVMF_ERRLOG(memreg, "allocate(%zu): size out of range", bytes);
    return nullptr;
  }
  const auto size_bytes = static_cast<size_t>(align_up(bytes, kAllocationAlignmentBytes));
  std::lock_guard lock(mutex_);
  try {
    void* buffer = nullptr;
    const uint32_t count = chunk_count_.load(std::memory_order_relaxed);
    for (uint32_t i = 0; i < count && buffer == nullptr; ++i) {
      buffer = take_from_chunk(chunks_[i], size_bytes);
    }
    if (buffer == nullptr) {
      // A bigger allocation gets a chunk of its own size.
      if (!add_chunk(size_bytes > opts_.chunk_bytes ? size_bytes : opts_.chunk_bytes)) {
        return nullptr;
      }
      buffer = take_from_chunk(chunks_[count], size_bytes);
      assert(buffer != nullptr && "a new chunk too small for the allocation it was made for");
    }
    allocations_.emplace(reinterpret_cast<uintptr_t>(buffer), size_bytes);
    return buffer;
  } catch (const std::bad_alloc&) {
    // Only the bookkeeping maps allocate; their node is a few dozen bytes.
    NVMF_ERRLOG(memreg, "allocate(%zu): out of memory for bookkeeping", bytes);
    return nullptr;
  }
}

void MemoryMap::free(void* buffer) noexcept {
  if (buffer == nullptr) return;
  std::lock_guard lock(mutex_);
  const auto address = reinterpret_cast<uintptr_t>(buffer);
  const auto allocation = allocations_.find(address);
  if (allocation == allocations_.end()) {
    NVMF_ERRLOG(memreg, "free(%p): not a buffer from allocate(), or freed already (ignored)",
                buffer);
    return;
  }
  const size_t size_bytes = allocation->second;
  allocations_.erase(allocation);
  const uint32_t count = chunk_count_.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < count; ++i) {
    Chunk& chunk = chunks_[i];
    if (chunk.holds(address, size_bytes)) {
      return_to_chunk(chunk, address - chunk.begin, size_bytes);
      return;
    }
  }
  assert(false && "an allocation outside every chunk");
}

Result<uint32_t> MemoryMap::attach(verbs::ProtectionDomain& pd) noexcept {
  std::lock_guard lock(mutex_);
  uint32_t free_index = kMaxDomains;
  for (uint32_t domain = 0; domain < kMaxDomains; ++domain) {
    if (domains_[domain].pd == &pd) {
      ++domains_[domain].references;
      return domain;
    }
    if (domains_[domain].pd == nullptr && free_index == kMaxDomains) free_index = domain;
  }
  if (free_index == kMaxDomains) {
    NVMF_ERRLOG(memreg, "attach: all %u domains in use (kMaxDomains: one per RDMA device)",
                kMaxDomains);
    return Unexpected(Errc::no_memory, "memory map: all kMaxDomains domains in use");
  }
  const uint32_t count = chunk_count_.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < count; ++i) {
    auto registered = register_chunk(chunks_[i], free_index, pd);
    if (!registered) {
      for (uint32_t j = 0; j < i; ++j) deregister_chunk(chunks_[j], free_index);
      return Unexpected(registered.error());
    }
  }
  domains_[free_index] = Domain{&pd, 1};
  NVMF_INFOLOG(memreg, "attach: domain %u, %u chunks registered", free_index, count);
  return free_index;
}

void MemoryMap::detach(uint32_t domain) noexcept {
  std::lock_guard lock(mutex_);
  if (domain >= kMaxDomains || domains_[domain].pd == nullptr) {
    NVMF_ERRLOG(memreg, "detach(%u): no such domain (ignored)", domain);
    return;
  }
  if (--domains_[domain].references > 0) return;
  const uint32_t count = chunk_count_.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < count; ++i) deregister_chunk(chunks_[i], domain);
  domains_[domain] = Domain{};
  NVMF_INFOLOG(memreg, "detach: domain %u deregistered", domain);
}

bool MemoryMap::translate(uint32_t domain, const void* addr, size_t length,
                          Keys* keys) const noexcept {
  KeyCache unused;
  return translate_into(domain, addr, length, keys, &unused);
}

bool MemoryMap::translate_into(uint32_t domain, const void* addr, size_t length, Keys* keys,
                               KeyCache* cache) const noexcept {
  if (domain >= kMaxDomains) return false;
  const Chunk* chunk = find_chunk(addr, length);
  if (chunk == nullptr) return false;
  const Chunk::Registration& registration = chunk->registrations[domain];
  if (registration.mr.load(std::memory_order_acquire) == nullptr) return false;
  keys->lkey = registration.lkey.load(std::memory_order_relaxed);
  keys->rkey = registration.rkey.load(std::memory_order_relaxed);
  *cache = KeyCache{chunk->begin, chunk->size_bytes, *keys};
  return true;
}

const verbs::MemoryRegion* MemoryMap::region_of(uint32_t domain, const void* addr) const noexcept {
  if (domain >= kMaxDomains) return nullptr;
  const Chunk* chunk = find_chunk(addr, 0);
  if (chunk == nullptr) return nullptr;
  return chunk->registrations[domain].mr.load(std::memory_order_acquire);
}

const MemoryMap::Chunk* MemoryMap::find_chunk(const void* addr, size_t length) const noexcept {
  // Acquire pairs with add_chunk()'s release: entries below count have their range set.
  const uint32_t count = chunk_count_.load(std::memory_order_acquire);
  const auto address = reinterpret_cast<uintptr_t>(addr);
  const uint32_t hint = t_chunk_hint;
  if (hint < count && chunks_[hint].holds(address, length)) return &chunks_[hint];
  // A handful of chunks in practice (kMaxChunks at most): a scan beats any index structure.
  for (uint32_t i = 0; i < count; ++i) {
    if (chunks_[i].holds(address, length)) {
      t_chunk_hint = i;
      return &chunks_[i];
    }
  }
  return nullptr;
}

bool MemoryMap::add_chunk(size_t size_bytes) noexcept {
  const uint32_t index = chunk_count_.load(std::memory_order_relaxed);
  if (index == kMaxChunks) {
    NVMF_ERRLOG(memreg,
                "allocate: chunk table full (%u chunks of %zu bytes, kMaxChunks): raise "
                "chunk_bytes",
                kMaxChunks, opts_.chunk_bytes);
    return false;
  }
  auto region = backend_->allocate(size_bytes, kAllocationAlignmentBytes);
  if (!region) {
    char text[160];
    NVMF_ERRLOG(memreg, "allocate: no chunk of %zu bytes: %s", size_bytes,
                error_describe(region.error(), text, sizeof(text)));
    return false;
  }
  // The entry is not published yet (index == chunk_count_), so no reader looks at it.
  Chunk& chunk = chunks_[index];
  chunk.begin = reinterpret_cast<uintptr_t>(region->addr());
  chunk.size_bytes = region->size_bytes();
  chunk.free_ranges.clear();
  try {
    chunk.free_ranges.emplace(0, chunk.size_bytes);
  } catch (const std::bad_alloc&) {
    NVMF_ERRLOG(memreg, "allocate: out of memory for a chunk's free list");
    return false;  // the region unmaps itself
  }
  for (uint32_t domain = 0; domain < kMaxDomains; ++domain) {
    if (domains_[domain].pd == nullptr) continue;
    if (!register_chunk(chunk, domain, *domains_[domain].pd)) {
      for (uint32_t undo = 0; undo < domain; ++undo) deregister_chunk(chunk, undo);
      chunk.free_ranges.clear();
      return false;  // the region unmaps itself
    }
  }
  chunk.region = std::move(*region);
  chunk_count_.store(index + 1, std::memory_order_release);
  NVMF_INFOLOG(memreg, "chunk %u: %zu bytes at 0x%" PRIxPTR "%s", index, chunk.size_bytes,
               chunk.begin, chunk.region.hugepages() ? " (hugepages)" : "");
  return true;
}

Result<void> MemoryMap::register_chunk(Chunk& chunk, uint32_t domain,
                                       verbs::ProtectionDomain& pd) noexcept {
  auto mr =
      pd.register_memory(reinterpret_cast<void*>(chunk.begin), chunk.size_bytes, opts_.access);
  if (!mr) {
    char text[160];
    NVMF_ERRLOG(memreg, "register %zu bytes at 0x%" PRIxPTR " in domain %u: %s", chunk.size_bytes,
                chunk.begin, domain, error_describe(mr.error(), text, sizeof(text)));
    return Unexpected(mr.error());
  }
  Chunk::Registration& registration = chunk.registrations[domain];
  registration.lkey.store((*mr)->lkey(), std::memory_order_relaxed);
  registration.rkey.store((*mr)->rkey(), std::memory_order_relaxed);
  registration.mr.store(mr->get(), std::memory_order_release);
  chunk.owned_mrs[domain] = std::move(*mr);
  return {};
}

void MemoryMap::deregister_chunk(Chunk& chunk, uint32_t domain) noexcept {
  Chunk::Registration& registration = chunk.registrations[domain];
  // Unpublish before deregistering, so a reader that races anyway gets false, not a stale key.
  registration.mr.store(nullptr, std::memory_order_release);
  registration.lkey.store(0, std::memory_order_relaxed);
  registration.rkey.store(0, std::memory_order_relaxed);
  chunk.owned_mrs[domain].reset();
}

void* MemoryMap::take_from_chunk(Chunk& chunk, size_t size_bytes) noexcept {
  for (auto range = chunk.free_ranges.begin(); range != chunk.free_ranges.end(); ++range) {
    if (range->second < size_bytes) continue;
    const size_t offset = range->first;
    if (range->second == size_bytes) {
      chunk.free_ranges.erase(range);
    } else {
      // Shrink the range from the front without allocating: re-key its node.
      auto node = chunk.free_ranges.extract(range);
      node.key() += size_bytes;
      node.mapped() -= size_bytes;
      chunk.free_ranges.insert(std::move(node));
    }
    return reinterpret_cast<void*>(chunk.begin + offset);
  }
  return nullptr;
}

void MemoryMap::return_to_chunk(Chunk& chunk, size_t offset, size_t size_bytes) noexcept {
  auto& ranges = chunk.free_ranges;
  auto next = ranges.lower_bound(offset);
  if (next != ranges.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == offset) {
      previous->second += size_bytes;
      if (next != ranges.end() && offset + size_bytes == next->first) {
        previous->second += next->second;
        ranges.erase(next);
      }
      return;
    }
  }
  if (next != ranges.end() && offset + size_bytes == next->first) {
    // Grow the following range backwards: re-key its node, no allocation.
    auto node = ranges.extract(next);
    node.key() = offset;
    node.mapped() += size_bytes;
    ranges.insert(std::move(node));
    return;
  }
  try {
    ranges.emplace(offset, size_bytes);
  } catch (const std::bad_alloc&) {
    NVMF_ERRLOG(memreg,
                "free: out of memory for the free list: %zu bytes at chunk offset %zu "
                "lost until the map is destroyed",
                size_bytes, offset);
  }
}

}  // namespace nvmf::memreg
