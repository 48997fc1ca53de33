// NVMe over Fabrics commands (opcode 7Fh): the common Fabrics command layout, Connect (command,
// 1024-byte data, response), Property Get/Set, Disconnect, Authentication Send/Receive, and
// the controller properties a Fabrics host reads and writes instead of PCIe registers
// (CAP, VS, CC, CSTS, NSSR) with their field accessors. Header-only; any thread.
//
// Sources: Fabrics Command Set ("Fabrics Command", "Connect Command", "Connect Command Data",
// "Connect Response", "Property Get Command", "Property Get Response", "Property Set Command",
// "Disconnect Command", "Authentication Send Command", "Authentication Receive Command");
// Base spec "Controller Properties" ("Offset 0h: CAP", "Offset 8h: VS", "Offset 14h: CC",
// "Offset 1Ch: CSTS", "Offset 20h: NSSR").
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>

#include "spec/nvme.h"
#include "spec/sgl.h"
#include "spec/wire.h"

namespace nvmf::spec {

// Fabrics Command Type (FCTYPE), byte 4 of a Fabrics command.
namespace fctype {
inline constexpr uint8_t property_set = 0x00;
inline constexpr uint8_t connect = 0x01;
inline constexpr uint8_t property_get = 0x04;
inline constexpr uint8_t authentication_send = 0x05;
inline constexpr uint8_t authentication_receive = 0x06;
inline constexpr uint8_t disconnect = 0x08;
}  // namespace fctype

inline const char* fctype_name(uint8_t type) noexcept {
  switch (type) {
    case fctype::property_set:
      return "Property Set";
    case fctype::connect:
      return "Connect";
    case fctype::property_get:
      return "Property Get";
    case fctype::authentication_send:
      return "Authentication Send";
    case fctype::authentication_receive:
      return "Authentication Receive";
    case fctype::disconnect:
      return "Disconnect";
    default:
      return "Unknown Fabrics Command";
  }
}

// "Fabrics Command": the layout every 7Fh command shares (64 bytes).
struct FabricsCommand {
  uint8_t opcode;               // 00: 7Fh
  uint8_t flags;                // 01: PSDT etc. as in Sqe (hosts set PSDT = SGL)
  uint16_t cid;                 // 02
  uint8_t fctype;               // 04
  uint8_t reserved5[19];        // 05
  SglDescriptor sgl1;           // 24
  uint8_t fctype_specific[24];  // 40
};
NVMF_SPEC_LAYOUT(FabricsCommand, 64);
NVMF_SPEC_OFFSET(FabricsCommand, cid, 2);
NVMF_SPEC_OFFSET(FabricsCommand, fctype, 4);
NVMF_SPEC_OFFSET(FabricsCommand, sgl1, 24);
NVMF_SPEC_OFFSET(FabricsCommand, fctype_specific, 40);

// FCTYPE of an SQE already known to carry opcode 7Fh (it overlays NSID byte 0).
constexpr uint8_t sqe_fctype(const Sqe& sqe) noexcept { return static_cast<uint8_t>(sqe.nsid); }

// --- Connect ---

inline constexpr uint16_t connect_recfmt = 0;          // the only Connect record format
inline constexpr uint16_t cntlid_dynamic = 0xFFFF;     // admin Connect: any (dynamic model)
inline constexpr uint16_t cntlid_static_any = 0xFFFE;  // admin Connect: any (static model)
inline constexpr uint32_t connect_data_size = 1024;

// Connect Attributes (CATTR): priority class 1:0, Disable SQ Flow Control (DISSQFC) bit 2.
namespace connect_cattr {
inline constexpr uint8_t priority_class_mask = 0x3;
inline constexpr uint8_t disable_sq_flow_control = 1u << 2;
}  // namespace connect_cattr

// "Connect Command" (64 bytes).
struct ConnectCommand {
  uint8_t opcode;          // 00: 7Fh
  uint8_t flags;           // 01
  uint16_t cid;            // 02
  uint8_t fctype;          // 04: 01h
  uint8_t reserved5[19];   // 05
  SglDescriptor sgl1;      // 24: the 1024-byte Connect data
  uint16_t recfmt;         // 40: Record Format, 0
  uint16_t qid;            // 42: 0 = admin queue
  uint16_t sqsize;         // 44: SQ size, 0's based
  uint8_t cattr;           // 46: Connect Attributes
  uint8_t reserved47;      // 47
  uint32_t kato;           // 48: Keep Alive Timeout in ms (admin queue only; 0 = disabled)
  uint8_t reserved52[12];  // 52
};
NVMF_SPEC_LAYOUT(ConnectCommand, 64);
NVMF_SPEC_OFFSET(ConnectCommand, fctype, 4);
NVMF_SPEC_OFFSET(ConnectCommand, sgl1, 24);
NVMF_SPEC_OFFSET(ConnectCommand, recfmt, 40);
NVMF_SPEC_OFFSET(ConnectCommand, qid, 42);
NVMF_SPEC_OFFSET(ConnectCommand, sqsize, 44);
NVMF_SPEC_OFFSET(ConnectCommand, cattr, 46);
NVMF_SPEC_OFFSET(ConnectCommand, kato, 48);

// A Connect for queue `qid` with `sq_entries` entries (encoded 0's based). SGL1 is left zero.
constexpr ConnectCommand make_connect_command(uint16_t cid, uint16_t qid, uint32_t sq_entries,
                                              uint32_t kato_ms, uint8_t cattr = 0) noexcept {
  assert(sq_entries >= 1 && sq_entries <= 65536);
  ConnectCommand command{};
  command.opcode = fabrics_opcode;
  command.flags = static_cast<uint8_t>(psdt::sgl_mptr_contiguous << 6);
  command.cid = cid;
  command.fctype = fctype::connect;
  command.recfmt = connect_recfmt;
  command.qid = qid;
  command.sqsize = static_cast<uint16_t>(sq_entries - 1);
  command.cattr = cattr;
  command.kato = kato_ms;
  return command;
}

// "Connect Command Data" (1024 bytes), carried by SGL1.
struct ConnectData {
  uint8_t hostid[16];        // 0: Host Identifier (a UUID, binary)
  uint16_t cntlid;           // 16: FFFFh on admin Connect (dynamic), the CNTLID on I/O Connect
  uint8_t reserved18[238];   // 18
  char subnqn[256];          // 256: NUL-terminated
  char hostnqn[256];         // 512: NUL-terminated
  uint8_t reserved768[256];  // 768
};
NVMF_SPEC_LAYOUT(ConnectData, 1024);
NVMF_SPEC_OFFSET(ConnectData, hostid, 0);
NVMF_SPEC_OFFSET(ConnectData, cntlid, 16);
NVMF_SPEC_OFFSET(ConnectData, subnqn, 256);
NVMF_SPEC_OFFSET(ConnectData, hostnqn, 512);
NVMF_SPEC_OFFSET(ConnectData, reserved768, 768);

// "Connect Response" (16 bytes). On success CNTLID and AUTHREQ; on Connect Invalid Parameters
// DW0 instead holds IPO (bytes 0..1: byte offset of the bad field) and IATTR (byte 2 bit 0:
// 1 = the bad field is in the Connect data, 0 = in the SQE), as Linux (IPO_IATTR_CONNECT_DATA),
// SPDK (spdk_nvmf_fabric_connect_rsp.invalid) and FreeBSD lay it out.
struct ConnectResponse {
  uint16_t cntlid;      // 00: controller ID (success) / IPO (invalid parameters)
  uint16_t authreq;     // 02: authentication requirements (success) / IATTR in byte 2
  uint32_t reserved4;   // 04
  uint16_t sqhd;        // 08
  uint16_t reserved10;  // 10
  uint16_t cid;         // 12
  uint16_t status;      // 14
};
NVMF_SPEC_LAYOUT(ConnectResponse, 16);
NVMF_SPEC_OFFSET(ConnectResponse, cntlid, 0);
NVMF_SPEC_OFFSET(ConnectResponse, authreq, 2);
NVMF_SPEC_OFFSET(ConnectResponse, sqhd, 8);
NVMF_SPEC_OFFSET(ConnectResponse, cid, 12);
NVMF_SPEC_OFFSET(ConnectResponse, status, 14);

// CQE DW0 of a successful Connect.
constexpr uint32_t connect_success_dw0(uint16_t cntlid, uint16_t authreq = 0) noexcept {
  return uint32_t{cntlid} | (uint32_t{authreq} << 16);
}
constexpr uint16_t connect_response_cntlid(const Cqe& cqe) noexcept {
  return static_cast<uint16_t>(cqe.cdw0);
}

// CQE DW0 of Connect Invalid Parameters: which field was bad.
constexpr uint32_t connect_invalid_parameter_dw0(bool in_connect_data,
                                                 uint16_t byte_offset) noexcept {
  return uint32_t{byte_offset} | (in_connect_data ? 1u << 16 : 0u);
}
constexpr bool connect_invalid_in_data(const Cqe& cqe) noexcept { return get_bit(cqe.cdw0, 16); }
constexpr uint16_t connect_invalid_offset(const Cqe& cqe) noexcept {
  return static_cast<uint16_t>(cqe.cdw0 & 0xFFFF);
}

// --- Property Get / Property Set ---

// Property offsets ("Controller Properties"). CAP is 8 bytes, the rest 4.
namespace property_offset {
inline constexpr uint32_t cap = 0x00;
inline constexpr uint32_t vs = 0x08;
inline constexpr uint32_t intms = 0x0C;  // PCIe only: reserved on Fabrics
inline constexpr uint32_t intmc = 0x10;  // PCIe only: reserved on Fabrics
inline constexpr uint32_t cc = 0x14;
inline constexpr uint32_t csts = 0x1C;
inline constexpr uint32_t nssr = 0x20;
}  // namespace property_offset

// ATTRIB bits 2:0: the property size.
namespace property_attrib {
inline constexpr uint8_t size_4_bytes = 0x0;
inline constexpr uint8_t size_8_bytes = 0x1;
}  // namespace property_attrib

constexpr uint8_t property_attrib_size(uint8_t attrib) noexcept {
  return static_cast<uint8_t>(attrib & 0x7);
}
// Bytes an ATTRIB value selects: 4, 8, or 0 for a reserved encoding.
constexpr uint32_t property_attrib_bytes(uint8_t attrib) noexcept {
  switch (property_attrib_size(attrib)) {
    case property_attrib::size_4_bytes:
      return 4;
    case property_attrib::size_8_bytes:
      return 8;
    default:
      return 0;
  }
}
// The width of a Fabrics property, or 0 for an offset a Fabrics controller does not implement.
constexpr uint32_t property_width_bytes(uint32_t offset) noexcept {
  switch (offset) {
    case property_offset::cap:
      return 8;
    case property_offset::vs:
    case property_offset::cc:
    case property_offset::csts:
    case property_offset::nssr:
      return 4;
    default:
      return 0;
  }
}

// "Property Get Command" (64 bytes).
struct PropertyGetCommand {
  uint8_t opcode;          // 00: 7Fh
  uint8_t flags;           // 01
  uint16_t cid;            // 02
  uint8_t fctype;          // 04: 04h
  uint8_t reserved5[35];   // 05 (SGL1 unused)
  uint8_t attrib;          // 40: size 2:0
  uint8_t reserved41[3];   // 41
  uint32_t ofst;           // 44: property offset
  uint8_t reserved48[16];  // 48
};
NVMF_SPEC_LAYOUT(PropertyGetCommand, 64);
NVMF_SPEC_OFFSET(PropertyGetCommand, fctype, 4);
NVMF_SPEC_OFFSET(PropertyGetCommand, attrib, 40);
NVMF_SPEC_OFFSET(PropertyGetCommand, ofst, 44);

// "Property Set Command" (64 bytes).
struct PropertySetCommand {
  uint8_t opcode;         // 00: 7Fh
  uint8_t flags;          // 01
  uint16_t cid;           // 02
  uint8_t fctype;         // 04: 00h
  uint8_t reserved5[35];  // 05
  uint8_t attrib;         // 40: size 2:0
  uint8_t reserved41[3];  // 41
  uint32_t ofst;          // 44
  uint64_t value;         // 48: low 4 bytes used for a 4-byte property
  uint8_t reserved56[8];  // 56
};
NVMF_SPEC_LAYOUT(PropertySetCommand, 64);
NVMF_SPEC_OFFSET(PropertySetCommand, fctype, 4);
NVMF_SPEC_OFFSET(PropertySetCommand, attrib, 40);
NVMF_SPEC_OFFSET(PropertySetCommand, ofst, 44);
NVMF_SPEC_OFFSET(PropertySetCommand, value, 48);

// "Property Get Response" (16 bytes): the value in bytes 0..7.
struct PropertyGetResponse {
  uint64_t value;       // 00
  uint16_t sqhd;        // 08
  uint16_t reserved10;  // 10
  uint16_t cid;         // 12
  uint16_t status;      // 14
};
NVMF_SPEC_LAYOUT(PropertyGetResponse, 16);
NVMF_SPEC_OFFSET(PropertyGetResponse, value, 0);
NVMF_SPEC_OFFSET(PropertyGetResponse, sqhd, 8);
NVMF_SPEC_OFFSET(PropertyGetResponse, status, 14);

// The size attribute that fits the property at `offset` (8 bytes for CAP, else 4).
constexpr uint8_t property_attrib_for(uint32_t offset) noexcept {
  return property_width_bytes(offset) == 8 ? property_attrib::size_8_bytes
                                           : property_attrib::size_4_bytes;
}

constexpr PropertyGetCommand make_property_get(uint16_t cid, uint32_t offset) noexcept {
  PropertyGetCommand command{};
  command.opcode = fabrics_opcode;
  command.flags = static_cast<uint8_t>(psdt::sgl_mptr_contiguous << 6);
  command.cid = cid;
  command.fctype = fctype::property_get;
  command.attrib = property_attrib_for(offset);
  command.ofst = offset;
  return command;
}

constexpr PropertySetCommand make_property_set(uint16_t cid, uint32_t offset,
                                               uint64_t value) noexcept {
  PropertySetCommand command{};
  command.opcode = fabrics_opcode;
  command.flags = static_cast<uint8_t>(psdt::sgl_mptr_contiguous << 6);
  command.cid = cid;
  command.fctype = fctype::property_set;
  command.attrib = property_attrib_for(offset);
  command.ofst = offset;
  command.value = value;
  return command;
}

// The 64-bit value of a Property Get completion (DW0 low, DW1 high).
constexpr uint64_t property_get_value(const Cqe& cqe) noexcept {
  return uint64_t{cqe.cdw0} | (uint64_t{cqe.cdw1} << 32);
}
constexpr void set_property_get_value(Cqe& cqe, uint64_t value) noexcept {
  cqe.cdw0 = static_cast<uint32_t>(value);
  cqe.cdw1 = static_cast<uint32_t>(value >> 32);
}

// --- Disconnect, Authentication Send / Receive ---

// "Disconnect Command" (64 bytes): tears down the I/O queue it is sent on.
struct DisconnectCommand {
  uint8_t opcode;          // 00: 7Fh
  uint8_t flags;           // 01
  uint16_t cid;            // 02
  uint8_t fctype;          // 04: 08h
  uint8_t reserved5[35];   // 05
  uint16_t recfmt;         // 40: 0
  uint8_t reserved42[22];  // 42
};
NVMF_SPEC_LAYOUT(DisconnectCommand, 64);
NVMF_SPEC_OFFSET(DisconnectCommand, recfmt, 40);

// "Authentication Send Command" and "Authentication Receive Command" (64 bytes each): same
// layout; the length field is TL (transfer length) for Send and AL (allocation length) for
// Receive.
struct AuthenticationCommand {
  uint8_t opcode;          // 00: 7Fh
  uint8_t flags;           // 01
  uint16_t cid;            // 02
  uint8_t fctype;          // 04: 05h send / 06h receive
  uint8_t reserved5[19];   // 05
  SglDescriptor sgl1;      // 24
  uint8_t reserved40;      // 40
  uint8_t spsp0;           // 41: SP Specific 0
  uint8_t spsp1;           // 42: SP Specific 1
  uint8_t secp;            // 43: Security Protocol (E9h = NVMe in-band authentication)
  uint32_t length;         // 44: TL (send) / AL (receive)
  uint8_t reserved48[16];  // 48
};
NVMF_SPEC_LAYOUT(AuthenticationCommand, 64);
NVMF_SPEC_OFFSET(AuthenticationCommand, sgl1, 24);
NVMF_SPEC_OFFSET(AuthenticationCommand, spsp0, 41);
NVMF_SPEC_OFFSET(AuthenticationCommand, secp, 43);
NVMF_SPEC_OFFSET(AuthenticationCommand, length, 44);

// --- Property values ---

// CAP (8 bytes, "Offset 0h: CAP - Controller Capabilities").
constexpr uint32_t cap_mqes(uint64_t cap) noexcept {  // max queue entries, 0's based
  return static_cast<uint32_t>(get_bits(cap, 0, 16));
}
constexpr bool cap_cqr(uint64_t cap) noexcept { return get_bit(cap, 16); }  // contiguous queues
constexpr uint8_t cap_ams(uint64_t cap) noexcept {
  return static_cast<uint8_t>(get_bits(cap, 17, 2));
}
constexpr uint8_t cap_to(uint64_t cap) noexcept {  // ready timeout in 500 ms units
  return static_cast<uint8_t>(get_bits(cap, 24, 8));
}
constexpr uint8_t cap_dstrd(uint64_t cap) noexcept {
  return static_cast<uint8_t>(get_bits(cap, 32, 4));
}
constexpr bool cap_nssrs(uint64_t cap) noexcept { return get_bit(cap, 36); }
constexpr uint8_t cap_css(uint64_t cap) noexcept {  // command sets supported
  return static_cast<uint8_t>(get_bits(cap, 37, 8));
}
constexpr bool cap_bps(uint64_t cap) noexcept { return get_bit(cap, 45); }
constexpr uint8_t cap_mpsmin(uint64_t cap) noexcept {  // page size 2^(12 + MPSMIN)
  return static_cast<uint8_t>(get_bits(cap, 48, 4));
}
constexpr uint8_t cap_mpsmax(uint64_t cap) noexcept {
  return static_cast<uint8_t>(get_bits(cap, 52, 4));
}
constexpr uint32_t cap_timeout_ms(uint64_t cap) noexcept { return uint32_t{cap_to(cap)} * 500; }

// CAP.CSS bits.
namespace cap_css_bit {
inline constexpr uint8_t nvm = 1u << 0;
inline constexpr uint8_t io_command_sets = 1u << 6;
inline constexpr uint8_t admin_only = 1u << 7;
}  // namespace cap_css_bit

struct CapFields {
  uint32_t mqes = 0;  // 0's based
  bool cqr = false;
  uint8_t ams = 0;
  uint8_t to = 0;  // 500 ms units
  uint8_t dstrd = 0;
  bool nssrs = false;
  uint8_t css = 0;
  bool bps = false;
  uint8_t mpsmin = 0;
  uint8_t mpsmax = 0;
};
constexpr uint64_t encode_cap(const CapFields& fields) noexcept {
  uint64_t cap = 0;
  cap = set_bits(cap, 0, 16, fields.mqes);
  cap = set_bit(cap, 16, fields.cqr);
  cap = set_bits(cap, 17, 2, fields.ams);
  cap = set_bits(cap, 24, 8, fields.to);
  cap = set_bits(cap, 32, 4, fields.dstrd);
  cap = set_bit(cap, 36, fields.nssrs);
  cap = set_bits(cap, 37, 8, fields.css);
  cap = set_bit(cap, 45, fields.bps);
  cap = set_bits(cap, 48, 4, fields.mpsmin);
  cap = set_bits(cap, 52, 4, fields.mpsmax);
  return cap;
}

// VS (4 bytes, "Offset 8h: VS - Version"): MJR 31:16, MNR 15:8, TER 7:0.
constexpr uint32_t make_version(uint16_t major, uint8_t minor, uint8_t tertiary = 0) noexcept {
  return (uint32_t{major} << 16) | (uint32_t{minor} << 8) | tertiary;
}
constexpr uint16_t version_major(uint32_t vs) noexcept { return static_cast<uint16_t>(vs >> 16); }
constexpr uint8_t version_minor(uint32_t vs) noexcept { return static_cast<uint8_t>(vs >> 8); }
constexpr uint8_t version_tertiary(uint32_t vs) noexcept { return static_cast<uint8_t>(vs); }

// CC (4 bytes, "Offset 14h: CC - Controller Configuration").
namespace shutdown_notification {  // CC.SHN
inline constexpr uint8_t none = 0x0;
inline constexpr uint8_t normal = 0x1;
inline constexpr uint8_t abrupt = 0x2;
}  // namespace shutdown_notification
namespace command_set_select {  // CC.CSS
inline constexpr uint8_t nvm = 0x0;
inline constexpr uint8_t all_io_command_sets = 0x6;
inline constexpr uint8_t admin_only = 0x7;
}  // namespace command_set_select

constexpr bool cc_en(uint32_t cc) noexcept { return get_bit(cc, 0); }
constexpr uint8_t cc_css(uint32_t cc) noexcept { return static_cast<uint8_t>(get_bits(cc, 4, 3)); }
constexpr uint8_t cc_mps(uint32_t cc) noexcept { return static_cast<uint8_t>(get_bits(cc, 7, 4)); }
constexpr uint8_t cc_ams(uint32_t cc) noexcept { return static_cast<uint8_t>(get_bits(cc, 11, 3)); }
constexpr uint8_t cc_shn(uint32_t cc) noexcept { return static_cast<uint8_t>(get_bits(cc, 14, 2)); }
constexpr uint8_t cc_iosqes(uint32_t cc) noexcept {  // log2 of the I/O SQ entry size (6 = 64 B)
  return static_cast<uint8_t>(get_bits(cc, 16, 4));
}
constexpr uint8_t cc_iocqes(uint32_t cc) noexcept {  // log2 of the I/O CQ entry size (4 = 16 B)
  return static_cast<uint8_t>(get_bits(cc, 20, 4));
}

struct CcFields {
  bool en = false;
  uint8_t css = command_set_select::nvm;
  uint8_t mps = 0;
  uint8_t ams = 0;
  uint8_t shn = shutdown_notification::none;
  uint8_t iosqes = 0;
  uint8_t iocqes = 0;
};
constexpr uint32_t encode_cc(const CcFields& fields) noexcept {
  uint32_t cc = 0;
  cc = set_bit(cc, 0, fields.en);
  cc = set_bits(cc, 4, 3, fields.css);
  cc = set_bits(cc, 7, 4, fields.mps);
  cc = set_bits(cc, 11, 3, fields.ams);
  cc = set_bits(cc, 14, 2, fields.shn);
  cc = set_bits(cc, 16, 4, fields.iosqes);
  cc = set_bits(cc, 20, 4, fields.iocqes);
  return cc;
}

// CSTS (4 bytes, "Offset 1Ch: CSTS - Controller Status").
namespace shutdown_status {                // CSTS.SHST
inline constexpr uint8_t normal = 0x0;     // normal operation, no shutdown requested
inline constexpr uint8_t occurring = 0x1;  // shutdown processing in progress
inline constexpr uint8_t complete = 0x2;   // shutdown processing complete
}  // namespace shutdown_status

constexpr bool csts_rdy(uint32_t csts) noexcept { return get_bit(csts, 0); }
constexpr bool csts_cfs(uint32_t csts) noexcept { return get_bit(csts, 1); }
constexpr uint8_t csts_shst(uint32_t csts) noexcept {
  return static_cast<uint8_t>(get_bits(csts, 2, 2));
}
constexpr bool csts_nssro(uint32_t csts) noexcept { return get_bit(csts, 4); }
constexpr bool csts_pp(uint32_t csts) noexcept { return get_bit(csts, 5); }

struct CstsFields {
  bool rdy = false;
  bool cfs = false;
  uint8_t shst = shutdown_status::normal;
  bool nssro = false;
  bool pp = false;
};
constexpr uint32_t encode_csts(const CstsFields& fields) noexcept {
  uint32_t csts = 0;
  csts = set_bit(csts, 0, fields.rdy);
  csts = set_bit(csts, 1, fields.cfs);
  csts = set_bits(csts, 2, 2, fields.shst);
  csts = set_bit(csts, 4, fields.nssro);
  csts = set_bit(csts, 5, fields.pp);
  return csts;
}

// NSSR ("Offset 20h: NSSR"): writing "NVMe" (4E564D65h) starts an NVM Subsystem Reset.
inline constexpr uint32_t nssr_reset_value = 0x4E564D65;

}  // namespace nvmf::spec
