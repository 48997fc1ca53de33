// --verify: the data pattern of a write and the check of a read, block by block.
//
// Every block written carries, as 64-bit words in host order:
//   word 0       the LBA
//   word 1       nsid << 32 | generation
//   word i >= 2  fill + i * kFillStep, fill derived from (nsid, LBA, generation)
// so a block in the wrong place (LBA or namespace), a stale one (older generation) and a
// single flipped byte all fail the comparison. Generations are per I/O unit: a unit's
// generation becomes current only when its write completes successfully.
//
// A write that failed (an error status, a refused submit) may have reached none, some or all
// of its blocks, so until the unit's next acknowledged write each block may hold the
// acknowledged data or that of any write that failed since: the check accepts either, block
// by block, and nothing else (an acknowledged write must read back).
#pragma once

#include <cstdint>

namespace nvmf::perf {

// Generation of a unit this run never wrote. Its reads accept a zero block (malloc bdevs and
// fresh drives) or an intact pattern of this namespace and LBA left by an earlier run (a real
// target keeps data between runs); anything else is a failure.
inline constexpr uint32_t kGenerationNone = 0;
// Generation of a unit whose last write failed: its content is unknown, reads are not checked
// until the next successful write.
inline constexpr uint32_t kGenerationUnknown = UINT32_MAX;

// Block sizes are multiples of 8 bytes, at least 512 (NVMe LBA formats).
void pattern_fill(void* buffer, uint32_t block_size, uint32_t nsid, uint64_t lba,
                  uint32_t blocks, uint32_t generation) noexcept;

struct PatternMismatch {
  uint64_t lba = 0;           // the first block that did not match
  uint32_t byte_offset = 0;   // in that block, of the first differing 64-bit word
  uint64_t expected = 0;      // that word, as it should be (0 for a never-written block)
  uint64_t actual = 0;        // and as read
};

// Checks `blocks` blocks read from `lba` against `generation`, the unit's last acknowledged
// write (kGenerationUnknown: always true). `failed_through`: the generation of the newest write
// to the unit that failed since then (kGenerationNone: none did); a block holding the intact
// pattern of any generation after `generation` up to it passes too (generations of one
// namespace grow, and only one I/O per unit is in flight, so those were the failed writes).
// On the first mismatching block returns false and fills *mismatch.
bool pattern_check(const void* buffer, uint32_t block_size, uint32_t nsid, uint64_t lba,
                   uint32_t blocks, uint32_t generation, PatternMismatch* mismatch,
                   uint32_t failed_through = kGenerationNone) noexcept;

// The next generation after `generation`, skipping the reserved values on wrap-around.
constexpr uint32_t next_generation(uint32_t generation) noexcept {
  uint32_t next = generation + 1;
  if (next == kGenerationUnknown) next = kGenerationNone + 1;
  return next;
}

}  // namespace nvmf::perf
