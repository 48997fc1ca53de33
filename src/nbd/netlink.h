// Control of the kernel's nbd driver over generic netlink (family "nbd", the kernel's uapi
// linux/nbd-netlink.h): CONNECT hands it the sockets and the geometry of a /dev/nbdN,
// DISCONNECT takes the device down, STATUS lists the devices. Raw AF_NETLINK sockets, no
// libnl. The message builders and parsers below are pure functions so that they are tested
// without a kernel.
//
// Which devices are destroyed on disconnect: the nbds_max devices made at modprobe stay (a
// udev rule, an fstab line or another user may refer to /dev/nbdN), so connect() asks the
// kernel to destroy a device on disconnect (NBD_CFLAG_DESTROY_ON_DISCONNECT) only when the
// kernel makes a new one for us: connect() lists the devices first, takes the lowest free
// existing one, and only when there is none (or the requested index does not exist) lets the
// kernel add one, flagged. Without the flag such devices would pile up past nbds_max. The
// flag is always sent (0 or set), which also clears a stale one left on a reused device.
//
// Setup path only: blocking system calls (each answer waited for at most 5 s), allocation,
// std::string messages. A Netlink belongs to one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace nvmf::nbd {

struct ConnectParams {
  std::vector<int> socket_fds;       // one per kernel hardware queue (the daemon keeps the
                                     // other ends); still the caller's: the kernel takes its
                                     // own reference, so they may be closed after connect()
  uint64_t size_bytes = 0;           // > 0, a multiple of block_size_bytes
  uint64_t block_size_bytes = 512;   // 512..4096, power of two
  uint64_t server_flags = 0;         // wire.h transmission flags (kFlagHasFlags added here)
  uint64_t timeout_s = 0;            // NBD_ATTR_TIMEOUT: per-request timeout, 0 = not sent
                                     // (the kernel's default; sending 0 would mean "never")
  uint64_t dead_conn_timeout_s = 0;  // NBD_ATTR_DEAD_CONN_TIMEOUT; 0 = not sent
  int index = -1;                    // -1: the lowest free /dev/nbdN (a new one if none)
  std::string backend_identifier;    // NBD_ATTR_BACKEND_IDENTIFIER (/sys/block/nbdN/backend):
                                     // sent only if non-empty and the kernel's family knows
                                     // the attribute (its CTRL_ATTR_MAXATTR reaches it)
};

struct DeviceStatus {
  int index = -1;
  bool connected = false;  // the kernel holds a configuration (NBD_DEVICE_CONNECTED)
};

// ---- Pure message code (what Netlink sends and parses), exposed for tests ----
namespace netlink {

// NBD_CFLAG_* (linux/nbd.h, NBD_ATTR_CLIENT_FLAGS).
inline constexpr uint64_t kClientFlagDestroyOnDisconnect = 1u << 0;
inline constexpr uint64_t kClientFlagDisconnectOnClose = 1u << 1;

// CTRL_CMD_GETFAMILY for `family_name` to the generic netlink controller (NLM_F_ACK).
std::vector<uint8_t> build_get_family_message(const char* family_name, uint32_t seq);
// NBD_CMD_CONNECT: INDEX (if params.index >= 0), SIZE_BYTES, BLOCK_SIZE_BYTES, SERVER_FLAGS
// (| HAS_FLAGS), CLIENT_FLAGS, TIMEOUT and DEAD_CONN_TIMEOUT (if non-zero), SOCKETS (one
// SOCK_ITEM{SOCK_FD} per fd), BACKEND_IDENTIFIER (if non-empty). Validates nothing.
std::vector<uint8_t> build_connect_message(const ConnectParams& params, uint64_t client_flags,
                                           uint16_t family_id, uint32_t seq);
std::vector<uint8_t> build_disconnect_message(int index, uint16_t family_id, uint32_t seq);
// NBD_CMD_STATUS: one device, or all with index -1.
std::vector<uint8_t> build_status_message(int index, uint16_t family_id, uint32_t seq);

// The answer to one request: the attributes of the generic netlink message that came back
// for it (if any) and the ack that ends it.
struct Answer {
  bool acked = false;               // the NLMSG_ERROR with our seq arrived: the answer is complete
  int error = 0;                    // its errno (positive), 0 = success
  std::string error_message;        // NLMSGERR_ATTR_MSG (extended ack) if the kernel sent one
  uint8_t command = 0;              // the data message's genlmsghdr.cmd
  std::vector<uint8_t> attributes;  // the data message's attributes (after genlmsghdr)
};
// Parses one received datagram (one or more netlink messages) into `answer`, keeping only
// messages with `seq`. Errors: invalid_argument with `message` for malformed lengths.
Result<void> parse_datagram(std::span<const uint8_t> datagram, uint32_t seq, Answer* answer,
                            std::string* message);

// One attribute of a flat attribute stream (type without the NLA_F_* bits).
struct Attribute {
  uint16_t type = 0;
  std::span<const uint8_t> payload;
};
// Splits `bytes` into attributes; false if a length runs past the end or is below 4.
bool split_attributes(std::span<const uint8_t> bytes, std::vector<Attribute>* attributes);

struct FamilyInfo {
  uint16_t id = 0;
  uint32_t max_attribute = 0;  // CTRL_ATTR_MAXATTR: the newest attribute the kernel knows
};
Result<FamilyInfo> parse_family(std::span<const uint8_t> attributes, std::string* message);
// NBD_ATTR_INDEX of a CONNECT reply.
Result<int> parse_connect_reply(std::span<const uint8_t> attributes, std::string* message);
// NBD_ATTR_DEVICE_LIST of a STATUS reply.
Result<std::vector<DeviceStatus>> parse_status_reply(std::span<const uint8_t> attributes,
                                                     std::string* message);

// Where connect() asks the kernel to connect, given the devices that exist.
struct ConnectTarget {
  int index = -1;  // -1: let the kernel add a device
  uint64_t client_flags = 0;
};
// `requested`: ConnectParams::index. `excluded`: indexes already found busy by a racing user.
ConnectTarget choose_connect_target(int requested, const std::vector<DeviceStatus>& devices,
                                    const std::vector<int>& excluded);

// "NBD_CMD_CONNECT: Device or resource busy (index 3 in use)": the errno's text, a hint for
// the usual causes, the kernel's extended-ack message if any.
std::string describe_error(const char* command, int error, int index,
                           const std::string& kernel_message);

}  // namespace netlink

class Netlink {
 public:
  // Opens a generic netlink socket and resolves the "nbd" family. Errors: not_found ("nbd
  // module not loaded (modprobe nbd)"), system_error for the socket calls; `message` (may be
  // nullptr) gets one line.
  static Result<std::unique_ptr<Netlink>> open(std::string* message);
  ~Netlink();
  Netlink(const Netlink&) = delete;
  Netlink& operator=(const Netlink&) = delete;

  // NBD_CMD_CONNECT (see the header comment for the device choice). Returns the index the
  // kernel used (its reply's NBD_ATTR_INDEX). Errors: invalid_argument (params, or the
  // kernel's EINVAL: the reason is in dmesg), busy (index in use), permission_denied (needs
  // CAP_SYS_ADMIN), others from the kernel's errno. `message`: "NBD_CMD_CONNECT: Device or
  // resource busy (index 3 in use)".
  Result<int> connect(const ConnectParams& params, std::string* message);
  // NBD_CMD_DISCONNECT: the kernel sends NBD_CMD_DISC on each socket, shuts them down and
  // fails what is in flight. Errors as connect() (invalid_argument: no such device).
  Result<void> disconnect(int index, std::string* message);
  // NBD_CMD_STATUS for one device: whether it exists and is connected (false if absent).
  Result<bool> connected(int index, std::string* message);
  // NBD_CMD_STATUS for all devices, in the kernel's (index) order.
  Result<std::vector<DeviceStatus>> devices(std::string* message);

  uint16_t family_id() const noexcept { return family_id_; }
  bool has_backend_identifier() const noexcept { return has_backend_identifier_; }

 private:
  Netlink(int fd, uint32_t port_id) noexcept : fd_(fd), port_id_(port_id) {}
  // Sends `request` and collects the answer to it (the data message, if any, and the ack).
  // A kernel error is described with `command` and `index` (for the hint) into `message`.
  Result<void> transact(const std::vector<uint8_t>& request, uint32_t seq, const char* command,
                        int index, netlink::Answer* answer, std::string* message);
  Result<int> connect_once(const ConnectParams& params, const netlink::ConnectTarget& target,
                           std::string* message);
  Result<std::vector<DeviceStatus>> status(int index, std::string* message);

  int fd_;
  uint32_t port_id_;
  uint32_t seq_ = 1;
  uint16_t family_id_ = 0;
  bool has_backend_identifier_ = false;
};

}  // namespace nvmf::nbd
