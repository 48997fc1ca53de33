// The Discovery Log Page (Log Page Identifier 70h) a discovery controller serves: a 1024-byte
// header followed by NUMREC 1024-byte entries, each naming one port of one subsystem, with the
// RDMA Transport Specific Address Subtype (TSAS) in its last 256 bytes. Also the well-known
// discovery subsystem NQN. Header-only; any thread.
//
// Sources: Base spec / NVMe-oF "Discovery Log Page" ("Discovery Log Page Format", "Discovery
// Log Page Entry"); NVMe RDMA Transport spec "Transport Specific Address Subtype" (RDMA).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#include "spec/wire.h"

namespace nvmf::spec {

// The NQN of the discovery subsystem every discovery controller answers to.
inline constexpr std::string_view discovery_nqn = "nqn.2014-08.org.nvmexpress.discovery";

inline constexpr uint8_t discovery_log_page_id = 0x70;
inline constexpr uint32_t discovery_log_header_size = 1024;
inline constexpr uint32_t discovery_log_entry_size = 1024;

// Bytes of a discovery log page holding `record_count` entries.
constexpr uint64_t discovery_log_page_size(uint64_t record_count) noexcept {
  return discovery_log_header_size + record_count * discovery_log_entry_size;
}

// Transport Type (TRTYPE).
namespace trtype {
inline constexpr uint8_t rdma = 1;
inline constexpr uint8_t fibre_channel = 2;
inline constexpr uint8_t tcp = 3;
inline constexpr uint8_t intra_host = 254;
}  // namespace trtype

// Address Family (ADRFAM).
namespace adrfam {
inline constexpr uint8_t pci = 0;
inline constexpr uint8_t ipv4 = 1;
inline constexpr uint8_t ipv6 = 2;
inline constexpr uint8_t infiniband = 3;
inline constexpr uint8_t fibre_channel = 4;
inline constexpr uint8_t intra_host = 254;
}  // namespace adrfam

// Subsystem Type (SUBTYPE).
namespace subsystem_type {
inline constexpr uint8_t discovery_referral = 1;  // another discovery subsystem
inline constexpr uint8_t nvm = 2;                 // an NVM subsystem (I/O controllers)
inline constexpr uint8_t current_discovery = 3;   // this discovery subsystem
}  // namespace subsystem_type

// Transport Requirements (TREQ): secure channel 1:0, SQ flow control disable bit 2.
namespace treq {
inline constexpr uint8_t secure_channel_not_specified = 0x0;
inline constexpr uint8_t secure_channel_required = 0x1;
inline constexpr uint8_t secure_channel_not_required = 0x2;
inline constexpr uint8_t secure_channel_mask = 0x3;
inline constexpr uint8_t sq_flow_control_disable_supported = 1u << 2;
}  // namespace treq

// Entry Flags (EFLAGS).
namespace eflags {
inline constexpr uint16_t duplicate_returned_information = 1u << 0;
inline constexpr uint16_t explicit_persistent_connection = 1u << 1;
inline constexpr uint16_t no_cdc_connectivity = 1u << 2;
}  // namespace eflags

// RDMA TSAS values.
namespace rdma_qptype {
inline constexpr uint8_t reliable_connected = 1;
inline constexpr uint8_t reliable_datagram = 2;
}  // namespace rdma_qptype
namespace rdma_prtype {
inline constexpr uint8_t not_specified = 1;
inline constexpr uint8_t infiniband = 2;
inline constexpr uint8_t roce = 3;
inline constexpr uint8_t roce_v2 = 4;
inline constexpr uint8_t iwarp = 5;
}  // namespace rdma_prtype
namespace rdma_cms {
inline constexpr uint8_t rdma_cm = 1;
}  // namespace rdma_cms

// "Discovery Log Page Format" header (1024 bytes).
struct DiscoveryLogPageHeader {
  uint64_t genctr;           // 0: Generation Counter: changes whenever the log changes
  uint64_t numrec;           // 8: Number of Records
  uint16_t recfmt;           // 16: Record Format, 0
  uint8_t reserved18[1006];  // 18
};
NVMF_SPEC_LAYOUT(DiscoveryLogPageHeader, 1024);
NVMF_SPEC_OFFSET(DiscoveryLogPageHeader, genctr, 0);
NVMF_SPEC_OFFSET(DiscoveryLogPageHeader, numrec, 8);
NVMF_SPEC_OFFSET(DiscoveryLogPageHeader, recfmt, 16);

// RDMA "Transport Specific Address Subtype" (256 bytes, the TSAS field of an RDMA entry).
struct RdmaTsas {
  uint8_t qptype;           // 0: RDMA QP Service Type
  uint8_t prtype;           // 1: RDMA Provider Type
  uint8_t cms;              // 2: RDMA Connection Management Service
  uint8_t reserved3[5];     // 3
  uint16_t pkey;            // 8: RDMA_PKEY (InfiniBand partition key)
  uint8_t reserved10[246];  // 10
};
NVMF_SPEC_LAYOUT(RdmaTsas, 256);
NVMF_SPEC_OFFSET(RdmaTsas, qptype, 0);
NVMF_SPEC_OFFSET(RdmaTsas, prtype, 1);
NVMF_SPEC_OFFSET(RdmaTsas, cms, 2);
NVMF_SPEC_OFFSET(RdmaTsas, pkey, 8);

// "Discovery Log Page Entry" (1024 bytes).
struct DiscoveryLogEntry {
  uint8_t trtype;           // 0: Transport Type
  uint8_t adrfam;           // 1: Address Family
  uint8_t subtype;          // 2: Subsystem Type
  uint8_t treq;             // 3: Transport Requirements
  uint16_t portid;          // 4: Port ID
  uint16_t cntlid;          // 6: Controller ID (FFFFh: dynamic controller model)
  uint16_t asqsz;           // 8: Admin Max SQ Size (at least 32)
  uint16_t eflags;          // 10: Entry Flags
  uint8_t reserved12[20];   // 12
  char trsvcid[32];         // 32: Transport Service Identifier (e.g. "4420"), NUL padded
  uint8_t reserved64[192];  // 64
  char subnqn[256];         // 256: NVM Subsystem NQN, NUL-terminated
  char traddr[256];         // 512: Transport Address (e.g. "192.168.1.10"), NUL padded
  uint8_t tsas[256];        // 768: Transport Specific Address Subtype (RdmaTsas for RDMA)
};
NVMF_SPEC_LAYOUT(DiscoveryLogEntry, 1024);
NVMF_SPEC_OFFSET(DiscoveryLogEntry, trtype, 0);
NVMF_SPEC_OFFSET(DiscoveryLogEntry, adrfam, 1);
NVMF_SPEC_OFFSET(DiscoveryLogEntry, subtype, 2);
NVMF_SPEC_OFFSET(DiscoveryLogEntry, treq, 3);
NVMF_SPEC_OFFSET(DiscoveryLogEntry, portid, 4);
NVMF_SPEC_OFFSET(DiscoveryLogEntry, cntlid, 6);
NVMF_SPEC_OFFSET(DiscoveryLogEntry, asqsz, 8);
NVMF_SPEC_OFFSET(DiscoveryLogEntry, eflags, 10);
NVMF_SPEC_OFFSET(DiscoveryLogEntry, trsvcid, 32);
NVMF_SPEC_OFFSET(DiscoveryLogEntry, subnqn, 256);
NVMF_SPEC_OFFSET(DiscoveryLogEntry, traddr, 512);
NVMF_SPEC_OFFSET(DiscoveryLogEntry, tsas, 768);

// The TSAS of an RDMA entry (a byte copy: tsas is raw because its meaning depends on TRTYPE).
inline RdmaTsas entry_rdma_tsas(const DiscoveryLogEntry& entry) noexcept {
  RdmaTsas tsas;
  std::memcpy(&tsas, entry.tsas, sizeof(tsas));
  return tsas;
}
inline void set_entry_rdma_tsas(DiscoveryLogEntry& entry, const RdmaTsas& tsas) noexcept {
  std::memcpy(entry.tsas, &tsas, sizeof(tsas));
}

constexpr RdmaTsas make_rdma_tsas(uint8_t prtype, uint16_t pkey = 0) noexcept {
  RdmaTsas tsas{};
  tsas.qptype = rdma_qptype::reliable_connected;
  tsas.prtype = prtype;
  tsas.cms = rdma_cms::rdma_cm;
  tsas.pkey = pkey;
  return tsas;
}

}  // namespace nvmf::spec
