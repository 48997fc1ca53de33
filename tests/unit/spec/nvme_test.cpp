// SQE / CQE layouts, the Status Field encoding, status names and NVM command dwords.
#include "spec/nvme.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string_view>

#include "byte_image.h"

namespace nvmf::spec {
namespace {

using test::ByteImage;
using test::bytes_of;
using test::SameBytes;

TEST(SpecSqe, FieldsLandAtCommonCommandFormatOffsets) {
  Sqe sqe = make_sqe(nvm_opcode::read, 0xBEEF, 1);
  sqe.cdw2 = 0x0A0B0C0D;
  sqe.mptr = 0x1122334455667788;
  sqe.sgl1 = make_keyed_data_block(0x0102030405060708, 0x1000, 0x12345678, false);
  sqe.cdw10 = 0x89ABCDEF;
  sqe.cdw11 = 0x00000001;
  sqe.cdw12 = 0x40000007;
  sqe.cdw15 = 0xDEADBEEF;

  ByteImage expected(64);
  expected
      .at(0, {0x02, 0x40, 0xEF, 0xBE})  // opcode, PSDT=01b in bits 7:6, CID
      .at(4, {0x01, 0x00, 0x00, 0x00})  // NSID
      .at(8, {0x0D, 0x0C, 0x0B, 0x0A})  // CDW2
      .at(16, {0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11})  // MPTR
      .at(24, {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,   // SGL1 address
               0x00, 0x10, 0x00,                                 // 24-bit length
               0x78, 0x56, 0x34, 0x12,                           // key
               0x40})                                            // keyed, subtype address
      .at(40, {0xEF, 0xCD, 0xAB, 0x89, 0x01, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x40})
      .at(60, {0xEF, 0xBE, 0xAD, 0xDE});
  EXPECT_TRUE(SameBytes(bytes_of(sqe), expected));
}

TEST(SpecSqe, FuseAndPsdtShareByteOneWithoutClobbering) {
  Sqe sqe{};
  sqe.set_fuse(fuse::second);
  EXPECT_EQ(sqe.flags, 0x02);
  sqe.set_psdt(psdt::sgl_mptr_segment);
  EXPECT_EQ(sqe.flags, 0x82);
  EXPECT_EQ(sqe.fuse(), fuse::second);
  EXPECT_EQ(sqe.psdt(), psdt::sgl_mptr_segment);
  sqe.set_fuse(fuse::normal);
  EXPECT_EQ(sqe.flags, 0x80);
  EXPECT_EQ(bytes_of(sqe)[1], 0x80);
}

TEST(SpecSqe, DecodesRawCapsuleBytes) {
  ByteImage raw(64);
  raw.at(0, {0x01, 0x40, 0x34, 0x12}).at(4, {0x05, 0x00, 0x00, 0x00});
  raw.at(24, {0x00, 0x00, 0, 0, 0, 0, 0, 0, 0x00, 0x02, 0x00, 0x00, 0, 0, 0, 0x01});
  raw.at(40, {0x10, 0, 0, 0, 0, 0, 0, 0, 0x0F, 0x00, 0x00, 0x00});
  const Sqe sqe = test::from_bytes<Sqe>(raw.bytes());
  EXPECT_EQ(sqe.opcode, nvm_opcode::write);
  EXPECT_EQ(sqe.psdt(), psdt::sgl_mptr_contiguous);
  EXPECT_EQ(sqe.cid, 0x1234);
  EXPECT_EQ(sqe.nsid, 5u);
  EXPECT_EQ(sgl_kind(sqe.sgl1), SglKind::in_capsule);
  EXPECT_EQ(sqe.sgl1.length(), 0x200u);
  EXPECT_EQ(rw_starting_lba(sqe), 0x10u);
  EXPECT_EQ(rw_block_count(sqe), 16u);
}

TEST(SpecCqe, FieldsLandAtCompletionEntryOffsets) {
  Cqe cqe{};
  cqe.cdw0 = 0x11223344;
  cqe.cdw1 = 0x55667788;
  cqe.sqhd = 0x0005;
  cqe.sqid = 0x0001;
  cqe.cid = 0x1234;
  cqe.set_status(command_specific_status(sc_fabrics::connect_invalid_host, true), true);

  ByteImage expected(16);
  expected.at(0, {0x44, 0x33, 0x22, 0x11, 0x88, 0x77, 0x66, 0x55})
      .at(8, {0x05, 0x00, 0x01, 0x00, 0x34, 0x12})
      // P=1, SC=84h in 8:1, SCT=1 in 11:9, DNR bit 15: 0x8000|0x0200|0x0108|1 = 0x8309
      .at(14, {0x09, 0x83});
  EXPECT_TRUE(SameBytes(bytes_of(cqe), expected));
}

TEST(SpecStatusField, EachFieldAtItsBitPosition) {
  EXPECT_EQ(encode_status_field(Status{}, true), 0x0001);
  EXPECT_EQ(encode_status_field(generic_status(0xFF), false), 0x01FE);
  EXPECT_EQ(encode_status_field(make_status(sct::vendor_specific, 0), false), 0x0E00);
  Status crd;
  crd.crd = 3;
  EXPECT_EQ(encode_status_field(crd, false), 0x3000);
  Status more;
  more.more = true;
  EXPECT_EQ(encode_status_field(more, false), 0x4000);
  EXPECT_EQ(encode_status_field(generic_status(sc_generic::success, true), false), 0x8000);
}

TEST(SpecStatusField, DecodesKnownWireValues) {
  // LBA Out of Range (SCT 0, SC 80h) with DNR and phase 0.
  const Status lba = decode_status_field(0x8100);
  EXPECT_EQ(lba.sct, sct::generic);
  EXPECT_EQ(lba.sc, sc_generic::lba_out_of_range);
  EXPECT_TRUE(lba.dnr);
  EXPECT_FALSE(lba.more);
  EXPECT_FALSE(status_field_phase(0x8100));
  // Unrecovered Read Error (SCT 2, SC 81h), M set, CRD 1, phase 1.
  const Status media = decode_status_field(0x5503);
  EXPECT_EQ(media.sct, sct::media_data_integrity);
  EXPECT_EQ(media.sc, sc_media::unrecovered_read_error);
  EXPECT_EQ(media.crd, 1);
  EXPECT_TRUE(media.more);
  EXPECT_FALSE(media.dnr);
  EXPECT_TRUE(status_field_phase(0x5503));
  EXPECT_TRUE(decode_status_field(0x0001).is_success());
}

TEST(SpecStatusField, EveryValueRoundTrips) {
  for (uint32_t raw = 0; raw <= 0xFFFF; ++raw) {
    const auto field = static_cast<uint16_t>(raw);
    ASSERT_EQ(encode_status_field(decode_status_field(field), status_field_phase(field)), field);
  }
}

TEST(SpecCqe, SetStatusThenDecode) {
  Cqe cqe{};
  const Status status = generic_status(sc_generic::sgl_offset_invalid, true);
  cqe.set_status(status, true);
  EXPECT_TRUE(cqe.phase());
  EXPECT_EQ(cqe.decoded_status(), status);
  cqe.set_status(status_success, false);
  EXPECT_EQ(cqe.status, 0);
  EXPECT_TRUE(cqe.decoded_status().is_success());
}

TEST(SpecStatusName, GenericCodes) {
  EXPECT_STREQ(status_name(sct::generic, sc_generic::success), "Successful Completion");
  EXPECT_STREQ(status_name(sct::generic, sc_generic::invalid_opcode), "Invalid Command Opcode");
  EXPECT_STREQ(status_name(sct::generic, sc_generic::invalid_field), "Invalid Field in Command");
  EXPECT_STREQ(status_name(sct::generic, sc_generic::command_id_conflict), "Command ID Conflict");
  EXPECT_STREQ(status_name(sct::generic, sc_generic::data_transfer_error), "Data Transfer Error");
  EXPECT_STREQ(status_name(sct::generic, sc_generic::internal_error), "Internal Error");
  EXPECT_STREQ(status_name(sct::generic, sc_generic::abort_requested), "Command Abort Requested");
  EXPECT_STREQ(status_name(sct::generic, sc_generic::sgl_offset_invalid), "SGL Offset Invalid");
  EXPECT_STREQ(status_name(sct::generic, sc_generic::data_sgl_length_invalid),
               "Data SGL Length Invalid");
  EXPECT_STREQ(status_name(sct::generic, sc_generic::metadata_sgl_length_invalid),
               "Metadata SGL Length Invalid");
  EXPECT_STREQ(status_name(sct::generic, sc_generic::sgl_descriptor_type_invalid),
               "SGL Descriptor Type Invalid");
  EXPECT_STREQ(status_name(sct::generic, sc_generic::invalid_namespace_or_format),
               "Invalid Namespace or Format");
  EXPECT_STREQ(status_name(sct::generic, sc_generic::lba_out_of_range), "LBA Out of Range");
  EXPECT_STREQ(status_name(sct::generic, sc_generic::capacity_exceeded), "Capacity Exceeded");
  EXPECT_STREQ(status_name(sct::generic, sc_generic::namespace_not_ready), "Namespace Not Ready");
  EXPECT_STREQ(status_name(generic_status(sc_generic::keep_alive_timer_expired)),
               "Keep Alive Timer Expired");
}

TEST(SpecStatusName, CommandSpecificDependsOnFabricsOpcode) {
  EXPECT_STREQ(status_name(sct::command_specific, 0x80, true), "Incompatible Format");
  EXPECT_STREQ(status_name(sct::command_specific, 0x80, false), "Conflicting Attributes");
  EXPECT_STREQ(status_name(sct::command_specific, 0x81, true), "Controller Busy");
  EXPECT_STREQ(status_name(sct::command_specific, 0x82, true), "Connect Invalid Parameters");
  EXPECT_STREQ(status_name(sct::command_specific, 0x83, true), "Connect Restart Discovery");
  EXPECT_STREQ(status_name(sct::command_specific, 0x84, true), "Connect Invalid Host");
  EXPECT_STREQ(status_name(sct::command_specific, 0x85, true), "Invalid Queue Type");
  EXPECT_STREQ(status_name(sct::command_specific, 0x90, true), "Discover Restart");
  EXPECT_STREQ(status_name(sct::command_specific, 0x91, true), "Authentication Required");
  EXPECT_STREQ(status_name(sct::command_specific, sc_command::invalid_log_page, true),
               "Invalid Log Page");
  EXPECT_STREQ(status_name(sct::command_specific, sc_command::invalid_queue_identifier),
               "Invalid Queue Identifier");
  EXPECT_STREQ(status_name(sct::media_data_integrity, sc_media::write_fault), "Write Fault");
  EXPECT_STREQ(status_name(sct::path_related, sc_path::asymmetric_access_inaccessible),
               "Asymmetric Access Inaccessible");
}

TEST(SpecStatusName, NeverNullForAnyValue) {
  for (unsigned type = 0; type < 8; ++type) {
    for (unsigned code = 0; code < 256; ++code) {
      for (bool fabrics : {false, true}) {
        const char* name =
            status_name(static_cast<uint8_t>(type), static_cast<uint8_t>(code), fabrics);
        ASSERT_NE(name, nullptr);
        ASSERT_GT(std::strlen(name), 0u);
      }
    }
  }
  EXPECT_STREQ(status_name(5, 0), "Reserved Status Code Type");
  EXPECT_STREQ(status_name(sct::generic, 0x7E), "Unknown Generic Status");
  EXPECT_STREQ(status_code_type_name(sct::path_related), "Path Related Status");
}

TEST(SpecNvmCommand, ReadWriteRangeAndFua) {
  Sqe sqe = make_sqe(nvm_opcode::write, 7, 1);
  rw_set_range(sqe, 0x0000000123456789, 8);
  rw_set_fua(sqe, true);
  const auto bytes = bytes_of(sqe);
  const uint8_t expected_dwords[12] = {0x89, 0x67, 0x45, 0x23, 0x01, 0x00,
                                       0x00, 0x00, 0x07, 0x00, 0x00, 0x40};
  EXPECT_EQ(std::memcmp(bytes.data() + 40, expected_dwords, sizeof(expected_dwords)), 0);
  EXPECT_EQ(rw_starting_lba(sqe), 0x0000000123456789u);
  EXPECT_EQ(rw_block_count(sqe), 8u);
  EXPECT_TRUE(rw_fua(sqe));
  EXPECT_FALSE(rw_limited_retry(sqe));
  rw_set_range(sqe, 0, rw_block_count_max);
  EXPECT_EQ(sqe.cdw12 & 0xFFFF, 0xFFFFu);
  EXPECT_EQ(rw_block_count(sqe), 65536u);
  EXPECT_TRUE(rw_fua(sqe));  // setting the range keeps the FUA bit
}

TEST(SpecNvmCommand, OpcodeDirectionAndDatasetManagement) {
  EXPECT_EQ(opcode_data_transfer(nvm_opcode::write), data_transfer::host_to_controller);
  EXPECT_EQ(opcode_data_transfer(nvm_opcode::read), data_transfer::controller_to_host);
  EXPECT_EQ(opcode_data_transfer(nvm_opcode::flush), data_transfer::none);
  EXPECT_EQ(opcode_data_transfer(admin_opcode::identify), data_transfer::controller_to_host);
  EXPECT_EQ(opcode_data_transfer(admin_opcode::get_log_page), data_transfer::controller_to_host);
  EXPECT_EQ(opcode_data_transfer(fabrics_opcode), data_transfer::bidirectional);

  Sqe dsm = make_sqe(nvm_opcode::dataset_management, 1, 1);
  dsm.cdw10 = 2;        // 3 ranges, 0's based
  dsm.cdw11 = 1u << 2;  // AD
  EXPECT_EQ(dsm_range_count(dsm), 3u);
  EXPECT_TRUE(dsm_deallocate(dsm));

  DsmRange range{};
  range.block_count = 0x100;
  range.starting_lba = 0x1122334455667788;
  ByteImage expected(16);
  expected.at(4, {0x00, 0x01, 0x00, 0x00}).at(8, {0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11});
  EXPECT_TRUE(SameBytes(bytes_of(range), expected));
}

}  // namespace
}  // namespace nvmf::spec
