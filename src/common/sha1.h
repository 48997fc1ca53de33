// SHA-1 (FIPS 180-4) and RFC 4122 name-based UUIDs (version 5) built on it: the target derives
// namespace identifiers that stay the same across restarts from names. Control path only: SHA-1
// is here because RFC 4122 version 5 names it, not for security (its collision resistance is
// broken) and never for data.
//
// Threads: a Sha1 belongs to its caller; the free functions are pure.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace nvmf {

inline constexpr size_t kSha1DigestSize = 20;  // 160 bits
using Sha1Digest = std::array<uint8_t, kSha1DigestSize>;

// Incremental SHA-1: update() any number of times, then finish() once.
class Sha1 {
 public:
  void update(const void* data, size_t size_bytes) noexcept;
  void update(std::string_view text) noexcept { update(text.data(), text.size()); }
  // Pads, processes the last block and returns the digest; the object is spent afterwards.
  Sha1Digest finish() noexcept;

 private:
  static constexpr size_t kBlockSize = 64;  // 512-bit message blocks
  void compress(const uint8_t* block) noexcept;

  // FIPS 180-4 section 5.3.1: the initial hash value H(0).
  std::array<uint32_t, 5> state_ = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
  std::array<uint8_t, kBlockSize> block_{};
  size_t block_used_ = 0;
  uint64_t total_bytes_ = 0;
};

Sha1Digest sha1(std::string_view text) noexcept;

// RFC 4122 section 4.3, version 5: SHA-1 over the name space ID's 16 bytes (in the network
// order a Uuid stores them) followed by `name`; the digest's first 16 bytes with the version
// (5) and variant (RFC 4122) bits set. The same inputs give the same UUID everywhere (Python's
// uuid.uuid5 agrees).
std::array<uint8_t, 16> uuid_v5(const std::array<uint8_t, 16>& name_space,
                                std::string_view name) noexcept;
// The same with the name given in pieces, hashed one after the other (no copy to join them).
std::array<uint8_t, 16> uuid_v5(const std::array<uint8_t, 16>& name_space,
                                std::initializer_list<std::string_view> name_pieces) noexcept;

}  // namespace nvmf
