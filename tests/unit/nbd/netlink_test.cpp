// The netlink message builders and parsers, byte by byte, without a kernel; and a live
// check that skips when the nbd module is not loaded (the VM tier runs it for real).
#include "nbd/netlink.h"

#include <linux/genetlink.h>
#include <linux/nbd-netlink.h>
#include <linux/nbd.h>
#include <linux/netlink.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "nbd/wire.h"

namespace nvmf::nbd::netlink {
namespace {

template <typename T>
T load(std::span<const uint8_t> bytes) {
  T value{};
  EXPECT_GE(bytes.size(), sizeof(T));
  std::memcpy(&value, bytes.data(), std::min(sizeof(T), bytes.size()));
  return value;
}

const Attribute* find(const std::vector<Attribute>& attributes, uint16_t type) {
  for (const auto& attribute : attributes) {
    if (attribute.type == type) return &attribute;
  }
  return nullptr;
}

// Checks the netlink and genl headers of `message` and returns its attributes.
std::vector<Attribute> open_message(const std::vector<uint8_t>& message, uint16_t type,
                                    uint32_t seq, uint8_t command) {
  std::vector<Attribute> attributes;
  EXPECT_GE(message.size(), NLMSG_HDRLEN + GENL_HDRLEN);
  if (message.size() < NLMSG_HDRLEN + GENL_HDRLEN) return attributes;
  const auto header = load<nlmsghdr>(message);
  EXPECT_EQ(header.nlmsg_len, message.size());
  EXPECT_EQ(header.nlmsg_type, type);
  EXPECT_EQ(header.nlmsg_flags, NLM_F_REQUEST | NLM_F_ACK);
  EXPECT_EQ(header.nlmsg_seq, seq);
  EXPECT_EQ(header.nlmsg_pid, 0u);
  const auto genl = load<genlmsghdr>(std::span(message).subspan(NLMSG_HDRLEN));
  EXPECT_EQ(genl.cmd, command);
  EXPECT_TRUE(
      split_attributes(std::span(message).subspan(NLMSG_HDRLEN + GENL_HDRLEN), &attributes));
  return attributes;
}

// Builds what the kernel would send: one netlink message with a genl header and `attributes`.
class KernelMessage {
 public:
  KernelMessage(uint16_t type, uint32_t seq, uint16_t flags = 0) {
    nlmsghdr header{};
    header.nlmsg_type = type;
    header.nlmsg_seq = seq;
    header.nlmsg_flags = flags;
    append(&header, sizeof(header));
  }
  KernelMessage& genl(uint8_t command) {
    genlmsghdr genl{};
    genl.cmd = command;
    genl.version = 1;
    append(&genl, sizeof(genl));
    return *this;
  }
  KernelMessage& raw(const void* data, size_t size) {
    append(data, size);
    return *this;
  }
  KernelMessage& attribute(uint16_t type, const void* data, size_t size) {
    nlattr attribute{static_cast<uint16_t>(NLA_HDRLEN + size), type};
    append(&attribute, sizeof(attribute));
    append(data, size);
    bytes_.resize(NLA_ALIGN(bytes_.size()), 0);
    return *this;
  }
  KernelMessage& u32(uint16_t type, uint32_t value) { return attribute(type, &value, 4); }
  KernelMessage& u8(uint16_t type, uint8_t value) { return attribute(type, &value, 1); }
  size_t begin_nested(uint16_t type) {
    const size_t at = bytes_.size();
    nlattr attribute{0, type};
    append(&attribute, sizeof(attribute));
    return at;
  }
  KernelMessage& end_nested(size_t at) {
    const auto length = static_cast<uint16_t>(bytes_.size() - at);
    std::memcpy(bytes_.data() + at, &length, sizeof(length));
    return *this;
  }
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out = bytes_;
    const auto length = static_cast<uint32_t>(out.size());
    std::memcpy(out.data(), &length, sizeof(length));
    return out;
  }

 private:
  void append(const void* data, size_t size) {
    // resize + memcpy: g++ 12 warns falsely (-Wstringop-overflow) on insert() here.
    const size_t at = bytes_.size();
    bytes_.resize(at + size);
    if (size != 0) std::memcpy(bytes_.data() + at, data, size);
  }
  std::vector<uint8_t> bytes_;
};

std::vector<uint8_t> ack(uint32_t seq, int error, const char* extack = nullptr) {
  KernelMessage message(NLMSG_ERROR, seq, extack ? NLM_F_CAPPED | NLM_F_ACK_TLVS : NLM_F_CAPPED);
  nlmsgerr body{};
  body.error = -error;
  body.msg.nlmsg_len = NLMSG_HDRLEN + 100;  // the request's header only (capped)
  body.msg.nlmsg_seq = seq;
  message.raw(&body, sizeof(body));
  if (extack != nullptr) message.attribute(NLMSGERR_ATTR_MSG, extack, std::strlen(extack) + 1);
  return message.bytes();
}

std::vector<uint8_t> concat(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(NbdNetlink, ClientFlagsMatchTheKernelHeader) {
  EXPECT_EQ(kClientFlagDestroyOnDisconnect, uint64_t{NBD_CFLAG_DESTROY_ON_DISCONNECT});
  EXPECT_EQ(kClientFlagDisconnectOnClose, uint64_t{NBD_CFLAG_DISCONNECT_ON_CLOSE});
}

TEST(NbdNetlink, GetFamilyMessage) {
  const auto message = build_get_family_message("nbd", 7);
  const auto attributes = open_message(message, GENL_ID_CTRL, 7, CTRL_CMD_GETFAMILY);
  ASSERT_EQ(attributes.size(), 1u);
  EXPECT_EQ(attributes[0].type, CTRL_ATTR_FAMILY_NAME);
  ASSERT_EQ(attributes[0].payload.size(), 4u) << "NUL-terminated";
  EXPECT_EQ(0, std::memcmp(attributes[0].payload.data(), "nbd", 4));
  EXPECT_EQ(message.size() % 4, 0u);
}

TEST(NbdNetlink, ConnectMessageCarriesEveryAttribute) {
  ConnectParams params;
  params.socket_fds = {5, 9, 12};
  params.size_bytes = 1ull << 30;
  params.block_size_bytes = 4096;
  params.server_flags = wire::kFlagSendFlush | wire::kFlagSendFua | wire::kFlagSendTrim;
  params.timeout_s = 30;
  params.dead_conn_timeout_s = 10;
  params.index = 3;
  params.backend_identifier = "nqn.2014-08.org.example:disk1/nsid 1";
  const auto message = build_connect_message(params, kClientFlagDestroyOnDisconnect, 0x1d, 42);
  const auto attributes = open_message(message, 0x1d, 42, NBD_CMD_CONNECT);

  EXPECT_EQ(load<uint32_t>(find(attributes, NBD_ATTR_INDEX)->payload), 3u);
  EXPECT_EQ(load<uint64_t>(find(attributes, NBD_ATTR_SIZE_BYTES)->payload), 1ull << 30);
  EXPECT_EQ(load<uint64_t>(find(attributes, NBD_ATTR_BLOCK_SIZE_BYTES)->payload), 4096u);
  EXPECT_EQ(
      load<uint64_t>(find(attributes, NBD_ATTR_SERVER_FLAGS)->payload),
      uint64_t{NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_TRIM});
  EXPECT_EQ(load<uint64_t>(find(attributes, NBD_ATTR_CLIENT_FLAGS)->payload),
            uint64_t{NBD_CFLAG_DESTROY_ON_DISCONNECT});
  EXPECT_EQ(load<uint64_t>(find(attributes, NBD_ATTR_TIMEOUT)->payload), 30u);
  EXPECT_EQ(load<uint64_t>(find(attributes, NBD_ATTR_DEAD_CONN_TIMEOUT)->payload), 10u);
  const Attribute* backend = find(attributes, NBD_ATTR_BACKEND_IDENTIFIER);
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(backend->payload.data())),
            params.backend_identifier);

  const Attribute* sockets = find(attributes, NBD_ATTR_SOCKETS);
  ASSERT_NE(sockets, nullptr);
  std::vector<Attribute> items;
  ASSERT_TRUE(split_attributes(sockets->payload, &items));
  ASSERT_EQ(items.size(), 3u);
  for (size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ(items[i].type, NBD_SOCK_ITEM);
    std::vector<Attribute> fields;
    ASSERT_TRUE(split_attributes(items[i].payload, &fields));
    ASSERT_EQ(fields.size(), 1u);
    EXPECT_EQ(fields[0].type, NBD_SOCK_FD);
    EXPECT_EQ(load<uint32_t>(fields[0].payload), static_cast<uint32_t>(params.socket_fds[i]));
  }
  // Nested attributes carry NLA_F_NESTED (split_attributes masks it off for the type).
  uint16_t raw_type = 0;
  std::memcpy(&raw_type, sockets->payload.data() - NLA_HDRLEN + 2, sizeof(raw_type));
  EXPECT_TRUE(raw_type & NLA_F_NESTED);
}

TEST(NbdNetlink, ConnectMessageLeavesOutDefaults) {
  ConnectParams params;
  params.socket_fds = {4};
  params.size_bytes = 1 << 20;
  const auto message = build_connect_message(params, 0, 0x1d, 1);
  const auto attributes = open_message(message, 0x1d, 1, NBD_CMD_CONNECT);
  EXPECT_EQ(find(attributes, NBD_ATTR_INDEX), nullptr) << "-1: the kernel picks";
  EXPECT_EQ(find(attributes, NBD_ATTR_TIMEOUT), nullptr) << "0 would mean 'never time out'";
  EXPECT_EQ(find(attributes, NBD_ATTR_DEAD_CONN_TIMEOUT), nullptr);
  EXPECT_EQ(find(attributes, NBD_ATTR_BACKEND_IDENTIFIER), nullptr);
  ASSERT_NE(find(attributes, NBD_ATTR_CLIENT_FLAGS), nullptr) << "always sent: clears stale";
  EXPECT_EQ(load<uint64_t>(find(attributes, NBD_ATTR_CLIENT_FLAGS)->payload), 0u);
  EXPECT_EQ(load<uint64_t>(find(attributes, NBD_ATTR_SERVER_FLAGS)->payload),
            uint64_t{NBD_FLAG_HAS_FLAGS});
}

TEST(NbdNetlink, DisconnectAndStatusMessages) {
  // The attributes point into the message: keep each one alive while they are read.
  const auto disconnect = build_disconnect_message(5, 0x1d, 9);
  auto attributes = open_message(disconnect, 0x1d, 9, NBD_CMD_DISCONNECT);
  ASSERT_EQ(attributes.size(), 1u);
  EXPECT_EQ(load<uint32_t>(find(attributes, NBD_ATTR_INDEX)->payload), 5u);
  const auto one = build_status_message(2, 0x1d, 10);
  attributes = open_message(one, 0x1d, 10, NBD_CMD_STATUS);
  ASSERT_EQ(attributes.size(), 1u);
  EXPECT_EQ(load<uint32_t>(find(attributes, NBD_ATTR_INDEX)->payload), 2u);
  const auto all = build_status_message(-1, 0x1d, 11);
  attributes = open_message(all, 0x1d, 11, NBD_CMD_STATUS);
  EXPECT_TRUE(attributes.empty()) << "all devices";
}

TEST(NbdNetlink, ParsesAReplyFollowedByItsAck) {
  const auto reply = KernelMessage(0x1d, 42).genl(NBD_CMD_CONNECT).u32(NBD_ATTR_INDEX, 3).bytes();
  Answer answer;
  std::string message;
  ASSERT_TRUE(parse_datagram(reply, 42, &answer, &message)) << message;
  EXPECT_FALSE(answer.acked) << "the ack is still to come";
  EXPECT_EQ(answer.command, NBD_CMD_CONNECT);
  ASSERT_TRUE(parse_datagram(ack(42, 0), 42, &answer, &message)) << message;
  EXPECT_TRUE(answer.acked);
  EXPECT_EQ(answer.error, 0);
  auto index = parse_connect_reply(answer.attributes, &message);
  ASSERT_TRUE(index) << message;
  EXPECT_EQ(*index, 3);
}

TEST(NbdNetlink, ParsesTwoMessagesInOneDatagramAndSkipsOtherSequences) {
  const auto stale = KernelMessage(0x1d, 41).genl(NBD_CMD_CONNECT).u32(NBD_ATTR_INDEX, 9).bytes();
  const auto reply = KernelMessage(0x1d, 42).genl(NBD_CMD_CONNECT).u32(NBD_ATTR_INDEX, 4).bytes();
  Answer answer;
  std::string message;
  ASSERT_TRUE(parse_datagram(concat(concat(stale, reply), ack(42, 0)), 42, &answer, &message));
  EXPECT_TRUE(answer.acked);
  EXPECT_EQ(*parse_connect_reply(answer.attributes, &message), 4);
}

TEST(NbdNetlink, ParsesAnErrorAckWithTheKernelsMessage) {
  Answer answer;
  std::string message;
  ASSERT_TRUE(parse_datagram(ack(8, EBUSY, "device busy"), 8, &answer, &message));
  EXPECT_TRUE(answer.acked);
  EXPECT_EQ(answer.error, EBUSY);
  EXPECT_EQ(answer.error_message, "device busy");

  // Without NETLINK_CAP_ACK the request is echoed before the TLVs.
  KernelMessage uncapped(NLMSG_ERROR, 8, NLM_F_ACK_TLVS);
  nlmsgerr body{};
  body.error = -EINVAL;
  body.msg.nlmsg_len = NLMSG_HDRLEN + 8;
  const uint8_t echoed[8] = {};
  uncapped.raw(&body, sizeof(body)).raw(echoed, sizeof(echoed));
  uncapped.attribute(NLMSGERR_ATTR_MSG, "bad", 4);
  Answer second;
  ASSERT_TRUE(parse_datagram(uncapped.bytes(), 8, &second, &message));
  EXPECT_EQ(second.error, EINVAL);
  EXPECT_EQ(second.error_message, "bad");
}

TEST(NbdNetlink, RejectsMalformedLengths) {
  Answer answer;
  std::string message;
  auto bytes = ack(1, 0);
  bytes.resize(10);  // shorter than a header
  EXPECT_FALSE(parse_datagram(bytes, 1, &answer, &message));
  EXPECT_NE(message.find("malformed"), std::string::npos);

  bytes = ack(1, 0);
  const uint32_t too_long = static_cast<uint32_t>(bytes.size() + 4);
  std::memcpy(bytes.data(), &too_long, 4);
  EXPECT_FALSE(parse_datagram(bytes, 1, &answer, &message));

  bytes = ack(1, 0);
  const uint32_t too_short = 8;
  std::memcpy(bytes.data(), &too_short, 4);
  EXPECT_FALSE(parse_datagram(bytes, 1, &answer, &message));

  const auto no_genl = KernelMessage(0x1d, 1).bytes();  // a family message without genlmsghdr
  EXPECT_FALSE(parse_datagram(no_genl, 1, &answer, &message));

  // An attribute whose length runs past its message.
  std::vector<uint8_t> attributes = {8, 0, 1, 0, 3, 0, 0, 0, 12, 0, 2, 0, 0, 0};
  std::vector<Attribute> split;
  EXPECT_FALSE(split_attributes(attributes, &split));
  attributes = {2, 0, 1, 0};  // nla_len below the header
  EXPECT_FALSE(split_attributes(attributes, &split));
  attributes = {8, 0, 1, 0, 3, 0, 0, 0, 1};  // trailing garbage
  EXPECT_FALSE(split_attributes(attributes, &split));
  EXPECT_FALSE(parse_connect_reply({}, &message)) << "no NBD_ATTR_INDEX";
}

TEST(NbdNetlink, ParsesTheFamilyReply) {
  KernelMessage reply(GENL_ID_CTRL, 1);
  reply.genl(CTRL_CMD_NEWFAMILY);
  const uint16_t id = 0x23;
  reply.attribute(CTRL_ATTR_FAMILY_ID, &id, sizeof(id));
  reply.attribute(CTRL_ATTR_FAMILY_NAME, "nbd", 4);
  reply.u32(CTRL_ATTR_MAXATTR, NBD_ATTR_BACKEND_IDENTIFIER);
  Answer answer;
  std::string message;
  ASSERT_TRUE(parse_datagram(reply.bytes(), 1, &answer, &message));
  auto family = parse_family(answer.attributes, &message);
  ASSERT_TRUE(family) << message;
  EXPECT_EQ(family->id, 0x23);
  EXPECT_EQ(family->max_attribute, uint32_t{NBD_ATTR_BACKEND_IDENTIFIER});
  EXPECT_FALSE(parse_family({}, &message));
}

TEST(NbdNetlink, ParsesTheDeviceList) {
  KernelMessage reply(0x1d, 5);
  reply.genl(NBD_CMD_STATUS);
  const size_t list = reply.begin_nested(NBD_ATTR_DEVICE_LIST);
  const int indexes[] = {0, 1, 7};
  const uint8_t connected[] = {1, 0, 1};
  for (int i = 0; i < 3; ++i) {
    const size_t item = reply.begin_nested(NBD_DEVICE_ITEM);
    reply.u32(NBD_DEVICE_INDEX, static_cast<uint32_t>(indexes[i]));
    reply.u8(NBD_DEVICE_CONNECTED, connected[i]);
    reply.end_nested(item);
  }
  reply.end_nested(list);
  Answer answer;
  std::string message;
  ASSERT_TRUE(parse_datagram(concat(reply.bytes(), ack(5, 0)), 5, &answer, &message));
  auto devices = parse_status_reply(answer.attributes, &message);
  ASSERT_TRUE(devices) << message;
  ASSERT_EQ(devices->size(), 3u);
  EXPECT_EQ((*devices)[2].index, 7);
  EXPECT_TRUE((*devices)[0].connected);
  EXPECT_FALSE((*devices)[1].connected);

  KernelMessage empty(0x1d, 6);
  empty.genl(NBD_CMD_STATUS);
  empty.end_nested(empty.begin_nested(NBD_ATTR_DEVICE_LIST));
  Answer second;
  ASSERT_TRUE(parse_datagram(empty.bytes(), 6, &second, &message));
  devices = parse_status_reply(second.attributes, &message);
  ASSERT_TRUE(devices);
  EXPECT_TRUE(devices->empty()) << "STATUS of an index that does not exist";

  KernelMessage broken(0x1d, 7);
  broken.genl(NBD_CMD_STATUS);
  const size_t broken_list = broken.begin_nested(NBD_ATTR_DEVICE_LIST);
  const size_t broken_item = broken.begin_nested(NBD_DEVICE_ITEM);
  broken.u8(NBD_DEVICE_CONNECTED, 1);  // no index
  broken.end_nested(broken_item);
  broken.end_nested(broken_list);
  Answer third;
  ASSERT_TRUE(parse_datagram(broken.bytes(), 7, &third, &message));
  EXPECT_FALSE(parse_status_reply(third.attributes, &message));
}

TEST(NbdNetlink, ChoosesAnExistingFreeDeviceBeforeLettingTheKernelAddOne) {
  const std::vector<DeviceStatus> devices = {{0, true}, {1, false}, {2, false}, {3, true}};
  ConnectTarget target = choose_connect_target(-1, devices, {});
  EXPECT_EQ(target.index, 1);
  EXPECT_EQ(target.client_flags, 0u) << "a modprobe device stays after disconnect";
  target = choose_connect_target(-1, devices, {1});
  EXPECT_EQ(target.index, 2) << "1 was taken by a racing user";
  target = choose_connect_target(-1, devices, {1, 2});
  EXPECT_EQ(target.index, -1);
  EXPECT_EQ(target.client_flags, kClientFlagDestroyOnDisconnect) << "the kernel adds it: ours";
  target = choose_connect_target(-1, {}, {});
  EXPECT_EQ(target.index, -1);
  EXPECT_EQ(target.client_flags, kClientFlagDestroyOnDisconnect);
  target = choose_connect_target(3, devices, {});
  EXPECT_EQ(target.index, 3);
  EXPECT_EQ(target.client_flags, 0u) << "exists (busy or not: the kernel decides)";
  target = choose_connect_target(20, devices, {});
  EXPECT_EQ(target.index, 20);
  EXPECT_EQ(target.client_flags, kClientFlagDestroyOnDisconnect);
}

TEST(NbdNetlink, DescribesKernelErrorsInOneLine) {
  EXPECT_EQ(describe_error("NBD_CMD_CONNECT", EBUSY, 3, ""),
            "NBD_CMD_CONNECT: Device or resource busy (index 3 in use)");
  EXPECT_EQ(describe_error("NBD_CMD_CONNECT", EPERM, -1, ""),
            "NBD_CMD_CONNECT: Operation not permitted (needs CAP_SYS_ADMIN)");
  EXPECT_EQ(describe_error("NBD_CMD_DISCONNECT", EINVAL, 4, ""),
            "NBD_CMD_DISCONNECT: Invalid argument (no device nbd4, or it is going down)");
  EXPECT_EQ(describe_error("NBD_CMD_CONNECT", EINVAL, -1, "size"),
            "NBD_CMD_CONNECT: Invalid argument (the kernel logs the reason: see dmesg): size");
  EXPECT_EQ(describe_error("NBD_CMD_STATUS", ENOMEM, -1, ""),
            "NBD_CMD_STATUS: Cannot allocate memory");
}

// Talks to the real driver when it is there (the VM tier); read-only: STATUS only.
TEST(NbdNetlinkLive, OpensAndListsDevicesWhenTheModuleIsLoaded) {
  std::string message;
  auto netlink = Netlink::open(&message);
  if (!netlink && netlink.error().code == Errc::not_found) {
    EXPECT_EQ(message, "nbd module not loaded (modprobe nbd)");
    GTEST_SKIP() << message;
  }
  if (!netlink) GTEST_SKIP() << "no generic netlink here: " << message;
  EXPECT_NE((*netlink)->family_id(), 0);
  auto devices = (*netlink)->devices(&message);
  ASSERT_TRUE(devices) << message;
  auto connected = (*netlink)->connected(1 << 20, &message);  // no such device
  ASSERT_TRUE(connected) << message;
  EXPECT_FALSE(*connected);

  ConnectParams bad;  // checked before anything is sent
  auto refused = (*netlink)->connect(bad, &message);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::invalid_argument);
  EXPECT_EQ(message, "NBD_CMD_CONNECT: no socket_fds");
}

}  // namespace
}  // namespace nvmf::nbd::netlink
