// SGL descriptors: exact bytes of every kind, accessors, classification.
#include "spec/sgl.h"

#include <gtest/gtest.h>

#include "byte_image.h"
#include "spec/nvme.h"

namespace nvmf::spec {
namespace {

using test::ByteImage;
using test::bytes_of;
using test::SameBytes;

TEST(SpecSgl, KeyedDataBlockInvalidateKeyExactBytes) {
  const SglDescriptor sgl = make_keyed_data_block(0x1122334455667788, 0x1000, 0xAABBCCDD, true);
  ByteImage expected(16);
  expected.at(0, {0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00, 0x10, 0x00, 0xDD, 0xCC,
                  0xBB, 0xAA, 0x4F});
  EXPECT_TRUE(SameBytes(bytes_of(sgl), expected));
  EXPECT_EQ(sgl.type(), sgl_type::keyed_data_block);
  EXPECT_EQ(sgl.subtype(), sgl_subtype::invalidate_key);
  EXPECT_EQ(sgl_kind(sgl), SglKind::keyed_invalidate);
}

TEST(SpecSgl, KeyedDataBlockAddressExactBytes) {
  const SglDescriptor sgl = make_keyed_data_block(0x00007F0012345000, 0x123456, 0x01020304, false);
  ByteImage expected(16);
  expected.at(0, {0x00, 0x50, 0x34, 0x12, 0x00, 0x7F, 0x00, 0x00, 0x56, 0x34, 0x12, 0x04, 0x03,
                  0x02, 0x01, 0x40});
  EXPECT_TRUE(SameBytes(bytes_of(sgl), expected));
  EXPECT_EQ(sgl_kind(sgl), SglKind::keyed_address);
  EXPECT_EQ(sgl.keyed_length(), 0x123456u);
  EXPECT_EQ(sgl.key(), 0x01020304u);
  EXPECT_EQ(sgl_data_length(sgl), 0x123456u);
}

TEST(SpecSgl, KeyedLengthMaxFillsThreeBytesOnly) {
  const SglDescriptor sgl = make_keyed_data_block(0, sgl_keyed_length_max, 0, false);
  ByteImage expected(16);
  expected.at(8, {0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0x40});
  EXPECT_TRUE(SameBytes(bytes_of(sgl), expected));
  EXPECT_EQ(sgl.keyed_length(), 0xFFFFFFu);
  EXPECT_EQ(sgl.key(), 0u);
}

TEST(SpecSgl, InCapsuleDataBlockOffsetExactBytes) {
  const SglDescriptor sgl = make_in_capsule_data_block(0, 0x2000);
  ByteImage expected(16);
  expected.at(8, {0x00, 0x20, 0x00, 0x00}).at(15, {0x01});
  EXPECT_TRUE(SameBytes(bytes_of(sgl), expected));
  EXPECT_EQ(sgl_kind(sgl), SglKind::in_capsule);
  EXPECT_EQ(sgl.length(), 0x2000u);

  const SglDescriptor with_offset = make_in_capsule_data_block(0x40, 0x12345678);
  ByteImage expected_offset(16);
  expected_offset.at(0, {0x40}).at(8, {0x78, 0x56, 0x34, 0x12}).at(15, {0x01});
  EXPECT_TRUE(SameBytes(bytes_of(with_offset), expected_offset));
}

TEST(SpecSgl, DataBlockAddressExactBytes) {
  const SglDescriptor sgl = make_data_block(0xFEDCBA9876543210, 512);
  ByteImage expected(16);
  expected.at(0, {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE, 0x00, 0x02, 0x00, 0x00});
  EXPECT_TRUE(SameBytes(bytes_of(sgl), expected));
  EXPECT_EQ(sgl_kind(sgl), SglKind::data_block_address);
}

TEST(SpecSgl, LastSegmentAndSegmentExactBytes) {
  const SglDescriptor last = make_last_segment(0, 3 * sgl_descriptor_size);
  ByteImage expected_last(16);
  expected_last.at(8, {0x30, 0x00, 0x00, 0x00}).at(15, {0x31});
  EXPECT_TRUE(SameBytes(bytes_of(last), expected_last));
  EXPECT_EQ(sgl_kind(last), SglKind::last_segment_offset);

  const SglDescriptor segment = make_segment(0x10, 0x20);
  ByteImage expected_segment(16);
  expected_segment.at(0, {0x10}).at(8, {0x20}).at(15, {0x21});
  EXPECT_TRUE(SameBytes(bytes_of(segment), expected_segment));
  EXPECT_EQ(sgl_kind(segment), SglKind::segment_offset);

  const SglDescriptor last_address = make_last_segment(0x1000, 0x10, sgl_subtype::address);
  EXPECT_EQ(last_address.identifier, 0x30);
  EXPECT_EQ(sgl_kind(last_address), SglKind::unsupported);
}

TEST(SpecSgl, ClassifiesEveryIdentifierByte) {
  int keyed = 0;
  int in_capsule = 0;
  int supported = 0;
  for (unsigned id = 0; id < 256; ++id) {
    SglDescriptor sgl{};
    sgl.identifier = static_cast<uint8_t>(id);
    EXPECT_EQ(sgl.type(), id >> 4);
    EXPECT_EQ(sgl.subtype(), id & 0xF);
    const SglKind kind = sgl_kind(sgl);
    if (kind == SglKind::keyed_address || kind == SglKind::keyed_invalidate) ++keyed;
    if (kind == SglKind::in_capsule) ++in_capsule;
    if (kind != SglKind::unsupported) ++supported;
  }
  EXPECT_EQ(keyed, 2);       // 40h and 4Fh only
  EXPECT_EQ(in_capsule, 1);  // 01h only
  EXPECT_EQ(supported, 6);   // 00h 01h 21h 31h 40h 4Fh

  SglDescriptor bit_bucket{};
  bit_bucket.set_identifier(sgl_type::bit_bucket, 0);
  EXPECT_EQ(bit_bucket.identifier, 0x10);
  EXPECT_EQ(sgl_kind(bit_bucket), SglKind::unsupported);
  SglDescriptor transport{};
  transport.set_identifier(sgl_type::transport_data_block, sgl_subtype::transport);
  EXPECT_EQ(transport.identifier, 0x5A);
  EXPECT_EQ(sgl_kind(transport), SglKind::unsupported);
}

TEST(SpecSgl, DecodesKeyedDescriptorFromWireBytes) {
  ByteImage raw(16);
  raw.at(0, {0x00, 0x10, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xEF, 0xBE, 0xAD,
             0xDE, 0x4F});
  const SglDescriptor sgl = test::from_bytes<SglDescriptor>(raw.bytes());
  EXPECT_EQ(sgl.address, 0x0000000100001000u);
  EXPECT_EQ(sgl.keyed_length(), 0x020000u);
  EXPECT_EQ(sgl.key(), 0xDEADBEEFu);
  EXPECT_EQ(sgl_kind(sgl), SglKind::keyed_invalidate);
  // The same bytes read as an unkeyed length would mix length and key: callers must classify.
  EXPECT_EQ(sgl.length(), 0xEF020000u);
}

TEST(SpecSgl, SettersOverwriteOnlyTheirBytes) {
  SglDescriptor sgl = make_keyed_data_block(0, 0x111111, 0x22222222, true);
  sgl.set_key(0xA1B2C3D4);
  EXPECT_EQ(sgl.keyed_length(), 0x111111u);
  sgl.set_keyed_length(0x000010);
  EXPECT_EQ(sgl.key(), 0xA1B2C3D4u);
  EXPECT_EQ(sgl.identifier, 0x4F);
}

TEST(SpecSgl, Sgl1SitsAtSqeByte24) {
  Sqe sqe{};
  sqe.sgl1 = make_keyed_data_block(0x1122334455667788, 0x1000, 0xAABBCCDD, true);
  const auto sqe_bytes = bytes_of(sqe);
  const auto sgl_bytes = bytes_of(sqe.sgl1);
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(sqe_bytes[24 + i], sgl_bytes[i]) << "byte " << i;
  EXPECT_EQ(sqe_bytes[39], 0x4F);
  EXPECT_EQ(sqe_bytes[23], 0x00);
  EXPECT_EQ(sqe_bytes[40], 0x00);
}

}  // namespace
}  // namespace nvmf::spec

// The encoders are constexpr: a target can build constant descriptors at compile time.
namespace nvmf::spec {
namespace {
constexpr SglDescriptor kConstKeyed = make_keyed_data_block(0x1000, 0x200, 0xABCD, true);
static_assert(kConstKeyed.identifier == 0x4F);
static_assert(kConstKeyed.keyed_length() == 0x200 && kConstKeyed.key() == 0xABCD);
static_assert(sgl_kind(make_in_capsule_data_block(0, 64)) == SglKind::in_capsule);
static_assert(encode_status_field(command_specific_status(0x82, true), true) == 0x8305);
static_assert(decode_status_field(0x8305).sc == 0x82);
}  // namespace
}  // namespace nvmf::spec
