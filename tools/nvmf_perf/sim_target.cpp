#include "sim_target.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "bdev/malloc_bdev.h"
#include "bdev/null_bdev.h"
#include "common/util.h"
#include "nvme_pcie/model/model_controller.h"

namespace nvmf::perf {

namespace {

// Bdev channel depth ceiling (NullBdevOpts / MallocBdevOpts::queue_depth_max range).
constexpr uint32_t kBdevQueueDepthMax = 4096;
// Admin queues: one per controller, at most this deep (TargetOpts default).
constexpr uint32_t kAdminQueueDepth = 128;

std::string describe(const char* what, const Error& error) {
  return std::string(what) + ": " + errc_name(error.code) +
         (error.detail[0] != '\0' ? std::string(" (") + error.detail + ")" : std::string());
}

}  // namespace

// One model controller with every namespace of the run; DMA reaches `shared` (the transport's
// buffer memory) as well as the model's own memory.
bdev::NvmeControllerPool::DeviceOpener model_opener(const SimTargetOpts& opts,
                                                    const env::MemoryBackend* shared) {
  return [opts, shared](const std::string& name) -> Result<std::unique_ptr<nvme_pcie::PciDevice>> {
    nvme_pcie::model::ModelOpts model_opts;
    model_opts.name = name;
    model_opts.namespaces.clear();
    for (uint32_t i = 0; i < opts.ns_count; ++i) {
      nvme_pcie::model::ModelNamespace ns;
      ns.nsid = i + 1;
      ns.block_size_bytes = kSimBlockSizeBytes;
      ns.block_count = opts.bdev_bytes / kSimBlockSizeBytes;
      model_opts.namespaces.push_back(ns);
    }
    model_opts.shared_dma_memory = shared;
    auto model = nvme_pcie::model::ModelController::create(model_opts);
    if (!model) return Unexpected(model.error());
    return std::unique_ptr<nvme_pcie::PciDevice>(std::move(*model));
  };
}

Result<std::unique_ptr<bdev::Bdev>> make_bdev(const SimTargetOpts& opts, uint32_t index,
                                              uint32_t depth, bdev::NvmeControllerPool* pool) {
  switch (opts.bdev) {
    case SimBdevKind::null: {
      bdev::NullBdevOpts null_opts;
      null_opts.name = "Null" + std::to_string(index);
      null_opts.block_size_bytes = kSimBlockSizeBytes;
      null_opts.block_count = opts.bdev_bytes / kSimBlockSizeBytes;
      null_opts.queue_depth_max = depth;
      return bdev::create_null_bdev(null_opts);
    }
    case SimBdevKind::malloc: {
      bdev::MallocBdevOpts malloc_opts;
      malloc_opts.name = "Malloc" + std::to_string(index);
      malloc_opts.block_size_bytes = kSimBlockSizeBytes;
      malloc_opts.block_count = opts.bdev_bytes / kSimBlockSizeBytes;
      malloc_opts.queue_depth_max = depth;
      return bdev::create_malloc_bdev(malloc_opts);
    }
    case SimBdevKind::nvme: {
      bdev::NvmeBdevOpts nvme_opts;
      nvme_opts.name = "Nvme0n" + std::to_string(index + 1);
      nvme_opts.pci = "model0";
      nvme_opts.nsid = index + 1;
      nvme_opts.queue_depth_max = depth;
      return bdev::create_nvme_bdev(nvme_opts, *pool);
    }
  }
  return Unexpected(Errc::invalid_argument, "bdev kind");
}

std::string SimTarget::trid_string() {
  return std::string("trtype:RDMA adrfam:IPv4 traddr:") + kSimAddress +
         " trsvcid:" + std::to_string(kSimPort) + " subnqn:" + kSimSubsystemNqn;
}

std::unique_ptr<SimTarget> SimTarget::start(const SimTargetOpts& opts, std::string* message) {
  std::unique_ptr<SimTarget> sim(new SimTarget());
  verbs::sim::SimOpts sim_opts;
  sim_opts.profile = opts.profile;
  sim_opts.send_fence = opts.send_fence;
  if (opts.race_one_in != 0) sim_opts.mkey_commit_slow_one_in = opts.race_one_in;
  sim_opts.seed = opts.seed;
  // The host's own connect timeout (5 s) decides; the sim's 1 s CM timeout is too short when
  // the run is under valgrind (callgrind figures in docs/performance.md).
  sim_opts.cm_connect_timeout_ms = 30000;
  auto provider = verbs::sim::SimProvider::create(sim_opts);
  if (!provider) {
    *message = describe("cannot create the simulated HCA", provider.error());
    return nullptr;
  }
  sim->target_provider_ = std::move(*provider);
  auto peer = sim->target_provider_->create_peer("sim1");
  if (!peer) {
    *message = describe("cannot create the host's simulated HCA", peer.error());
    return nullptr;
  }
  sim->host_provider_ = std::move(*peer);

  // Limits sized to the run: every worker's queue must fit (CAP.MQES), one I/O queue per
  // worker plus the admin queue, and -o within MDTS (4 KiB times a power of two).
  const uint32_t queue_depth_max = std::max<uint32_t>(128, opts.io_queue_entries);
  const uint32_t qpairs_max = std::max<uint32_t>(128, opts.io_queues + 1);
  const auto max_io_size = static_cast<uint32_t>(std::max<uint64_t>(
      131072, 4096 * round_up_power_of_two((uint64_t{opts.io_size_bytes} + 4095) / 4096)));
  target::TargetOpts target_opts;
  target_opts.max_queue_depth = queue_depth_max;
  target_opts.max_qpairs_per_ctrlr = qpairs_max;
  target_opts.max_io_size = max_io_size;
  target_opts.max_namespaces_default = std::max<uint32_t>(32, opts.ns_count);
  auto target = target::Target::create(target_opts);
  if (!target) {
    *message = describe("sim target options rejected", target.error());
    return nullptr;
  }
  sim->target_ = std::move(*target);
  target::SubsystemOpts subsystem;
  subsystem.nqn = kSimSubsystemNqn;
  subsystem.serial_number = "NVMFPERF0000000001";
  subsystem.model_number = "nvmf_perf sim";
  subsystem.allow_any_host = true;
  subsystem.max_namespaces = std::max<uint32_t>(32, opts.ns_count);
  if (auto added = sim->target_->add_subsystem(subsystem); !added) {
    *message = describe("cannot add the sim subsystem", added.error());
    return nullptr;
  }

  const uint32_t bdev_depth = std::clamp<uint32_t>(
      static_cast<uint32_t>(std::min<uint64_t>(uint64_t{opts.io_queue_entries} * opts.io_queues,
                                               kBdevQueueDepthMax)),
      128, kBdevQueueDepthMax);
  auto buffer_memory = env::PosixMemoryBackend::create(env::PosixMemoryOpts{});
  if (!buffer_memory) {
    *message = describe("cannot create the sim target's buffer memory", buffer_memory.error());
    return nullptr;
  }
  sim->buffer_memory_ = std::move(*buffer_memory);
  if (opts.bdev == SimBdevKind::nvme) {
    nvme_pcie::ControllerOpts controller_opts;
    controller_opts.io_queue_entries = std::min<uint32_t>(bdev_depth + 1, 1024);
    sim->nvme_pool_ = std::make_unique<bdev::NvmeControllerPool>(
        model_opener(opts, sim->buffer_memory_.get()), controller_opts);
  }
  for (uint32_t i = 0; i < opts.ns_count; ++i) {
    auto bdev = make_bdev(opts, i, bdev_depth, sim->nvme_pool_.get());
    if (!bdev) {
      *message = describe("cannot create the sim namespace's bdev", bdev.error());
      return nullptr;
    }
    target::NamespaceOpts ns;
    ns.bdev = bdev->get();
    sim->bdevs_.push_back(std::move(*bdev));
    if (opts.error_bdevs) {
      bdev::ErrorBdevOpts error_opts;
      error_opts.name = "Error" + std::to_string(i);
      error_opts.base_bdev = sim->bdevs_.back()->name();
      auto error_bdev = bdev::create_error_bdev(error_opts, *sim->bdevs_.back());
      if (!error_bdev) {
        *message = describe("cannot create the sim namespace's error bdev", error_bdev.error());
        return nullptr;
      }
      ns.bdev = error_bdev->get();
      sim->error_bdev_views_.push_back(bdev::as_error_bdev(**error_bdev));
      sim->error_bdevs_.push_back(std::move(*error_bdev));
    }
    if (auto added = sim->target_->add_namespace(kSimSubsystemNqn, ns); !added) {
      *message = describe("cannot add a sim namespace", added.error());
      return nullptr;
    }
  }

  reactor::ReactorGroupOpts group_opts;
  group_opts.reactor.mode = reactor::Mode::poll;
  group_opts.reactor.name = "perf_target";
  if (opts.core >= 0) {
    group_opts.cores = {opts.core};
  } else {
    group_opts.reactor_count = 1;
  }
  auto group = reactor::ReactorGroup::start(group_opts);
  if (!group) {
    *message = describe("cannot start the sim target's reactor", group.error());
    return nullptr;
  }
  sim->group_ = std::move(*group);
  sim->reactor_ = &sim->group_->reactor(0);

  transport_rdma::RdmaTargetOpts transport_opts;
  transport_opts.limits.max_queue_depth = static_cast<uint16_t>(std::min<uint32_t>(queue_depth_max, 65535));
  transport_opts.limits.max_admin_queue_depth = static_cast<uint16_t>(kAdminQueueDepth);
  transport_opts.limits.max_qpairs_per_ctrlr = static_cast<uint16_t>(qpairs_max);
  transport_opts.max_io_size = max_io_size;
  // nvmf_tgt's rule: a command uses at most 16 data buffers (MSDBD), about 16 MiB of them.
  transport_opts.io_unit_size = std::max<uint32_t>(8192, max_io_size / 16);
  transport_opts.data_buffers_per_group =
      std::max<uint32_t>((16u << 20) / transport_opts.io_unit_size, 16);
  // Receives for every command the hosts may have outstanding (plus their admin queues), and
  // a CQ with the room the transport reserves (RdmaTargetOpts::cq_depth): the SRQ's receives,
  // and each queue pair's send queue, 2 x depth + 33 WRs as the HCA grants them (rounded up to
  // a power of two, as the sim and mlx5 do), so that -P 12 gets its 12 queue pairs.
  constexpr uint64_t kSendQueueExtraWrs = 33;
  const uint64_t commands = uint64_t{opts.io_queue_entries} * opts.io_queues +
                            uint64_t{kAdminQueueDepth} * 2;
  const uint64_t send_queue_wrs =
      round_up_power_of_two(uint64_t{opts.io_queue_entries} * 2 + kSendQueueExtraWrs) *
          opts.io_queues +
      round_up_power_of_two(uint64_t{kAdminQueueDepth} * 2 + kSendQueueExtraWrs) * 2;
  const verbs::DeviceCaps caps = sim->target_provider_->device().caps();
  transport_opts.srq_depth =
      static_cast<uint32_t>(std::clamp<uint64_t>(commands, 4096, caps.max_srq_wr));
  transport_opts.cq_depth = static_cast<uint32_t>(
      std::clamp<uint64_t>(transport_opts.srq_depth + send_queue_wrs, 4096, caps.max_cqe));
  transport_opts.send_with_invalidate = opts.send_with_invalidate;
  transport_opts.buffer_memory = sim->buffer_memory_.get();

  std::string startup_error;
  reactor::run_and_wait(*sim->reactor_, [&] {
    auto created = transport_rdma::RdmaTargetTransport::create(
        *sim->target_provider_, *sim->target_, {sim->reactor_}, transport_opts);
    if (!created) {
      startup_error = describe("cannot open the sim RDMA transport", created.error());
      return;
    }
    sim->transport_ = std::move(*created);
    if (auto listening = sim->transport_->listen(kSimAddress, kSimPort); !listening) {
      startup_error = describe("cannot listen on the sim fabric", listening.error());
    }
  });
  if (!startup_error.empty()) {
    *message = startup_error;
    return nullptr;  // the destructor stops what started
  }
  return sim;
}

SimTarget::~SimTarget() {
  stop();
  buffer_memory_.reset();
}

uint64_t SimTarget::bdev_bytes_copied() const noexcept {
  uint64_t total = 0;
  for (const auto& bdev : bdevs_) total += bdev::nvme_bdev_bytes_copied(*bdev);
  return total;
}

void SimTarget::stop() noexcept {
  if (stopped_) return;
  stopped_ = true;
  if (group_) {
    if (transport_) {
      reactor::run_and_wait(*reactor_, [&] { transport_->begin_shutdown(); });
      // nvmf_tgt's patience: hosts get 5 s to let go, then the reactor stops regardless.
      for (int i = 0; i < 500; ++i) {
        bool drained = false;
        reactor::run_and_wait(*reactor_, [&] { drained = transport_->drained(); });
        if (drained) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    // release_reactor is not_found when no connection ever reached the reactor: fine.
    reactor::run_and_wait(*reactor_, [&] { (void)target_->release_reactor(*reactor_); });
    group_->stop();
    reactor_->take_ownership();  // the reactor thread is gone: this thread takes apart
  }
  transport_.reset();
  target_.reset();
  group_.reset();
  error_bdev_views_.clear();
  error_bdevs_.clear();
  bdevs_.clear();
  nvme_pool_.reset();
  host_provider_.reset();
  target_provider_.reset();
}

}  // namespace nvmf::perf
