// The NBD transmission phase as the kernel's nbd driver speaks it over each socket it is given
// (doc/proto.md of the NBD project, "Transmission"; the kernel's uapi linux/nbd.h). Only
// simple replies: the kernel never negotiates structured replies or extended headers.
//
// Our own structs so that this header needs no kernel headers; tests/unit/nbd compares every
// constant with linux/nbd.h. All fields are big-endian on the wire; the structs hold the wire
// bytes and the accessors convert. Header-only, stateless: call from any thread.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace nvmf::nbd::wire {

constexpr uint16_t to_be16(uint16_t value) noexcept {
  return std::endian::native == std::endian::big ? value : __builtin_bswap16(value);
}
constexpr uint32_t to_be32(uint32_t value) noexcept {
  return std::endian::native == std::endian::big ? value : __builtin_bswap32(value);
}
constexpr uint64_t to_be64(uint64_t value) noexcept {
  return std::endian::native == std::endian::big ? value : __builtin_bswap64(value);
}
// A byte swap is its own inverse.
constexpr uint16_t from_be16(uint16_t value) noexcept { return to_be16(value); }
constexpr uint32_t from_be32(uint32_t value) noexcept { return to_be32(value); }
constexpr uint64_t from_be64(uint64_t value) noexcept { return to_be64(value); }

// proto.md "Request message": NBD_REQUEST_MAGIC.
inline constexpr uint32_t kRequestMagic = 0x25609513;
// proto.md "Simple reply message": NBD_SIMPLE_REPLY_MAGIC (the kernel's NBD_REPLY_MAGIC).
inline constexpr uint32_t kSimpleReplyMagic = 0x67446698;

// proto.md "Request types". The kernel sends read, write, disconnect, flush, trim and (since
// it learnt REQ_OP_WRITE_ZEROES) write zeroes; cache and the rest are negotiated extensions it
// never uses, so a Queue treats them as protocol errors.
enum class Command : uint16_t {
  read = 0,
  write = 1,
  disconnect = 2,  // NBD_CMD_DISC: no reply; the client closes the socket next
  flush = 3,
  trim = 4,
  cache = 5,
  write_zeroes = 6,
};

// proto.md "Command flags": the 16-bit flags field before the type. The kernel declares the
// flags and the type as one be32 `type` with the flags in its upper half (NBD_CMD_FLAG_FUA is
// 1 << 16 there), which is the same bytes.
inline constexpr uint16_t kCmdFlagFua = 1u << 0;     // NBD_CMD_FLAG_FUA: reply once durable
inline constexpr uint16_t kCmdFlagNoHole = 1u << 1;  // NBD_CMD_FLAG_NO_HOLE: write zeroes only
inline constexpr uint16_t kCmdFlagDf = 1u << 2;      // NBD_CMD_FLAG_DF: structured replies only
// The kernel's shift from our 16-bit flags to its 32-bit `type` word.
inline constexpr unsigned kKernelCmdFlagShift = 16;

// proto.md "Transmission flags" (NBD_ATTR_SERVER_FLAGS in the netlink CONNECT): what the
// server supports, so what the kernel may send and how it sets up the queue.
inline constexpr uint16_t kFlagHasFlags = 1u << 0;         // NBD_FLAG_HAS_FLAGS: always set
inline constexpr uint16_t kFlagReadOnly = 1u << 1;         // NBD_FLAG_READ_ONLY
inline constexpr uint16_t kFlagSendFlush = 1u << 2;        // NBD_FLAG_SEND_FLUSH: volatile cache
inline constexpr uint16_t kFlagSendFua = 1u << 3;          // NBD_FLAG_SEND_FUA
inline constexpr uint16_t kFlagRotational = 1u << 4;       // NBD_FLAG_ROTATIONAL
inline constexpr uint16_t kFlagSendTrim = 1u << 5;         // NBD_FLAG_SEND_TRIM: discard
inline constexpr uint16_t kFlagSendWriteZeroes = 1u << 6;  // NBD_FLAG_SEND_WRITE_ZEROES
inline constexpr uint16_t kFlagSendDf = 1u << 7;           // NBD_FLAG_SEND_DF (unused here)
inline constexpr uint16_t kFlagCanMultiConn = 1u << 8;     // NBD_FLAG_CAN_MULTI_CONN

// proto.md "Error values": the errno values a reply may carry (the kernel fails the request
// with BLK_STS_IOERR for any of them; the value matters to other clients and to logs).
inline constexpr uint32_t kErrorPermission = 1;     // NBD_EPERM
inline constexpr uint32_t kErrorIo = 5;             // NBD_EIO
inline constexpr uint32_t kErrorNoMemory = 12;      // NBD_ENOMEM
inline constexpr uint32_t kErrorInvalid = 22;       // NBD_EINVAL
inline constexpr uint32_t kErrorNoSpace = 28;       // NBD_ENOSPC
inline constexpr uint32_t kErrorOverflow = 75;      // NBD_EOVERFLOW
inline constexpr uint32_t kErrorNotSupported = 95;  // NBD_ENOTSUP
inline constexpr uint32_t kErrorShutdown = 108;     // NBD_ESHUTDOWN

// proto.md "Request message" (the kernel's struct nbd_request). 28 bytes, so packed: `offset`
// sits at 16 but the struct would otherwise be padded to 32.
struct __attribute__((packed)) Request {
  uint32_t magic_be;   // kRequestMagic
  uint16_t flags_be;   // kCmdFlag*
  uint16_t type_be;    // Command
  uint8_t handle[8];   // the client's cookie, echoed in the reply as is (opaque)
  uint64_t offset_be;  // bytes from the start of the export
  uint32_t length_be;  // bytes; a write's payload of this size follows the header

  uint32_t magic() const noexcept { return from_be32(magic_be); }
  uint16_t flags() const noexcept { return from_be16(flags_be); }
  uint16_t type() const noexcept { return from_be16(type_be); }
  uint64_t offset() const noexcept { return from_be64(offset_be); }
  uint32_t length() const noexcept { return from_be32(length_be); }
};
static_assert(sizeof(Request) == 28, "nbd request: 28 bytes");
static_assert(offsetof(Request, flags_be) == 4 && offsetof(Request, type_be) == 6);
static_assert(offsetof(Request, handle) == 8 && offsetof(Request, offset_be) == 16);
static_assert(offsetof(Request, length_be) == 24);
static_assert(std::is_standard_layout_v<Request> && std::is_trivially_copyable_v<Request>);

// proto.md "Simple reply message" (the kernel's struct nbd_reply). A successful read's data
// follows it; an error reply has no payload.
struct SimpleReply {
  uint32_t magic_be;  // kSimpleReplyMagic
  uint32_t error_be;  // 0 or one of kError*
  uint8_t handle[8];  // the request's handle

  uint32_t magic() const noexcept { return from_be32(magic_be); }
  uint32_t error() const noexcept { return from_be32(error_be); }
};
static_assert(sizeof(SimpleReply) == 16, "nbd simple reply: 16 bytes");
static_assert(offsetof(SimpleReply, error_be) == 4 && offsetof(SimpleReply, handle) == 8);
static_assert(std::is_standard_layout_v<SimpleReply> && std::is_trivially_copyable_v<SimpleReply>);

inline Request make_request(Command type, uint16_t flags, uint64_t handle, uint64_t offset,
                            uint32_t length) noexcept {
  Request request{};
  request.magic_be = to_be32(kRequestMagic);
  request.flags_be = to_be16(flags);
  request.type_be = to_be16(static_cast<uint16_t>(type));
  std::memcpy(request.handle, &handle, sizeof(request.handle));
  request.offset_be = to_be64(offset);
  request.length_be = to_be32(length);
  return request;
}

inline SimpleReply make_simple_reply(uint32_t error, const uint8_t (&handle)[8]) noexcept {
  SimpleReply reply{};
  reply.magic_be = to_be32(kSimpleReplyMagic);
  reply.error_be = to_be32(error);
  std::memcpy(reply.handle, handle, sizeof(reply.handle));
  return reply;
}

}  // namespace nvmf::nbd::wire
