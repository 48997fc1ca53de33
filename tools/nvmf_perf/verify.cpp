#include "verify.h"

#include <cstring>

namespace nvmf::perf {

namespace {

// Weyl-sequence step (2^64 / golden ratio): consecutive words differ in many bits, so a
// shifted or duplicated word within a block does not match by accident.
constexpr uint64_t kFillStep = 0x9E3779B97F4A7C15ull;

// splitmix64's finalizer: every input bit affects every output bit.
constexpr uint64_t mix(uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

constexpr uint64_t tag_word(uint32_t nsid, uint32_t generation) noexcept {
  return uint64_t{nsid} << 32 | generation;
}

constexpr uint64_t fill_seed(uint32_t nsid, uint64_t lba, uint32_t generation) noexcept {
  return mix(lba ^ mix(tag_word(nsid, generation)));
}

inline uint64_t load_word(const uint8_t* block, uint32_t word) noexcept {
  uint64_t value;
  std::memcpy(&value, block + size_t{word} * 8, 8);
  return value;
}

inline void store_word(uint8_t* block, uint32_t word, uint64_t value) noexcept {
  std::memcpy(block + size_t{word} * 8, &value, 8);
}

inline uint64_t expected_word(uint32_t word, uint32_t nsid, uint64_t lba, uint32_t generation,
                              uint64_t fill) noexcept {
  if (word == 0) return lba;
  if (word == 1) return tag_word(nsid, generation);
  return fill + word * kFillStep;
}

// Index of the first word that differs from the pattern, or `words` when none does.
uint32_t first_difference(const uint8_t* block, uint32_t words, uint32_t nsid, uint64_t lba,
                          uint32_t generation) noexcept {
  const uint64_t fill = fill_seed(nsid, lba, generation);
  for (uint32_t w = 0; w < words; ++w) {
    if (load_word(block, w) != expected_word(w, nsid, lba, generation, fill)) return w;
  }
  return words;
}

uint32_t first_nonzero(const uint8_t* block, uint32_t words) noexcept {
  for (uint32_t w = 0; w < words; ++w) {
    if (load_word(block, w) != 0) return w;
  }
  return words;
}

// Whether `block` holds the intact pattern of a failed write: a generation after
// `acknowledged` up to `failed_through` (modulo 2^32, as generations wrap).
bool holds_failed_write(const uint8_t* block, uint32_t words, uint32_t nsid, uint64_t lba,
                        uint32_t acknowledged, uint32_t failed_through) noexcept {
  if (failed_through == kGenerationNone || words < 2) return false;
  if (load_word(block, 0) != lba || load_word(block, 1) >> 32 != nsid) return false;
  const auto generation = static_cast<uint32_t>(load_word(block, 1));
  const uint32_t after = generation - acknowledged;
  if (after == 0 || after > failed_through - acknowledged) return false;
  return first_difference(block, words, nsid, lba, generation) == words;
}

}  // namespace

void pattern_fill(void* buffer, uint32_t block_size, uint32_t nsid, uint64_t lba,
                  uint32_t blocks, uint32_t generation) noexcept {
  auto* bytes = static_cast<uint8_t*>(buffer);
  const uint32_t words = block_size / 8;
  for (uint32_t b = 0; b < blocks; ++b) {
    uint8_t* block = bytes + size_t{b} * block_size;
    const uint64_t block_lba = lba + b;
    const uint64_t fill = fill_seed(nsid, block_lba, generation);
    for (uint32_t w = 0; w < words; ++w) {
      store_word(block, w, expected_word(w, nsid, block_lba, generation, fill));
    }
  }
}

bool pattern_check(const void* buffer, uint32_t block_size, uint32_t nsid, uint64_t lba,
                   uint32_t blocks, uint32_t generation, PatternMismatch* mismatch,
                   uint32_t failed_through) noexcept {
  if (generation == kGenerationUnknown) return true;
  const auto* bytes = static_cast<const uint8_t*>(buffer);
  const uint32_t words = block_size / 8;
  for (uint32_t b = 0; b < blocks; ++b) {
    const uint8_t* block = bytes + size_t{b} * block_size;
    const uint64_t block_lba = lba + b;
    uint32_t bad = words;
    uint64_t expected = 0;
    if (generation != kGenerationNone) {
      bad = first_difference(block, words, nsid, block_lba, generation);
      if (bad < words) {
        expected = expected_word(bad, nsid, block_lba, generation,
                                 fill_seed(nsid, block_lba, generation));
      }
    } else {
      bad = first_nonzero(block, words);
      // Not zero: an intact block of an earlier run (this namespace, this LBA, any generation)
      // is acceptable too. Its header words say which generation to check the rest against.
      if (bad < words && words >= 2 && load_word(block, 0) == block_lba &&
          load_word(block, 1) >> 32 == nsid) {
        const auto old_generation = static_cast<uint32_t>(load_word(block, 1));
        if (old_generation != kGenerationNone && old_generation != kGenerationUnknown &&
            first_difference(block, words, nsid, block_lba, old_generation) == words) {
          bad = words;
        }
      }
    }
    if (bad < words &&
        holds_failed_write(block, words, nsid, block_lba, generation, failed_through)) {
      bad = words;
    }
    if (bad < words) {
      mismatch->lba = block_lba;
      mismatch->byte_offset = bad * 8;
      mismatch->expected = expected;
      mismatch->actual = load_word(block, bad);
      return false;
    }
  }
  return true;
}

}  // namespace nvmf::perf
