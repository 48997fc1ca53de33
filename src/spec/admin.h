// Admin command data structures a Fabrics target serves and a host parses: Identify (CNS
// values, Identify Controller, Identify Namespace, Namespace Identification Descriptor list,
// Active Namespace ID list), Get Log Page (command fields and the Error Information, SMART /
// Health and Changed Namespace List pages), Set/Get Features (IDs, Number of Queues, Keep Alive,
// Async Event Configuration, Volatile Write Cache) and the Asynchronous Event Request result.
// Header-only; any thread.
//
// Sources: Base spec "Identify command" ("CNS Values"), "Identify Controller Data Structure"
// (incl. its "NVMe over Fabrics Attributes" bytes 1792..2047), "Power State Descriptor Data
// Structure", "Namespace Identification Descriptor", "Get Log Page command", "Error Information
// (Log Page Identifier 01h)", "SMART / Health Information (Log Page Identifier 02h)", "Changed
// Namespace List (Log Page Identifier 04h)", "Set Features command", "Get Features command",
// "Feature Identifiers", "Number of Queues", "Asynchronous Event Request command"; NVM Command
// Set spec "Identify Namespace Data Structure, NVM Command Set", "LBA Format Data Structure".
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "spec/nvme.h"
#include "spec/wire.h"

namespace nvmf::spec {

inline constexpr uint32_t identify_data_size = 4096;

// --- Identify command: CDW10 CNS 7:0, CNTID 31:16; CDW11 CNSSID 15:0, CSI 31:24 ---

// Controller or Namespace Structure (CNS) values.
namespace cns {
inline constexpr uint8_t namespace_data = 0x00;
inline constexpr uint8_t controller = 0x01;
inline constexpr uint8_t active_namespace_list = 0x02;
inline constexpr uint8_t namespace_id_descriptor_list = 0x03;
inline constexpr uint8_t nvm_set_list = 0x04;
inline constexpr uint8_t io_command_set_namespace = 0x05;
inline constexpr uint8_t io_command_set_controller = 0x06;
inline constexpr uint8_t io_command_set_active_namespace_list = 0x07;
inline constexpr uint8_t allocated_namespace_list = 0x10;
inline constexpr uint8_t allocated_namespace_data = 0x11;
inline constexpr uint8_t namespace_attached_controller_list = 0x12;
inline constexpr uint8_t controller_list = 0x13;
inline constexpr uint8_t primary_controller_capabilities = 0x14;
inline constexpr uint8_t secondary_controller_list = 0x15;
inline constexpr uint8_t namespace_granularity_list = 0x16;
inline constexpr uint8_t uuid_list = 0x17;
inline constexpr uint8_t io_command_set_data = 0x1C;
}  // namespace cns

// Command Set Identifier (CSI).
namespace csi {
inline constexpr uint8_t nvm = 0x00;
inline constexpr uint8_t key_value = 0x01;
inline constexpr uint8_t zoned = 0x02;
}  // namespace csi

constexpr uint8_t identify_cns(const Sqe& sqe) noexcept {
  return static_cast<uint8_t>(get_bits(sqe.cdw10, 0, 8));
}
constexpr uint16_t identify_cntid(const Sqe& sqe) noexcept {
  return static_cast<uint16_t>(get_bits(sqe.cdw10, 16, 16));
}
constexpr uint8_t identify_csi(const Sqe& sqe) noexcept {
  return static_cast<uint8_t>(get_bits(sqe.cdw11, 24, 8));
}

constexpr Sqe make_identify(uint16_t cid, uint8_t cns_value, uint32_t nsid = nsid_none,
                            uint8_t csi_value = csi::nvm) noexcept {
  Sqe sqe = make_sqe(admin_opcode::identify, cid, nsid);
  sqe.cdw10 = cns_value;
  sqe.cdw11 = set_bits(uint32_t{0}, 24, 8, csi_value);
  return sqe;
}

// "Power State Descriptor Data Structure" (32 bytes).
struct PowerStateDescriptor {
  uint16_t mp;            // 00: Maximum Power (centiwatts, or 0.0001 W with MXPS)
  uint8_t reserved2;      // 02
  uint8_t flags;          // 03: MXPS bit 0, NOPS bit 1
  uint32_t enlat;         // 04: Entry Latency (us)
  uint32_t exlat;         // 08: Exit Latency (us)
  uint8_t rrt;            // 12: Relative Read Throughput
  uint8_t rrl;            // 13: Relative Read Latency
  uint8_t rwt;            // 14: Relative Write Throughput
  uint8_t rwl;            // 15: Relative Write Latency
  uint16_t idlp;          // 16: Idle Power
  uint8_t ips;            // 18: Idle Power Scale 7:6
  uint8_t reserved19;     // 19
  uint16_t actp;          // 20: Active Power
  uint8_t apw_aps;        // 22: Active Power Workload 2:0, Active Power Scale 7:6
  uint8_t reserved23[9];  // 23
};
NVMF_SPEC_LAYOUT(PowerStateDescriptor, 32);
NVMF_SPEC_OFFSET(PowerStateDescriptor, enlat, 4);
NVMF_SPEC_OFFSET(PowerStateDescriptor, idlp, 16);
NVMF_SPEC_OFFSET(PowerStateDescriptor, actp, 20);

// "Identify Controller Data Structure" (4096 bytes).
struct IdentifyController {
  // Controller Capabilities and Features
  uint16_t vid;              // 0: PCI Vendor ID
  uint16_t ssvid;            // 2: PCI Subsystem Vendor ID
  char sn[20];               // 4: Serial Number, ASCII, space padded
  char mn[40];               // 24: Model Number, ASCII, space padded
  char fr[8];                // 64: Firmware Revision, ASCII, space padded
  uint8_t rab;               // 72: Recommended Arbitration Burst
  uint8_t ieee[3];           // 73: IEEE OUI
  uint8_t cmic;              // 76: Multi-path I/O and Namespace Sharing Capabilities
  uint8_t mdts;              // 77: Maximum Data Transfer Size, 2^n min pages; 0 = no limit
  uint16_t cntlid;           // 78: Controller ID
  uint32_t ver;              // 80: Version (VS format)
  uint32_t rtd3r;            // 84: RTD3 Resume Latency (us)
  uint32_t rtd3e;            // 88: RTD3 Entry Latency (us)
  uint32_t oaes;             // 92: Optional Asynchronous Events Supported
  uint32_t ctratt;           // 96: Controller Attributes
  uint16_t rrls;             // 100: Read Recovery Levels Supported
  uint8_t reserved102[9];    // 102
  uint8_t cntrltype;         // 111: Controller Type
  uint8_t fguid[16];         // 112: FRU GUID
  uint16_t crdt1;            // 128: Command Retry Delay Time 1 (100 ms units)
  uint16_t crdt2;            // 130
  uint16_t crdt3;            // 132
  uint8_t reserved134[106];  // 134
  uint8_t reserved_mi[16];   // 240: NVMe Management Interface
  // Admin Command Set Attributes & Optional Controller Capabilities
  uint16_t oacs;             // 256: Optional Admin Command Support
  uint8_t acl;               // 258: Abort Command Limit, 0's based
  uint8_t aerl;              // 259: Asynchronous Event Request Limit, 0's based
  uint8_t frmw;              // 260: Firmware Updates
  uint8_t lpa;               // 261: Log Page Attributes
  uint8_t elpe;              // 262: Error Log Page Entries, 0's based
  uint8_t npss;              // 263: Number of Power States Support, 0's based
  uint8_t avscc;             // 264: Admin Vendor Specific Command Configuration
  uint8_t apsta;             // 265: Autonomous Power State Transition Attributes
  uint16_t wctemp;           // 266: Warning Composite Temperature Threshold (K)
  uint16_t cctemp;           // 268: Critical Composite Temperature Threshold (K)
  uint16_t mtfa;             // 270: Maximum Time for Firmware Activation
  uint32_t hmpre;            // 272: Host Memory Buffer Preferred Size
  uint32_t hmmin;            // 276: Host Memory Buffer Minimum Size
  Uint128 tnvmcap;           // 280: Total NVM Capacity (bytes)
  Uint128 unvmcap;           // 296: Unallocated NVM Capacity (bytes)
  uint32_t rpmbs;            // 312: Replay Protected Memory Block Support
  uint16_t edstt;            // 316: Extended Device Self-test Time
  uint8_t dsto;              // 318: Device Self-test Options
  uint8_t fwug;              // 319: Firmware Update Granularity
  uint16_t kas;              // 320: Keep Alive Support (100 ms units; 0 = not supported)
  uint16_t hctma;            // 322: Host Controlled Thermal Management Attributes
  uint16_t mntmt;            // 324: Minimum Thermal Management Temperature
  uint16_t mxtmt;            // 326: Maximum Thermal Management Temperature
  uint32_t sanicap;          // 328: Sanitize Capabilities
  uint32_t hmminds;          // 332: Host Memory Buffer Minimum Descriptor Entry Size
  uint16_t hmmaxd;           // 336: Host Memory Maximum Descriptors Entries
  uint16_t nsetidmax;        // 338: NVM Set Identifier Maximum
  uint16_t endgidmax;        // 340: Endurance Group Identifier Maximum
  uint8_t anatt;             // 342: ANA Transition Time
  uint8_t anacap;            // 343: ANA Capabilities
  uint32_t anagrpmax;        // 344: ANA Group Identifier Maximum
  uint32_t nanagrpid;        // 348: Number of ANA Group Identifiers
  uint32_t pels;             // 352: Persistent Event Log Size
  uint16_t domainid;         // 356: Domain Identifier
  uint8_t reserved358[10];   // 358
  Uint128 megcap;            // 368: Max Endurance Group Capacity
  uint8_t reserved384[128];  // 384
  // NVM Command Set Attributes
  uint8_t sqes;               // 512: SQ Entry Size: required (min) 3:0, max 7:4, log2
  uint8_t cqes;               // 513: CQ Entry Size: required (min) 3:0, max 7:4, log2
  uint16_t maxcmd;            // 514: Maximum Outstanding Commands (Fabrics)
  uint32_t nn;                // 516: Number of Namespaces (highest valid NSID)
  uint16_t oncs;              // 520: Optional NVM Command Support
  uint16_t fuses;             // 522: Fused Operation Support
  uint8_t fna;                // 524: Format NVM Attributes
  uint8_t vwc;                // 525: Volatile Write Cache
  uint16_t awun;              // 526: Atomic Write Unit Normal, 0's based
  uint16_t awupf;             // 528: Atomic Write Unit Power Fail, 0's based
  uint8_t nvscc;              // 530: NVM Vendor Specific Command Configuration (ICSVSCC)
  uint8_t nwpc;               // 531: Namespace Write Protection Capabilities
  uint16_t acwu;              // 532: Atomic Compare & Write Unit, 0's based
  uint16_t ocfs;              // 534: Optional Copy Formats Supported
  uint32_t sgls;              // 536: SGL Support
  uint32_t mnan;              // 540: Maximum Number of Allowed Namespaces
  Uint128 maxdna;             // 544: Maximum Domain Namespace Attachments
  uint32_t maxcna;            // 560: Maximum I/O Controller Namespace Attachments
  uint8_t reserved564[204];   // 564
  char subnqn[256];           // 768: NVM Subsystem NQN, NUL-terminated
  uint8_t reserved1024[768];  // 1024
  // NVMe over Fabrics Attributes
  uint32_t ioccsz;            // 1792: I/O Queue Command Capsule Supported Size, 16 B units
  uint32_t iorcsz;            // 1796: I/O Queue Response Capsule Supported Size, 16 B units
  uint16_t icdoff;            // 1800: In Capsule Data Offset, 16 B units after the SQE
  uint8_t fcatt;              // 1802: Fabrics Controller Attributes: bit 0 static model
  uint8_t msdbd;              // 1803: Maximum SGL Data Block Descriptors (0 = no limit)
  uint16_t ofcs;              // 1804: Optional Fabric Commands Support: bit 0 Disconnect
  uint8_t reserved1806[242];  // 1806
  // Power State Descriptors
  PowerStateDescriptor psd[32];  // 2048
  // Vendor Specific
  uint8_t vs[1024];  // 3072
};
NVMF_SPEC_LAYOUT(IdentifyController, 4096);
NVMF_SPEC_OFFSET(IdentifyController, vid, 0);
NVMF_SPEC_OFFSET(IdentifyController, ssvid, 2);
NVMF_SPEC_OFFSET(IdentifyController, sn, 4);
NVMF_SPEC_OFFSET(IdentifyController, mn, 24);
NVMF_SPEC_OFFSET(IdentifyController, fr, 64);
NVMF_SPEC_OFFSET(IdentifyController, rab, 72);
NVMF_SPEC_OFFSET(IdentifyController, ieee, 73);
NVMF_SPEC_OFFSET(IdentifyController, cmic, 76);
NVMF_SPEC_OFFSET(IdentifyController, mdts, 77);
NVMF_SPEC_OFFSET(IdentifyController, cntlid, 78);
NVMF_SPEC_OFFSET(IdentifyController, ver, 80);
NVMF_SPEC_OFFSET(IdentifyController, oaes, 92);
NVMF_SPEC_OFFSET(IdentifyController, ctratt, 96);
NVMF_SPEC_OFFSET(IdentifyController, cntrltype, 111);
NVMF_SPEC_OFFSET(IdentifyController, fguid, 112);
NVMF_SPEC_OFFSET(IdentifyController, crdt1, 128);
NVMF_SPEC_OFFSET(IdentifyController, oacs, 256);
NVMF_SPEC_OFFSET(IdentifyController, acl, 258);
NVMF_SPEC_OFFSET(IdentifyController, aerl, 259);
NVMF_SPEC_OFFSET(IdentifyController, frmw, 260);
NVMF_SPEC_OFFSET(IdentifyController, lpa, 261);
NVMF_SPEC_OFFSET(IdentifyController, elpe, 262);
NVMF_SPEC_OFFSET(IdentifyController, npss, 263);
NVMF_SPEC_OFFSET(IdentifyController, wctemp, 266);
NVMF_SPEC_OFFSET(IdentifyController, tnvmcap, 280);
NVMF_SPEC_OFFSET(IdentifyController, kas, 320);
NVMF_SPEC_OFFSET(IdentifyController, anacap, 343);
NVMF_SPEC_OFFSET(IdentifyController, pels, 352);
NVMF_SPEC_OFFSET(IdentifyController, megcap, 368);
NVMF_SPEC_OFFSET(IdentifyController, sqes, 512);
NVMF_SPEC_OFFSET(IdentifyController, cqes, 513);
NVMF_SPEC_OFFSET(IdentifyController, maxcmd, 514);
NVMF_SPEC_OFFSET(IdentifyController, nn, 516);
NVMF_SPEC_OFFSET(IdentifyController, oncs, 520);
NVMF_SPEC_OFFSET(IdentifyController, fuses, 522);
NVMF_SPEC_OFFSET(IdentifyController, fna, 524);
NVMF_SPEC_OFFSET(IdentifyController, vwc, 525);
NVMF_SPEC_OFFSET(IdentifyController, awun, 526);
NVMF_SPEC_OFFSET(IdentifyController, awupf, 528);
NVMF_SPEC_OFFSET(IdentifyController, nvscc, 530);
NVMF_SPEC_OFFSET(IdentifyController, acwu, 532);
NVMF_SPEC_OFFSET(IdentifyController, sgls, 536);
NVMF_SPEC_OFFSET(IdentifyController, mnan, 540);
NVMF_SPEC_OFFSET(IdentifyController, maxcna, 560);
NVMF_SPEC_OFFSET(IdentifyController, subnqn, 768);
NVMF_SPEC_OFFSET(IdentifyController, ioccsz, 1792);
NVMF_SPEC_OFFSET(IdentifyController, iorcsz, 1796);
NVMF_SPEC_OFFSET(IdentifyController, icdoff, 1800);
NVMF_SPEC_OFFSET(IdentifyController, fcatt, 1802);
NVMF_SPEC_OFFSET(IdentifyController, msdbd, 1803);
NVMF_SPEC_OFFSET(IdentifyController, ofcs, 1804);
NVMF_SPEC_OFFSET(IdentifyController, psd, 2048);
NVMF_SPEC_OFFSET(IdentifyController, vs, 3072);

// Identify Controller field values.
namespace controller_type {  // CNTRLTYPE
inline constexpr uint8_t io = 1;
inline constexpr uint8_t discovery = 2;
inline constexpr uint8_t administrative = 3;
}  // namespace controller_type

namespace cmic_bit {
inline constexpr uint8_t multiple_ports = 1u << 0;
inline constexpr uint8_t multiple_controllers = 1u << 1;
inline constexpr uint8_t sr_iov = 1u << 2;
inline constexpr uint8_t ana_reporting = 1u << 3;
}  // namespace cmic_bit

namespace oacs_bit {
inline constexpr uint16_t security = 1u << 0;
inline constexpr uint16_t format_nvm = 1u << 1;
inline constexpr uint16_t firmware = 1u << 2;
inline constexpr uint16_t namespace_management = 1u << 3;
inline constexpr uint16_t device_self_test = 1u << 4;
inline constexpr uint16_t directives = 1u << 5;
inline constexpr uint16_t nvme_mi = 1u << 6;
inline constexpr uint16_t virtualization = 1u << 7;
inline constexpr uint16_t doorbell_buffer_config = 1u << 8;
inline constexpr uint16_t get_lba_status = 1u << 9;
}  // namespace oacs_bit

namespace lpa_bit {
inline constexpr uint8_t smart_per_namespace = 1u << 0;
inline constexpr uint8_t commands_effects = 1u << 1;
inline constexpr uint8_t extended_data = 1u << 2;  // NUMDU and LPOL/LPOU honoured
inline constexpr uint8_t telemetry = 1u << 3;
inline constexpr uint8_t persistent_event = 1u << 4;
}  // namespace lpa_bit

namespace oncs_bit {
inline constexpr uint16_t compare = 1u << 0;
inline constexpr uint16_t write_uncorrectable = 1u << 1;
inline constexpr uint16_t dataset_management = 1u << 2;
inline constexpr uint16_t write_zeroes = 1u << 3;
inline constexpr uint16_t save_select_features = 1u << 4;
inline constexpr uint16_t reservations = 1u << 5;
inline constexpr uint16_t timestamp = 1u << 6;
inline constexpr uint16_t verify = 1u << 7;
inline constexpr uint16_t copy = 1u << 8;
}  // namespace oncs_bit

namespace vwc_bit {
inline constexpr uint8_t present = 1u << 0;
// Bits 2:1 = 11b: Flush with NSID FFFFFFFFh flushes all namespaces.
inline constexpr uint8_t flush_broadcast_supported = 0x3u << 1;
}  // namespace vwc_bit

// SGL Support (SGLS).
namespace sgls_bit {
inline constexpr uint32_t supported_no_alignment = 0x1;     // bits 1:0 = 01b
inline constexpr uint32_t supported_dword_alignment = 0x2;  // bits 1:0 = 10b
inline constexpr uint32_t keyed_data_block = 1u << 2;
inline constexpr uint32_t bit_bucket = 1u << 16;
inline constexpr uint32_t byte_aligned_metadata = 1u << 17;
inline constexpr uint32_t length_larger_than_data = 1u << 18;
inline constexpr uint32_t mptr_sgl = 1u << 19;
inline constexpr uint32_t address_as_offset = 1u << 20;  // in-capsule data (Offset subtype)
inline constexpr uint32_t transport_data_block = 1u << 21;
}  // namespace sgls_bit

namespace fcatt_bit {
inline constexpr uint8_t static_controller_model = 1u << 0;  // 0 = dynamic model
}
namespace ofcs_bit {
inline constexpr uint16_t disconnect = 1u << 0;
}

// SQES / CQES: required (minimum) entry size in bits 3:0, maximum in 7:4, both log2.
constexpr uint8_t make_queue_entry_sizes(uint8_t required_log2, uint8_t max_log2) noexcept {
  return static_cast<uint8_t>((max_log2 << 4) | (required_log2 & 0x0F));
}
constexpr uint8_t queue_entry_size_required(uint8_t sizes) noexcept {
  return static_cast<uint8_t>(sizes & 0x0F);
}
constexpr uint8_t queue_entry_size_max(uint8_t sizes) noexcept {
  return static_cast<uint8_t>(sizes >> 4);
}

// "LBA Format Data Structure, NVM Command Set" (4 bytes).
struct LbaFormat {
  uint16_t ms;    // 0: Metadata Size (bytes per LBA)
  uint8_t lbads;  // 2: LBA Data Size, log2 (9 = 512 B, 12 = 4 KiB); 0 = format not available
  uint8_t rp;     // 3: Relative Performance 1:0

  constexpr uint8_t relative_performance() const noexcept { return static_cast<uint8_t>(rp & 3); }
};
NVMF_SPEC_LAYOUT(LbaFormat, 4);
NVMF_SPEC_OFFSET(LbaFormat, lbads, 2);
NVMF_SPEC_OFFSET(LbaFormat, rp, 3);

// "Identify Namespace Data Structure, NVM Command Set" (4096 bytes).
struct IdentifyNamespace {
  uint64_t nsze;           // 0: Namespace Size (LBAs)
  uint64_t ncap;           // 8: Namespace Capacity (LBAs)
  uint64_t nuse;           // 16: Namespace Utilization (LBAs)
  uint8_t nsfeat;          // 24: Namespace Features
  uint8_t nlbaf;           // 25: Number of LBA Formats, 0's based
  uint8_t flbas;           // 26: Formatted LBA Size: index 3:0 (+ 6:5), extended LBA bit 4
  uint8_t mc;              // 27: Metadata Capabilities
  uint8_t dpc;             // 28: End-to-end Data Protection Capabilities
  uint8_t dps;             // 29: End-to-end Data Protection Type Settings
  uint8_t nmic;            // 30: Namespace Multi-path I/O and Sharing: bit 0 shared
  uint8_t rescap;          // 31: Reservation Capabilities
  uint8_t fpi;             // 32: Format Progress Indicator
  uint8_t dlfeat;          // 33: Deallocate Logical Block Features
  uint16_t nawun;          // 34: Namespace Atomic Write Unit Normal
  uint16_t nawupf;         // 36: Namespace Atomic Write Unit Power Fail
  uint16_t nacwu;          // 38: Namespace Atomic Compare & Write Unit
  uint16_t nabsn;          // 40: Namespace Atomic Boundary Size Normal
  uint16_t nabo;           // 42: Namespace Atomic Boundary Offset
  uint16_t nabspf;         // 44: Namespace Atomic Boundary Size Power Fail
  uint16_t noiob;          // 46: Namespace Optimal I/O Boundary
  Uint128 nvmcap;          // 48: NVM Capacity (bytes)
  uint16_t npwg;           // 64: Namespace Preferred Write Granularity
  uint16_t npwa;           // 66: Namespace Preferred Write Alignment
  uint16_t npdg;           // 68: Namespace Preferred Deallocate Granularity
  uint16_t npda;           // 70: Namespace Preferred Deallocate Alignment
  uint16_t nows;           // 72: Namespace Optimal Write Size
  uint16_t mssrl;          // 74: Maximum Single Source Range Length
  uint32_t mcl;            // 76: Maximum Copy Length
  uint8_t msrc;            // 80: Maximum Source Range Count
  uint8_t nulbaf;          // 81: Number of Unique Capability LBA Formats (NVMe 2.0)
  uint8_t reserved82[10];  // 82
  uint32_t anagrpid;       // 92: ANA Group Identifier
  uint8_t reserved96[3];   // 96
  uint8_t nsattr;          // 99: Namespace Attributes: bit 0 write protected
  uint16_t nvmsetid;       // 100: NVM Set Identifier
  uint16_t endgid;         // 102: Endurance Group Identifier
  uint8_t nguid[16];       // 104: Namespace Globally Unique Identifier
  uint8_t eui64[8];        // 120: IEEE Extended Unique Identifier
  LbaFormat lbaf[64];      // 128: LBA Format 0..63 (only 0..15 before NVMe 2.0)
  uint8_t vs[3712];        // 384: Vendor Specific
};
NVMF_SPEC_LAYOUT(IdentifyNamespace, 4096);
NVMF_SPEC_OFFSET(IdentifyNamespace, nsze, 0);
NVMF_SPEC_OFFSET(IdentifyNamespace, ncap, 8);
NVMF_SPEC_OFFSET(IdentifyNamespace, nuse, 16);
NVMF_SPEC_OFFSET(IdentifyNamespace, nsfeat, 24);
NVMF_SPEC_OFFSET(IdentifyNamespace, nlbaf, 25);
NVMF_SPEC_OFFSET(IdentifyNamespace, flbas, 26);
NVMF_SPEC_OFFSET(IdentifyNamespace, dlfeat, 33);
NVMF_SPEC_OFFSET(IdentifyNamespace, nawun, 34);
NVMF_SPEC_OFFSET(IdentifyNamespace, noiob, 46);
NVMF_SPEC_OFFSET(IdentifyNamespace, nvmcap, 48);
NVMF_SPEC_OFFSET(IdentifyNamespace, npwg, 64);
NVMF_SPEC_OFFSET(IdentifyNamespace, mcl, 76);
NVMF_SPEC_OFFSET(IdentifyNamespace, msrc, 80);
NVMF_SPEC_OFFSET(IdentifyNamespace, nulbaf, 81);
NVMF_SPEC_OFFSET(IdentifyNamespace, anagrpid, 92);
NVMF_SPEC_OFFSET(IdentifyNamespace, nsattr, 99);
NVMF_SPEC_OFFSET(IdentifyNamespace, nvmsetid, 100);
NVMF_SPEC_OFFSET(IdentifyNamespace, endgid, 102);
NVMF_SPEC_OFFSET(IdentifyNamespace, nguid, 104);
NVMF_SPEC_OFFSET(IdentifyNamespace, eui64, 120);
NVMF_SPEC_OFFSET(IdentifyNamespace, lbaf, 128);
NVMF_SPEC_OFFSET(IdentifyNamespace, vs, 384);

namespace nsfeat_bit {
inline constexpr uint8_t thin_provisioning = 1u << 0;
inline constexpr uint8_t atomic_fields = 1u << 1;  // NSABP: NAWUN etc. are valid
inline constexpr uint8_t deallocated_error = 1u << 2;
inline constexpr uint8_t uid_reuse = 1u << 3;
inline constexpr uint8_t optimal_performance = 1u << 4;  // NPWG..NOWS are valid
}  // namespace nsfeat_bit

// FLBAS: format index bits 3:0 plus, since NVMe 2.0, bits 6:5 as index bits 5:4.
constexpr uint8_t flbas_format_index(uint8_t flbas) noexcept {
  return static_cast<uint8_t>((flbas & 0x0F) | ((flbas >> 1) & 0x30));
}
constexpr bool flbas_extended_metadata(uint8_t flbas) noexcept { return get_bit(flbas, 4); }
constexpr uint8_t make_flbas(uint8_t format_index, bool extended_metadata) noexcept {
  return static_cast<uint8_t>((format_index & 0x0F) | ((format_index & 0x30) << 1) |
                              (extended_metadata ? 0x10 : 0));
}
// The logical block size of the formatted LBA format, in bytes.
constexpr uint64_t namespace_block_size(const IdentifyNamespace& ns) noexcept {
  return uint64_t{1} << ns.lbaf[flbas_format_index(ns.flbas)].lbads;
}

// --- Namespace Identification Descriptor list (CNS 03h) ---

// Namespace Identifier Type (NIDT) and the NIDL each one requires.
namespace nidt {
inline constexpr uint8_t eui64 = 0x1;  // 8 bytes
inline constexpr uint8_t nguid = 0x2;  // 16 bytes
inline constexpr uint8_t uuid = 0x3;   // 16 bytes
inline constexpr uint8_t csi = 0x4;    // 1 byte
}  // namespace nidt

// Required NIDL of a known NIDT, 0 for an unknown type.
constexpr uint8_t nid_length(uint8_t type) noexcept {
  switch (type) {
    case nidt::eui64:
      return 8;
    case nidt::nguid:
      return 16;
    case nidt::uuid:
      return 16;
    case nidt::csi:
      return 1;
    default:
      return 0;
  }
}

// "Namespace Identification Descriptor" header (4 bytes), followed by NIDL bytes of NID.
struct NsIdDescriptorHeader {
  uint8_t nidt;         // 0: Namespace Identifier Type; 0 ends the list
  uint8_t nidl;         // 1: Namespace Identifier Length
  uint8_t reserved[2];  // 2
};
NVMF_SPEC_LAYOUT(NsIdDescriptorHeader, 4);
NVMF_SPEC_OFFSET(NsIdDescriptorHeader, nidl, 1);

// The identifiers of one namespace, as carried in the descriptor list.
struct NamespaceIdentifiers {
  bool has_eui64 = false;
  bool has_nguid = false;
  bool has_uuid = false;
  bool has_csi = false;
  uint8_t eui64[8] = {};
  uint8_t nguid[16] = {};
  uint8_t uuid[16] = {};
  uint8_t csi = 0;
};

namespace detail {
// Appends one descriptor at `*offset` if it fits in `size`; false (nothing written) if not.
inline bool put_ns_id_descriptor(uint8_t* out, size_t size, size_t* offset, uint8_t type,
                                 const uint8_t* id, uint8_t length) noexcept {
  if (size - *offset < sizeof(NsIdDescriptorHeader) + length) return false;
  uint8_t* at = out + *offset;
  at[0] = type;
  at[1] = length;
  at[2] = 0;
  at[3] = 0;
  std::memcpy(at + sizeof(NsIdDescriptorHeader), id, length);
  *offset += sizeof(NsIdDescriptorHeader) + length;
  return true;
}
}  // namespace detail

// Writes the descriptor list (EUI64, NGUID, UUID, CSI order, present ones only) into `out`
// and zero-fills the rest, which terminates the list. `size` is normally 4096 (the Identify
// transfer); the worst case needs 4 * 4 + 8 + 16 + 16 + 1 = 57 bytes. Stops at the first
// descriptor that does not fit, so a short buffer holds a valid, shorter list. Returns the
// bytes used.
inline size_t encode_ns_id_descriptor_list(const NamespaceIdentifiers& ids, uint8_t* out,
                                           size_t size) noexcept {
  std::memset(out, 0, size);
  size_t offset = 0;
  if (ids.has_eui64 && !detail::put_ns_id_descriptor(out, size, &offset, nidt::eui64, ids.eui64,
                                                     sizeof(ids.eui64))) {
    return offset;
  }
  if (ids.has_nguid && !detail::put_ns_id_descriptor(out, size, &offset, nidt::nguid, ids.nguid,
                                                     sizeof(ids.nguid))) {
    return offset;
  }
  if (ids.has_uuid &&
      !detail::put_ns_id_descriptor(out, size, &offset, nidt::uuid, ids.uuid, sizeof(ids.uuid))) {
    return offset;
  }
  if (ids.has_csi) detail::put_ns_id_descriptor(out, size, &offset, nidt::csi, &ids.csi, 1);
  return offset;
}

// One descriptor found by the walker; `id` points into the caller's buffer.
struct NsIdDescriptorView {
  uint8_t type = 0;
  uint8_t length = 0;
  const uint8_t* id = nullptr;
};

enum class NsIdWalk : uint8_t {
  descriptor,  // `view` holds the next descriptor
  end,         // a zero NIDT or the end of the buffer: the list is complete
  malformed,   // a descriptor runs past the buffer or has the wrong NIDL for its type
};

// Steps through a descriptor list held in `data[0..size)` starting at `*offset`, and advances
// `*offset` past the descriptor it returns. Never reads outside the buffer. Unknown NIDTs are
// returned as-is (callers skip them); known NIDTs must carry their required NIDL.
inline NsIdWalk ns_id_descriptor_next(const uint8_t* data, size_t size, size_t* offset,
                                      NsIdDescriptorView* view) noexcept {
  if (*offset >= size) return NsIdWalk::end;
  const size_t remaining = size - *offset;
  if (data[*offset] == 0) return NsIdWalk::end;
  if (remaining < sizeof(NsIdDescriptorHeader)) return NsIdWalk::malformed;
  const uint8_t type = data[*offset];
  const uint8_t length = data[*offset + 1];
  if (length == 0 || remaining - sizeof(NsIdDescriptorHeader) < length) {
    return NsIdWalk::malformed;
  }
  const uint8_t required = nid_length(type);
  if (required != 0 && length != required) return NsIdWalk::malformed;
  view->type = type;
  view->length = length;
  view->id = data + *offset + sizeof(NsIdDescriptorHeader);
  *offset += sizeof(NsIdDescriptorHeader) + length;
  return NsIdWalk::descriptor;
}

// Decodes a whole list into `ids`. False when the list is malformed (ids then holds what was
// decoded before the fault). Unknown types are skipped; a repeated type keeps the last one.
inline bool decode_ns_id_descriptor_list(const uint8_t* data, size_t size,
                                         NamespaceIdentifiers* ids) noexcept {
  *ids = NamespaceIdentifiers{};
  size_t offset = 0;
  NsIdDescriptorView view;
  for (;;) {
    switch (ns_id_descriptor_next(data, size, &offset, &view)) {
      case NsIdWalk::end:
        return true;
      case NsIdWalk::malformed:
        return false;
      case NsIdWalk::descriptor:
        break;
    }
    switch (view.type) {
      case nidt::eui64:
        ids->has_eui64 = true;
        std::memcpy(ids->eui64, view.id, sizeof(ids->eui64));
        break;
      case nidt::nguid:
        ids->has_nguid = true;
        std::memcpy(ids->nguid, view.id, sizeof(ids->nguid));
        break;
      case nidt::uuid:
        ids->has_uuid = true;
        std::memcpy(ids->uuid, view.id, sizeof(ids->uuid));
        break;
      case nidt::csi:
        ids->has_csi = true;
        ids->csi = view.id[0];
        break;
      default:
        break;
    }
  }
}

// "Active Namespace ID list" (CNS 02h): up to 1024 NSIDs in increasing order, greater than the
// command's NSID, zero-filled after the last one.
struct ActiveNamespaceList {
  uint32_t nsid[1024];
};
NVMF_SPEC_LAYOUT(ActiveNamespaceList, 4096);

// --- Get Log Page ---
// CDW10: LID 7:0, LSP 14:8, RAE 15, NUMDL 31:16. CDW11: NUMDU 15:0, LSI 31:16.
// CDW12/13: LPOL/LPOU (byte offset, dword aligned). CDW14: UUID index 6:0, OT 23, CSI 31:24.
// NUMD (NUMDU:NUMDL) is a 0's based count of dwords.

// Log Page Identifiers.
namespace log_page {
inline constexpr uint8_t supported_log_pages = 0x00;
inline constexpr uint8_t error_information = 0x01;
inline constexpr uint8_t smart_health = 0x02;
inline constexpr uint8_t firmware_slot = 0x03;
inline constexpr uint8_t changed_namespace_list = 0x04;
inline constexpr uint8_t commands_supported_effects = 0x05;
inline constexpr uint8_t device_self_test = 0x06;
inline constexpr uint8_t telemetry_host = 0x07;
inline constexpr uint8_t telemetry_controller = 0x08;
inline constexpr uint8_t endurance_group_information = 0x09;
inline constexpr uint8_t asymmetric_namespace_access = 0x0C;
inline constexpr uint8_t persistent_event = 0x0D;
inline constexpr uint8_t discovery = 0x70;
inline constexpr uint8_t reservation_notification = 0x80;
inline constexpr uint8_t sanitize_status = 0x81;
}  // namespace log_page

constexpr uint8_t get_log_page_lid(const Sqe& sqe) noexcept {
  return static_cast<uint8_t>(get_bits(sqe.cdw10, 0, 8));
}
constexpr uint8_t get_log_page_lsp(const Sqe& sqe) noexcept {
  return static_cast<uint8_t>(get_bits(sqe.cdw10, 8, 7));
}
constexpr bool get_log_page_rae(const Sqe& sqe) noexcept { return get_bit(sqe.cdw10, 15); }
constexpr uint16_t get_log_page_lsi(const Sqe& sqe) noexcept {
  return static_cast<uint16_t>(get_bits(sqe.cdw11, 16, 16));
}
// NUMD, 0's based dwords.
constexpr uint32_t get_log_page_numd(const Sqe& sqe) noexcept {
  return (static_cast<uint32_t>(get_bits(sqe.cdw11, 0, 16)) << 16) |
         static_cast<uint32_t>(get_bits(sqe.cdw10, 16, 16));
}
// Bytes requested: (NUMD + 1) * 4, 4 B .. 16 GiB.
constexpr uint64_t get_log_page_length_bytes(const Sqe& sqe) noexcept {
  return (uint64_t{get_log_page_numd(sqe)} + 1) * 4;
}
// Byte offset into the log page (LPOU:LPOL).
constexpr uint64_t get_log_page_offset_bytes(const Sqe& sqe) noexcept {
  return (uint64_t{sqe.cdw13} << 32) | sqe.cdw12;
}

// A Get Log Page for `length_bytes` (a multiple of 4, at least 4) at `offset_bytes` (a multiple
// of 4). Everything else zero except the given LSP and RAE.
constexpr Sqe make_get_log_page(uint16_t cid, uint8_t lid, uint64_t length_bytes,
                                uint64_t offset_bytes = 0, uint32_t nsid = nsid_all,
                                uint8_t lsp = 0, bool rae = false) noexcept {
  assert(length_bytes >= 4 && length_bytes % 4 == 0 && length_bytes / 4 <= (uint64_t{1} << 32));
  assert(offset_bytes % 4 == 0);
  const uint64_t numd = length_bytes / 4 - 1;
  Sqe sqe = make_sqe(admin_opcode::get_log_page, cid, nsid);
  sqe.cdw10 = set_bits(sqe.cdw10, 0, 8, lid);
  sqe.cdw10 = set_bits(sqe.cdw10, 8, 7, lsp);
  sqe.cdw10 = set_bit(sqe.cdw10, 15, rae);
  sqe.cdw10 = set_bits(sqe.cdw10, 16, 16, numd & 0xFFFF);
  sqe.cdw11 = set_bits(sqe.cdw11, 0, 16, numd >> 16);
  sqe.cdw12 = static_cast<uint32_t>(offset_bytes);
  sqe.cdw13 = static_cast<uint32_t>(offset_bytes >> 32);
  return sqe;
}

// "Error Information Log Entry" (64 bytes).
struct ErrorInformationEntry {
  uint64_t error_count;               // 0: unique, incrementing; 0 = entry invalid
  uint16_t sqid;                      // 8
  uint16_t cid;                       // 10
  uint16_t status;                    // 12: Status Field 15:1, phase tag bit 0 (as in the CQE)
  uint16_t parameter_error_location;  // 14: byte 7:0, bit 10:8 of the bad field in the SQE
  uint64_t lba;                       // 16
  uint32_t nsid;                      // 24
  uint8_t vendor_specific;            // 28: vendor specific information available (log page)
  uint8_t trtype;                     // 29: Transport Type (for transport_specific)
  uint8_t reserved30[2];              // 30
  uint64_t command_specific;          // 32
  uint16_t transport_specific;        // 40
  uint8_t reserved42[22];             // 42
};
NVMF_SPEC_LAYOUT(ErrorInformationEntry, 64);
NVMF_SPEC_OFFSET(ErrorInformationEntry, sqid, 8);
NVMF_SPEC_OFFSET(ErrorInformationEntry, cid, 10);
NVMF_SPEC_OFFSET(ErrorInformationEntry, status, 12);
NVMF_SPEC_OFFSET(ErrorInformationEntry, parameter_error_location, 14);
NVMF_SPEC_OFFSET(ErrorInformationEntry, lba, 16);
NVMF_SPEC_OFFSET(ErrorInformationEntry, nsid, 24);
NVMF_SPEC_OFFSET(ErrorInformationEntry, trtype, 29);
NVMF_SPEC_OFFSET(ErrorInformationEntry, command_specific, 32);
NVMF_SPEC_OFFSET(ErrorInformationEntry, transport_specific, 40);

// "SMART / Health Information Log" (512 bytes). Composite Temperature is a u16 at byte 1, an
// offset a u16 cannot sit at, so it is a byte pair with accessors.
struct SmartHealthLog {
  uint8_t critical_warning;                  // 0
  uint8_t composite_temperature[2];          // 1: Kelvin, little-endian
  uint8_t available_spare;                   // 3: percent
  uint8_t available_spare_threshold;         // 4: percent
  uint8_t percentage_used;                   // 5
  uint8_t endurance_group_critical_warning;  // 6
  uint8_t reserved7[25];                     // 7
  Uint128 data_units_read;                   // 32: thousands of 512-byte units
  Uint128 data_units_written;                // 48
  Uint128 host_read_commands;                // 64
  Uint128 host_write_commands;               // 80
  Uint128 controller_busy_time;              // 96: minutes
  Uint128 power_cycles;                      // 112
  Uint128 power_on_hours;                    // 128
  Uint128 unsafe_shutdowns;                  // 144
  Uint128 media_errors;                      // 160
  Uint128 error_log_entries;                 // 176
  uint32_t warning_temperature_time;         // 192: minutes
  uint32_t critical_temperature_time;        // 196: minutes
  uint16_t temperature_sensor[8];            // 200: Kelvin
  uint32_t thermal_transition_count[2];      // 216
  uint32_t thermal_total_time[2];            // 224
  uint8_t reserved232[280];                  // 232

  constexpr uint16_t composite_temperature_kelvin() const noexcept {
    return load_le16(composite_temperature);
  }
  constexpr void set_composite_temperature_kelvin(uint16_t kelvin) noexcept {
    store_le16(composite_temperature, kelvin);
  }
};
NVMF_SPEC_LAYOUT(SmartHealthLog, 512);
NVMF_SPEC_OFFSET(SmartHealthLog, composite_temperature, 1);
NVMF_SPEC_OFFSET(SmartHealthLog, available_spare, 3);
NVMF_SPEC_OFFSET(SmartHealthLog, percentage_used, 5);
NVMF_SPEC_OFFSET(SmartHealthLog, data_units_read, 32);
NVMF_SPEC_OFFSET(SmartHealthLog, data_units_written, 48);
NVMF_SPEC_OFFSET(SmartHealthLog, host_read_commands, 64);
NVMF_SPEC_OFFSET(SmartHealthLog, controller_busy_time, 96);
NVMF_SPEC_OFFSET(SmartHealthLog, power_cycles, 112);
NVMF_SPEC_OFFSET(SmartHealthLog, power_on_hours, 128);
NVMF_SPEC_OFFSET(SmartHealthLog, unsafe_shutdowns, 144);
NVMF_SPEC_OFFSET(SmartHealthLog, media_errors, 160);
NVMF_SPEC_OFFSET(SmartHealthLog, error_log_entries, 176);
NVMF_SPEC_OFFSET(SmartHealthLog, warning_temperature_time, 192);
NVMF_SPEC_OFFSET(SmartHealthLog, temperature_sensor, 200);
NVMF_SPEC_OFFSET(SmartHealthLog, thermal_transition_count, 216);
NVMF_SPEC_OFFSET(SmartHealthLog, reserved232, 232);

namespace critical_warning_bit {
inline constexpr uint8_t spare_below_threshold = 1u << 0;
inline constexpr uint8_t temperature = 1u << 1;
inline constexpr uint8_t reliability_degraded = 1u << 2;
inline constexpr uint8_t read_only = 1u << 3;
inline constexpr uint8_t volatile_backup_failed = 1u << 4;
inline constexpr uint8_t pmr_read_only = 1u << 5;
}  // namespace critical_warning_bit

// "Changed Namespace List" log page (4096 bytes): up to 1024 NSIDs; if more changed, the
// first entry is FFFFFFFFh and the rest zero.
struct ChangedNamespaceList {
  uint32_t nsid[1024];
};
NVMF_SPEC_LAYOUT(ChangedNamespaceList, 4096);
inline constexpr uint32_t changed_namespace_list_overflow = 0xFFFFFFFF;

// --- Set Features / Get Features ---
// Set Features CDW10: FID 7:0, SV 31. Get Features CDW10: FID 7:0, SEL 10:8.

// Feature Identifiers.
namespace feature {
inline constexpr uint8_t arbitration = 0x01;
inline constexpr uint8_t power_management = 0x02;
inline constexpr uint8_t lba_range_type = 0x03;
inline constexpr uint8_t temperature_threshold = 0x04;
inline constexpr uint8_t error_recovery = 0x05;
inline constexpr uint8_t volatile_write_cache = 0x06;
inline constexpr uint8_t number_of_queues = 0x07;
inline constexpr uint8_t interrupt_coalescing = 0x08;
inline constexpr uint8_t interrupt_vector_configuration = 0x09;
inline constexpr uint8_t write_atomicity_normal = 0x0A;
inline constexpr uint8_t async_event_configuration = 0x0B;
inline constexpr uint8_t autonomous_power_state_transition = 0x0C;
inline constexpr uint8_t host_memory_buffer = 0x0D;
inline constexpr uint8_t timestamp = 0x0E;
inline constexpr uint8_t keep_alive_timer = 0x0F;
inline constexpr uint8_t host_controlled_thermal_management = 0x10;
inline constexpr uint8_t host_identifier = 0x81;
inline constexpr uint8_t reservation_notification_mask = 0x82;
inline constexpr uint8_t reservation_persistence = 0x83;
}  // namespace feature

// Get Features SEL (CDW10 10:8).
namespace feature_select {
inline constexpr uint8_t current = 0x0;
inline constexpr uint8_t default_value = 0x1;
inline constexpr uint8_t saved = 0x2;
inline constexpr uint8_t supported_capabilities = 0x3;
}  // namespace feature_select

constexpr uint8_t features_fid(const Sqe& sqe) noexcept {
  return static_cast<uint8_t>(get_bits(sqe.cdw10, 0, 8));
}
constexpr bool set_features_save(const Sqe& sqe) noexcept { return get_bit(sqe.cdw10, 31); }
constexpr uint8_t get_features_select(const Sqe& sqe) noexcept {
  return static_cast<uint8_t>(get_bits(sqe.cdw10, 8, 3));
}

constexpr Sqe make_set_features(uint16_t cid, uint8_t fid, uint32_t cdw11_value,
                                bool save = false) noexcept {
  Sqe sqe = make_sqe(admin_opcode::set_features, cid);
  sqe.cdw10 = set_bit(uint32_t{fid}, 31, save);
  sqe.cdw11 = cdw11_value;
  return sqe;
}
constexpr Sqe make_get_features(uint16_t cid, uint8_t fid,
                                uint8_t select = feature_select::current) noexcept {
  Sqe sqe = make_sqe(admin_opcode::get_features, cid);
  sqe.cdw10 = set_bits(uint32_t{fid}, 8, 3, select);
  return sqe;
}

// Number of Queues (07h): CDW11 on Set and DW0 of the completion carry NSQR/NSQA 15:0 and
// NCQR/NCQA 31:16, both 0's based and excluding the admin queue. FFFFh is invalid.
constexpr uint32_t encode_number_of_queues(uint32_t sq_count, uint32_t cq_count) noexcept {
  assert(sq_count >= 1 && sq_count <= 65535 && cq_count >= 1 && cq_count <= 65535);
  return (sq_count - 1) | ((cq_count - 1) << 16);
}
constexpr uint32_t number_of_queues_sq_count(uint32_t dword) noexcept {
  return static_cast<uint32_t>(get_bits(dword, 0, 16)) + 1;
}
constexpr uint32_t number_of_queues_cq_count(uint32_t dword) noexcept {
  return static_cast<uint32_t>(get_bits(dword, 16, 16)) + 1;
}

// Volatile Write Cache (06h): CDW11 bit 0 WCE.
constexpr bool volatile_write_cache_enabled(uint32_t dword) noexcept { return get_bit(dword, 0); }

// Keep Alive Timer (0Fh): CDW11 = KATO in milliseconds (controllers round up to KAS units).

// Asynchronous Event Configuration (0Bh) CDW11 bits.
namespace async_event_config_bit {
inline constexpr uint32_t smart_critical_warnings = 0xFF;  // 7:0, one per critical warning
inline constexpr uint32_t namespace_attribute = 1u << 8;
inline constexpr uint32_t firmware_activation = 1u << 9;
inline constexpr uint32_t telemetry_log = 1u << 10;
inline constexpr uint32_t ana_change = 1u << 11;
inline constexpr uint32_t predictable_latency = 1u << 12;
inline constexpr uint32_t lba_status_information = 1u << 13;
inline constexpr uint32_t endurance_group_event = 1u << 14;
inline constexpr uint32_t discovery_log_page_change = 1u << 31;
}  // namespace async_event_config_bit

// --- Asynchronous Event Request completion DW0 ---
// Type 2:0, Information 15:8, Log Page Identifier 23:16.

namespace async_event_type {
inline constexpr uint8_t error_status = 0x0;
inline constexpr uint8_t smart_health_status = 0x1;
inline constexpr uint8_t notice = 0x2;
inline constexpr uint8_t io_command_specific = 0x6;
inline constexpr uint8_t vendor_specific = 0x7;
}  // namespace async_event_type

// Asynchronous Event Information - Notice.
namespace async_event_notice {
inline constexpr uint8_t namespace_attribute_changed = 0x00;
inline constexpr uint8_t firmware_activation_starting = 0x01;
inline constexpr uint8_t telemetry_log_changed = 0x02;
inline constexpr uint8_t ana_change = 0x03;
inline constexpr uint8_t predictable_latency_change = 0x04;
inline constexpr uint8_t lba_status_information = 0x05;
inline constexpr uint8_t endurance_group_event = 0x06;
inline constexpr uint8_t discovery_log_page_change = 0xF0;
}  // namespace async_event_notice

constexpr uint32_t encode_async_event(uint8_t type, uint8_t info, uint8_t lid) noexcept {
  return (uint32_t{type} & 0x7) | (uint32_t{info} << 8) | (uint32_t{lid} << 16);
}
constexpr uint8_t async_event_type_of(uint32_t dw0) noexcept {
  return static_cast<uint8_t>(get_bits(dw0, 0, 3));
}
constexpr uint8_t async_event_info_of(uint32_t dw0) noexcept {
  return static_cast<uint8_t>(get_bits(dw0, 8, 8));
}
constexpr uint8_t async_event_log_page_of(uint32_t dw0) noexcept {
  return static_cast<uint8_t>(get_bits(dw0, 16, 8));
}

}  // namespace nvmf::spec
