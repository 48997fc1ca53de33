// Fabrics commands (Connect, Property Get/Set, Disconnect, Authentication) and the CAP, VS, CC,
// CSTS property encodings.
#include "spec/fabrics.h"

#include <gtest/gtest.h>

#include <string_view>

#include "byte_image.h"
#include "spec/discovery.h"
#include "spec/string_field.h"

namespace nvmf::spec {
namespace {

using test::ByteImage;
using test::bytes_of;
using test::SameBytes;

TEST(SpecConnect, AdminConnectCommandExactBytes) {
  ConnectCommand connect =
      make_connect_command(0x0001, 0, 32, 120000, connect_cattr::disable_sq_flow_control);
  connect.sgl1 = make_keyed_data_block(0x1000, connect_data_size, 0x1234, false);

  ByteImage expected(64);
  expected
      .at(0, {0x7F, 0x40, 0x01, 0x00, 0x01})  // opcode, PSDT=SGL, CID, FCTYPE Connect
      .at(24, {0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x34, 0x12, 0x00,
               0x00, 0x40})
      .at(40, {0x00, 0x00,                // RECFMT
               0x00, 0x00,                // QID 0 = admin
               0x1F, 0x00,                // SQSIZE 31 = 32 entries, 0's based
               0x04, 0x00})               // CATTR: disable SQ flow control
      .at(48, {0xC0, 0xD4, 0x01, 0x00});  // KATO 120000 ms
  EXPECT_TRUE(SameBytes(bytes_of(connect), expected));
}

TEST(SpecConnect, IoConnectWithInCapsuleDataExactBytes) {
  ConnectCommand connect = make_connect_command(0x00AB, 3, 128, 0);
  connect.sgl1 = make_in_capsule_data_block(0, connect_data_size);
  ByteImage expected(64);
  expected.at(0, {0x7F, 0x40, 0xAB, 0x00, 0x01})
      .at(32, {0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01})
      .at(40, {0x00, 0x00, 0x03, 0x00, 0x7F, 0x00, 0x00, 0x00});
  EXPECT_TRUE(SameBytes(bytes_of(connect), expected));
}

TEST(SpecConnect, SqeConversionKeepsEveryByte) {
  const ConnectCommand connect = make_connect_command(9, 2, 64, 0);
  const Sqe sqe = to_sqe(connect);
  EXPECT_TRUE(SameBytes(bytes_of(sqe), bytes_of(connect)));
  EXPECT_EQ(sqe.opcode, fabrics_opcode);
  EXPECT_EQ(sqe_fctype(sqe), fctype::connect);
  EXPECT_EQ(sqe.cid, 9);
  const auto back = sqe_as<ConnectCommand>(sqe);
  EXPECT_EQ(back.qid, 2);
  EXPECT_EQ(back.sqsize, 63);
  const auto common = sqe_as<FabricsCommand>(sqe);
  EXPECT_EQ(common.fctype, fctype::connect);
}

TEST(SpecConnect, ConnectDataExactBytes) {
  ConnectData data{};
  for (uint8_t i = 0; i < 16; ++i) data.hostid[i] = static_cast<uint8_t>(0xA0 + i);
  data.cntlid = cntlid_dynamic;
  const std::string_view hostnqn =
      "nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6";
  ASSERT_TRUE(put_nul_padded(data.subnqn, "nqn.2016-06.io.spdk:cnode1"));
  ASSERT_TRUE(put_nul_padded(data.hostnqn, hostnqn));

  ByteImage expected(1024);
  expected
      .at(0, {0xA0, 0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7, 0xA8, 0xA9, 0xAA, 0xAB, 0xAC, 0xAD,
              0xAE, 0xAF})
      .at(16, {0xFF, 0xFF})
      .text(256, "nqn.2016-06.io.spdk:cnode1")
      .text(512, hostnqn);
  EXPECT_TRUE(SameBytes(bytes_of(data), expected));
  EXPECT_EQ(get_nul_terminated(data.hostnqn), hostnqn);
  EXPECT_TRUE(nqn_field_valid(data.subnqn));
  EXPECT_TRUE(nqn_field_valid(data.hostnqn));
}

TEST(SpecConnect, ResponseSuccessAndInvalidParameterDw0) {
  ConnectResponse response{};
  response.cntlid = 0x0005;
  response.sqhd = 1;
  response.cid = 0x0001;
  ByteImage expected(16);
  expected.at(0, {0x05, 0x00}).at(8, {0x01, 0x00}).at(12, {0x01, 0x00});
  EXPECT_TRUE(SameBytes(bytes_of(response), expected));

  Cqe cqe = to_cqe(response);
  EXPECT_EQ(cqe.cdw0, connect_success_dw0(5));
  EXPECT_EQ(connect_response_cntlid(cqe), 5);

  // Bad HOSTNQN: IPO=512 in bytes 0..1, IATTR=1 (in the Connect data) in byte 2.
  cqe.cdw0 = connect_invalid_parameter_dw0(true, offsetof(ConnectData, hostnqn));
  EXPECT_EQ(bytes_of(cqe)[0], 0x00);
  EXPECT_EQ(bytes_of(cqe)[1], 0x02);
  EXPECT_EQ(bytes_of(cqe)[2], 0x01);
  EXPECT_EQ(bytes_of(cqe)[3], 0x00);
  EXPECT_TRUE(connect_invalid_in_data(cqe));
  EXPECT_EQ(connect_invalid_offset(cqe), 512);
  // Bad SQSIZE: IATTR=0 (in the command), IPO=44.
  cqe.cdw0 = connect_invalid_parameter_dw0(false, offsetof(ConnectCommand, sqsize));
  EXPECT_EQ(cqe.cdw0, 0x0000002Cu);
  EXPECT_FALSE(connect_invalid_in_data(cqe));
  EXPECT_EQ(connect_invalid_offset(cqe), 44);

  EXPECT_EQ(connect_success_dw0(0x1234, 0x0001), 0x00011234u);
}

TEST(SpecProperty, GetCapIsEightBytesAtOffsetZero) {
  const PropertyGetCommand get = make_property_get(0x000A, property_offset::cap);
  ByteImage expected(64);
  expected.at(0, {0x7F, 0x40, 0x0A, 0x00, 0x04}).at(40, {0x01}).at(44, {0x00, 0x00, 0x00, 0x00});
  EXPECT_TRUE(SameBytes(bytes_of(get), expected));
}

TEST(SpecProperty, GetCstsIsFourBytesAt1Ch) {
  const PropertyGetCommand get = make_property_get(0x0102, property_offset::csts);
  ByteImage expected(64);
  expected.at(0, {0x7F, 0x40, 0x02, 0x01, 0x04}).at(40, {0x00}).at(44, {0x1C, 0x00, 0x00, 0x00});
  EXPECT_TRUE(SameBytes(bytes_of(get), expected));
  EXPECT_EQ(property_attrib_bytes(get.attrib), 4u);
}

TEST(SpecProperty, SetCcExactBytes) {
  CcFields fields;
  fields.en = true;
  fields.iosqes = 6;
  fields.iocqes = 4;
  const PropertySetCommand set = make_property_set(0x0003, property_offset::cc, encode_cc(fields));
  ByteImage expected(64);
  expected
      .at(0, {0x7F, 0x40, 0x03, 0x00, 0x00})  // FCTYPE Property Set is 00h
      .at(40, {0x00})
      .at(44, {0x14, 0x00, 0x00, 0x00})
      .at(48, {0x01, 0x00, 0x46, 0x00, 0x00, 0x00, 0x00, 0x00});
  EXPECT_TRUE(SameBytes(bytes_of(set), expected));
}

TEST(SpecProperty, GetResponseValueSpansDw0AndDw1) {
  Cqe cqe{};
  set_property_get_value(cqe, 0x004000201E0103FF);
  cqe.cid = 0x000A;
  ByteImage expected(16);
  expected.at(0, {0xFF, 0x03, 0x01, 0x1E, 0x20, 0x00, 0x40, 0x00}).at(12, {0x0A, 0x00});
  EXPECT_TRUE(SameBytes(bytes_of(cqe), expected));
  EXPECT_EQ(property_get_value(cqe), 0x004000201E0103FFu);
  EXPECT_EQ(cqe_as<PropertyGetResponse>(cqe).value, 0x004000201E0103FFu);
}

TEST(SpecProperty, WidthsAndAttributes) {
  EXPECT_EQ(property_width_bytes(property_offset::cap), 8u);
  EXPECT_EQ(property_width_bytes(property_offset::vs), 4u);
  EXPECT_EQ(property_width_bytes(property_offset::cc), 4u);
  EXPECT_EQ(property_width_bytes(property_offset::csts), 4u);
  EXPECT_EQ(property_width_bytes(property_offset::nssr), 4u);
  EXPECT_EQ(property_width_bytes(property_offset::intms), 0u);
  EXPECT_EQ(property_width_bytes(0x04), 0u);  // the middle of CAP
  EXPECT_EQ(property_attrib_bytes(property_attrib::size_4_bytes), 4u);
  EXPECT_EQ(property_attrib_bytes(property_attrib::size_8_bytes), 8u);
  EXPECT_EQ(property_attrib_bytes(0x02), 0u);
  EXPECT_EQ(property_attrib_bytes(0xF9), 8u);  // only bits 2:0 are the size
}

TEST(SpecProperty, CapEncodeAndAccessors) {
  CapFields fields;
  fields.mqes = 1023;
  fields.cqr = true;
  fields.ams = 1;
  fields.to = 30;
  fields.css = cap_css_bit::nvm;
  fields.mpsmax = 4;
  const uint64_t cap = encode_cap(fields);
  EXPECT_EQ(cap, 0x004000201E0303FFu);
  EXPECT_EQ(cap_mqes(cap), 1023u);
  EXPECT_TRUE(cap_cqr(cap));
  EXPECT_EQ(cap_ams(cap), 1);
  EXPECT_EQ(cap_to(cap), 30);
  EXPECT_EQ(cap_timeout_ms(cap), 15000u);
  EXPECT_EQ(cap_dstrd(cap), 0);
  EXPECT_FALSE(cap_nssrs(cap));
  EXPECT_EQ(cap_css(cap), cap_css_bit::nvm);
  EXPECT_EQ(cap_mpsmin(cap), 0);
  EXPECT_EQ(cap_mpsmax(cap), 4);

  // Every field at its top value decodes independently.
  EXPECT_EQ(cap_mqes(0xFFFF), 0xFFFFu);
  EXPECT_FALSE(cap_cqr(0xFFFF));
  EXPECT_EQ(cap_css(0xFFull << 37), 0xFF);
  EXPECT_EQ(cap_mpsmin(0xFull << 48), 0xF);
  EXPECT_EQ(cap_mpsmax(0xFull << 48), 0);
  EXPECT_EQ(cap_dstrd(0xFull << 32), 0xF);
  EXPECT_TRUE(cap_nssrs(1ull << 36));
  EXPECT_TRUE(cap_bps(1ull << 45));
}

TEST(SpecProperty, CcEncodeAndAccessors) {
  CcFields fields;
  fields.en = true;
  fields.iosqes = 6;
  fields.iocqes = 4;
  fields.shn = shutdown_notification::normal;
  const uint32_t cc = encode_cc(fields);
  EXPECT_EQ(cc, 0x00464001u);
  EXPECT_TRUE(cc_en(cc));
  EXPECT_EQ(cc_css(cc), command_set_select::nvm);
  EXPECT_EQ(cc_mps(cc), 0);
  EXPECT_EQ(cc_ams(cc), 0);
  EXPECT_EQ(cc_shn(cc), shutdown_notification::normal);
  EXPECT_EQ(cc_iosqes(cc), 6);
  EXPECT_EQ(cc_iocqes(cc), 4);

  CcFields other;
  other.css = command_set_select::admin_only;
  other.mps = 0xF;
  other.ams = 0x7;
  other.shn = shutdown_notification::abrupt;
  EXPECT_EQ(encode_cc(other), 0x00003FF0u | 0x00008000u);
  EXPECT_EQ(cc_mps(encode_cc(other)), 0xF);
  EXPECT_EQ(cc_shn(encode_cc(other)), shutdown_notification::abrupt);
}

TEST(SpecProperty, CstsEncodeAndAccessors) {
  CstsFields fields;
  fields.rdy = true;
  fields.shst = shutdown_status::complete;
  const uint32_t csts = encode_csts(fields);
  EXPECT_EQ(csts, 0x9u);
  EXPECT_TRUE(csts_rdy(csts));
  EXPECT_FALSE(csts_cfs(csts));
  EXPECT_EQ(csts_shst(csts), shutdown_status::complete);
  EXPECT_TRUE(csts_cfs(0x2));
  EXPECT_EQ(csts_shst(0x4), shutdown_status::occurring);
  EXPECT_TRUE(csts_nssro(0x10));
  EXPECT_TRUE(csts_pp(0x20));
  CstsFields fatal;
  fatal.cfs = true;
  fatal.pp = true;
  EXPECT_EQ(encode_csts(fatal), 0x22u);
}

TEST(SpecProperty, VersionEncoding) {
  EXPECT_EQ(make_version(1, 4), 0x00010400u);
  EXPECT_EQ(make_version(2, 0), 0x00020000u);
  EXPECT_EQ(make_version(1, 3, 1), 0x00010301u);
  EXPECT_EQ(version_major(0x00010400), 1);
  EXPECT_EQ(version_minor(0x00010400), 4);
  EXPECT_EQ(version_tertiary(0x00010301), 1);
  EXPECT_EQ(nssr_reset_value, 0x4E564D65u);  // "NVMe" read as little-endian bytes "eMVN"
}

TEST(SpecFabrics, DisconnectAndAuthenticationExactBytes) {
  DisconnectCommand disconnect{};
  disconnect.opcode = fabrics_opcode;
  disconnect.cid = 0x0042;
  disconnect.fctype = fctype::disconnect;
  ByteImage expected_disconnect(64);
  expected_disconnect.at(0, {0x7F, 0x00, 0x42, 0x00, 0x08});
  EXPECT_TRUE(SameBytes(bytes_of(disconnect), expected_disconnect));

  AuthenticationCommand send{};
  send.opcode = fabrics_opcode;
  send.cid = 7;
  send.fctype = fctype::authentication_send;
  send.spsp0 = 0x01;
  send.spsp1 = 0x02;
  send.secp = 0xE9;
  send.length = 0x100;
  ByteImage expected_send(64);
  expected_send.at(0, {0x7F, 0x00, 0x07, 0x00, 0x05}).at(41, {0x01, 0x02, 0xE9, 0x00, 0x01});
  EXPECT_TRUE(SameBytes(bytes_of(send), expected_send));
}

TEST(SpecFabrics, FctypeValuesAndNames) {
  EXPECT_EQ(fctype::property_set, 0x00);
  EXPECT_EQ(fctype::connect, 0x01);
  EXPECT_EQ(fctype::property_get, 0x04);
  EXPECT_EQ(fctype::authentication_send, 0x05);
  EXPECT_EQ(fctype::authentication_receive, 0x06);
  EXPECT_EQ(fctype::disconnect, 0x08);
  EXPECT_STREQ(fctype_name(fctype::connect), "Connect");
  EXPECT_STREQ(fctype_name(fctype::property_get), "Property Get");
  EXPECT_STREQ(fctype_name(0x02), "Unknown Fabrics Command");
  EXPECT_EQ(discovery_nqn.size() + 1 <= sizeof(ConnectData{}.subnqn), true);
}

}  // namespace
}  // namespace nvmf::spec
