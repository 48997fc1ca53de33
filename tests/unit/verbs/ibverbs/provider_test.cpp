// The provider against the real rdma-core. Without RDMA hardware only the no-device
// behaviour runs; the loopback tests need a device and NVMF_TEST_RDMA_ADDR (the IPv4 address
// of a netdev with an RDMA device, e.g. soft-RoCE in the VM tier) and skip otherwise.
#include <poll.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "verbs/ibverbs/ibverbs.h"
#include "verbs/ibverbs/ibverbs_internal.h"

namespace nvmf::verbs::ibverbs {
namespace {

using Clock = std::chrono::steady_clock;

int rdma_device_count() {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) return 0;
  ibv_free_device_list(list);
  return count;
}

bool rdma_cm_present() { return access("/dev/infiniband/rdma_cm", F_OK) == 0; }

const char* kNoDevice =
    "no RDMA device: ibv_get_device_list returned 0 devices; these run in the VM tier";

// --- no device needed

TEST(IbverbsProvider, CreatesAndListsDevicesWithOrWithoutHardware) {
  auto provider = IbverbsProvider::create();
  ASSERT_TRUE(provider);
  EXPECT_STREQ((*provider)->name(), "ibverbs");
  const auto names = (*provider)->device_names();
  EXPECT_EQ(names.size(), static_cast<size_t>(rdma_device_count()));
  for (const auto& name : names) EXPECT_FALSE(name.empty());
}

TEST(IbverbsProvider, CmChannelFailsCleanlyWithoutRdmaCmAndWorksWithIt) {
  auto provider = IbverbsProvider::create();
  ASSERT_TRUE(provider);
  auto channel = (*provider)->create_cm_channel();
  if (!rdma_cm_present()) {
    ASSERT_FALSE(channel) << "rdma_create_event_channel succeeded without /dev/infiniband/rdma_cm";
    EXPECT_NE(channel.error().os_errno, 0);
    EXPECT_STREQ(channel.error().detail, "rdma_create_event_channel");
    return;
  }
  ASSERT_TRUE(channel);
  EXPECT_GE((*channel)->event_fd(), 0);
  CmEvent event;
  EXPECT_FALSE((*channel)->poll_event(&event));  // non-blocking, nothing waiting
  EXPECT_EQ((*channel)->adopt(nullptr), nullptr);
}

// With rdma_cm present, listening on an address no RDMA device owns fails with an Error,
// resolving one reports an event rather than hanging, and malformed addresses never reach
// librdmacm.
TEST(IbverbsProvider, ListenAndResolveFailCleanlyOnAddressesWithoutADevice) {
  if (!rdma_cm_present()) GTEST_SKIP() << "no /dev/infiniband/rdma_cm: CM ids need it (VM tier)";
  auto provider = IbverbsProvider::create();
  ASSERT_TRUE(provider);
  auto channel = (*provider)->create_cm_channel();
  ASSERT_TRUE(channel);
  auto id = (*channel)->create_id();
  ASSERT_TRUE(id);
  EXPECT_EQ((*id)->listen("not-an-address", 4420, 4).error().code, Errc::invalid_argument);
  EXPECT_EQ((*id)->resolve("", 4420, 100).error().code, Errc::invalid_argument);
  EXPECT_EQ((*id)->device(), nullptr);  // not bound yet
  // 192.0.2.1 (TEST-NET-1) is nobody's address.
  EXPECT_FALSE((*id)->listen("192.0.2.1", 4420, 4));
  auto other = (*channel)->create_id();
  ASSERT_TRUE(other);
  auto resolved = (*other)->resolve("192.0.2.1", 4420, 200);
  if (resolved) {
    CmEvent event;
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    bool got = false;
    while (!got && Clock::now() < deadline) {
      got = (*channel)->poll_event(&event);
      if (!got) usleep(1000);
    }
    ASSERT_TRUE(got) << "no event after resolving an address without a device";
    // unreachable, or route_resolved where a default route leads through an RDMA netdev.
    EXPECT_TRUE(event.type == CmEventType::unreachable || event.type == CmEventType::route_resolved)
        << cm_event_type_name(event.type);
  }
}

// --- loopback over a real device (VM tier)

bool wait_readable(int fd, int timeout_ms) {
  pollfd pfd{fd, POLLIN, 0};
  return ::poll(&pfd, 1, timeout_ms) > 0;
}

// Waits for the next event on `channel`; fails the test on timeout.
bool next_event(CmChannel& channel, CmEvent* event, int timeout_ms = 5000) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Clock::now() < deadline) {
    if (channel.poll_event(event)) return true;
    wait_readable(channel.event_fd(), 10);
  }
  return false;
}

std::vector<WorkCompletion> poll_completions(CompletionQueue& cq, size_t count,
                                             int timeout_ms = 5000) {
  std::vector<WorkCompletion> all;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  WorkCompletion batch[16];
  while (all.size() < count && Clock::now() < deadline) {
    const int got = cq.poll(batch);
    for (int i = 0; i < got; ++i) all.push_back(batch[i]);
    if (got == 0) usleep(100);
  }
  return all;
}

uint16_t next_port() {
  static std::atomic<int> counter{0};
  return static_cast<uint16_t>(20000 + (getpid() * 7 + counter++) % 20000);
}

constexpr size_t kBufferBytes = 64 * 1024;
constexpr uint32_t kAllAccess =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessMwBind;

// One end of a loopback connection: id, PD, CQ, QP and a registered buffer.
struct Side {
  std::unique_ptr<CmId> id;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<SharedReceiveQueue> srq;
  std::vector<uint8_t> buffer = std::vector<uint8_t>(kBufferBytes);
  std::unique_ptr<MemoryRegion> mr;
  QueuePair* qp = nullptr;

  uint64_t addr(size_t offset) const { return reinterpret_cast<uint64_t>(buffer.data() + offset); }
  Sge sge(size_t offset, uint32_t length) const { return Sge{addr(offset), length, mr->lkey()}; }

  // Teardown in reverse order of creation: QP (with the id), MR, SRQ, CQ, PD.
  ~Side() {
    id.reset();
    mr.reset();
    srq.reset();
    cq.reset();
    pd.reset();
  }

  ::testing::AssertionResult build(bool event_fd, bool with_srq) {
    Device* device = id->device();
    if (device == nullptr) return ::testing::AssertionFailure() << "CmId::device() is null";
    auto made_pd = device->allocate_pd();
    if (!made_pd) return ::testing::AssertionFailure() << "allocate_pd failed";
    pd = std::move(*made_pd);
    CqOpts cq_opts;
    cq_opts.depth = 256;
    cq_opts.with_event_fd = event_fd;
    auto made_cq = pd->create_cq(cq_opts);
    if (!made_cq) return ::testing::AssertionFailure() << "create_cq failed";
    cq = std::move(*made_cq);
    auto made_mr = pd->register_memory(buffer.data(), buffer.size(), kAllAccess);
    if (!made_mr) return ::testing::AssertionFailure() << "register_memory failed";
    mr = std::move(*made_mr);
    QpOpts opts;
    opts.send_cq = cq.get();
    opts.recv_cq = cq.get();
    opts.max_send_wr = 64;
    opts.max_recv_wr = 64;
    opts.max_send_sge = 2;
    if (with_srq) {
      SrqOpts srq_opts;
      srq_opts.max_wr = 64;
      auto made_srq = pd->create_srq(srq_opts);
      if (!made_srq) return ::testing::AssertionFailure() << "create_srq failed";
      srq = std::move(*made_srq);
      opts.srq = srq.get();
    }
    auto made_qp = id->create_qp(*pd, opts);
    if (!made_qp) return ::testing::AssertionFailure() << "create_qp failed";
    qp = *made_qp;
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult post_recv(uint64_t wr_id, size_t offset, uint32_t length) {
    const Sge s = sge(offset, length);
    RecvWr wr;
    wr.wr_id = wr_id;
    wr.sg_list = &s;
    wr.num_sge = 1;
    Result<void> posted = srq != nullptr ? srq->post_recv(wr) : qp->post_recv(wr);
    if (!posted) return ::testing::AssertionFailure() << "post_recv failed";
    Result<void> flushed = srq != nullptr ? srq->flush() : qp->flush();
    if (!flushed) return ::testing::AssertionFailure() << "flush failed";
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult send(const SendWr& wr) {
    if (!qp->post_send(wr)) return ::testing::AssertionFailure() << "post_send failed";
    if (!qp->flush()) return ::testing::AssertionFailure() << "flush failed";
    return ::testing::AssertionSuccess();
  }
};

struct LoopbackOpts {
  bool server_event_fd = false;
  bool server_srq = false;
  std::vector<uint8_t> request_data;  // client -> server in the CM REQ
  std::vector<uint8_t> accept_data;   // server -> client in the CM REP
  bool reject = false;                // server rejects with accept_data instead
};

class Loopback : public ::testing::Test {
 protected:
  void SetUp() override {
    if (rdma_device_count() == 0) GTEST_SKIP() << kNoDevice;
    const char* address = getenv("NVMF_TEST_RDMA_ADDR");
    if (address == nullptr || address[0] == '\0') {
      GTEST_SKIP() << "set NVMF_TEST_RDMA_ADDR to the IPv4 address of a netdev with an RDMA "
                      "device (the VM tier does)";
    }
    address_ = address;
    auto provider = IbverbsProvider::create();
    ASSERT_TRUE(provider);
    provider_ = std::move(*provider);
    auto server_channel = provider_->create_cm_channel();
    auto client_channel = provider_->create_cm_channel();
    ASSERT_TRUE(server_channel && client_channel);
    server_channel_ = std::move(*server_channel);
    client_channel_ = std::move(*client_channel);
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
    listener_.reset();
    client_channel_.reset();
    server_channel_.reset();
    provider_.reset();
  }

  // Listens, resolves, connects and accepts; the two sides are ready for traffic after.
  void connect(const LoopbackOpts& opts = {}) {
    port_ = next_port();
    auto listener = server_channel_->create_id();
    ASSERT_TRUE(listener);
    listener_ = std::move(*listener);
    ASSERT_TRUE(listener_->listen(address_, port_, 8)) << address_ << ":" << port_;

    client_ = std::make_unique<Side>();
    auto client_id = client_channel_->create_id();
    ASSERT_TRUE(client_id);
    client_->id = std::move(*client_id);
    ASSERT_TRUE(client_->id->resolve(address_, port_, 2000));
    CmEvent event;
    ASSERT_TRUE(next_event(*client_channel_, &event));
    ASSERT_EQ(event.type, CmEventType::route_resolved) << cm_event_type_name(event.type);
    ASSERT_TRUE(client_->build(false, false));
    ConnectParams params;
    params.private_data = opts.request_data.data();
    params.private_data_length = static_cast<uint8_t>(opts.request_data.size());
    params.responder_resources = 4;
    params.initiator_depth = 4;
    ASSERT_TRUE(client_->id->connect(params));

    ASSERT_TRUE(next_event(*server_channel_, &event));
    ASSERT_EQ(event.type, CmEventType::connect_request) << cm_event_type_name(event.type);
    EXPECT_EQ(event.listen_id, listener_.get());
    request_event_ = event;
    server_ = std::make_unique<Side>();
    server_->id = server_channel_->adopt(event.id);
    ASSERT_NE(server_->id, nullptr);
    ConnectParams answer;
    answer.private_data = opts.accept_data.data();
    answer.private_data_length = static_cast<uint8_t>(opts.accept_data.size());
    if (opts.reject) {
      ASSERT_TRUE(server_->id->reject(answer.private_data, answer.private_data_length));
      return;
    }
    ASSERT_TRUE(server_->build(opts.server_event_fd, opts.server_srq));
    answer.responder_resources = 4;
    answer.initiator_depth = 4;
    ASSERT_TRUE(server_->id->accept(answer));
    ASSERT_TRUE(next_event(*client_channel_, &event));
    ASSERT_EQ(event.type, CmEventType::established) << cm_event_type_name(event.type);
    established_event_ = event;
    ASSERT_TRUE(next_event(*server_channel_, &event));
    ASSERT_EQ(event.type, CmEventType::established) << cm_event_type_name(event.type);
  }

  std::string address_;
  uint16_t port_ = 0;
  std::unique_ptr<IbverbsProvider> provider_;
  std::unique_ptr<CmChannel> server_channel_;
  std::unique_ptr<CmChannel> client_channel_;
  std::unique_ptr<CmId> listener_;
  std::unique_ptr<Side> server_;
  std::unique_ptr<Side> client_;
  CmEvent request_event_;
  CmEvent established_event_;
};

TEST_F(Loopback, DeviceReportsCapsAndTheQpWhatItGranted) {
  ASSERT_NO_FATAL_FAILURE(connect());
  Device* device = client_->id->device();
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(device, server_->id->device());  // one Device per RDMA device
  const DeviceCaps& caps = device->caps();
  EXPECT_FALSE(caps.name.empty());
  EXPECT_GT(caps.max_qp_wr, 0u);
  EXPECT_GT(caps.max_cqe, 0u);
  const QpOpts& granted = client_->qp->granted();
  EXPECT_GE(granted.max_send_wr, 64u);
  EXPECT_GE(granted.max_recv_wr, 64u);
  EXPECT_GE(granted.max_send_sge, 2u);
  EXPECT_EQ(client_->qp->state(), QpState::ready_to_send);
  EXPECT_GE(client_->cq->depth(), 256u);
  EXPECT_NE(client_->id->peer_address().find(address_), std::string::npos);
}

TEST_F(Loopback, QpOptsBeyondTheDeviceFailNamingTheKnob) {
  ASSERT_NO_FATAL_FAILURE(connect());
  auto extra = client_channel_->create_id();
  ASSERT_TRUE(extra);
  ASSERT_TRUE((*extra)->resolve(address_, port_, 2000));
  CmEvent event;
  ASSERT_TRUE(next_event(*client_channel_, &event));
  ASSERT_EQ(event.type, CmEventType::route_resolved);
  QpOpts opts;
  opts.send_cq = client_->cq.get();
  opts.recv_cq = client_->cq.get();
  opts.max_send_wr = client_->id->device()->caps().max_qp_wr + 1;
  auto qp = (*extra)->create_qp(*client_->pd, opts);
  ASSERT_FALSE(qp);
  EXPECT_EQ(qp.error().code, Errc::invalid_argument);
  EXPECT_NE(std::string(qp.error().detail).find("max_send_wr"), std::string::npos);
  CqOpts cq_opts;
  cq_opts.depth = client_->id->device()->caps().max_cqe + 1;
  EXPECT_EQ(client_->pd->create_cq(cq_opts).error().code, Errc::invalid_argument);
}

TEST_F(Loopback, SendAndReceive) {
  ASSERT_NO_FATAL_FAILURE(connect());
  ASSERT_TRUE(server_->post_recv(100, 0, 1024));
  memset(client_->buffer.data(), 0x5A, 100);
  const Sge sge = client_->sge(0, 100);
  SendWr wr;
  wr.wr_id = 7;
  wr.opcode = WrOpcode::send;
  wr.flags = kWrSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ASSERT_TRUE(client_->send(wr));
  auto sent = poll_completions(*client_->cq, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, WcStatus::success) << wc_status_name(sent[0].status);
  EXPECT_EQ(sent[0].opcode, WcOpcode::send);
  EXPECT_EQ(sent[0].wr_id, 7u);
  auto received = poll_completions(*server_->cq, 1);
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(received[0].status, WcStatus::success);
  EXPECT_EQ(received[0].opcode, WcOpcode::recv);
  EXPECT_EQ(received[0].wr_id, 100u);
  EXPECT_EQ(received[0].byte_len, 100u);
  EXPECT_FALSE(received[0].remote_invalidated);
  EXPECT_EQ(received[0].qp_num, server_->qp->qp_num());
  EXPECT_EQ(server_->buffer[99], 0x5A);
  auto* server_qp = static_cast<IbvQueuePair*>(server_->qp);
  auto* client_qp = static_cast<IbvQueuePair*>(client_->qp);
  EXPECT_EQ(server_qp->recv_outstanding(), 0u);
  EXPECT_EQ(client_qp->send_outstanding(), 0u);
}

TEST_F(Loopback, RdmaWriteThenReadBack) {
  ASSERT_NO_FATAL_FAILURE(connect());
  for (size_t i = 0; i < 4096; ++i) client_->buffer[i] = static_cast<uint8_t>(i * 7);
  const Sge source = client_->sge(0, 4096);
  SendWr write;
  write.wr_id = 1;
  write.opcode = WrOpcode::rdma_write;
  write.sg_list = &source;
  write.num_sge = 1;
  write.remote_addr = server_->addr(8192);
  write.rkey = server_->mr->rkey();  // unsignaled: completes with the READ below
  ASSERT_TRUE(client_->qp->post_send(write));
  const Sge sink = client_->sge(16384, 4096);
  SendWr read = write;
  read.wr_id = 2;
  read.opcode = WrOpcode::rdma_read;
  read.flags = kWrSignaled;
  read.sg_list = &sink;
  ASSERT_TRUE(client_->qp->post_send(read));
  ASSERT_TRUE(client_->qp->flush());  // one doorbell for both
  auto done = poll_completions(*client_->cq, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, WcStatus::success) << wc_status_name(done[0].status);
  EXPECT_EQ(done[0].opcode, WcOpcode::rdma_read);
  EXPECT_EQ(done[0].byte_len, 4096u);
  EXPECT_EQ(memcmp(server_->buffer.data() + 8192, client_->buffer.data(), 4096), 0);
  EXPECT_EQ(memcmp(client_->buffer.data() + 16384, client_->buffer.data(), 4096), 0);
  EXPECT_EQ(static_cast<IbvQueuePair*>(client_->qp)->send_outstanding(), 0u);
}

// Binds a window on the server's buffer [offset, offset + length); returns its key.
::testing::AssertionResult bind_window(Side& side, MemoryWindow& window, size_t offset,
                                       uint64_t length, uint32_t* key) {
  SendWr bind;
  bind.wr_id = 0xB1;
  bind.opcode = WrOpcode::bind_mw;
  bind.flags = kWrSignaled;
  bind.bind.mw = &window;
  bind.bind.mr = side.mr.get();
  bind.bind.addr = side.addr(offset);
  bind.bind.length = length;
  bind.bind.access = kAccessRemoteRead | kAccessRemoteWrite;
  bind.bind.rkey = window.next_rkey();
  *key = bind.bind.rkey;
  if (auto sent = side.send(bind); !sent) return sent;
  auto done = poll_completions(*side.cq, 1);
  if (done.size() != 1 || done[0].status != WcStatus::success ||
      done[0].opcode != WcOpcode::bind_mw) {
    return ::testing::AssertionFailure()
           << "bind: " << (done.empty() ? "no completion" : wc_status_name(done[0].status));
  }
  if (window.rkey() != *key) return ::testing::AssertionFailure() << "window key not updated";
  return ::testing::AssertionSuccess();
}

TEST_F(Loopback, WindowBindThenSendWithInvalidateNormalisesTheFlag) {
  ASSERT_NO_FATAL_FAILURE(connect());
  if (!server_->id->device()->caps().memory_window_type2) {
    GTEST_SKIP() << "device lacks type-2 memory windows";
  }
  auto window = server_->pd->allocate_window();
  ASSERT_TRUE(window);
  uint32_t key = 0;
  ASSERT_TRUE(bind_window(*server_, **window, 4096, 4096, &key));
  ASSERT_TRUE(server_->post_recv(200, 0, 256));

  // The client writes through the window, then sends with invalidate of its key.
  memset(client_->buffer.data(), 0xC3, 512);
  const Sge payload = client_->sge(0, 512);
  SendWr write;
  write.wr_id = 1;
  write.opcode = WrOpcode::rdma_write;
  write.sg_list = &payload;
  write.num_sge = 1;
  write.remote_addr = server_->addr(4096);
  write.rkey = key;
  ASSERT_TRUE(client_->qp->post_send(write));
  const Sge response = client_->sge(1024, 16);
  SendWr send;
  send.wr_id = 2;
  send.opcode = WrOpcode::send_with_inv;
  send.flags = kWrSignaled;
  send.sg_list = &response;
  send.num_sge = 1;
  send.invalidate_rkey = key;
  ASSERT_TRUE(client_->qp->post_send(send));
  ASSERT_TRUE(client_->qp->flush());
  auto sent = poll_completions(*client_->cq, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, WcStatus::success) << wc_status_name(sent[0].status);
  auto received = poll_completions(*server_->cq, 1);
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(received[0].status, WcStatus::success);
  EXPECT_TRUE(received[0].remote_invalidated);  // rxe: bit 0x4, others: IBV_WC_WITH_INV
  EXPECT_EQ(received[0].invalidated_rkey, key);
  EXPECT_EQ(server_->buffer[4096 + 511], 0xC3);
  // Invalidated exactly once: no LOCAL_INV of this key now (it panics a 6.1 rxe guest).
}

TEST_F(Loopback, LocalInvalidateRevokesTheWindow) {
  ASSERT_NO_FATAL_FAILURE(connect());
  if (!server_->id->device()->caps().memory_window_type2) {
    GTEST_SKIP() << "device lacks type-2 memory windows";
  }
  auto window = server_->pd->allocate_window();
  ASSERT_TRUE(window);
  uint32_t key = 0;
  ASSERT_TRUE(bind_window(*server_, **window, 0, 8192, &key));
  SendWr invalidate;
  invalidate.wr_id = 0x1A;
  invalidate.opcode = WrOpcode::local_inv;
  invalidate.flags = kWrSignaled;
  invalidate.invalidate_rkey = key;
  ASSERT_TRUE(server_->send(invalidate));
  auto done = poll_completions(*server_->cq, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, WcStatus::success) << wc_status_name(done[0].status);
  EXPECT_EQ(done[0].opcode, WcOpcode::local_inv);

  // The key is dead: the client's READ through it fails with a remote access error.
  const Sge sink = client_->sge(0, 64);
  SendWr read;
  read.wr_id = 3;
  read.opcode = WrOpcode::rdma_read;
  read.flags = kWrSignaled;
  read.sg_list = &sink;
  read.num_sge = 1;
  read.remote_addr = server_->addr(0);
  read.rkey = key;
  ASSERT_TRUE(client_->send(read));
  auto failed = poll_completions(*client_->cq, 1, 20000);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].status, WcStatus::remote_access_error) << wc_status_name(failed[0].status);
  EXPECT_EQ(static_cast<IbvQueuePair*>(client_->qp)->send_outstanding(), 0u);
}

TEST_F(Loopback, MoveToErrorFlushesEveryOutstandingWr) {
  ASSERT_NO_FATAL_FAILURE(connect());
  for (uint64_t id = 1; id <= 4; ++id) ASSERT_TRUE(server_->post_recv(id, id * 1024, 1024));
  ASSERT_TRUE(server_->qp->move_to_error());
  EXPECT_EQ(server_->qp->state(), QpState::error);
  auto flushed = poll_completions(*server_->cq, 4);
  ASSERT_EQ(flushed.size(), 4u);
  for (size_t i = 0; i < flushed.size(); ++i) {
    EXPECT_EQ(flushed[i].status, WcStatus::wr_flush_error) << wc_status_name(flushed[i].status);
    EXPECT_EQ(flushed[i].wr_id, i + 1);  // in order
  }
  // A QP in error still takes WRs and flushes them.
  const Sge sge = server_->sge(0, 8);
  SendWr wr;
  wr.wr_id = 9;
  wr.sg_list = &sge;
  wr.num_sge = 1;  // unsignaled: flushed anyway
  ASSERT_TRUE(server_->send(wr));
  auto late = poll_completions(*server_->cq, 1);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].wr_id, 9u);
  EXPECT_EQ(late[0].status, WcStatus::wr_flush_error);
  auto* qp = static_cast<IbvQueuePair*>(server_->qp);
  EXPECT_EQ(qp->send_outstanding(), 0u);
  EXPECT_EQ(qp->recv_outstanding(), 0u);
}

TEST_F(Loopback, PrivateDataTravelsInRequestAndReply) {
  LoopbackOpts opts;
  for (int i = 0; i < 32; ++i) opts.request_data.push_back(static_cast<uint8_t>(0x10 + i));
  for (int i = 0; i < 64; ++i) opts.accept_data.push_back(static_cast<uint8_t>(0x80 + i));
  ASSERT_NO_FATAL_FAILURE(connect(opts));
  // rdma_cm reports the CM maximum, not the length sent: compare by layout.
  ASSERT_GE(request_event_.private_data_length, 32);
  EXPECT_EQ(memcmp(request_event_.private_data, opts.request_data.data(), 32), 0);
  EXPECT_EQ(request_event_.initiator_depth, 4);
  ASSERT_GE(established_event_.private_data_length, 64);
  EXPECT_EQ(memcmp(established_event_.private_data, opts.accept_data.data(), 64), 0);
  // Too much private data never reaches librdmacm.
  std::vector<uint8_t> big(kCmRequestPrivateDataMax + 1);
  ConnectParams params;
  params.private_data = big.data();
  params.private_data_length = static_cast<uint8_t>(big.size());
  EXPECT_EQ(client_->id->connect(params).error().code, Errc::invalid_argument);
}

TEST_F(Loopback, RejectCarriesPrivateData) {
  LoopbackOpts opts;
  opts.reject = true;
  opts.accept_data = {0xDE, 0xAD, 0xBE, 0xEF, 1, 2, 3, 4};
  ASSERT_NO_FATAL_FAILURE(connect(opts));
  CmEvent event;
  ASSERT_TRUE(next_event(*client_channel_, &event));
  ASSERT_EQ(event.type, CmEventType::rejected) << cm_event_type_name(event.type);
  EXPECT_EQ(event.id, client_->id.get());
  ASSERT_GE(event.private_data_length, opts.accept_data.size());
  EXPECT_EQ(memcmp(event.private_data, opts.accept_data.data(), opts.accept_data.size()), 0);
}

TEST_F(Loopback, ConnectingWhereNobodyListensIsUnreachable) {
  auto id = client_channel_->create_id();
  ASSERT_TRUE(id);
  ASSERT_TRUE((*id)->resolve(address_, next_port(), 2000));
  CmEvent event;
  ASSERT_TRUE(next_event(*client_channel_, &event));
  ASSERT_EQ(event.type, CmEventType::route_resolved);
  Side side;
  side.id = std::move(*id);
  ASSERT_TRUE(side.build(false, false));
  ASSERT_TRUE(side.id->connect(ConnectParams{}));
  ASSERT_TRUE(next_event(*client_channel_, &event, 30000));
  EXPECT_EQ(event.type, CmEventType::unreachable)
      << cm_event_type_name(event.type) << " status " << event.status;
}

TEST_F(Loopback, InterruptModeSignalsTheEventFd) {
  LoopbackOpts opts;
  opts.server_event_fd = true;
  ASSERT_NO_FATAL_FAILURE(connect(opts));
  CompletionQueue& cq = *server_->cq;
  ASSERT_GE(cq.event_fd(), 0);
  EXPECT_EQ(cq.consume_event().error().code, Errc::busy);  // nothing yet, and no blocking
  ASSERT_TRUE(cq.arm());
  ASSERT_TRUE(server_->post_recv(1, 0, 64));
  const Sge sge = client_->sge(0, 64);
  SendWr wr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ASSERT_TRUE(client_->send(wr));
  ASSERT_TRUE(wait_readable(cq.event_fd(), 5000));
  ASSERT_TRUE(cq.consume_event());
  ASSERT_TRUE(cq.arm());
  auto done = poll_completions(cq, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, WcStatus::success);
}

TEST_F(Loopback, SharedReceiveQueueFeedsTheQp) {
  LoopbackOpts opts;
  opts.server_srq = true;
  ASSERT_NO_FATAL_FAILURE(connect(opts));
  auto* srq = static_cast<IbvSharedReceiveQueue*>(server_->srq.get());
  ASSERT_TRUE(server_->post_recv(1, 0, 128));
  ASSERT_TRUE(server_->post_recv(2, 128, 128));
  EXPECT_EQ(srq->outstanding(), 2u);
  const Sge sge = client_->sge(0, 16);
  SendWr wr;
  wr.flags = kWrSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ASSERT_TRUE(client_->send(wr));
  auto done = poll_completions(*server_->cq, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, WcStatus::success);
  EXPECT_EQ(done[0].opcode, WcOpcode::recv);
  EXPECT_EQ(srq->outstanding(), 1u);
}

TEST_F(Loopback, DisconnectFlushesAndReportsDisconnected) {
  ASSERT_NO_FATAL_FAILURE(connect());
  ASSERT_TRUE(server_->post_recv(1, 0, 64));
  ASSERT_TRUE(client_->id->disconnect());
  CmEvent event;
  ASSERT_TRUE(next_event(*server_channel_, &event));
  EXPECT_EQ(event.type, CmEventType::disconnected) << cm_event_type_name(event.type);
  ASSERT_TRUE(server_->id->disconnect());
  auto flushed = poll_completions(*server_->cq, 1);
  ASSERT_EQ(flushed.size(), 1u);
  EXPECT_EQ(flushed[0].status, WcStatus::wr_flush_error);
  EXPECT_EQ(client_->qp->state(), QpState::error);
}

}  // namespace
}  // namespace nvmf::verbs::ibverbs
