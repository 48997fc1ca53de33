// Writes the seed corpus of every fuzz target (tests/fuzz/corpus/NAME/SEED) from the spec
// helpers, so the seeds are valid inputs in each harness's format (see the header comment of
// each *_fuzz.cpp). The files are committed; run this again after a format changes:
//   build-fuzz/tests/fuzz/fuzz_make_corpus tests/fuzz/corpus
// Existing seeds of the same name are overwritten; others are left alone (libFuzzer's finds
// and crash inputs added by hand stay).
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "nbd/wire.h"
#include "spec/spec.h"
#include "target_harness.h"

namespace spec = nvmf::spec;
namespace wire = nvmf::nbd::wire;
using nvmf::fuzz::kHostNqn;
using nvmf::fuzz::kSubsystemNqn;

namespace {

std::string g_root;

class Bytes {
 public:
  template <typename T>
  Bytes& put(const T& value) {
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    data_.insert(data_.end(), p, p + sizeof(T));
    return *this;
  }
  Bytes& u8(uint8_t v) { return put(v); }
  Bytes& u16(uint16_t v) { return put(v); }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& raw(const std::vector<uint8_t>& bytes) {
    data_.insert(data_.end(), bytes.begin(), bytes.end());
    return *this;
  }
  Bytes& text(const std::string& s) {
    data_.insert(data_.end(), s.begin(), s.end());
    return *this;
  }
  const std::vector<uint8_t>& data() const { return data_; }

 private:
  std::vector<uint8_t> data_;
};

void write_seed(const std::string& target, const std::string& name, const std::vector<uint8_t>& d) {
  const std::string dir = g_root + "/" + target;
  mkdir(g_root.c_str(), 0755);
  mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/" + name;
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr || std::fwrite(d.data(), 1, d.size(), file) != d.size()) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::fclose(file);
}
void write_seed(const std::string& target, const std::string& name, const std::string& text) {
  write_seed(target, name, std::vector<uint8_t>(text.begin(), text.end()));
}

spec::Sqe io_sqe(uint8_t opcode, uint32_t nsid, uint64_t lba, uint32_t blocks) {
  spec::Sqe sqe = spec::make_sqe(opcode, 8, nsid);
  if (blocks != 0) spec::rw_set_range(sqe, lba, blocks);
  return sqe;
}

spec::Sqe disconnect_sqe(uint16_t cid) {
  spec::DisconnectCommand command{};
  command.opcode = spec::fabrics_opcode;
  command.cid = cid;
  command.fctype = spec::fctype::disconnect;
  return spec::to_sqe(command);
}

// ---- sgl_parse ----

void sgl_seeds() {
  const auto realistic = [](Bytes& b) { b.u8(0).u8(8).u16(256).u8(15); };  // 1 MiB, 4 KiB, 16
  {
    Bytes b;
    realistic(b);
    spec::Sqe sqe = io_sqe(spec::nvm_opcode::write, 1, 0, 8);
    sqe.sgl1 = spec::make_keyed_data_block(0x10000, 4096, 0x1234, false);
    write_seed("sgl_parse", "write-keyed", b.put(sqe).data());
  }
  {
    Bytes b;
    realistic(b);
    spec::Sqe sqe = io_sqe(spec::nvm_opcode::read, 1, 0, 8);
    sqe.sgl1 = spec::make_keyed_data_block(0x20000, 4096, 0x99, true);
    write_seed("sgl_parse", "read-keyed-invalidate", b.put(sqe).data());
  }
  {
    Bytes b;
    realistic(b);
    spec::Sqe sqe = io_sqe(spec::nvm_opcode::write, 1, 0, 1);
    sqe.sgl1 = spec::make_in_capsule_data_block(0, 512);
    write_seed("sgl_parse", "write-in-capsule",
               b.put(sqe).raw(std::vector<uint8_t>(512, 0xA5)).data());
  }
  {
    Bytes b;
    realistic(b);
    spec::Sqe sqe = io_sqe(spec::nvm_opcode::read, 1, 0, 24);
    sqe.sgl1 = spec::make_last_segment(0, 3 * spec::sgl_descriptor_size);
    b.put(sqe);
    for (uint32_t i = 0; i < 3; ++i) {
      b.put(spec::make_keyed_data_block(0x1000 * (i + 1), 4096, 0x50 + i, i == 2));
    }
    write_seed("sgl_parse", "read-last-segment-3", b.data());
  }
  {
    Bytes b;
    realistic(b);
    spec::Sqe sqe = spec::to_sqe(spec::make_connect_command(1, 0, 32, 0, 0));
    sqe.sgl1 = spec::make_in_capsule_data_block(0, spec::connect_data_size);
    write_seed("sgl_parse", "connect-in-capsule",
               b.put(sqe).raw(nvmf::fuzz::connect_data(kSubsystemNqn, 0xFFFF)).data());
  }
  {
    Bytes b;
    b.u8(1).u32(131072).u32(8192).u32(4);  // raw limits
    spec::Sqe sqe = spec::make_identify(1, spec::cns::controller);
    sqe.sgl1 = spec::make_keyed_data_block(0x3000, 4096, 7, false);
    write_seed("sgl_parse", "identify-raw-limits", b.put(sqe).data());
  }
}

// ---- cm_private_data ----

void cm_seeds() {
  const auto limits = [](Bytes& b, uint32_t max_qp_wr, uint32_t rd_atom) {
    b.u16(128).u16(128).u16(128).u32(max_qp_wr).u32(rd_atom).u32(16);
  };
  {
    Bytes b;
    limits(b, 0, 0);
    write_seed("cm_private_data", "admin-32",
               b.u8(16).put(spec::make_rdma_cm_request(0, 32, 31)).data());
  }
  {
    Bytes b;
    limits(b, 16384, 16);
    write_seed("cm_private_data", "io-128-device",
               b.u8(8).put(spec::make_rdma_cm_request(1, 128, 127, 1)).data());
  }
  {
    Bytes b;
    limits(b, 64, 4);
    write_seed("cm_private_data", "io-small-device",
               b.u8(255).put(spec::make_rdma_cm_request(5, 64, 63, 1)).data());
  }
  {
    Bytes b;
    limits(b, 0, 0);
    spec::RdmaCmRequest request = spec::make_rdma_cm_request(0, 32, 31);
    request.recfmt = 1;
    write_seed("cm_private_data", "bad-recfmt", b.u8(16).put(request).data());
  }
  {
    Bytes b;
    limits(b, 0, 0);
    write_seed("cm_private_data", "short", b.u8(16).u16(0).u16(0).u16(32).u16(31).data());
  }
}

// ---- the target fuzzers' records (TargetHarness::run_records) ----

class Records {
 public:
  Records& command(uint8_t queue, const spec::Sqe& sqe, uint16_t length = 0,
                   const std::vector<uint8_t>& data = {}, uint8_t segments = 1) {
    b_.u8(0).u8(queue).put(sqe).u16(length).u8(segments).raw(data);
    return *this;
  }
  Records& poll(uint8_t rounds) {
    b_.u8(4).u8(rounds);
    return *this;
  }
  Records& clock(uint16_t ms) {
    b_.u8(5).u16(ms);
    return *this;
  }
  Records& new_queue(uint8_t reactor, uint8_t depth) {
    b_.u8(6).u8(reactor).u8(depth);
    return *this;
  }
  Records& destroy(uint8_t queue) {
    b_.u8(7).u8(queue);
    return *this;
  }
  Bytes& bytes() { return b_; }
  const std::vector<uint8_t>& data() const { return b_.data(); }

 private:
  Bytes b_;
};

spec::Sqe connect_sqe(uint16_t qid, uint32_t entries, uint32_t kato_ms = 0, uint8_t cattr = 0) {
  return spec::to_sqe(spec::make_connect_command(1, qid, entries, kato_ms, cattr));
}

std::vector<uint8_t> dsm_ranges() {
  std::vector<uint8_t> out;
  for (uint32_t i = 0; i < 2; ++i) {
    spec::DsmRange range{};
    range.block_count = 8;
    range.starting_lba = i * 16;
    const auto* p = reinterpret_cast<const uint8_t*>(&range);
    out.insert(out.end(), p, p + sizeof(range));
  }
  return out;
}

void fabrics_seeds() {
  const auto admin = [](Records& r, uint32_t kato_ms) {
    r.command(0, connect_sqe(0, 32, kato_ms), 1024,
              nvmf::fuzz::connect_data(kSubsystemNqn, spec::cntlid_dynamic));
  };
  {
    Records r;
    r.bytes().u8(1);
    admin(r, 0);
    write_seed("fabrics_connect", "admin-connect", r.data());
  }
  {
    Records r;
    r.bytes().u8(1);
    admin(r, 10000);
    r.command(0, spec::to_sqe(spec::make_property_get(2, spec::property_offset::cap)));
    r.command(0, spec::to_sqe(spec::make_property_set(3, spec::property_offset::cc,
                                                      nvmf::fuzz::cc_enable_value())));
    r.command(0, spec::to_sqe(spec::make_property_get(4, spec::property_offset::csts)));
    r.command(0, spec::make_set_features(5, spec::feature::number_of_queues,
                                         spec::encode_number_of_queues(2, 2)));
    r.new_queue(1, 32);
    r.command(1, connect_sqe(1, 32), 1024, nvmf::fuzz::connect_data(kSubsystemNqn, 1));
    r.command(1, connect_sqe(1, 32), 1024, nvmf::fuzz::connect_data(kSubsystemNqn, 1));
    r.command(1, disconnect_sqe(6));
    r.poll(4);
    write_seed("fabrics_connect", "admin-enable-io-connect-disconnect", r.data());
  }
  {
    Records r;
    r.bytes().u8(0);
    r.command(0, connect_sqe(0, 32), 1024,
              nvmf::fuzz::connect_data(std::string(spec::discovery_nqn), spec::cntlid_dynamic));
    r.command(0, spec::to_sqe(spec::make_property_set(3, spec::property_offset::cc,
                                                      nvmf::fuzz::cc_enable_value())));
    r.command(0, spec::make_get_log_page(4, spec::log_page::discovery, 4096), 4096);
    write_seed("fabrics_connect", "discovery-connect", r.data());
  }
  {
    Records r;
    r.bytes().u8(0);  // only kHostNqn may connect
    r.command(0, connect_sqe(0, 32), 1024,
              nvmf::fuzz::connect_data(kSubsystemNqn, spec::cntlid_dynamic,
                                       "nqn.2014-08.org.nvmexpress:uuid:99999999-2222-3333-4444-"
                                       "555555555555"));
    r.command(0, connect_sqe(0, 4096), 1024,
              nvmf::fuzz::connect_data(kSubsystemNqn, spec::cntlid_dynamic));
    r.command(0, spec::to_sqe(spec::make_property_get(2, spec::property_offset::cap)));
    write_seed("fabrics_connect", "refused-connects", r.data());
  }
  {
    Records r;
    r.bytes().u8(1);
    admin(r, 5000);
    r.command(0, spec::to_sqe(spec::make_property_set(3, spec::property_offset::cc,
                                                      nvmf::fuzz::cc_enable_value())));
    r.clock(3000);
    r.command(0, spec::make_sqe(spec::admin_opcode::keep_alive, 7));
    r.clock(9000);  // no Keep Alive within KATO: the controller goes
    r.new_queue(0, 16);
    admin(r, 0);
    write_seed("fabrics_connect", "keep-alive-expiry", r.data());
  }
}

void admin_seeds() {
  {
    Records r;
    r.command(0, spec::make_identify(1, spec::cns::controller), 4096);
    r.command(0, spec::make_identify(2, spec::cns::namespace_data, 1), 4096);
    r.command(0, spec::make_identify(3, spec::cns::namespace_data, 2), 4096, {}, 3);
    r.command(0, spec::make_identify(4, spec::cns::active_namespace_list, 0), 4096);
    r.command(0, spec::make_identify(5, spec::cns::namespace_id_descriptor_list, 1), 4096);
    write_seed("admin_commands", "identify", r.data());
  }
  {
    Records r;
    r.command(0, spec::make_get_log_page(1, spec::log_page::error_information, 64), 64);
    r.command(0, spec::make_get_log_page(2, spec::log_page::smart_health, 512), 512);
    r.command(0,
              spec::make_get_log_page(3, spec::log_page::changed_namespace_list, 4096, 0,
                                      spec::nsid_all, 0, true),
              4096);
    r.command(0, spec::make_get_log_page(4, spec::log_page::smart_health, 256, 256), 256, {}, 2);
    write_seed("admin_commands", "log-pages", r.data());
  }
  {
    Records r;
    r.command(0, spec::make_get_features(1, spec::feature::number_of_queues));
    r.command(0, spec::make_set_features(2, spec::feature::keep_alive_timer, 15000));
    r.command(0, spec::make_get_features(3, spec::feature::keep_alive_timer));
    r.command(0, spec::make_set_features(4, spec::feature::async_event_configuration, 0x100));
    r.command(0, spec::make_set_features(5, spec::feature::volatile_write_cache, 1));
    r.command(0, spec::make_get_features(6, spec::feature::volatile_write_cache));
    r.command(0, spec::make_set_features(7, spec::feature::number_of_queues, 0x00030003));
    write_seed("admin_commands", "features", r.data());
  }
  {
    Records r;
    r.command(0, spec::make_sqe(spec::admin_opcode::async_event_request, 10));
    r.command(0, spec::make_sqe(spec::admin_opcode::async_event_request, 11));
    spec::Sqe abort = spec::make_sqe(spec::admin_opcode::abort, 12);
    abort.cdw10 = uint32_t{10} << 16;  // SQID 0, CID 10
    r.command(0, abort);
    spec::Sqe abort_io = spec::make_sqe(spec::admin_opcode::abort, 13);
    abort_io.cdw10 = (uint32_t{8} << 16) | 1;  // SQID 1, CID 8 (the read)
    r.command(1, io_sqe(spec::nvm_opcode::read, 1, 0, 8), 4096);
    r.command(0, abort_io);
    r.command(0, spec::make_sqe(spec::admin_opcode::keep_alive, 14));
    r.poll(4);
    write_seed("admin_commands", "events-abort-keep-alive", r.data());
  }
  {
    Records r;
    std::vector<uint8_t> block(4096);
    for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<uint8_t>(i * 7);
    r.command(1, io_sqe(spec::nvm_opcode::write, 1, 8, 8), 4096, block, 2);
    r.poll(2);
    r.command(1, io_sqe(spec::nvm_opcode::read, 1, 8, 8), 4096, {}, 4);
    r.poll(2);
    r.command(1, io_sqe(spec::nvm_opcode::flush, 1, 0, 0));
    r.command(1, io_sqe(spec::nvm_opcode::write_zeroes, 1, 0, 16));
    spec::Sqe dsm = spec::make_sqe(spec::nvm_opcode::dataset_management, 9, 1);
    dsm.cdw10 = 1;        // NR: two ranges
    dsm.cdw11 = 1u << 2;  // deallocate
    r.command(1, dsm, 32, dsm_ranges());
    r.command(1, io_sqe(spec::nvm_opcode::read, 2, 0, 1), 4096);
    r.command(1, io_sqe(spec::nvm_opcode::read, 1, 250, 8), 4096);
    r.poll(8);
    write_seed("admin_commands", "io", r.data());
  }
  {
    Records r;
    r.command(0, spec::to_sqe(spec::make_property_get(1, spec::property_offset::vs)));
    spec::CcFields cc;
    cc.en = true;
    cc.iosqes = 6;
    cc.iocqes = 4;
    cc.shn = spec::shutdown_notification::normal;
    r.command(0, spec::to_sqe(
                     spec::make_property_set(2, spec::property_offset::cc, spec::encode_cc(cc))));
    r.command(0, spec::to_sqe(spec::make_property_get(3, spec::property_offset::csts)));
    r.command(1, io_sqe(spec::nvm_opcode::read, 1, 0, 8), 4096);
    r.command(1, disconnect_sqe(4));
    r.poll(4);
    write_seed("admin_commands", "shutdown-disconnect", r.data());
  }
}

void discovery_seeds() {
  const auto read = [](Bytes& b, uint8_t mode, uint64_t offset, uint32_t numd, uint16_t buffer,
                       uint8_t segments) {
    b.u8(0).u8(mode).u64(offset).u32(numd).u16(buffer).u8(segments).u8(spec::log_page::discovery);
  };
  {
    Bytes b;
    b.u8(3).u8(0x01 | (1 << 2)).u8(0x02 | (2 << 2) | (1 << 4)).u8(0x00 | (3 << 2));
    read(b, 0, 0, 0, 1024, 1);     // the header
    read(b, 0, 0, 0, 4096, 3);     // everything
    read(b, 1, 1024, 0, 1024, 1);  // the first record, RAE
    write_seed("discovery_log", "three-subsystems", b.data());
  }
  {
    Bytes b;
    b.u8(2).u8(0x01 | (3 << 2)).u8(0x01 | (3 << 2) | (2 << 4));
    read(b, 0, 2000, 0, 512, 2);  // inside a record
    b.u8(2).u8(0).u8(0x21);       // add a listener
    read(b, 0, 0, 0, 8192, 4);
    b.u8(2).u8(6).u8(0);  // remove subsystem 0
    read(b, 0, 0, 0, 4096, 1);
    b.u8(2).u8(5).u8(0x84);  // add subsystem 4 allowing any host
    b.u8(2).u8(0).u8(0x04);  // and a listener for it
    read(b, 0, 0, 0, 8192, 16);
    write_seed("discovery_log", "changes-between-reads", b.data());
  }
  {
    Bytes b;
    b.u8(1).u8(0x01 | (1 << 2));
    b.u8(3).u32(1u << 31);  // an AER, discovery log change notices on
    b.u8(2).u8(0).u8(0x11);
    read(b, 0, 0, 0, 2048, 1);  // clears the event
    read(b, 2, 4096, 0, 1024, 1);
    read(b, 4, 0, 0x3FF, 64, 1);
    write_seed("discovery_log", "event-and-bad-reads", b.data());
  }
}

// ---- target_config ----

void config_seeds() {
  write_seed("target_config", "empty", std::string("{}"));
  write_seed("target_config", "full", std::string(R"({
  "target": { "max_namespaces_default": 16, "keep_alive_granularity_ms": 1000,
              "discovery_keep_alive_timeout_ms": 120000 },
  "transports": [ { "type": "rdma", "max_queue_depth": 128, "max_admin_queue_depth": 32,
                    "max_qpairs_per_ctrlr": 64, "in_capsule_data_size": 8192,
                    "max_io_size": 131072, "max_sgl_descriptors": 4,
                    "send_with_invalidate": "off" } ],
  "bdevs": [
    { "type": "malloc", "name": "Malloc0", "block_size": 4096, "num_blocks": 64,
      "uuid": "11111111-2222-3333-4444-555555555555", "queue_depth": 64 },
    { "type": "null", "name": "Null0", "block_size": 512, "num_blocks": 1048576,
      "completion_delay_ns": 1000, "zero_read_buffers": true },
    { "type": "nvme", "name": "Nvme0n1", "pci": "0000:00:04.0", "nsid": 1 }
  ],
  "subsystems": [
    { "nqn": "nqn.2026-01.io.example:one", "serial_number": "SN1", "model_number": "M1",
      "allow_any_host": false,
      "hosts": [ "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555" ],
      "max_namespaces": 4,
      "namespaces": [ { "nsid": 1, "bdev": "Malloc0", "nguid": "000102030405060708090a0b0c0d0e0f",
                        "eui64": "0011223344556677" },
                      { "bdev": "Null0", "uuid": "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee" } ],
      "listeners": [ { "trtype": "rdma", "adrfam": "ipv4", "traddr": "10.0.0.1", "trsvcid": "4420" },
                     { "adrfam": "ipv6", "traddr": "fe80::1", "trsvcid": "4421" } ] }
  ]
})"));
  write_seed("target_config", "uring", std::string(R"({
  "bdevs": [ { "type": "uring", "name": "U0", "path": "/nonexistent/fuzz.img", "create_file": true,
               "size_bytes": 1048576, "direct_io": "prefer", "fallocate": true } ],
  "subsystems": [ { "nqn": "nqn.2026-01.io.example:u", "namespaces": [ { "bdev": "U0" } ] } ]
})"));
  write_seed("target_config", "errors", std::string(R"({
  "transports": [ { "type": "rdma", "max_queue_depth": 65536 } ],
  "bdevs": [ { "type": "malloc", "name": "", "block_size": 3000 } ],
  "subsystems": [ { "nqn": "not-an-nqn", "namespaces": [ { "nsid": 0, "bdev": "Missing" } ] } ]
})"));
}

// ---- rpc ----

void rpc_seeds() {
  const auto line = [](const std::string& method, const std::string& params, int id) {
    std::string out = R"({"jsonrpc":"2.0","method":")" + method + "\"";
    if (!params.empty()) out += R"(,"params":)" + params;
    if (id >= 0) out += R"(,"id":)" + std::to_string(id);
    return out + "}\n";
  };
  const std::string nqn = R"("nqn.2026-01.io.example:rpc")";
  std::string setup = line("bdev_create", R"({"type":"malloc","name":"M0","num_blocks":64})", 1) +
                      line("bdev_create", R"({"type":"null","name":"N0","block_size":4096})", 2) +
                      line("subsystem_create", "{\"nqn\":" + nqn + R"(,"serial_number":"S1"})", 3) +
                      line("namespace_add", "{\"nqn\":" + nqn + R"(,"bdev":"M0","nsid":1})", 4);
  write_seed("rpc", "setup", setup);
  write_seed(
      "rpc", "listeners-hosts",
      setup +
          line("listener_add", "{\"nqn\":" + nqn + R"(,"traddr":"10.0.0.1","trsvcid":"4420"})", 5) +
          line("host_add", "{\"nqn\":" + nqn + R"(,"host":")" + kHostNqn + "\"}", 6) +
          line("subsystem_allow_any_host", "{\"nqn\":" + nqn + R"(,"allow":true})", 7) +
          line("subsystem_list", "", 8) +
          line("host_remove", "{\"nqn\":" + nqn + R"(,"host":")" + kHostNqn + "\"}", 9) +
          line("listener_remove", "{\"nqn\":" + nqn + R"(,"traddr":"10.0.0.1","trsvcid":"4420"})",
               10));
  write_seed("rpc", "teardown",
             setup + line("bdev_delete", R"({"name":"M0"})", 5) +
                 line("namespace_remove", "{\"nqn\":" + nqn + R"(,"nsid":1})", 6) +
                 line("bdev_delete", R"({"name":"M0"})", 7) +
                 line("subsystem_delete", "{\"nqn\":" + nqn + "}", 8) + line("save_config", "", 9) +
                 line("bdev_list", "", 10));
  write_seed(
      "rpc", "misc",
      line("rpc_get_methods", "", 1) + line("stats", "", 2) +
          line("log_set_level", R"({"level":"info"})", 3) + line("log_get_level", "", 4) +
          line("no_such_method", "{}", 5) + line("subsystem_list", "[1,2]", 6) +
          line("log_set_level", R"({"level":"loud"})", -1) + R"({"jsonrpc":"1.0","id":1})" + "\n" +
          R"([{"jsonrpc":"2.0","method":"stats","id":"a"},{"jsonrpc":"2.0","method":"bdev_list"}])" +
          "\n" + "[]\n" + "{\"jsonrpc\":\n");
  write_seed("rpc", "errors",
             line("bdev_create", R"({"type":"nvme","name":"Nvme0n1","pci":"0000:00:04.0"})", 1) +
                 line("bdev_create", R"({"type":"malloc","name":"M0","num_blocks":"x"})", 2) +
                 line("subsystem_create", R"({"nqn":"nqn.2014-08.org.nvmexpress.discovery"})", 3) +
                 line("namespace_add", "{\"nqn\":" + nqn + R"(,"bdev":"M9"})", 4) +
                 line("host_add", "{\"nqn\":" + nqn + R"(,"host":"bad"})", 5) +
                 line("subsystem_delete", R"({"nqn":"nqn.2014-08.org.nvmexpress.discovery"})", 6));
}

// ---- nbd_queue ----

void nbd_seeds() {
  const auto request = [](Bytes& b, wire::Command type, uint64_t offset, uint32_t length,
                          uint16_t flags = 0) {
    b.put(wire::make_request(type, flags, 0, offset, length));
  };
  {
    Bytes b;
    b.u8(0x02).u8(16).u8(7);  // in_process backend, 64 KiB chunks, 8 slots
    request(b, wire::Command::write, 4096, 4096);
    b.raw(std::vector<uint8_t>(4096, 0x5A));
    request(b, wire::Command::read, 4096, 4096);
    request(b, wire::Command::flush, 0, 0, wire::kCmdFlagFua);
    request(b, wire::Command::trim, 0, 1024);
    request(b, wire::Command::write_zeroes, 8192, 512, wire::kCmdFlagNoHole);
    request(b, wire::Command::read, 8192, 1024);
    request(b, wire::Command::disconnect, 0, 0);
    write_seed("nbd_queue", "mixed-then-disconnect", b.data());
  }
  {
    Bytes b;
    b.u8(0x04 | (3 << 3) | 0x40).u8(5).u8(1);  // one at a time, refuse every 3rd, errors, 32 B
    for (uint32_t i = 0; i < 6; ++i) {
      request(b, wire::Command::write, i * 512, 512);
      b.raw(std::vector<uint8_t>(512, static_cast<uint8_t>(i)));
      request(b, wire::Command::read, i * 512, 512);
    }
    write_seed("nbd_queue", "small-chunks-busy-errors", b.data());
  }
  {
    Bytes b;
    b.u8(0x00).u8(12).u8(3);
    request(b, wire::Command::write, 0, 16384);  // above max_request_bytes: payload dropped
    b.raw(std::vector<uint8_t>(16384, 1));
    request(b, wire::Command::read, 65536 - 512, 1024);  // past the end
    request(b, wire::Command::write, 100, 512);          // misaligned
    b.raw(std::vector<uint8_t>(512, 2));
    request(b, wire::Command::read, 0, 512, 1u << 2);  // DF: not ours
    request(b, wire::Command::cache, 0, 512);          // unknown: EINVAL, then stop
    request(b, wire::Command::read, 0, 512);
    write_seed("nbd_queue", "invalid-requests", b.data());
  }
  {
    Bytes b;
    b.u8(0x01 | 0x06).u8(9).u8(2);  // read-only, reversed completions
    request(b, wire::Command::write, 0, 512);
    b.raw(std::vector<uint8_t>(512, 3));
    request(b, wire::Command::read, 0, 512);
    request(b, wire::Command::write, 512, 1024);
    b.raw(std::vector<uint8_t>(100, 4));  // the payload is cut short
    write_seed("nbd_queue", "read-only-truncated", b.data());
  }
  {
    Bytes b;
    b.u8(0).u8(16).u8(0);
    request(b, wire::Command::read, 0, 512);
    b.u32(0xdeadbeef).raw(std::vector<uint8_t>(24, 0));  // bad magic: nothing more is read
    request(b, wire::Command::read, 0, 512);
    write_seed("nbd_queue", "bad-magic", b.data());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  g_root = argv[1];
  sgl_seeds();
  cm_seeds();
  fabrics_seeds();
  admin_seeds();
  discovery_seeds();
  config_seeds();
  rpc_seeds();
  nbd_seeds();
  std::printf("seeds written under %s\n", g_root.c_str());
  return 0;
}
