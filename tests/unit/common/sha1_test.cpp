// SHA-1 against the FIPS 180 / RFC 3174 test vectors, and version 5 UUIDs against Python's
// uuid.uuid5.
#include "common/sha1.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace nvmf {
namespace {

std::string hex(const uint8_t* bytes, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  for (size_t i = 0; i < size; ++i) {
    text += kDigits[bytes[i] >> 4];
    text += kDigits[bytes[i] & 0xf];
  }
  return text;
}

std::string hex(const Sha1Digest& digest) { return hex(digest.data(), digest.size()); }

TEST(Sha1, FipsAndRfc3174Vectors) {
  // FIPS 180-2 appendix A.1 / RFC 3174 TEST1: one block.
  EXPECT_EQ(hex(sha1("abc")), "a9993e364706816aba3e25717850c26c9cd0d89d");
  // Appendix A.2 / TEST2: the 448-bit message, whose padding needs a second block.
  EXPECT_EQ(hex(sha1("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  EXPECT_EQ(hex(sha1("")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
}

TEST(Sha1, OneMillionAsFedInUnevenPieces) {
  // Appendix A.3 / TEST3: one million 'a', in pieces that straddle block boundaries.
  const std::string piece(997, 'a');  // a prime, so pieces end anywhere in a block
  Sha1 hash;
  size_t fed_bytes = 0;
  while (fed_bytes < 1000000) {
    const size_t take = std::min(piece.size(), size_t{1000000} - fed_bytes);
    hash.update(piece.data(), take);
    fed_bytes += take;
  }
  EXPECT_EQ(hex(hash.finish()), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}

TEST(Sha1, LengthsAroundThePaddingBoundary) {
  // 55 bytes pad within the block, 56 need one more, 64 is a whole block (Python's hashlib).
  EXPECT_EQ(hex(sha1(std::string(55, 'a'))), "c1c8bbdc22796e28c0e15163d20899b65621d65a");
  EXPECT_EQ(hex(sha1(std::string(56, 'a'))), "c2db330f6083854c99d4b5bfb6e8f29f201be699");
  EXPECT_EQ(hex(sha1(std::string(64, 'a'))), "0098ba824b5c16427bd7a1122a5a442a25ec644d");
}

TEST(UuidV5, MatchesPythonsUuid5) {
  // RFC 4122 appendix C name space IDs.
  constexpr std::array<uint8_t, 16> kNameSpaceDns = {0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad,
                                                     0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0,
                                                     0x4f, 0xd4, 0x30, 0xc8};
  constexpr std::array<uint8_t, 16> kNameSpaceUrl = {0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad,
                                                     0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0,
                                                     0x4f, 0xd4, 0x30, 0xc8};
  // uuid.uuid5(uuid.NAMESPACE_DNS, "python.org") = 886313e1-3b8a-5372-9b90-0c9aee199e5d
  const std::array<uint8_t, 16> dns = uuid_v5(kNameSpaceDns, "python.org");
  EXPECT_EQ(hex(dns.data(), dns.size()), "886313e13b8a53729b900c9aee199e5d");
  // uuid.uuid5(uuid.NAMESPACE_URL, "http://example.com/") = 0a300ee9-f9e4-5697-a51a-...
  const std::array<uint8_t, 16> url = uuid_v5(kNameSpaceUrl, "http://example.com/");
  EXPECT_EQ(hex(url.data(), url.size()), "0a300ee9f9e45697a51aefc7fafaba67");
  EXPECT_EQ(dns[6] >> 4, 5) << "version 5";
  EXPECT_EQ(dns[8] & 0xc0, 0x80) << "RFC 4122 variant";
}

}  // namespace
}  // namespace nvmf
