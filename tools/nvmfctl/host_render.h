// nvmfctl discover / id-ctrl / id-ns: what libnvmf_host returned, printed the way nvme-cli
// prints it (normal: "key : value" lines; json: one object). Only what include/nvmf/host.h
// exposes is printed; nvme-cli fields the library does not return (the discovery log's
// generation counter, treq and RDMA transport-specific fields; ssvid, oncs, sgls, iorcsz,
// msdbd; ncap, nuse, nlbaf, flbas, eui64) are left out. Pure: unit-tested on made-up data.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nvmf/host.h"

namespace nvmf::ctl {

using Json = nlohmann::json;

// nvme-cli's (libnvme's) names: "rdma", "ipv4", "nvme subsystem", ...; "unrecognized" else.
const char* trtype_name(uint8_t trtype) noexcept;
const char* adrfam_name(uint8_t adrfam) noexcept;
const char* subtype_name(uint8_t subtype) noexcept;

// "\nDiscovery Log Number of Records N\n" then "=====Discovery Log Entry K======" blocks.
std::string discovery_log_text(const std::vector<host::DiscoveryEntry>& entries);
// {"records": [{"trtype", "adrfam", "subtype", "portid", "trsvcid", "subnqn", "traddr"}]}
Json discovery_log_json(const std::vector<host::DiscoveryEntry>& entries);

// The Identify Controller fields derived back from ControllerData: MDTS from
// max_transfer_bytes and CAP.MPSMIN (0: no limit reported), IOCCSZ from
// in_capsule_data_bytes, ver from the VS property.
uint8_t mdts_of(const host::ControllerData& data) noexcept;
uint32_t ioccsz_of(const host::ControllerData& data) noexcept;

// "NVME Identify Controller:" then vid, sn, mn, fr, mdts, cntlid, ver, aerl, nn, subnqn,
// ioccsz as nvme-cli prints them.
std::string id_ctrl_text(const host::ControllerData& data);
Json id_ctrl_json(const host::ControllerData& data);

// "NVME Identify Namespace N:" then nsze, lbads (of the LBA format in use), nguid, uuid.
std::string id_ns_text(const host::Namespace& ns);
Json id_ns_json(const host::Namespace& ns);

// Exit status of a failed connect or discover, from the library's message: 3 (cannot reach:
// no RDMA device or route to the address, nothing listening, no answer) when the admin
// queue's RDMA connection never came up, unless the target's NVMe/RDMA layer rejected it
// with a status; 1 (the target answered and refused or failed: a rejected queue, Fabrics
// Connect refused, a failed Identify) otherwise.
int connect_failure_status(std::string_view message);

}  // namespace nvmf::ctl
