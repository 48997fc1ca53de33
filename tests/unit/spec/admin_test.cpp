// Identify data, Namespace Identification Descriptors, Get Log Page, log pages, Features and
// Asynchronous Event results.
#include "spec/admin.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "byte_image.h"
#include "spec/string_field.h"

namespace nvmf::spec {
namespace {

using test::ByteImage;
using test::bytes_of;
using test::SameBytes;

TEST(SpecIdentify, ControllerFieldsAtSpecOffsets) {
  IdentifyController id{};
  id.vid = 0x1B36;
  id.ssvid = 0x1AF4;
  ASSERT_TRUE(put_space_padded(id.sn, "SPDK0001"));
  ASSERT_TRUE(put_space_padded(id.mn, "nvmf-rdma target"));
  ASSERT_TRUE(put_space_padded(id.fr, "0.1"));
  id.rab = 6;
  id.ieee[0] = 0x00;
  id.ieee[1] = 0x02;
  id.ieee[2] = 0xC9;
  id.cmic = cmic_bit::multiple_ports | cmic_bit::multiple_controllers;
  id.mdts = 5;
  id.cntlid = 0x0001;
  id.ver = 0x00010400;
  id.oaes = 1u << 31;
  id.cntrltype = controller_type::io;
  id.oacs = oacs_bit::firmware;
  id.acl = 3;
  id.aerl = 3;
  id.frmw = 0x03;
  id.lpa = lpa_bit::extended_data;
  id.elpe = 127;
  id.kas = 10;
  id.sqes = make_queue_entry_sizes(6, 6);
  id.cqes = make_queue_entry_sizes(4, 4);
  id.maxcmd = 128;
  id.nn = 32;
  id.oncs = oncs_bit::dataset_management | oncs_bit::write_zeroes;
  id.vwc = vwc_bit::present | vwc_bit::flush_broadcast_supported;
  id.nvscc = 1;
  id.sgls =
      sgls_bit::supported_no_alignment | sgls_bit::keyed_data_block | sgls_bit::address_as_offset;
  ASSERT_TRUE(put_nul_padded(id.subnqn, "nqn.2016-06.io.spdk:cnode1"));
  id.ioccsz = (64 + 4096) / 16;
  id.iorcsz = 16 / 16;
  id.icdoff = 0;
  id.fcatt = 0;
  id.msdbd = 16;
  id.ofcs = ofcs_bit::disconnect;
  id.psd[0].mp = 2500;

  ByteImage expected(4096);
  expected.at(0, {0x36, 0x1B, 0xF4, 0x1A})
      .text(4, "SPDK0001            ")
      .text(24, "nvmf-rdma target                        ")
      .text(64, "0.1     ")
      .at(72, {0x06, 0x00, 0x02, 0xC9, 0x03, 0x05, 0x01, 0x00})
      .at(80, {0x00, 0x04, 0x01, 0x00})
      .at(92, {0x00, 0x00, 0x00, 0x80})
      .at(111, {0x01})
      .at(256, {0x04, 0x00, 0x03, 0x03, 0x03, 0x04, 0x7F, 0x00})
      .at(320, {0x0A, 0x00})
      .at(512, {0x66, 0x44, 0x80, 0x00, 0x20, 0x00, 0x00, 0x00})
      .at(520, {0x0C, 0x00})
      .at(525, {0x07})
      .at(530, {0x01})
      .at(536, {0x05, 0x00, 0x10, 0x00})
      .text(768, "nqn.2016-06.io.spdk:cnode1")
      .at(1792,
          {0x04, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x01, 0x00})
      .at(2048, {0xC4, 0x09});
  EXPECT_TRUE(SameBytes(bytes_of(id), expected));

  EXPECT_EQ(get_space_padded(id.mn), "nvmf-rdma target");
  EXPECT_EQ(queue_entry_size_required(id.sqes), 6);
  EXPECT_EQ(queue_entry_size_max(id.cqes), 4);
}

TEST(SpecIdentify, NamespaceFieldsAtSpecOffsets) {
  IdentifyNamespace ns{};
  ns.nsze = 0x200000;
  ns.ncap = 0x200000;
  ns.nuse = 0x1000;
  ns.nsfeat = nsfeat_bit::thin_provisioning | nsfeat_bit::deallocated_error;
  ns.nlbaf = 1;
  ns.flbas = 1;
  ns.nmic = 1;
  ns.dlfeat = 0x09;
  for (uint8_t i = 0; i < 16; ++i) ns.nguid[i] = static_cast<uint8_t>(0x10 + i);
  for (uint8_t i = 0; i < 8; ++i) ns.eui64[i] = static_cast<uint8_t>(0xE0 + i);
  ns.lbaf[0] = LbaFormat{0, 9, 2};
  ns.lbaf[1] = LbaFormat{8, 12, 0};
  ns.lbaf[63] = LbaFormat{0, 12, 3};

  ByteImage expected(4096);
  expected.at(0, {0x00, 0x00, 0x20, 0x00, 0, 0, 0, 0})
      .at(8, {0x00, 0x00, 0x20, 0x00, 0, 0, 0, 0})
      .at(16, {0x00, 0x10, 0x00, 0x00, 0, 0, 0, 0})
      .at(24, {0x05, 0x01, 0x01})
      .at(30, {0x01})
      .at(33, {0x09})
      .at(104, {0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1A, 0x1B, 0x1C, 0x1D,
                0x1E, 0x1F})
      .at(120, {0xE0, 0xE1, 0xE2, 0xE3, 0xE4, 0xE5, 0xE6, 0xE7})
      .at(128, {0x00, 0x00, 0x09, 0x02, 0x08, 0x00, 0x0C, 0x00})
      .at(380, {0x00, 0x00, 0x0C, 0x03});
  EXPECT_TRUE(SameBytes(bytes_of(ns), expected));
  EXPECT_EQ(namespace_block_size(ns), 4096u);
  EXPECT_EQ(ns.lbaf[63].relative_performance(), 3);
}

TEST(SpecIdentify, FormattedLbaSizeIndexBits) {
  EXPECT_EQ(make_flbas(1, false), 0x01);
  EXPECT_EQ(make_flbas(0, true), 0x10);
  EXPECT_EQ(make_flbas(17, true), 0x31);  // index bits 5:4 go to FLBAS bits 6:5
  EXPECT_EQ(make_flbas(63, false), 0x6F);
  EXPECT_EQ(flbas_format_index(0x31), 17);
  EXPECT_TRUE(flbas_extended_metadata(0x31));
  EXPECT_EQ(flbas_format_index(0x6F), 63);
  EXPECT_FALSE(flbas_extended_metadata(0x6F));
  EXPECT_EQ(flbas_format_index(0x80), 0);  // bit 7 reserved
}

TEST(SpecIdentify, IdentifyCommandDwords) {
  const Sqe controller = make_identify(5, cns::controller);
  ByteImage expected(64);
  expected.at(0, {0x06, 0x40, 0x05, 0x00}).at(40, {0x01});
  EXPECT_TRUE(SameBytes(bytes_of(controller), expected));

  Sqe zoned = make_identify(6, cns::io_command_set_namespace, 1, csi::zoned);
  zoned.cdw10 |= uint32_t{0x0007} << 16;  // CNTID
  ByteImage expected_zoned(64);
  expected_zoned.at(0, {0x06, 0x40, 0x06, 0x00, 0x01})
      .at(40, {0x05, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x02});
  EXPECT_TRUE(SameBytes(bytes_of(zoned), expected_zoned));
  EXPECT_EQ(identify_cns(zoned), cns::io_command_set_namespace);
  EXPECT_EQ(identify_cntid(zoned), 7);
  EXPECT_EQ(identify_csi(zoned), csi::zoned);
}

NamespaceIdentifiers all_identifiers() {
  NamespaceIdentifiers ids;
  ids.has_eui64 = ids.has_nguid = ids.has_uuid = ids.has_csi = true;
  for (uint8_t i = 0; i < 8; ++i) ids.eui64[i] = static_cast<uint8_t>(0x01 + i);
  for (uint8_t i = 0; i < 16; ++i) ids.nguid[i] = static_cast<uint8_t>(0x10 + i);
  for (uint8_t i = 0; i < 16; ++i) ids.uuid[i] = static_cast<uint8_t>(0x20 + i);
  ids.csi = csi::nvm;
  return ids;
}

TEST(SpecNsIdDescriptor, EncodeExactBytes) {
  std::vector<uint8_t> buffer(identify_data_size, 0xEE);
  const size_t used = encode_ns_id_descriptor_list(all_identifiers(), buffer.data(), buffer.size());
  EXPECT_EQ(used, 57u);
  ByteImage expected(4096);
  expected.at(0, {0x01, 0x08, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08})
      .at(12, {0x02, 0x10, 0x00, 0x00, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15,
               0x16, 0x17, 0x18, 0x19, 0x1A, 0x1B, 0x1C, 0x1D, 0x1E, 0x1F})
      .at(32, {0x03, 0x10, 0x00, 0x00, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25,
               0x26, 0x27, 0x28, 0x29, 0x2A, 0x2B, 0x2C, 0x2D, 0x2E, 0x2F})
      .at(52, {0x04, 0x01, 0x00, 0x00, 0x00});
  EXPECT_TRUE(SameBytes(buffer, expected));  // the 0xEE filler is gone: zeroes end the list
}

TEST(SpecNsIdDescriptor, DecodeRoundTripAndPartialLists) {
  std::vector<uint8_t> buffer(identify_data_size);
  encode_ns_id_descriptor_list(all_identifiers(), buffer.data(), buffer.size());
  NamespaceIdentifiers decoded;
  ASSERT_TRUE(decode_ns_id_descriptor_list(buffer.data(), buffer.size(), &decoded));
  const NamespaceIdentifiers original = all_identifiers();
  EXPECT_TRUE(decoded.has_eui64 && decoded.has_nguid && decoded.has_uuid && decoded.has_csi);
  EXPECT_EQ(std::memcmp(decoded.eui64, original.eui64, 8), 0);
  EXPECT_EQ(std::memcmp(decoded.nguid, original.nguid, 16), 0);
  EXPECT_EQ(std::memcmp(decoded.uuid, original.uuid, 16), 0);
  EXPECT_EQ(decoded.csi, csi::nvm);

  NamespaceIdentifiers only_uuid;
  only_uuid.has_uuid = true;
  only_uuid.uuid[15] = 0x99;
  EXPECT_EQ(encode_ns_id_descriptor_list(only_uuid, buffer.data(), buffer.size()), 20u);
  ASSERT_TRUE(decode_ns_id_descriptor_list(buffer.data(), buffer.size(), &decoded));
  EXPECT_FALSE(decoded.has_eui64 || decoded.has_nguid || decoded.has_csi);
  EXPECT_TRUE(decoded.has_uuid);
  EXPECT_EQ(decoded.uuid[15], 0x99);
}

TEST(SpecNsIdDescriptor, TruncatedInputNeverOverruns) {
  std::vector<uint8_t> full(identify_data_size);
  encode_ns_id_descriptor_list(all_identifiers(), full.data(), full.size());
  for (size_t size = 0; size <= 64; ++size) {
    // An exact-size heap copy, so a read past the end is a real out-of-bounds read (and
    // AddressSanitizer builds catch it).
    std::unique_ptr<uint8_t[]> cut(new uint8_t[size == 0 ? 1 : size]);
    std::memcpy(cut.get(), full.data(), size);
    NamespaceIdentifiers ids;
    const bool ok = decode_ns_id_descriptor_list(cut.get(), size, &ids);
    const bool at_boundary = size == 0 || size == 12 || size == 32 || size == 52 || size >= 57;
    EXPECT_EQ(ok, at_boundary) << "size " << size;
    if (size >= 12) {
      EXPECT_TRUE(ids.has_eui64) << "size " << size;
    }
    if (size < 57) {
      EXPECT_FALSE(ids.has_csi) << "size " << size;
    }
  }
}

TEST(SpecNsIdDescriptor, GarbageInputTerminatesInBounds) {
  uint32_t seed = 12345;
  auto next_byte = [&seed]() {
    seed = seed * 1103515245u + 12345u;  // a fixed LCG: the same garbage every run
    return static_cast<uint8_t>(seed >> 16);
  };
  for (int round = 0; round < 2000; ++round) {
    const size_t size = static_cast<size_t>(round % 97);
    std::unique_ptr<uint8_t[]> data(new uint8_t[size == 0 ? 1 : size]);
    for (size_t i = 0; i < size; ++i) data[i] = next_byte();
    if (size > 1 && round % 3 == 0) data[1] = static_cast<uint8_t>(data[1] % 20);  // plausible NIDL
    size_t offset = 0;
    NsIdDescriptorView view;
    int steps = 0;
    while (ns_id_descriptor_next(data.get(), size, &offset, &view) == NsIdWalk::descriptor) {
      ASSERT_LE(offset, size);
      ASSERT_GE(view.id, data.get());
      ASSERT_LE(view.id + view.length, data.get() + size);
      ASSERT_LT(++steps, 100);
    }
    NamespaceIdentifiers ids;
    (void)decode_ns_id_descriptor_list(data.get(), size, &ids);
  }
}

TEST(SpecNsIdDescriptor, RejectsWrongLengthsAndSkipsUnknownTypes) {
  NamespaceIdentifiers ids;
  // EUI64 must be 8 bytes long.
  const uint8_t long_eui64[20] = {0x01, 0x10, 0x00, 0x00};
  EXPECT_FALSE(decode_ns_id_descriptor_list(long_eui64, sizeof(long_eui64), &ids));
  // CSI must be 1 byte.
  const uint8_t long_csi[8] = {0x04, 0x02, 0x00, 0x00, 0x00, 0x00};
  EXPECT_FALSE(decode_ns_id_descriptor_list(long_csi, sizeof(long_csi), &ids));
  // A zero NIDL is never valid.
  const uint8_t zero_length[8] = {0x07, 0x00, 0x00, 0x00};
  EXPECT_FALSE(decode_ns_id_descriptor_list(zero_length, sizeof(zero_length), &ids));
  // A NIDL past the buffer.
  const uint8_t past_end[6] = {0x09, 0xFF, 0x00, 0x00, 0xAA, 0xBB};
  EXPECT_FALSE(decode_ns_id_descriptor_list(past_end, sizeof(past_end), &ids));
  // An unknown type with a sane length is skipped; the CSI after it is still read.
  const uint8_t unknown_then_csi[16] = {0x09, 0x05, 0x00, 0x00, 1,    2,    3,
                                        4,    5,    0x04, 0x01, 0x00, 0x00, 0x02};
  ASSERT_TRUE(decode_ns_id_descriptor_list(unknown_then_csi, sizeof(unknown_then_csi), &ids));
  EXPECT_TRUE(ids.has_csi);
  EXPECT_EQ(ids.csi, csi::zoned);
  EXPECT_FALSE(ids.has_eui64);
}

TEST(SpecNsIdDescriptor, EncodeStopsWhenTheBufferIsFull) {
  uint8_t small[20];
  std::memset(small, 0xEE, sizeof(small));
  EXPECT_EQ(encode_ns_id_descriptor_list(all_identifiers(), small, sizeof(small)), 12u);
  for (size_t i = 12; i < sizeof(small); ++i) EXPECT_EQ(small[i], 0) << "byte " << i;
  NamespaceIdentifiers ids;
  ASSERT_TRUE(decode_ns_id_descriptor_list(small, sizeof(small), &ids));
  EXPECT_TRUE(ids.has_eui64);
  EXPECT_FALSE(ids.has_nguid);
}

TEST(SpecIdentify, NamespaceListsAreFlatDwordArrays) {
  ActiveNamespaceList active{};
  active.nsid[0] = 1;
  active.nsid[1] = 5;
  active.nsid[1023] = 0x01020304;
  ByteImage expected(4096);
  expected.at(0, {0x01, 0, 0, 0, 0x05, 0, 0, 0}).at(4092, {0x04, 0x03, 0x02, 0x01});
  EXPECT_TRUE(SameBytes(bytes_of(active), expected));

  ChangedNamespaceList changed{};
  changed.nsid[0] = changed_namespace_list_overflow;
  ByteImage expected_changed(4096);
  expected_changed.at(0, {0xFF, 0xFF, 0xFF, 0xFF});
  EXPECT_TRUE(SameBytes(bytes_of(changed), expected_changed));
}

TEST(SpecGetLogPage, SmallPageDwords) {
  const Sqe sqe = make_get_log_page(3, log_page::smart_health, 512);
  ByteImage expected(64);
  expected.at(0, {0x02, 0x40, 0x03, 0x00, 0xFF, 0xFF, 0xFF, 0xFF})
      .at(40, {0x02, 0x00, 0x7F, 0x00});  // LID 02h, NUMDL 127 = 128 dwords
  EXPECT_TRUE(SameBytes(bytes_of(sqe), expected));
  EXPECT_EQ(get_log_page_lid(sqe), log_page::smart_health);
  EXPECT_EQ(get_log_page_numd(sqe), 127u);
  EXPECT_EQ(get_log_page_length_bytes(sqe), 512u);
  EXPECT_EQ(get_log_page_offset_bytes(sqe), 0u);
}

TEST(SpecGetLogPage, LargeLengthSplitsNumdAndOffsetSplitsLpo) {
  const uint64_t length = (1u << 20) + 4;  // 262145 dwords: NUMD = 40000h
  const uint64_t offset = 0x100000400;
  const Sqe sqe = make_get_log_page(9, log_page::discovery, length, offset, nsid_none, 0, true);
  ByteImage expected(64);
  expected.at(0, {0x02, 0x40, 0x09, 0x00})
      .at(40, {0x70, 0x80, 0x00, 0x00,    // LID 70h, RAE bit 15, NUMDL 0000h
               0x04, 0x00, 0x00, 0x00,    // NUMDU 0004h
               0x00, 0x04, 0x00, 0x00,    // LPOL
               0x01, 0x00, 0x00, 0x00});  // LPOU
  EXPECT_TRUE(SameBytes(bytes_of(sqe), expected));
  EXPECT_EQ(get_log_page_numd(sqe), 0x40000u);
  EXPECT_EQ(get_log_page_length_bytes(sqe), length);
  EXPECT_EQ(get_log_page_offset_bytes(sqe), offset);
  EXPECT_TRUE(get_log_page_rae(sqe));
  EXPECT_EQ(get_log_page_lsp(sqe), 0);
}

TEST(SpecGetLogPage, LspRaeLsiAndExtremes) {
  Sqe sqe = make_get_log_page(1, log_page::error_information, 4, 0, nsid_all, 0x7F, false);
  EXPECT_EQ(sqe.cdw10, 0x00007F01u);
  EXPECT_EQ(get_log_page_lsp(sqe), 0x7F);
  EXPECT_FALSE(get_log_page_rae(sqe));
  EXPECT_EQ(get_log_page_length_bytes(sqe), 4u);
  sqe.cdw11 |= 0xABCDu << 16;
  EXPECT_EQ(get_log_page_lsi(sqe), 0xABCD);

  Sqe raw{};
  raw.cdw10 = 0xFFFF0000;
  raw.cdw11 = 0x0000FFFF;
  EXPECT_EQ(get_log_page_numd(raw), 0xFFFFFFFFu);
  EXPECT_EQ(get_log_page_length_bytes(raw), uint64_t{1} << 34);  // 16 GiB, no 32-bit overflow
  raw.cdw12 = 0xFFFFFFFC;
  raw.cdw13 = 0xFFFFFFFF;
  EXPECT_EQ(get_log_page_offset_bytes(raw), 0xFFFFFFFFFFFFFFFCu);
}

TEST(SpecLogPage, ErrorInformationEntryExactBytes) {
  ErrorInformationEntry entry{};
  entry.error_count = 1;
  entry.sqid = 2;
  entry.cid = 0x1234;
  entry.status = encode_status_field(generic_status(sc_generic::invalid_field, true), false);
  entry.parameter_error_location = offsetof(Sqe, cdw11);
  entry.lba = 0x10;
  entry.nsid = 1;
  entry.trtype = 1;
  entry.command_specific = 0xABCD;
  entry.transport_specific = 0x0102;
  ByteImage expected(64);
  expected.at(0, {0x01})
      .at(8, {0x02, 0x00, 0x34, 0x12, 0x04, 0x80, 0x2C, 0x00})
      .at(16, {0x10})
      .at(24, {0x01, 0x00, 0x00, 0x00, 0x00, 0x01})
      .at(32, {0xCD, 0xAB})
      .at(40, {0x02, 0x01});
  EXPECT_TRUE(SameBytes(bytes_of(entry), expected));
}

TEST(SpecLogPage, SmartHealthExactBytes) {
  SmartHealthLog smart{};
  smart.critical_warning = critical_warning_bit::temperature;
  smart.set_composite_temperature_kelvin(310);
  smart.available_spare = 100;
  smart.available_spare_threshold = 10;
  smart.percentage_used = 3;
  smart.data_units_read = Uint128{0x0102030405060708, 1};
  smart.power_on_hours.low = 1000;
  smart.unsafe_shutdowns.low = 7;
  smart.media_errors.low = 2;
  smart.error_log_entries.low = 9;
  smart.warning_temperature_time = 5;
  smart.temperature_sensor[0] = 300;
  ByteImage expected(512);
  expected.at(0, {0x02, 0x36, 0x01, 0x64, 0x0A, 0x03})
      .at(32, {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x01})
      .at(128, {0xE8, 0x03})
      .at(144, {0x07})
      .at(160, {0x02})
      .at(176, {0x09})
      .at(192, {0x05})
      .at(200, {0x2C, 0x01});
  EXPECT_TRUE(SameBytes(bytes_of(smart), expected));
  EXPECT_EQ(smart.composite_temperature_kelvin(), 310);
}

TEST(SpecFeatures, NumberOfQueuesIsZeroBased) {
  EXPECT_EQ(encode_number_of_queues(4, 4), 0x00030003u);
  EXPECT_EQ(encode_number_of_queues(1, 2), 0x00010000u);
  EXPECT_EQ(number_of_queues_sq_count(0x001F003F), 64u);
  EXPECT_EQ(number_of_queues_cq_count(0x001F003F), 32u);
  EXPECT_EQ(number_of_queues_sq_count(0xFFFEFFFE), 65535u);

  const Sqe set = make_set_features(1, feature::number_of_queues, encode_number_of_queues(4, 4));
  ByteImage expected(64);
  expected.at(0, {0x09, 0x40, 0x01, 0x00}).at(40, {0x07, 0x00, 0x00, 0x00, 0x03, 0x00, 0x03, 0x00});
  EXPECT_TRUE(SameBytes(bytes_of(set), expected));
}

TEST(SpecFeatures, SetAndGetFeatureDwords) {
  const Sqe keep_alive = make_set_features(2, feature::keep_alive_timer, 10000, true);
  EXPECT_EQ(keep_alive.cdw10, 0x8000000Fu);  // FID 0Fh, SV
  EXPECT_EQ(keep_alive.cdw11, 10000u);
  EXPECT_EQ(features_fid(keep_alive), feature::keep_alive_timer);
  EXPECT_TRUE(set_features_save(keep_alive));

  const Sqe get =
      make_get_features(3, feature::volatile_write_cache, feature_select::supported_capabilities);
  const auto bytes = bytes_of(get);
  EXPECT_EQ(bytes[0], admin_opcode::get_features);
  EXPECT_EQ(bytes[40], 0x06);
  EXPECT_EQ(bytes[41], 0x03);
  EXPECT_EQ(get_features_select(get), feature_select::supported_capabilities);
  EXPECT_TRUE(volatile_write_cache_enabled(1));
  EXPECT_FALSE(volatile_write_cache_enabled(2));

  EXPECT_EQ(feature::async_event_configuration, 0x0B);
  EXPECT_EQ(async_event_config_bit::discovery_log_page_change, 0x80000000u);
  EXPECT_EQ(async_event_config_bit::namespace_attribute, 0x100u);
}

TEST(SpecAsyncEvent, CompletionDw0Layout) {
  const uint32_t ns_changed =
      encode_async_event(async_event_type::notice, async_event_notice::namespace_attribute_changed,
                         log_page::changed_namespace_list);
  EXPECT_EQ(ns_changed, 0x00040002u);
  const uint32_t discovery = encode_async_event(
      async_event_type::notice, async_event_notice::discovery_log_page_change, log_page::discovery);
  EXPECT_EQ(discovery, 0x0070F002u);
  EXPECT_EQ(async_event_type_of(discovery), async_event_type::notice);
  EXPECT_EQ(async_event_info_of(discovery), async_event_notice::discovery_log_page_change);
  EXPECT_EQ(async_event_log_page_of(discovery), log_page::discovery);
  const uint32_t smart =
      encode_async_event(async_event_type::smart_health_status, 0x01, log_page::smart_health);
  EXPECT_EQ(smart, 0x00020101u);
}

}  // namespace
}  // namespace nvmf::spec
