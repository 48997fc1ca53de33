// nvmf_perf --sim: an NVMe-oF target in this process, on the simulated HCA. One subsystem
// (any host allowed) with N null or malloc namespaces, served by the RDMA target transport on
// one poll-mode reactor thread (pinned when a core is given); the host side gets a peer HCA on
// the same simulated fabric. The wiring is nvmf_tgt's, with limits raised to fit the run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bdev/bdev.h"
#include "bdev/error_bdev.h"
#include "bdev/nvme_bdev.h"
#include "env/posix_memory.h"
#include "options.h"
#include "reactor/group.h"
#include "target/target.h"
#include "transport_rdma/target_transport.h"
#include "verbs/sim/sim.h"

namespace nvmf::perf {

inline constexpr const char* kSimSubsystemNqn = "nqn.2026-01.io.nvmf:perf";
inline constexpr const char* kSimAddress = "10.0.0.1";
inline constexpr uint16_t kSimPort = 4420;

struct SimTargetOpts {
  verbs::sim::SimProfile profile = verbs::sim::SimProfile::rxe;
  verbs::sim::SendFence send_fence = verbs::sim::SendFence::profile;
  uint32_t race_one_in = 0;  // mlx5-2017-rare's SimOpts::mkey_commit_slow_one_in; 0 = default
  uint64_t seed = 1;
  uint32_t ns_count = 1;
  SimBdevKind bdev = SimBdevKind::null;
  uint64_t bdev_bytes = kSimNullBytesDefault;
  transport_rdma::SendWithInvalidate send_with_invalidate =
      transport_rdma::SendWithInvalidate::automatic;
  uint32_t io_queue_entries = 128;  // what each host I/O queue asks for
  uint32_t io_queues = 1;           // host I/O queue pairs: workers x -P
  uint32_t io_size_bytes = 4096;    // the largest transfer the host will ask for
  int core = -1;                    // the reactor's core; -1 = not pinned
  // --chaos bdev-error: each namespace's bdev under an error bdev (no rule until inject()).
  bool error_bdevs = false;
};

class SimTarget {
 public:
  // "" or a one-line reason in *message.
  static std::unique_ptr<SimTarget> start(const SimTargetOpts& opts, std::string* message);
  ~SimTarget();  // stop()
  SimTarget(const SimTarget&) = delete;
  SimTarget& operator=(const SimTarget&) = delete;

  // The host's HCA (HostOpts::provider); lives until the SimTarget goes.
  verbs::Provider& host_provider() noexcept { return *host_provider_; }
  // The options the simulated fabric runs with (both HCAs share them), for the JSON report.
  const verbs::sim::SimOpts& sim_opts() const noexcept { return target_provider_->opts(); }
  // "trtype:RDMA adrfam:IPv4 traddr:10.0.0.1 trsvcid:4420 subnqn:nqn.2026-01.io.nvmf:perf"
  static std::string trid_string();
  // Bytes the nvme bdevs copied through bounce buffers (0: zero copy); 0 for other bdevs.
  uint64_t bdev_bytes_copied() const noexcept;
  // What each simulated HCA did so far (SimProvider::counters(): any thread).
  verbs::sim::SimCounters host_counters() const noexcept { return host_provider_->counters(); }
  verbs::sim::SimCounters target_counters() const noexcept { return target_provider_->counters(); }
  // The simulated HCAs themselves, for fault injection (every call thread-safe: sim.h).
  verbs::sim::SimProvider& host_sim() noexcept { return *host_provider_; }
  verbs::sim::SimProvider& target_sim() noexcept { return *target_provider_; }
  // With SimTargetOpts::error_bdevs: the error bdev of each namespace, in nsid order (else
  // empty). Their rules may be set from any thread.
  const std::vector<bdev::ErrorBdev*>& error_bdevs() const noexcept { return error_bdev_views_; }
  // Disconnects whatever hosts are left, drains, stops the reactor. Call after the host
  // disconnected. Idempotent.
  void stop() noexcept;

 private:
  SimTarget() = default;

  std::unique_ptr<verbs::sim::SimProvider> target_provider_;
  std::unique_ptr<verbs::sim::SimProvider> host_provider_;
  // Data buffers of the transport; with --sim-bdev nvme the controller model reaches them too.
  std::unique_ptr<env::PosixMemoryBackend> buffer_memory_;
  std::unique_ptr<bdev::NvmeControllerPool> nvme_pool_;  // outlives the nvme bdevs
  std::vector<std::unique_ptr<bdev::Bdev>> bdevs_;  // outlive the target
  // Over bdevs_ (each claims its base): made after them, destroyed before them.
  std::vector<std::unique_ptr<bdev::Bdev>> error_bdevs_;
  std::vector<bdev::ErrorBdev*> error_bdev_views_;  // the same, typed
  std::unique_ptr<target::Target> target_;
  std::unique_ptr<reactor::ReactorGroup> group_;
  reactor::Reactor* reactor_ = nullptr;
  std::unique_ptr<transport_rdma::RdmaTargetTransport> transport_;
  bool stopped_ = false;
};

}  // namespace nvmf::perf
