#include "transport_rdma/sgl_parse.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace nvmf::transport_rdma {
namespace {

namespace sc = spec::sc_generic;
constexpr uint8_t kToController = spec::data_transfer::host_to_controller;
constexpr uint8_t kToHost = spec::data_transfer::controller_to_host;

spec::Sqe write_with(const spec::SglDescriptor& sgl) {
  spec::Sqe sqe = spec::make_sqe(spec::nvm_opcode::write, 1, 1);
  sqe.sgl1 = sgl;
  return sqe;
}

uint8_t sc_of(const spec::Status& status) { return status.sc; }

TEST(SglParse, KeyedAddress) {
  ParsedSgl out;
  spec::Sqe sqe = write_with(spec::make_keyed_data_block(0x1000, 8192, 0xABCD, false));
  ASSERT_TRUE(parse_command_sgl(sqe, kToHost, nullptr, 0, SglLimits{}, &out).is_success());
  EXPECT_EQ(out.kind, ParsedSgl::Kind::keyed);
  EXPECT_EQ(out.total_length, 8192u);
  EXPECT_FALSE(out.invalidate_key);
  ASSERT_EQ(out.keyed_count, 1u);
  EXPECT_EQ(out.keyed[0].address, 0x1000u);
  EXPECT_EQ(out.keyed[0].key, 0xABCDu);
}

TEST(SglParse, KeyedInvalidateAsksForSendWithInvalidate) {
  ParsedSgl out;
  spec::Sqe sqe = write_with(spec::make_keyed_data_block(0x2000, 4096, 0x1234, true));
  ASSERT_TRUE(parse_command_sgl(sqe, kToController, nullptr, 0, SglLimits{}, &out).is_success());
  EXPECT_TRUE(out.invalidate_key);
  EXPECT_EQ(out.invalidate_rkey, 0x1234u);
}

TEST(SglParse, KeyedLongerThanMaxIoSize) {
  ParsedSgl out;
  SglLimits limits;
  limits.max_io_size = 131072;
  spec::Sqe sqe = write_with(spec::make_keyed_data_block(0, 131072 + 512, 1, false));
  EXPECT_EQ(sc_of(parse_command_sgl(sqe, kToHost, nullptr, 0, limits, &out)),
            sc::data_sgl_length_invalid);
  sqe = write_with(spec::make_keyed_data_block(0, 131072, 1, false));
  EXPECT_TRUE(parse_command_sgl(sqe, kToHost, nullptr, 0, limits, &out).is_success());
}

TEST(SglParse, ZeroLengthMovesNothing) {
  ParsedSgl out;
  spec::Sqe sqe = write_with(spec::make_keyed_data_block(0x1000, 0, 5, false));
  ASSERT_TRUE(parse_command_sgl(sqe, kToHost, nullptr, 0, SglLimits{}, &out).is_success());
  EXPECT_EQ(out.kind, ParsedSgl::Kind::none);
}

TEST(SglParse, InCapsuleData) {
  std::vector<uint8_t> capsule(4096, 0xEE);
  ParsedSgl out;
  spec::Sqe sqe = write_with(spec::make_in_capsule_data_block(0, 4096));
  ASSERT_TRUE(
      parse_command_sgl(sqe, kToController, capsule.data(), 4096, SglLimits{}, &out).is_success());
  EXPECT_EQ(out.kind, ParsedSgl::Kind::in_capsule);
  EXPECT_EQ(out.in_capsule_offset, 0u);
  EXPECT_EQ(out.total_length, 4096u);
  sqe = write_with(spec::make_in_capsule_data_block(512, 1024));
  ASSERT_TRUE(
      parse_command_sgl(sqe, kToController, capsule.data(), 4096, SglLimits{}, &out).is_success());
  EXPECT_EQ(out.in_capsule_offset, 512u);
}

TEST(SglParse, InCapsuleDataPastWhatArrived) {
  std::vector<uint8_t> capsule(4096);
  ParsedSgl out;
  // The host claims 4096 bytes but only 1024 came with the capsule.
  spec::Sqe sqe = write_with(spec::make_in_capsule_data_block(0, 4096));
  EXPECT_EQ(sc_of(parse_command_sgl(sqe, kToController, capsule.data(), 1024, SglLimits{}, &out)),
            sc::data_sgl_length_invalid);
  sqe = write_with(spec::make_in_capsule_data_block(4097, 0));
  EXPECT_EQ(sc_of(parse_command_sgl(sqe, kToController, capsule.data(), 4096, SglLimits{}, &out)),
            sc::sgl_offset_invalid);
}

// The 2026 kernel bug: offset + length wrapped and passed a naive check.
TEST(SglParse, InCapsuleOffsetPlusLengthWrapIsRefused) {
  std::vector<uint8_t> capsule(4096);
  ParsedSgl out;
  spec::SglDescriptor sgl = spec::make_in_capsule_data_block(16, 0xFFFFFFF8u);
  EXPECT_EQ(sc_of(parse_command_sgl(write_with(sgl), kToController, capsule.data(), 4096,
                                    SglLimits{}, &out)),
            sc::data_sgl_length_invalid);
  sgl = spec::make_in_capsule_data_block(0xFFFFFFFFFFFFFF00ull, 0x200);
  EXPECT_EQ(sc_of(parse_command_sgl(write_with(sgl), kToController, capsule.data(), 4096,
                                    SglLimits{}, &out)),
            sc::sgl_offset_invalid);
}

TEST(SglParse, InCapsuleDataOnAReadIsInvalid) {
  std::vector<uint8_t> capsule(4096);
  ParsedSgl out;
  spec::Sqe sqe = write_with(spec::make_in_capsule_data_block(0, 512));
  EXPECT_EQ(sc_of(parse_command_sgl(sqe, kToHost, capsule.data(), 4096, SglLimits{}, &out)),
            sc::invalid_field);
}

std::vector<uint8_t> descriptor_list(const std::vector<spec::SglDescriptor>& list) {
  std::vector<uint8_t> bytes(list.size() * 16);
  std::memcpy(bytes.data(), list.data(), bytes.size());
  return bytes;
}

TEST(SglParse, LastSegmentWithSeveralKeyedDescriptors) {
  auto list = descriptor_list({spec::make_keyed_data_block(0x1000, 4096, 11, false),
                               spec::make_keyed_data_block(0x9000, 8192, 12, true),
                               spec::make_keyed_data_block(0x5000, 512, 13, false)});
  ParsedSgl out;
  spec::Sqe sqe = write_with(spec::make_last_segment(0, 48));
  ASSERT_TRUE(parse_command_sgl(sqe, kToHost, list.data(), static_cast<uint32_t>(list.size()),
                                SglLimits{}, &out)
                  .is_success());
  EXPECT_EQ(out.kind, ParsedSgl::Kind::keyed);
  ASSERT_EQ(out.keyed_count, 3u);
  EXPECT_EQ(out.total_length, 4096u + 8192u + 512u);
  EXPECT_EQ(out.keyed[0].key, 11u) << "the data layout keeps the host's order";
  EXPECT_EQ(out.keyed[1].address, 0x9000u);
  EXPECT_EQ(out.keyed[2].length, 512u);
  EXPECT_TRUE(out.invalidate_key);
  EXPECT_EQ(out.invalidate_rkey, 12u);
}

TEST(SglParse, LastSegmentErrors) {
  auto one = descriptor_list({spec::make_keyed_data_block(0x1000, 4096, 1, false)});
  ParsedSgl out;
  auto parse = [&](const spec::SglDescriptor& sgl, const std::vector<uint8_t>& data) {
    return sc_of(parse_command_sgl(write_with(sgl), kToHost, data.data(),
                                   static_cast<uint32_t>(data.size()), SglLimits{}, &out));
  };
  EXPECT_EQ(parse(spec::make_last_segment(0, 0), one), sc::data_sgl_length_invalid);
  EXPECT_EQ(parse(spec::make_last_segment(0, 24), one), sc::data_sgl_length_invalid);
  EXPECT_EQ(parse(spec::make_last_segment(16, 16), one), sc::sgl_offset_invalid);
  EXPECT_EQ(parse(spec::make_last_segment(0xFFFFFFFFFFFFFFF0ull, 32), one), sc::sgl_offset_invalid);
  // A list entry that is not keyed.
  auto mixed = descriptor_list({spec::make_keyed_data_block(0x1000, 4096, 1, false),
                                spec::make_in_capsule_data_block(0, 16)});
  EXPECT_EQ(parse(spec::make_last_segment(0, 32), mixed), sc::sgl_descriptor_type_invalid);
  // Two different keys to invalidate.
  auto two_keys = descriptor_list({spec::make_keyed_data_block(0x1000, 4096, 1, true),
                                   spec::make_keyed_data_block(0x2000, 4096, 2, true)});
  EXPECT_EQ(parse(spec::make_last_segment(0, 32), two_keys), sc::invalid_field);
  // More descriptors than MSDBD.
  std::vector<spec::SglDescriptor> many(17, spec::make_keyed_data_block(0, 512, 1, false));
  auto too_many = descriptor_list(many);
  EXPECT_EQ(parse(spec::make_last_segment(0, 17 * 16), too_many), sc::data_sgl_length_invalid);
  // Sum beyond max_io_size even though each fits.
  std::vector<spec::SglDescriptor> big(16, spec::make_keyed_data_block(0, 0xFFFFFF, 1, false));
  auto huge = descriptor_list(big);
  EXPECT_EQ(parse(spec::make_last_segment(0, 256), huge), sc::data_sgl_length_invalid);
}

TEST(SglParse, DescriptorTypesTheBindingDoesNotAllow) {
  ParsedSgl out;
  std::vector<uint8_t> capsule(64);
  const spec::SglDescriptor refused[] = {
      spec::make_data_block(0x1000, 4096),  // PCIe memory address
      spec::make_segment(0, 32),            // chained segments
  };
  for (const auto& sgl : refused) {
    EXPECT_EQ(
        sc_of(parse_command_sgl(write_with(sgl), kToHost, capsule.data(), 64, SglLimits{}, &out)),
        sc::sgl_descriptor_type_invalid);
  }
  spec::SglDescriptor bit_bucket{};
  bit_bucket.set_identifier(spec::sgl_type::bit_bucket, 0);
  EXPECT_EQ(
      sc_of(parse_command_sgl(write_with(bit_bucket), kToHost, nullptr, 0, SglLimits{}, &out)),
      sc::sgl_descriptor_type_invalid);
  spec::SglDescriptor keyed_bad_subtype = spec::make_keyed_data_block(0, 512, 1, false);
  keyed_bad_subtype.set_identifier(spec::sgl_type::keyed_data_block, 0x3);
  EXPECT_EQ(sc_of(parse_command_sgl(write_with(keyed_bad_subtype), kToHost, nullptr, 0, SglLimits{},
                                    &out)),
            sc::sgl_descriptor_type_invalid);
}

TEST(SglParse, PrpInsteadOfSglIsInvalidField) {
  ParsedSgl out;
  spec::Sqe sqe = write_with(spec::make_keyed_data_block(0, 512, 1, false));
  sqe.set_psdt(spec::psdt::prp);
  EXPECT_EQ(sc_of(parse_command_sgl(sqe, kToHost, nullptr, 0, SglLimits{}, &out)),
            sc::invalid_field);
}

TEST(SglParse, CommandsWithoutDataIgnoreTheSgl) {
  ParsedSgl out;
  spec::Sqe sqe = spec::make_sqe(spec::nvm_opcode::flush, 1, 1);
  sqe.sgl1.set_identifier(0xF, 0xF);  // garbage: not looked at
  EXPECT_TRUE(parse_command_sgl(sqe, spec::data_transfer::none, nullptr, 0, SglLimits{}, &out)
                  .is_success());
  EXPECT_EQ(out.kind, ParsedSgl::Kind::none);
  EXPECT_EQ(sc_of(parse_command_sgl(sqe, spec::data_transfer::bidirectional, nullptr, 0,
                                    SglLimits{}, &out)),
            sc::invalid_opcode);
}

TEST(SglParse, ErrorsSetDoNotRetry) {
  ParsedSgl out;
  spec::Sqe sqe = write_with(spec::make_data_block(0, 1));
  spec::Status status = parse_command_sgl(sqe, kToHost, nullptr, 0, SglLimits{}, &out);
  EXPECT_FALSE(status.is_success());
  EXPECT_TRUE(status.dnr) << "a malformed SGL fails the same way on retry";
  EXPECT_EQ(status.sct, spec::sct::generic);
}

}  // namespace
}  // namespace nvmf::transport_rdma
