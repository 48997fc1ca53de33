// wire.h against the kernel's uapi header and against hand-written wire bytes.
#include "nbd/wire.h"

#include <linux/nbd.h>

#include <gtest/gtest.h>

#include <cstring>

namespace nvmf::nbd::wire {
namespace {

TEST(NbdWire, ConstantsMatchTheKernelHeader) {
  EXPECT_EQ(kRequestMagic, uint32_t{NBD_REQUEST_MAGIC});
  EXPECT_EQ(kSimpleReplyMagic, uint32_t{NBD_REPLY_MAGIC});
  EXPECT_EQ(static_cast<int>(Command::read), NBD_CMD_READ);
  EXPECT_EQ(static_cast<int>(Command::write), NBD_CMD_WRITE);
  EXPECT_EQ(static_cast<int>(Command::disconnect), NBD_CMD_DISC);
  EXPECT_EQ(static_cast<int>(Command::flush), NBD_CMD_FLUSH);
  EXPECT_EQ(static_cast<int>(Command::trim), NBD_CMD_TRIM);
  EXPECT_EQ(uint32_t{kCmdFlagFua} << kKernelCmdFlagShift, uint32_t{NBD_CMD_FLAG_FUA});
  EXPECT_EQ(kFlagHasFlags, NBD_FLAG_HAS_FLAGS);
  EXPECT_EQ(kFlagReadOnly, NBD_FLAG_READ_ONLY);
  EXPECT_EQ(kFlagSendFlush, NBD_FLAG_SEND_FLUSH);
  EXPECT_EQ(kFlagSendFua, NBD_FLAG_SEND_FUA);
  EXPECT_EQ(kFlagSendTrim, NBD_FLAG_SEND_TRIM);
  EXPECT_EQ(kFlagCanMultiConn, NBD_FLAG_CAN_MULTI_CONN);
#ifdef NBD_FLAG_SEND_WRITE_ZEROES  // uapi headers before the kernel learnt write zeroes
  EXPECT_EQ(kFlagSendWriteZeroes, NBD_FLAG_SEND_WRITE_ZEROES);
  EXPECT_EQ(static_cast<int>(Command::write_zeroes), NBD_CMD_WRITE_ZEROES);
#endif
#ifdef NBD_CMD_FLAG_NO_HOLE
  EXPECT_EQ(uint32_t{kCmdFlagNoHole} << kKernelCmdFlagShift, uint32_t{NBD_CMD_FLAG_NO_HOLE});
#endif
#ifdef NBD_FLAG_ROTATIONAL
  EXPECT_EQ(kFlagRotational, NBD_FLAG_ROTATIONAL);
#endif
  EXPECT_EQ(sizeof(Request), sizeof(nbd_request));
  EXPECT_EQ(sizeof(SimpleReply), sizeof(nbd_reply));
  EXPECT_EQ(offsetof(Request, handle), offsetof(nbd_request, handle));
  EXPECT_EQ(offsetof(Request, offset_be), offsetof(nbd_request, from));
  EXPECT_EQ(offsetof(Request, length_be), offsetof(nbd_request, len));
}

TEST(NbdWire, RequestBytesAreBigEndianWithFlagsBeforeType) {
  const Request request = make_request(Command::write, kCmdFlagFua, 0x0102030405060708ull,
                                       0x1122334455667788ull, 0x99aabbcc);
  uint8_t bytes[sizeof(Request)];
  std::memcpy(bytes, &request, sizeof(bytes));
  const uint8_t expected_head[8] = {0x25, 0x60, 0x95, 0x13, 0x00, 0x01, 0x00, 0x01};
  EXPECT_EQ(0, std::memcmp(bytes, expected_head, sizeof(expected_head)));
  uint64_t handle = 0;
  std::memcpy(&handle, bytes + 8, sizeof(handle));  // opaque: host order, echoed as is
  EXPECT_EQ(handle, 0x0102030405060708ull);
  const uint8_t expected_tail[12] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66,
                                     0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc};
  EXPECT_EQ(0, std::memcmp(bytes + 16, expected_tail, sizeof(expected_tail)));

  // The kernel's view of the same bytes: one be32 type with the flags in the upper half.
  nbd_request kernel{};
  std::memcpy(&kernel, bytes, sizeof(kernel));
  EXPECT_EQ(from_be32(kernel.type), uint32_t{NBD_CMD_WRITE} | uint32_t{NBD_CMD_FLAG_FUA});
  EXPECT_EQ(request.magic(), kRequestMagic);
  EXPECT_EQ(request.flags(), kCmdFlagFua);
  EXPECT_EQ(request.type(), static_cast<uint16_t>(Command::write));
  EXPECT_EQ(request.offset(), 0x1122334455667788ull);
  EXPECT_EQ(request.length(), 0x99aabbccu);
}

TEST(NbdWire, SimpleReplyBytes) {
  const uint8_t handle[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const SimpleReply reply = make_simple_reply(kErrorNoSpace, handle);
  uint8_t bytes[sizeof(SimpleReply)];
  std::memcpy(bytes, &reply, sizeof(bytes));
  const uint8_t expected[16] = {0x67, 0x44, 0x66, 0x98, 0, 0, 0, 28, 1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(0, std::memcmp(bytes, expected, sizeof(expected)));
  EXPECT_EQ(reply.magic(), kSimpleReplyMagic);
  EXPECT_EQ(reply.error(), kErrorNoSpace);
}

}  // namespace
}  // namespace nvmf::nbd::wire
