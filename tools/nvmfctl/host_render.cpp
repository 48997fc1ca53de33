#include "host_render.h"

#include <cstdio>

#include "cli.h"
#include "spec/discovery.h"
#include "spec/fabrics.h"
#include "spec/rdma_cm.h"

namespace nvmf::ctl {

namespace {

std::string hex(uint64_t value) {
  char text[24];
  // nvme-cli's %#x: "0x1f", and "0" for zero.
  std::snprintf(text, sizeof(text), "%#llx", static_cast<unsigned long long>(value));
  return text;
}

// nvme-cli prints an NGUID as 32 hex digits, no separators.
std::string hex_bytes(const std::array<uint8_t, 16>& bytes) {
  std::string text;
  char digits[3];
  for (uint8_t byte : bytes) {
    std::snprintf(digits, sizeof(digits), "%02x", byte);
    text += digits;
  }
  return text;
}

// One "key : value" line with nvme-cli's key column (`width` characters).
void line(std::string* out, const char* key, size_t width, const std::string& value) {
  std::string padded(key);
  if (padded.size() < width) padded.resize(width, ' ');
  *out += padded + ": " + value + "\n";
}

uint8_t lbads_of(uint32_t block_size) {
  uint8_t shift = 0;
  while (shift < 31 && (uint32_t{1} << shift) < block_size) ++shift;
  return shift;
}

}  // namespace

const char* trtype_name(uint8_t trtype) noexcept {
  switch (trtype) {
    case spec::trtype::rdma:
      return "rdma";
    case spec::trtype::fibre_channel:
      return "fc";
    case spec::trtype::tcp:
      return "tcp";
    case spec::trtype::intra_host:
      return "loop";
    default:
      return "unrecognized";
  }
}

const char* adrfam_name(uint8_t adrfam) noexcept {
  switch (adrfam) {
    case spec::adrfam::pci:
      return "pci";
    case spec::adrfam::ipv4:
      return "ipv4";
    case spec::adrfam::ipv6:
      return "ipv6";
    case spec::adrfam::infiniband:
      return "infiniband";
    case spec::adrfam::fibre_channel:
      return "fibre-channel";
    case spec::adrfam::intra_host:
      return "loop";
    default:
      return "unrecognized";
  }
}

const char* subtype_name(uint8_t subtype) noexcept {
  switch (subtype) {
    case spec::subsystem_type::discovery_referral:
      return "discovery subsystem referral";
    case spec::subsystem_type::nvm:
      return "nvme subsystem";
    case spec::subsystem_type::current_discovery:
      return "current discovery subsystem";
    default:
      return "unrecognized";
  }
}

std::string discovery_log_text(const std::vector<host::DiscoveryEntry>& entries) {
  std::string out = "\nDiscovery Log Number of Records " + std::to_string(entries.size()) + "\n";
  for (size_t i = 0; i < entries.size(); ++i) {
    const host::DiscoveryEntry& entry = entries[i];
    out += "=====Discovery Log Entry " + std::to_string(i) + "======\n";
    // nvme-cli's columns: "trtype:  rdma" (the key and its colon in 9 characters).
    auto field = [&](const char* key, const std::string& value) {
      std::string padded = std::string(key) + ":";
      if (padded.size() < 9) padded.resize(9, ' ');
      out += padded + value + "\n";
    };
    field("trtype", trtype_name(entry.trtype));
    // nvme-cli leaves the address family blank when there is no address.
    field("adrfam", entry.traddr.empty() ? "" : adrfam_name(entry.adrfam));
    field("subtype", subtype_name(entry.subtype));
    field("portid", std::to_string(entry.portid));
    field("trsvcid", entry.trsvcid);
    field("subnqn", entry.subnqn);
    field("traddr", entry.traddr);
  }
  return out;
}

Json discovery_log_json(const std::vector<host::DiscoveryEntry>& entries) {
  Json records = Json::array();
  for (const host::DiscoveryEntry& entry : entries) {
    records.push_back({{"trtype", trtype_name(entry.trtype)},
                       {"adrfam", entry.traddr.empty() ? "" : adrfam_name(entry.adrfam)},
                       {"subtype", subtype_name(entry.subtype)},
                       {"portid", entry.portid},
                       {"trsvcid", entry.trsvcid},
                       {"subnqn", entry.subnqn},
                       {"traddr", entry.traddr}});
  }
  return Json{{"records", records}};
}

uint8_t mdts_of(const host::ControllerData& data) noexcept {
  if (data.max_transfer_bytes == 0) return 0;
  // The library computed max_transfer_bytes = (4096 << CAP.MPSMIN) << MDTS.
  const uint64_t page_bytes = uint64_t{4096} << spec::cap_mpsmin(data.cap);
  uint8_t mdts = 0;
  while (mdts < 63 && (page_bytes << mdts) < data.max_transfer_bytes) ++mdts;
  return mdts;
}

uint32_t ioccsz_of(const host::ControllerData& data) noexcept {
  // in_capsule_data_bytes = IOCCSZ * 16 - 64 (the 64-byte command before the data).
  return data.in_capsule_data_bytes == 0 ? 0 : (data.in_capsule_data_bytes + 64) / 16;
}

std::string id_ctrl_text(const host::ControllerData& data) {
  constexpr size_t kWidth = 10;  // nvme-cli's "vid       : "
  std::string out = "NVME Identify Controller:\n";
  line(&out, "vid", kWidth, hex(data.vid));
  line(&out, "sn", kWidth, data.serial_number);
  line(&out, "mn", kWidth, data.model_number);
  line(&out, "fr", kWidth, data.firmware_revision);
  line(&out, "mdts", kWidth, std::to_string(mdts_of(data)));
  line(&out, "cntlid", kWidth, hex(data.cntlid));
  line(&out, "ver", kWidth, hex(data.vs));
  line(&out, "aerl", kWidth, std::to_string(data.aerl));
  line(&out, "nn", kWidth, std::to_string(data.namespace_count));
  line(&out, "subnqn", kWidth, data.subnqn);
  line(&out, "ioccsz", kWidth, std::to_string(ioccsz_of(data)));
  return out;
}

Json id_ctrl_json(const host::ControllerData& data) {
  return Json{{"vid", data.vid},
              {"sn", data.serial_number},
              {"mn", data.model_number},
              {"fr", data.firmware_revision},
              {"mdts", mdts_of(data)},
              {"cntlid", data.cntlid},
              {"ver", data.vs},
              {"aerl", data.aerl},
              {"nn", data.namespace_count},
              {"subnqn", data.subnqn},
              {"ioccsz", ioccsz_of(data)}};
}

std::string id_ns_text(const host::Namespace& ns) {
  constexpr size_t kWidth = 8;  // nvme-cli's "nsze    : "
  std::string out = "NVME Identify Namespace " + std::to_string(ns.id()) + ":\n";
  line(&out, "nsze", kWidth, hex(ns.block_count()));
  line(&out, "lbads", kWidth,
       std::to_string(lbads_of(ns.block_size())) + " (" + std::to_string(ns.block_size()) +
           "-byte blocks, the LBA format in use)");
  line(&out, "nguid", kWidth, hex_bytes(ns.nguid()));
  line(&out, "uuid", kWidth, host::uuid_to_string(ns.uuid()));
  return out;
}

Json id_ns_json(const host::Namespace& ns) {
  return Json{{"nsid", ns.id()},
              {"nsze", ns.block_count()},
              {"lbads", lbads_of(ns.block_size())},
              {"block_size", ns.block_size()},
              {"nguid", hex_bytes(ns.nguid())},
              {"uuid", host::uuid_to_string(ns.uuid())}};
}

int connect_failure_status(std::string_view message) {
  // The library's messages (src/initiator/controller.cpp): the admin queue's RDMA connection
  // failed ("cannot start connecting to A:P: ..." when no device or route took the address,
  // "cannot connect queue 0 to A:P: REASON" when the CM gave up), or a later step did.
  constexpr std::string_view kNoStart = "cannot start connecting to ";
  constexpr std::string_view kNoConnect = "cannot connect queue ";
  if (message.substr(0, kNoStart.size()) == kNoStart) return exit_status::unreachable;
  if (message.substr(0, kNoConnect.size()) != kNoConnect) return exit_status::failed;
  // A CM reject carrying an NVMe/RDMA status: the target's transport refused the queue.
  for (uint16_t sts = 0; sts <= spec::rdma_cm_reject::invalid_cntlid + 1; ++sts) {
    const std::string_view name = spec::rdma_cm_reject_name(sts);
    if (message.size() >= name.size() && message.substr(message.size() - name.size()) == name) {
      return exit_status::failed;
    }
  }
  return exit_status::unreachable;
}

}  // namespace nvmf::ctl
