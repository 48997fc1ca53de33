#include "sim_test_util.h"

#include <span>

namespace nvmf::verbs::sim::test {
namespace {

void make_resources(Side& side, Device& device, const PairOpts& opts, bool with_srq,
                    uint32_t access) {
  auto pd = device.allocate_pd();
  ASSERT_TRUE(pd);
  side.pd = std::move(*pd);
  auto send_cq = side.pd->create_cq({.depth = 1024});
  auto recv_cq = side.pd->create_cq({.depth = 1024});
  ASSERT_TRUE(send_cq && recv_cq);
  side.send_cq = std::move(*send_cq);
  side.recv_cq = std::move(*recv_cq);
  if (with_srq) {
    auto srq = side.pd->create_srq({.max_wr = opts.queue_depth, .max_sge = 2});
    ASSERT_TRUE(srq);
    side.srq = std::move(*srq);
  }
  auto mr = side.pd->register_memory(side.buffer.data(), side.buffer.size(), access);
  ASSERT_TRUE(mr);
  side.mr = std::move(*mr);
  QpOpts qp_opts;
  qp_opts.send_cq = side.send_cq.get();
  qp_opts.recv_cq = side.recv_cq.get();
  qp_opts.srq = side.srq.get();
  qp_opts.max_send_wr = opts.queue_depth;
  qp_opts.max_recv_wr = opts.queue_depth;
  qp_opts.max_send_sge = 2;
  qp_opts.max_recv_sge = 2;
  qp_opts.max_inline_data = opts.max_inline_data;
  auto qp = side.id->create_qp(*side.pd, qp_opts);
  ASSERT_TRUE(qp);
  side.qp = *qp;
}

}  // namespace

SimPair::SimPair(const PairOpts& opts) {
  auto provider = SimProvider::create(opts.sim);
  if (!provider) {
    ADD_FAILURE() << "SimProvider::create failed";
    return;
  }
  provider_ = std::move(*provider);
  if (opts.two_devices) {
    auto peer = provider_->create_peer("sim1");
    if (!peer) {
      ADD_FAILURE() << "create_peer failed";
      return;
    }
    host_provider_ = std::move(*peer);
  }

  auto target_channel = provider_->create_cm_channel();
  auto host_channel = host_provider().create_cm_channel();
  if (!target_channel || !host_channel) {
    ADD_FAILURE() << "create_cm_channel failed";
    return;
  }
  target.channel = std::move(*target_channel);
  host.channel = std::move(*host_channel);
  auto listen_id = target.channel->create_id();
  auto host_id = host.channel->create_id();
  if (!listen_id || !host_id) {
    ADD_FAILURE() << "create_id failed";
    return;
  }
  listener = std::move(*listen_id);
  host.id = std::move(*host_id);
  EXPECT_TRUE(listener->listen(kTargetAddress, kTargetPort, 16));

  EXPECT_TRUE(host.id->resolve(kTargetAddress, kTargetPort, 1000));
  CmEvent event;
  if (!wait_event(*host.channel, &event) || event.type != CmEventType::route_resolved) {
    ADD_FAILURE() << "no route_resolved";
    return;
  }
  make_resources(host, *host.id->device(), opts, false, opts.host_mr_access);
  if (host.qp == nullptr) return;

  EXPECT_TRUE(host.id->connect(opts.host_params));
  if (!wait_event(*target.channel, &event) || event.type != CmEventType::connect_request) {
    ADD_FAILURE() << "no connect_request";
    return;
  }
  target.id = target.channel->adopt(event.id);
  if (target.id == nullptr) {
    ADD_FAILURE() << "adopt failed";
    return;
  }
  make_resources(target, *target.id->device(), opts, opts.target_srq, opts.target_mr_access);
  if (target.qp == nullptr || !opts.connect) return;
  EXPECT_TRUE(target.id->accept(opts.target_params));
  if (!wait_event(*host.channel, &event) || event.type != CmEventType::established) {
    ADD_FAILURE() << "host: no established";
  }
  if (!wait_event(*target.channel, &event) || event.type != CmEventType::established) {
    ADD_FAILURE() << "target: no established";
  }
}

SimPair::~SimPair() = default;

bool SimPair::wait_event(CmChannel& channel, CmEvent* event, int polls_max) {
  for (int i = 0; i < polls_max; ++i) {
    if (channel.poll_event(event)) return true;
  }
  return false;
}

std::vector<WorkCompletion> SimPair::collect(CompletionQueue& cq, size_t want, int polls_max) {
  std::vector<WorkCompletion> got;
  WorkCompletion wcs[32];
  for (int i = 0; i < polls_max && got.size() < want; ++i) {
    const int n = cq.poll(std::span<WorkCompletion>(wcs, 32));
    got.insert(got.end(), wcs, wcs + n);
  }
  return got;
}

SimPair::Drained SimPair::drain(int polls) {
  Drained drained;
  WorkCompletion wcs[32];
  auto take = [&](CompletionQueue& cq, std::vector<WorkCompletion>& into) {
    const int n = cq.poll(std::span<WorkCompletion>(wcs, 32));
    into.insert(into.end(), wcs, wcs + n);
  };
  for (int i = 0; i < polls; ++i) {
    take(*host.send_cq, drained.host_send);
    take(*host.recv_cq, drained.host_recv);
    take(*target.send_cq, drained.target_send);
    take(*target.recv_cq, drained.target_recv);
  }
  return drained;
}

void SimPair::post_recvs(Side& side, uint32_t count, size_t offset, uint32_t length,
                         uint64_t first_id) {
  for (uint32_t i = 0; i < count; ++i) {
    Sge sge = side.sge(offset + static_cast<size_t>(i) * length, length);
    RecvWr wr{first_id + i, &sge, 1};
    if (side.srq != nullptr) {
      ASSERT_TRUE(side.srq->post_recv(wr));
    } else {
      ASSERT_TRUE(side.qp->post_recv(wr));
    }
  }
  if (side.srq != nullptr) {
    ASSERT_TRUE(side.srq->flush());
  } else {
    ASSERT_TRUE(side.qp->flush());
  }
}

}  // namespace nvmf::verbs::sim::test
