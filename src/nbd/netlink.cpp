#include "nbd/netlink.h"

#include <linux/genetlink.h>
#include <linux/nbd-netlink.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/log.h"
#include "common/util.h"
#include "nbd/wire.h"

NVMF_LOG_COMPONENT_DECLARE(nbd);

namespace nvmf::nbd {

namespace {

// The kernel answers generic netlink requests from within our sendmsg(), so an answer that
// has not come in 5 s is not coming (a wedged driver); better an error than a hung daemon.
constexpr int kAnswerTimeoutMs = 5000;
// connect() retries with the next free device when another user took the one it chose
// between its STATUS and its CONNECT.
constexpr int kConnectAttempts = 4;
// The genl controller's version (CTRL_VERSION in the kernel); informational in requests.
constexpr uint8_t kCtrlVersion = 2;
constexpr uint64_t kBlockSizeMin = 512;   // SECTOR_SIZE: the kernel's blk_validate_block_size
constexpr uint64_t kBlockSizeMax = 4096;  // PAGE_SIZE on x86-64: what every kernel takes

void set_message(std::string* message, std::string text) {
  if (message != nullptr) *message = std::move(text);
}

std::string errno_string(int os_errno) {
  char buffer[128];
  return strerror_r(os_errno, buffer, sizeof(buffer));  // GNU: returns the text
}

// Appends netlink attributes to one message; finish() writes the total length.
class MessageBuilder {
 public:
  MessageBuilder(uint16_t type, uint32_t seq, uint8_t command, uint8_t version) {
    nlmsghdr header{};
    header.nlmsg_type = type;
    header.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;  // the ack carries the kernel's errno
    header.nlmsg_seq = seq;
    append(&header, sizeof(header));
    genlmsghdr genl{};
    genl.cmd = command;
    genl.version = version;
    append(&genl, sizeof(genl));
  }
  void put(uint16_t type, const void* data, size_t size) {
    nlattr attribute{};
    attribute.nla_len = static_cast<uint16_t>(NLA_HDRLEN + size);
    attribute.nla_type = type;
    append(&attribute, sizeof(attribute));
    append(data, size);
    pad();
  }
  void put_u32(uint16_t type, uint32_t value) { put(type, &value, sizeof(value)); }
  void put_u64(uint16_t type, uint64_t value) { put(type, &value, sizeof(value)); }
  void put_string(uint16_t type, const std::string& text) {  // NLA_STRING: NUL included
    put(type, text.c_str(), text.size() + 1);
  }
  size_t begin_nested(uint16_t type) {
    const size_t at = bytes_.size();
    nlattr attribute{};
    attribute.nla_type = static_cast<uint16_t>(type | NLA_F_NESTED);
    append(&attribute, sizeof(attribute));
    return at;
  }
  void end_nested(size_t at) {
    const auto length = static_cast<uint16_t>(bytes_.size() - at);
    std::memcpy(bytes_.data() + at, &length, sizeof(length));
  }
  std::vector<uint8_t> finish() {
    const auto length = static_cast<uint32_t>(bytes_.size());
    std::memcpy(bytes_.data(), &length, sizeof(length));
    return std::move(bytes_);
  }

 private:
  void append(const void* data, size_t size) {
    // resize + memcpy: g++ 12 warns falsely (-Wstringop-overflow) on insert() here.
    const size_t at = bytes_.size();
    bytes_.resize(at + size);
    if (size != 0) std::memcpy(bytes_.data() + at, data, size);
  }
  void pad() { bytes_.resize(NLA_ALIGN(bytes_.size()), 0); }
  std::vector<uint8_t> bytes_;
};

const netlink::Attribute* find(const std::vector<netlink::Attribute>& attributes, uint16_t type) {
  for (const auto& attribute : attributes) {
    if (attribute.type == type) return &attribute;
  }
  return nullptr;
}

// Reads an integer attribute of exactly sizeof(T) (the kernel's nla_put_u8/u16/u32).
template <typename T>
bool read_integer(const netlink::Attribute* attribute, T* value) {
  if (attribute == nullptr || attribute->payload.size() < sizeof(T)) return false;
  std::memcpy(value, attribute->payload.data(), sizeof(T));
  return true;
}

Unexpected malformed(std::string* message, const char* what) {
  set_message(message, std::string("malformed netlink answer: ") + what);
  return Unexpected{Errc::invalid_argument, "nbd netlink: malformed answer"};
}

// The attributes after NLMSG_ERROR's nlmsgerr (and the echoed request unless capped).
void parse_ack_tlvs(const nlmsghdr& header, std::span<const uint8_t> body,
                    netlink::Answer* answer) {
  if ((header.nlmsg_flags & NLM_F_ACK_TLVS) == 0 || body.size() < sizeof(nlmsgerr)) return;
  nlmsgerr error{};
  std::memcpy(&error, body.data(), sizeof(error));
  size_t offset = sizeof(nlmsgerr);
  if ((header.nlmsg_flags & NLM_F_CAPPED) == 0) {
    offset += NLMSG_ALIGN(std::max<size_t>(error.msg.nlmsg_len, NLMSG_HDRLEN)) - NLMSG_HDRLEN;
  }
  if (offset >= body.size()) return;
  std::vector<netlink::Attribute> tlvs;
  if (!netlink::split_attributes(body.subspan(offset), &tlvs)) return;
  const netlink::Attribute* text = find(tlvs, NLMSGERR_ATTR_MSG);
  if (text == nullptr || text->payload.empty()) return;
  const auto* chars = reinterpret_cast<const char*>(text->payload.data());
  answer->error_message.assign(chars, strnlen(chars, text->payload.size()));
}

Result<void> parse_message(const nlmsghdr& header, std::span<const uint8_t> body,
                           netlink::Answer* answer, std::string* message) {
  if (header.nlmsg_type == NLMSG_ERROR) {
    int error = 0;
    if (body.size() < sizeof(error)) return malformed(message, "short NLMSG_ERROR");
    std::memcpy(&error, body.data(), sizeof(error));
    answer->acked = true;
    answer->error = error < 0 ? -error : error;  // the kernel sends -errno
    parse_ack_tlvs(header, body, answer);
    return {};
  }
  if (header.nlmsg_type == NLMSG_DONE) {
    answer->acked = true;
    return {};
  }
  if (header.nlmsg_type < NLMSG_MIN_TYPE) return {};  // NLMSG_NOOP, NLMSG_OVERRUN
  if (body.size() < GENL_HDRLEN) return malformed(message, "short generic netlink header");
  genlmsghdr genl{};
  std::memcpy(&genl, body.data(), sizeof(genl));
  answer->command = genl.cmd;
  answer->attributes.assign(body.begin() + GENL_HDRLEN, body.end());
  return {};
}

Result<void> check_params(const ConnectParams& params, std::string* message) {
  const char* problem = nullptr;
  if (params.socket_fds.empty()) {
    problem = "no socket_fds";
  } else if (std::any_of(params.socket_fds.begin(), params.socket_fds.end(),
                         [](int fd) { return fd < 0; })) {
    problem = "a negative socket fd";
  } else if (!is_power_of_two(params.block_size_bytes) || params.block_size_bytes < kBlockSizeMin ||
             params.block_size_bytes > kBlockSizeMax) {
    problem = "block_size_bytes must be a power of two in 512..4096";
  } else if (params.size_bytes == 0 || params.size_bytes % params.block_size_bytes != 0) {
    problem = "size_bytes must be a non-zero multiple of block_size_bytes";
  } else if (params.index < -1) {
    problem = "index must be -1 or a device index";
  }
  if (problem == nullptr) return {};
  set_message(message, std::string("NBD_CMD_CONNECT: ") + problem);
  return Unexpected{Errc::invalid_argument, "nbd connect parameters"};
}

}  // namespace

// ---- Pure message code ----

namespace netlink {

std::vector<uint8_t> build_get_family_message(const char* family_name, uint32_t seq) {
  MessageBuilder builder(GENL_ID_CTRL, seq, CTRL_CMD_GETFAMILY, kCtrlVersion);
  builder.put_string(CTRL_ATTR_FAMILY_NAME, family_name);
  return builder.finish();
}

std::vector<uint8_t> build_connect_message(const ConnectParams& params, uint64_t client_flags,
                                           uint16_t family_id, uint32_t seq) {
  MessageBuilder builder(family_id, seq, NBD_CMD_CONNECT, NBD_GENL_VERSION);
  if (params.index >= 0) builder.put_u32(NBD_ATTR_INDEX, static_cast<uint32_t>(params.index));
  builder.put_u64(NBD_ATTR_SIZE_BYTES, params.size_bytes);
  builder.put_u64(NBD_ATTR_BLOCK_SIZE_BYTES, params.block_size_bytes);
  builder.put_u64(NBD_ATTR_SERVER_FLAGS, params.server_flags | wire::kFlagHasFlags);
  builder.put_u64(NBD_ATTR_CLIENT_FLAGS, client_flags);
  if (params.timeout_s != 0) builder.put_u64(NBD_ATTR_TIMEOUT, params.timeout_s);
  if (params.dead_conn_timeout_s != 0) {
    builder.put_u64(NBD_ATTR_DEAD_CONN_TIMEOUT, params.dead_conn_timeout_s);
  }
  const size_t sockets = builder.begin_nested(NBD_ATTR_SOCKETS);
  for (int fd : params.socket_fds) {
    const size_t item = builder.begin_nested(NBD_SOCK_ITEM);
    builder.put_u32(NBD_SOCK_FD, static_cast<uint32_t>(fd));
    builder.end_nested(item);
  }
  builder.end_nested(sockets);
  if (!params.backend_identifier.empty()) {
    builder.put_string(NBD_ATTR_BACKEND_IDENTIFIER, params.backend_identifier);
  }
  return builder.finish();
}

std::vector<uint8_t> build_disconnect_message(int index, uint16_t family_id, uint32_t seq) {
  MessageBuilder builder(family_id, seq, NBD_CMD_DISCONNECT, NBD_GENL_VERSION);
  builder.put_u32(NBD_ATTR_INDEX, static_cast<uint32_t>(index));
  return builder.finish();
}

std::vector<uint8_t> build_status_message(int index, uint16_t family_id, uint32_t seq) {
  MessageBuilder builder(family_id, seq, NBD_CMD_STATUS, NBD_GENL_VERSION);
  if (index >= 0) builder.put_u32(NBD_ATTR_INDEX, static_cast<uint32_t>(index));
  return builder.finish();
}

bool split_attributes(std::span<const uint8_t> bytes, std::vector<Attribute>* attributes) {
  attributes->clear();
  size_t offset = 0;
  while (bytes.size() - offset >= NLA_HDRLEN) {
    nlattr header{};
    std::memcpy(&header, bytes.data() + offset, sizeof(header));
    if (header.nla_len < NLA_HDRLEN || header.nla_len > bytes.size() - offset) return false;
    attributes->push_back({static_cast<uint16_t>(header.nla_type & NLA_TYPE_MASK),
                           bytes.subspan(offset + NLA_HDRLEN, header.nla_len - NLA_HDRLEN)});
    offset += std::min<size_t>(NLA_ALIGN(header.nla_len), bytes.size() - offset);
  }
  return offset == bytes.size();  // trailing bytes shorter than a header: malformed
}

Result<void> parse_datagram(std::span<const uint8_t> datagram, uint32_t seq, Answer* answer,
                            std::string* message) {
  size_t offset = 0;
  while (offset < datagram.size()) {
    if (datagram.size() - offset < NLMSG_HDRLEN) return malformed(message, "short header");
    nlmsghdr header{};
    std::memcpy(&header, datagram.data() + offset, sizeof(header));
    if (header.nlmsg_len < NLMSG_HDRLEN || header.nlmsg_len > datagram.size() - offset) {
      return malformed(message, "message length");
    }
    if (header.nlmsg_seq == seq) {
      const auto body = datagram.subspan(offset + NLMSG_HDRLEN, header.nlmsg_len - NLMSG_HDRLEN);
      if (auto parsed = parse_message(header, body, answer, message); !parsed) return parsed;
    }
    offset += std::min<size_t>(NLMSG_ALIGN(header.nlmsg_len), datagram.size() - offset);
  }
  return {};
}

Result<FamilyInfo> parse_family(std::span<const uint8_t> bytes, std::string* message) {
  std::vector<Attribute> attributes;
  if (!split_attributes(bytes, &attributes)) return malformed(message, "family attributes");
  FamilyInfo info;
  if (!read_integer(find(attributes, CTRL_ATTR_FAMILY_ID), &info.id) || info.id == 0) {
    return malformed(message, "no CTRL_ATTR_FAMILY_ID");
  }
  read_integer(find(attributes, CTRL_ATTR_MAXATTR), &info.max_attribute);  // optional
  return info;
}

Result<int> parse_connect_reply(std::span<const uint8_t> bytes, std::string* message) {
  std::vector<Attribute> attributes;
  uint32_t index = 0;
  if (!split_attributes(bytes, &attributes) ||
      !read_integer(find(attributes, NBD_ATTR_INDEX), &index) || index > INT32_MAX) {
    return malformed(message, "NBD_CMD_CONNECT reply without NBD_ATTR_INDEX");
  }
  return static_cast<int>(index);
}

Result<std::vector<DeviceStatus>> parse_status_reply(std::span<const uint8_t> bytes,
                                                     std::string* message) {
  std::vector<Attribute> attributes;
  if (!split_attributes(bytes, &attributes)) return malformed(message, "status attributes");
  const Attribute* list = find(attributes, NBD_ATTR_DEVICE_LIST);
  std::vector<Attribute> items;
  if (list == nullptr || !split_attributes(list->payload, &items)) {
    return malformed(message, "NBD_ATTR_DEVICE_LIST");
  }
  std::vector<DeviceStatus> devices;
  for (const Attribute& item : items) {
    if (item.type != NBD_DEVICE_ITEM) continue;  // newer kernels may add other entries
    std::vector<Attribute> fields;
    uint32_t index = 0;
    uint8_t connected = 0;
    if (!split_attributes(item.payload, &fields) ||
        !read_integer(find(fields, NBD_DEVICE_INDEX), &index) || index > INT32_MAX) {
      return malformed(message, "NBD_DEVICE_ITEM without NBD_DEVICE_INDEX");
    }
    read_integer(find(fields, NBD_DEVICE_CONNECTED), &connected);  // absent: not connected
    devices.push_back({static_cast<int>(index), connected != 0});
  }
  return devices;
}

ConnectTarget choose_connect_target(int requested, const std::vector<DeviceStatus>& devices,
                                    const std::vector<int>& excluded) {
  if (requested >= 0) {
    const bool exists = std::any_of(devices.begin(), devices.end(),
                                    [&](const DeviceStatus& d) { return d.index == requested; });
    return {requested, exists ? 0 : kClientFlagDestroyOnDisconnect};
  }
  const DeviceStatus* best = nullptr;
  for (const DeviceStatus& device : devices) {
    if (device.connected) continue;
    if (std::find(excluded.begin(), excluded.end(), device.index) != excluded.end()) continue;
    if (best == nullptr || device.index < best->index) best = &device;
  }
  if (best != nullptr) return {best->index, 0};
  return {-1, kClientFlagDestroyOnDisconnect};  // the kernel adds one: ours to remove
}

std::string describe_error(const char* command, int error, int index,
                           const std::string& kernel_message) {
  char hint[96] = "";
  if (error == EBUSY && index >= 0) {
    snprintf(hint, sizeof(hint), " (index %d in use)", index);
  } else if (error == EPERM || error == EACCES) {
    snprintf(hint, sizeof(hint), " (needs CAP_SYS_ADMIN)");
  } else if (error == EINVAL && std::strcmp(command, "NBD_CMD_CONNECT") == 0) {
    snprintf(hint, sizeof(hint), " (the kernel logs the reason: see dmesg)");
  } else if (error == EINVAL && index >= 0) {
    snprintf(hint, sizeof(hint), " (no device nbd%d, or it is going down)", index);
  }
  std::string text = std::string(command) + ": " + errno_string(error) + hint;
  if (!kernel_message.empty()) text += ": " + kernel_message;
  return text;
}

}  // namespace netlink

// ---- Netlink ----

Result<std::unique_ptr<Netlink>> Netlink::open(std::string* message) {
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
  if (fd < 0) {
    const int os_errno = errno;
    set_message(message, "netlink socket: " + errno_string(os_errno));
    return Unexpected{make_system_error(os_errno, "nbd netlink: socket")};
  }
  // Error strings from the kernel (extended ack) and acks without our request echoed; both
  // optional, so failures (kernels before 4.12) are ignored.
  const int on = 1;
  (void)setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &on, sizeof(on));
  (void)setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &on, sizeof(on));
  sockaddr_nl local{};
  local.nl_family = AF_NETLINK;  // nl_pid 0: the kernel assigns our port id
  socklen_t length = sizeof(local);
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) {
    const int os_errno = errno;
    close(fd);
    set_message(message, "netlink bind: " + errno_string(os_errno));
    return Unexpected{make_system_error(os_errno, "nbd netlink: bind")};
  }
  std::unique_ptr<Netlink> netlink(new Netlink(fd, local.nl_pid));  // setup-path
  const uint32_t seq = netlink->seq_++;
  netlink::Answer answer;
  auto sent = netlink->transact(netlink::build_get_family_message(NBD_GENL_FAMILY_NAME, seq), seq,
                                "CTRL_CMD_GETFAMILY", -1, &answer, message);
  if (!sent) {
    if (sent.error().os_errno == ENOENT) {
      set_message(message, "nbd module not loaded (modprobe nbd)");
      return Unexpected{Errc::not_found, "nbd netlink family", ENOENT};
    }
    return Unexpected{sent.error()};
  }
  auto family = netlink::parse_family(answer.attributes, message);
  if (!family) return Unexpected{family.error()};
  netlink->family_id_ = family->id;
  netlink->has_backend_identifier_ = family->max_attribute >= NBD_ATTR_BACKEND_IDENTIFIER;
  return netlink;
}

Netlink::~Netlink() { close(fd_); }

Result<void> Netlink::transact(const std::vector<uint8_t>& request, uint32_t seq,
                               const char* command, int index, netlink::Answer* answer,
                               std::string* message) {
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  const ssize_t sent = sendto(fd_, request.data(), request.size(), 0,
                              reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel));
  if (sent != static_cast<ssize_t>(request.size())) {
    const int os_errno = sent < 0 ? errno : EMSGSIZE;
    set_message(message, std::string(command) + ": send: " + errno_string(os_errno));
    return Unexpected{make_system_error(os_errno, command)};
  }
  std::vector<uint8_t> buffer;
  while (!answer->acked) {
    pollfd ready{fd_, POLLIN, 0};
    const int events = ::poll(&ready, 1, kAnswerTimeoutMs);
    if (events < 0 && errno == EINTR) continue;
    if (events <= 0) {
      set_message(message, std::string(command) + ": no answer from the kernel in 5 s");
      return Unexpected{Errc::timed_out, command};
    }
    // Peek at the size first: a STATUS of many devices may exceed any fixed buffer.
    const ssize_t size = recv(fd_, nullptr, 0, MSG_PEEK | MSG_TRUNC);
    ssize_t got = size;
    sockaddr_nl from{};
    if (size >= 0) {
      buffer.resize(std::max<size_t>(static_cast<size_t>(size), NLMSG_HDRLEN));
      socklen_t from_length = sizeof(from);
      got = recvfrom(fd_, buffer.data(), buffer.size(), 0, reinterpret_cast<sockaddr*>(&from),
                     &from_length);
    }
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      const int os_errno = errno;
      set_message(message, std::string(command) + ": recv: " + errno_string(os_errno));
      return Unexpected{make_system_error(os_errno, command)};
    }
    if (from.nl_pid != 0) continue;  // only the kernel speaks for the kernel
    auto parsed =
        netlink::parse_datagram({buffer.data(), static_cast<size_t>(got)}, seq, answer, message);
    if (!parsed) return parsed;
  }
  if (answer->error == 0) return {};
  set_message(message,
              netlink::describe_error(command, answer->error, index, answer->error_message));
  return Unexpected{errno_to_errc(answer->error), command, answer->error};
}

Result<int> Netlink::connect(const ConnectParams& params, std::string* message) {
  if (auto valid = check_params(params, message); !valid) return Unexpected{valid.error()};
  std::vector<int> excluded;
  for (int attempt = 1;; ++attempt) {
    auto list = devices(message);
    if (!list) return Unexpected{list.error()};
    const auto target = netlink::choose_connect_target(params.index, *list, excluded);
    auto index = connect_once(params, target, message);
    const bool raced =
        !index && index.error().code == Errc::busy && params.index < 0 && target.index >= 0;
    if (!raced || attempt == kConnectAttempts) return index;
    excluded.push_back(target.index);  // taken since we listed: try the next free one
  }
}

Result<int> Netlink::connect_once(const ConnectParams& params, const netlink::ConnectTarget& target,
                                  std::string* message) {
  ConnectParams sent = params;
  sent.index = target.index;
  if (!has_backend_identifier_) sent.backend_identifier.clear();
  const uint32_t seq = seq_++;
  netlink::Answer answer;
  auto done = transact(netlink::build_connect_message(sent, target.client_flags, family_id_, seq),
                       seq, "NBD_CMD_CONNECT", target.index, &answer, message);
  if (!done) return Unexpected{done.error()};
  auto index = netlink::parse_connect_reply(answer.attributes, message);
  if (!index) return index;
  NVMF_INFOLOG(nbd, "nbd%d: connected over %zu sockets (%s)", *index, params.socket_fds.size(),
               target.client_flags & netlink::kClientFlagDestroyOnDisconnect
                   ? "a device the kernel added for us: removed on disconnect"
                   : "an existing device: kept after disconnect");
  return index;
}

Result<void> Netlink::disconnect(int index, std::string* message) {
  if (index < 0) {
    set_message(message, "NBD_CMD_DISCONNECT: index must be >= 0");
    return Unexpected{Errc::invalid_argument, "nbd disconnect index"};
  }
  const uint32_t seq = seq_++;
  netlink::Answer answer;
  return transact(netlink::build_disconnect_message(index, family_id_, seq), seq,
                  "NBD_CMD_DISCONNECT", index, &answer, message);
}

Result<std::vector<DeviceStatus>> Netlink::status(int index, std::string* message) {
  const uint32_t seq = seq_++;
  netlink::Answer answer;
  auto done = transact(netlink::build_status_message(index, family_id_, seq), seq, "NBD_CMD_STATUS",
                       index, &answer, message);
  if (!done) return Unexpected{done.error()};
  return netlink::parse_status_reply(answer.attributes, message);
}

Result<bool> Netlink::connected(int index, std::string* message) {
  if (index < 0) {
    set_message(message, "NBD_CMD_STATUS: index must be >= 0");
    return Unexpected{Errc::invalid_argument, "nbd status index"};
  }
  auto list = status(index, message);
  if (!list) return Unexpected{list.error()};
  for (const DeviceStatus& device : *list) {
    if (device.index == index) return device.connected;
  }
  return false;
}

Result<std::vector<DeviceStatus>> Netlink::devices(std::string* message) {
  return status(-1, message);
}

}  // namespace nvmf::nbd
