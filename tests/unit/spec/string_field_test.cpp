// Fixed-width string fields (space padded, NUL terminated) and NQN validation.
#include "spec/string_field.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <string_view>

#include "byte_image.h"

namespace nvmf::spec {
namespace {

using test::ByteImage;
using test::bytes_of;
using test::SameBytes;

// A field between two guard bytes, to see that nothing writes or reads outside it.
struct Guarded8 {
  char before;
  char field[8];
  char after;
};

TEST(SpecStringField, SpacePaddedPutPadsWithSpaces) {
  Guarded8 g{'G', {}, 'G'};
  EXPECT_TRUE(put_space_padded(g.field, "1.0"));
  EXPECT_TRUE(SameBytes(bytes_of(g), ByteImage(10).text(0, "G1.0     G")));
  EXPECT_TRUE(put_space_padded(g.field, "ABCDEFGH"));  // exact fit: no terminator, no padding
  EXPECT_TRUE(SameBytes(bytes_of(g), ByteImage(10).text(0, "GABCDEFGHG")));
  EXPECT_TRUE(put_space_padded(g.field, ""));
  EXPECT_TRUE(SameBytes(bytes_of(g), ByteImage(10).text(0, "G        G")));
}

TEST(SpecStringField, SpacePaddedPutTruncatesAndSaysSo) {
  Guarded8 g{'G', {}, 'G'};
  EXPECT_FALSE(put_space_padded(g.field, "0123456789"));
  EXPECT_TRUE(SameBytes(bytes_of(g), ByteImage(10).text(0, "G01234567G")));
}

TEST(SpecStringField, SpacePaddedGetTrimsAndStaysInside) {
  Guarded8 g{'X', {}, 'Y'};
  std::memcpy(g.field, "SN 1    ", 8);
  EXPECT_EQ(get_space_padded(g.field), "SN 1");
  std::memcpy(g.field, "ABCDEFGH", 8);  // full width, no terminator: stops at the field end
  EXPECT_EQ(get_space_padded(g.field), "ABCDEFGH");
  std::memcpy(g.field, "        ", 8);
  EXPECT_EQ(get_space_padded(g.field), "");
  std::memcpy(g.field, "AB\0\0\0\0\0\0", 8);  // NUL padded by a sloppy device
  EXPECT_EQ(get_space_padded(g.field), "AB");
  std::memcpy(g.field, "AB \0ZZZZ", 8);  // stops at the first NUL, then trims
  EXPECT_EQ(get_space_padded(g.field), "AB");
}

TEST(SpecStringField, NulPaddedPutFillsWithNuls) {
  Guarded8 g{'G', {}, 'G'};
  std::memset(g.field, 'z', sizeof(g.field));
  EXPECT_TRUE(put_nul_padded(g.field, "4420"));
  EXPECT_TRUE(SameBytes(bytes_of(g), ByteImage(10).text(0, "G4420").text(9, "G")));
  EXPECT_TRUE(put_nul_padded(g.field, "1234567"));  // 7 + terminator = 8
  EXPECT_TRUE(SameBytes(bytes_of(g), ByteImage(10).text(0, "G1234567").text(9, "G")));
  EXPECT_TRUE(is_nul_terminated(g.field));
}

TEST(SpecStringField, NulPaddedPutRefusesWhatDoesNotFit) {
  Guarded8 g{'G', {}, 'G'};
  std::memset(g.field, 'z', sizeof(g.field));
  EXPECT_FALSE(put_nul_padded(g.field, "12345678"));  // no room for the terminator
  EXPECT_TRUE(SameBytes(bytes_of(g), ByteImage(10).text(0, "G").text(9, "G")));  // zeroed
  EXPECT_FALSE(put_nul_padded(g.field, std::string_view("ab\0cd", 5)));          // embedded NUL
  EXPECT_EQ(get_nul_terminated(g.field), "");
}

TEST(SpecStringField, NulTerminatedGetWithoutTerminatorStopsAtFieldEnd) {
  Guarded8 g{'X', {}, 'Y'};
  std::memcpy(g.field, "ABCDEFGH", 8);
  EXPECT_FALSE(is_nul_terminated(g.field));
  const std::string_view text = get_nul_terminated(g.field);
  EXPECT_EQ(text, "ABCDEFGH");  // not "ABCDEFGHY"
  EXPECT_EQ(text.data(), g.field);
  std::memcpy(g.field, "nqn\0junk", 8);
  EXPECT_TRUE(is_nul_terminated(g.field));
  EXPECT_EQ(get_nul_terminated(g.field), "nqn");
}

TEST(SpecStringField, CopyToCStringAlwaysTerminates) {
  char out[5];
  EXPECT_EQ(copy_to_c_string("abcdefgh", out), 4u);
  EXPECT_STREQ(out, "abcd");
  EXPECT_EQ(copy_to_c_string("ab", out), 2u);
  EXPECT_STREQ(out, "ab");
  char one[1] = {'x'};
  EXPECT_EQ(copy_to_c_string("abc", one), 0u);
  EXPECT_EQ(one[0], '\0');
  EXPECT_EQ(copy_to_c_string("abc", out, 0), 0u);
}

TEST(SpecNqn, AcceptsWellFormedNames) {
  EXPECT_TRUE(nqn_valid("nqn.2014-08.org.nvmexpress.discovery"));
  EXPECT_TRUE(nqn_valid("nqn.2016-06.io.spdk:cnode1"));
  EXPECT_TRUE(nqn_valid("nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6"));
  EXPECT_TRUE(nqn_valid("nqn.2014-08.org.nvmexpress:uuid:F81D4FAE-7DEC-11D0-A765-00A0C91E6BF6"));
  std::string longest = "nqn.2024-01.com.example:";
  longest.append(223 - longest.size(), 'x');
  ASSERT_EQ(longest.size(), 223u);
  EXPECT_TRUE(nqn_valid(longest));
  EXPECT_TRUE(uuid_text_valid("00000000-0000-0000-0000-000000000000"));
}

TEST(SpecNqn, RejectsMalformedNames) {
  EXPECT_FALSE(nqn_valid(""));
  EXPECT_FALSE(nqn_valid("nqn."));
  EXPECT_FALSE(nqn_valid("iqn.2016-06.io.spdk:cnode1"));
  EXPECT_FALSE(nqn_valid("nqn.16-06.io.spdk:cnode1"));
  EXPECT_FALSE(nqn_valid("nqn.2016-6.io.spdk:cnode1"));
  EXPECT_FALSE(nqn_valid("nqn.2016-06."));  // nothing after the date
  EXPECT_FALSE(nqn_valid("nqn.2016_06.io.spdk:cnode1"));
  EXPECT_FALSE(nqn_valid("nqn.2014-08.org.nvmexpress:uuid:"));
  EXPECT_FALSE(nqn_valid("nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf"));
  EXPECT_FALSE(nqn_valid("nqn.2014-08.org.nvmexpress:uuid:f81d4fae+7dec-11d0-a765-00a0c91e6bf6"));
  EXPECT_FALSE(nqn_valid("nqn.2014-08.org.nvmexpress:uuid:g81d4fae-7dec-11d0-a765-00a0c91e6bf6"));
  EXPECT_FALSE(nqn_valid("nqn.2016-06.io.spdk:cnode\n1"));
  EXPECT_FALSE(nqn_valid(std::string_view("nqn.2016-06.io.spdk:\0x", 22)));
  std::string too_long = "nqn.2024-01.com.example:";
  too_long.append(224 - too_long.size(), 'x');
  EXPECT_FALSE(nqn_valid(too_long));
}

TEST(SpecNqn, FieldValidityNeedsTerminatorAndLength) {
  char field[nqn_field_size];
  ASSERT_TRUE(put_nul_padded(field, "nqn.2016-06.io.spdk:cnode1"));
  EXPECT_TRUE(nqn_field_valid(field));
  std::memset(field, 'a', sizeof(field));  // no terminator anywhere
  EXPECT_FALSE(nqn_field_valid(field));
  std::string long_name = "nqn.2024-01.com.example:";
  long_name.append(240 - long_name.size(), 'x');  // fits the field, exceeds 223 bytes
  ASSERT_TRUE(put_nul_padded(field, long_name));
  EXPECT_FALSE(nqn_field_valid(field));
  EXPECT_EQ(nqn_length_max, 223u);
}

}  // namespace
}  // namespace nvmf::spec
