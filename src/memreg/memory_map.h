// MemoryMap: DMA memory for I/O buffers, registered with every RDMA protection domain attached
// to the map (one PD per device), with lock-free translation to keys on the data path.
//
// Memory comes from env::PosixMemoryBackend in chunks of at least MemoryMapOpts::chunk_bytes;
// allocate() carves 4096-aligned buffers out of them first-fit. Each chunk is registered once
// per attached domain (one MR per chunk and PD), so translate() is "which chunk holds this
// range" plus two loads, and a buffer keeps its keys for its whole life.
//
// Lifetime: chunks are never unmapped or deregistered before the map dies. free() returns the
// space to the chunk's free list only, so translate() never sees a chunk vanish and needs no
// lock. The price is that the map's footprint is its high-water mark.
//
// Threads:
//   - create(), allocate(), free(), attach(), detach(): setup path, any thread, one mutex.
//   - translate(), region_of(), chunk_count(): data path, any thread, lock-free, no allocation.
//     They may run while another thread allocates or attaches another PD. They must not race
//     with detach() of the same domain (the MR they read is about to be deregistered): detach
//     a domain only after every queue pair using it is gone.
//   - Every attached PD must outlive the map or be detached first: ~MemoryMap deregisters the
//     MRs of the domains still attached.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/result.h"
#include "env/posix_memory.h"
#include "verbs/verbs.h"

namespace nvmf::memreg {

// PDs one map serves at once: one per RDMA device in use. Eight covers a dual-port NIC on each
// socket of a two-socket server with room to spare; per-chunk MR slots are sized by it.
inline constexpr uint32_t kMaxDomains = 8;
// Chunks one map holds. With the default 8 MiB chunks that is 2 GiB of buffers; raise
// MemoryMapOpts::chunk_bytes for more. Fixed so that published chunks never move.
inline constexpr uint32_t kMaxChunks = 256;
// Alignment (and size granularity) of every allocation: the 4 KiB page that NVMe PRPs and
// most devices' DMA assume, whatever page size backs the chunk.
inline constexpr size_t kAllocationAlignmentBytes = 4096;

struct MemoryMapOpts {
  // Memory is mmapped in chunks of at least this; a bigger allocation gets its own chunk of
  // its size. Rounded up to the backend's page size (2 MiB with hugepages).
  size_t chunk_bytes = 8u << 20;
  // Access rights of every MR: local write for receives, remote read/write for the target's
  // RDMA, MW bind for the per-I/O window policies (src/memreg key policies).
  uint32_t access = verbs::kAccessLocalWrite | verbs::kAccessRemoteRead |
                    verbs::kAccessRemoteWrite | verbs::kAccessMwBind;
  // The posix backend that maps the chunks (hugepages auto by default).
  env::PosixMemoryOpts memory{};

  // {"chunk_bytes":8388608,"access":23,"memory":{...}}
  std::string to_json() const;
};

// A buffer's keys in one domain.
struct Keys {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

// What one data-path user (a queue pair, on its one thread) keeps of its last translate() in
// one domain: the chunk's range and keys. The next buffer is mostly in the same chunk, and
// then needs a compare instead of a chunk search and three atomic loads. Valid as long as the
// domain stays attached: a chunk never moves, shrinks or changes keys before (see Lifetime).
struct KeyCache {
  uintptr_t begin = 0;
  size_t size_bytes = 0;  // 0: holds nothing yet
  Keys keys;

  bool holds(const void* addr, size_t length) const noexcept {
    // Unsigned wrap makes an address below begin a huge offset, which fails the check.
    const uintptr_t offset = reinterpret_cast<uintptr_t>(addr) - begin;
    return offset < size_bytes && length <= size_bytes - offset;
  }
};

class MemoryMap {
 public:
  // Errors: invalid_argument (chunk_bytes 0, access bits verbs.h does not define), and what
  // PosixMemoryBackend::create() answers (no_memory for hugepages=on without hugepages).
  static Result<std::unique_ptr<MemoryMap>> create(const MemoryMapOpts& opts = {});

  MemoryMap(const MemoryMap&) = delete;
  MemoryMap& operator=(const MemoryMap&) = delete;
  // Deregisters every MR (the attached PDs must still exist) and unmaps every chunk. Buffers
  // not freed become invalid.
  ~MemoryMap();

  // Setup path, any thread. `bytes` rounded up to 4096, 4096-aligned, from the first chunk with
  // room, else from a new chunk registered with every attached PD. nullptr (logged, naming the
  // knob) for 0 bytes, out of memory, a full chunk table or a failed registration.
  void* allocate(size_t bytes) noexcept;
  // Returns the buffer's space to its chunk. nullptr is ignored; a pointer that allocate() did
  // not return (or already freed) is logged and ignored.
  void free(void* buffer) noexcept;

  // Setup path, any thread. Registers every existing chunk with `pd`; chunks made later are
  // registered with it too. Returns the domain index (< kMaxDomains) to pass to translate().
  // Attaching a PD already attached returns its index and counts one more reference.
  // Errors: no_memory when kMaxDomains PDs are attached, or what register_memory() answered
  // (nothing stays registered then).
  Result<uint32_t> attach(verbs::ProtectionDomain& pd) noexcept;
  // Drops a reference to `domain`; at zero deregisters the domain's MRs (call it before the PD
  // is destroyed) and frees the index for another PD. An unknown domain is logged and ignored.
  void detach(uint32_t domain) noexcept;

  // Data path, any thread, lock-free, no allocation. The keys of the chunk that holds the whole
  // of [addr, addr + length) in `domain` (length 0: addr itself must be inside a chunk). false
  // when the range is not inside one chunk (a pointer not from allocate(), or a range running
  // past a chunk's end) or the domain is not attached.
  bool translate(uint32_t domain, const void* addr, size_t length, Keys* keys) const noexcept;
  // The same through `cache`, which belongs to this domain and one thread: answered from it
  // when it holds the range, else translated and the cache refilled with the chunk found.
  bool translate(uint32_t domain, const void* addr, size_t length, Keys* keys,
                 KeyCache* cache) const noexcept {
    if (cache->holds(addr, length)) {
      *keys = cache->keys;
      return true;
    }
    return translate_into(domain, addr, length, keys, cache);
  }
  // The MR of the chunk holding `addr` in `domain` (to bind memory windows); nullptr if none.
  // Valid until detach(domain) or the map's destruction.
  const verbs::MemoryRegion* region_of(uint32_t domain, const void* addr) const noexcept;

  // Chunks mapped so far (they are kept until the map dies).
  uint32_t chunk_count() const noexcept { return chunk_count_.load(std::memory_order_acquire); }
  const MemoryMapOpts& opts() const noexcept { return opts_; }

 private:
  struct Chunk;  // memory_map.cpp
  struct Domain {
    verbs::ProtectionDomain* pd = nullptr;  // nullptr: the index is free
    uint32_t references = 0;
  };

  MemoryMap(const MemoryMapOpts& opts, std::unique_ptr<env::PosixMemoryBackend> backend);

  // All under mutex_.
  bool add_chunk(size_t size_bytes) noexcept;
  Result<void> register_chunk(Chunk& chunk, uint32_t domain, verbs::ProtectionDomain& pd) noexcept;
  void deregister_chunk(Chunk& chunk, uint32_t domain) noexcept;
  void* take_from_chunk(Chunk& chunk, size_t size_bytes) noexcept;
  void return_to_chunk(Chunk& chunk, size_t offset, size_t size_bytes) noexcept;

  // translate() that also fills *cache with the chunk's range and keys.
  bool translate_into(uint32_t domain, const void* addr, size_t length, Keys* keys,
                      KeyCache* cache) const noexcept;
  // Lock-free: the published chunk whose bytes include [addr, addr + length), or nullptr.
  const Chunk* find_chunk(const void* addr, size_t length) const noexcept;

  const MemoryMapOpts opts_;
  std::unique_ptr<env::PosixMemoryBackend> backend_;  // declared first: outlives the chunks
  // kMaxChunks entries made at create(); entry i is published by chunk_count_ > i (release)
  // and never moves or changes its address range afterwards.
  std::unique_ptr<Chunk[]> chunks_;
  std::atomic<uint32_t> chunk_count_{0};

  std::mutex mutex_;  // guards everything below and every chunk's setup-path state
  std::array<Domain, kMaxDomains> domains_{};
  std::map<uintptr_t, size_t> allocations_;  // buffer address -> rounded size, for free()
};

}  // namespace nvmf::memreg
