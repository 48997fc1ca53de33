#include "common/sha1.h"

#include <algorithm>
#include <cstring>

namespace nvmf {

namespace {
constexpr uint32_t rotate_left(uint32_t value, unsigned bits) noexcept {
  return (value << bits) | (value >> (32 - bits));
}
}  // namespace

// FIPS 180-4 section 6.1.2: one 512-bit block into the hash state.
void Sha1::compress(const uint8_t* block) noexcept {
  uint32_t schedule[80];               // W(0..79)
  for (unsigned t = 0; t < 16; ++t) {  // big-endian words
    schedule[t] = uint32_t{block[4 * t]} << 24 | uint32_t{block[4 * t + 1]} << 16 |
                  uint32_t{block[4 * t + 2]} << 8 | uint32_t{block[4 * t + 3]};
  }
  for (unsigned t = 16; t < 80; ++t) {
    schedule[t] =
        rotate_left(schedule[t - 3] ^ schedule[t - 8] ^ schedule[t - 14] ^ schedule[t - 16], 1);
  }
  uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3], e = state_[4];
  for (unsigned t = 0; t < 80; ++t) {
    uint32_t f, k;  // section 4.1.1 functions and section 4.2.1 constants, by round
    if (t < 20) {
      f = (b & c) | (~b & d), k = 0x5A827999;
    } else if (t < 40) {
      f = b ^ c ^ d, k = 0x6ED9EBA1;
    } else if (t < 60) {
      f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDC;
    } else {
      f = b ^ c ^ d, k = 0xCA62C1D6;
    }
    const uint32_t next = rotate_left(a, 5) + f + e + k + schedule[t];
    e = d, d = c, c = rotate_left(b, 30), b = a, a = next;
  }
  state_[0] += a, state_[1] += b, state_[2] += c, state_[3] += d, state_[4] += e;
}

void Sha1::update(const void* data, size_t size_bytes) noexcept {
  const auto* bytes = static_cast<const uint8_t*>(data);
  total_bytes_ += size_bytes;
  while (size_bytes > 0) {
    const size_t take = std::min(size_bytes, kBlockSize - block_used_);
    std::memcpy(block_.data() + block_used_, bytes, take);
    block_used_ += take, bytes += take, size_bytes -= take;
    if (block_used_ == kBlockSize) {
      compress(block_.data());
      block_used_ = 0;
    }
  }
}

Sha1Digest Sha1::finish() noexcept {
  // Section 5.1.1: a 1 bit, zeroes up to 8 bytes short of a block end, the length in bits.
  const uint64_t total_bits = total_bytes_ * 8;
  const uint8_t one_bit = 0x80;
  update(&one_bit, 1);
  const uint8_t zero = 0;
  while (block_used_ != kBlockSize - 8) update(&zero, 1);
  uint8_t length[8];
  for (unsigned i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(total_bits >> (56 - 8 * i));
  update(length, sizeof(length));
  Sha1Digest digest{};
  for (unsigned i = 0; i < kSha1DigestSize; ++i) {
    digest[i] = static_cast<uint8_t>(state_[i / 4] >> (24 - 8 * (i % 4)));
  }
  return digest;
}

Sha1Digest sha1(std::string_view text) noexcept {
  Sha1 hash;
  hash.update(text);
  return hash.finish();
}

std::array<uint8_t, 16> uuid_v5(const std::array<uint8_t, 16>& name_space,
                                std::string_view name) noexcept {
  return uuid_v5(name_space, {name});
}

std::array<uint8_t, 16> uuid_v5(const std::array<uint8_t, 16>& name_space,
                                std::initializer_list<std::string_view> name_pieces) noexcept {
  Sha1 hash;
  hash.update(name_space.data(), name_space.size());
  for (const std::string_view piece : name_pieces) hash.update(piece);
  const Sha1Digest digest = hash.finish();
  std::array<uint8_t, 16> uuid{};
  std::memcpy(uuid.data(), digest.data(), uuid.size());
  uuid[6] = static_cast<uint8_t>((uuid[6] & 0x0f) | 0x50);  // version 5: name-based, SHA-1
  uuid[8] = static_cast<uint8_t>((uuid[8] & 0x3f) | 0x80);  // variant 1: RFC 4122
  return uuid;
}

}  // namespace nvmf
