// Sim provider throughput: SEND/RECV and 4 KiB RDMA WRITE operations per second on one core,
// one thread driving both sides of a connection, in batches of 32 WRs per doorbell (every
// 32nd WR signaled, as a host does with selective signaling). items_per_second = WRs per
// second. Never pass/fail on time.
#include <benchmark/benchmark.h>

#include <memory>
#include <span>
#include <vector>

#include "verbs/sim/sim.h"

namespace nvmf::verbs::sim {
namespace {

constexpr uint32_t kBatch = 32;  // WRs per doorbell
constexpr uint32_t kQueueDepth = 128;

// A connected pair on one sim fabric, as the unit tests build it.
struct Rig {
  std::unique_ptr<SimProvider> provider;
  std::unique_ptr<CmChannel> channel;
  std::unique_ptr<CmId> listener;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> host_cq, target_send_cq, target_recv_cq;
  std::vector<uint8_t> host_buffer, target_buffer;
  std::unique_ptr<MemoryRegion> host_mr, target_mr;
  std::unique_ptr<CmId> host, target;

  bool setup(SimProfile profile, uint32_t bytes) {
    SimOpts opts;
    opts.profile = profile;
    auto created = SimProvider::create(opts);
    if (!created) return false;
    provider = std::move(*created);
    channel = std::move(*provider->create_cm_channel());
    listener = std::move(*channel->create_id());
    if (!listener->listen("10.0.0.1", 4420, 4)) return false;
    pd = std::move(*provider->device().allocate_pd());
    host_cq = std::move(*pd->create_cq({.depth = 1024}));
    target_send_cq = std::move(*pd->create_cq({.depth = 1024}));
    target_recv_cq = std::move(*pd->create_cq({.depth = 1024}));
    host_buffer.assign(static_cast<size_t>(bytes) * kQueueDepth, 0x5a);
    target_buffer.assign(static_cast<size_t>(bytes) * kQueueDepth, 0);
    constexpr uint32_t kAccess = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
    host_mr = std::move(*pd->register_memory(host_buffer.data(), host_buffer.size(), kAccess));
    target_mr =
        std::move(*pd->register_memory(target_buffer.data(), target_buffer.size(), kAccess));
    host = std::move(*channel->create_id());
    if (!host->resolve("10.0.0.1", 4420, 100)) return false;
    CmEvent event;
    if (!channel->poll_event(&event)) return false;
    QpOpts qp_opts;
    qp_opts.send_cq = host_cq.get();
    qp_opts.recv_cq = host_cq.get();
    qp_opts.max_send_wr = kQueueDepth;
    qp_opts.max_recv_wr = kQueueDepth;
    if (!host->create_qp(*pd, qp_opts) || !host->connect({})) return false;
    if (!channel->poll_event(&event) || event.type != CmEventType::connect_request) return false;
    target = channel->adopt(event.id);
    qp_opts.send_cq = target_send_cq.get();
    qp_opts.recv_cq = target_recv_cq.get();
    if (!target->create_qp(*pd, qp_opts) || !target->accept({})) return false;
    return channel->poll_event(&event) && event.type == CmEventType::established;
  }
};

void run(benchmark::State& state, bool rdma_write) {
  const auto bytes = static_cast<uint32_t>(state.range(0));
  Rig rig;
  if (!rig.setup(SimProfile::rxe, bytes)) {
    state.SkipWithError("sim setup failed");
    return;
  }
  QueuePair& host = *rig.host->qp();
  QueuePair& target = *rig.target->qp();
  const uint64_t host_base = reinterpret_cast<uint64_t>(rig.host_buffer.data());
  const uint64_t target_base = reinterpret_cast<uint64_t>(rig.target_buffer.data());
  WorkCompletion wcs[kBatch];
  uint64_t operations = 0;
  for (auto _ : state) {
    if (!rdma_write) {
      for (uint32_t i = 0; i < kBatch; ++i) {
        Sge sge{target_base + static_cast<uint64_t>(i) * bytes, bytes, rig.target_mr->lkey()};
        (void)target.post_recv({i, &sge, 1});
      }
      (void)target.flush();
    }
    for (uint32_t i = 0; i < kBatch; ++i) {
      Sge sge{host_base + static_cast<uint64_t>(i) * bytes, bytes, rig.host_mr->lkey()};
      SendWr wr;
      wr.wr_id = i;
      wr.opcode = rdma_write ? WrOpcode::rdma_write : WrOpcode::send;
      wr.flags = i == kBatch - 1 ? uint32_t{kWrSignaled} : 0u;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.remote_addr = target_base + static_cast<uint64_t>(i) * bytes;
      wr.rkey = rig.target_mr->rkey();
      (void)host.post_send(wr);
    }
    (void)host.flush();
    int signaled = 0;
    while (signaled == 0) signaled = rig.host_cq->poll(std::span<WorkCompletion>(wcs, kBatch));
    if (!rdma_write) {
      int received = 0;
      while (received < static_cast<int>(kBatch)) {
        received += rig.target_recv_cq->poll(std::span<WorkCompletion>(wcs, kBatch));
      }
    }
    operations += kBatch;
  }
  state.SetItemsProcessed(static_cast<int64_t>(operations));
  state.SetBytesProcessed(static_cast<int64_t>(operations * bytes));
  const SimCounters counters = rig.provider->counters();
  state.counters["doorbells"] = static_cast<double>(counters.doorbells);
  state.counters["errors"] = static_cast<double>(counters.error_completions);
}

void BM_SimSendRecv(benchmark::State& state) { run(state, false); }
void BM_SimRdmaWrite(benchmark::State& state) { run(state, true); }

BENCHMARK(BM_SimSendRecv)->Arg(64)->Arg(4096);
BENCHMARK(BM_SimRdmaWrite)->Arg(4096);

}  // namespace
}  // namespace nvmf::verbs::sim

BENCHMARK_MAIN();
